"""Lower bounds against the brute-force optimum: every bound <= OPT, the exact MIP = OPT.

The sweep covers 300 seeded random DAGs (n = 4..8, half with a memory limit, three
bandwidths) for k = 2, 3, 4, once at the default integer scale and once for a
subset at a deliberately coarse scale, where every rounding is large enough that
a rounding in the wrong direction shows up as a bound above OPT. The default run
checks every method on a share of those graphs that still covers every size,
memory setting and bandwidth; the whole sweep is marked slow (``pytest -m slow``).
The optima come from the bundled table (see ``reference.OPTIMA_FILE``).
"""

from __future__ import annotations

import dataclasses
import pickle
from functools import lru_cache

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.problems.pipeline import _mip, bounds, closed_form
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag, regal_like
from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline import reference

KS = (2, 3, 4)
N_GRAPHS = 300
CHUNKS = 10
TIME_LIMIT_S = 10.0   # never reached on these sizes; a hit shows as a non-optimal status


def _graph(i: int) -> PipelineProblem:
    # sizes, memory and bandwidth vary inside every chunk (chunk = i mod CHUNKS)
    return random_dag(4 + (i // CHUNKS) % 5, 7000 + i, memory=i % 4 >= 2, bandwidth=(1.0, 0.7, 3.0)[i % 3])


@lru_cache(maxsize=None)
def _opt(i: int, k: int) -> float:
    return reference.brute_force(_graph(i), k)


def _tol(opt: float) -> float:
    return 1e-9 * max(1.0, abs(opt))


# ------------------------------------------------------------------------------- closed form
def _problem(work, edges=(), size_out=None, size_param=None, memory=None, bandwidth=1.0) -> PipelineProblem:
    n = len(work)
    return PipelineProblem(
        name="hand", work=np.array(work, dtype=np.float64),
        size_param=np.zeros(n, np.int64) if size_param is None else np.array(size_param),
        size_out=np.zeros(n, np.int64) if size_out is None else np.array(size_out),
        edges=np.array(edges, dtype=np.int64).reshape(-1, 2), bandwidth=bandwidth, memory=memory)


def _assert_nudged(value: float, exact: float) -> None:
    assert value <= exact
    assert value == pytest.approx(exact, rel=1e-12, abs=0)


def test_simple_lemma_3_3() -> None:
    p = _problem([1.0, 2.0, 6.0], edges=[(0, 1), (1, 2)], size_out=[0, 0, 0])
    _assert_nudged(bounds.simple_bound(p, 2).value, 6.0)      # max work
    _assert_nudged(bounds.simple_bound(p, 1).value, 9.0)      # W / 1
    q = _problem([3.0, 3.0, 3.0, 3.0])
    _assert_nudged(bounds.simple_bound(q, 3).value, 4.0)      # W / k


def test_simple_neighbourhood() -> None:
    # node 1 (work 10) pays its input and its output unless a neighbour joins it, and a
    # neighbour costs 1 < 4: OPT (k = 3) is the whole chain in one block, 12
    p = _problem([1.0, 10.0, 1.0], edges=[(0, 1), (1, 2)], size_out=[4, 4, 0])
    b = bounds.simple_bound(p, 3)
    assert float(closed_form.lemma33_work(p, 3)) == 10.0
    _assert_nudged(b.value, 12.0)
    assert reference.brute_force(p, 3) == 12.0
    # cheap neighbours join, expensive ones send: 0 -> 1 (tensor 2, work 5), 3 -> 1 (tensor 9,
    # work 1), 1 -> 2 (tensor 3; consumer work 7): 10 + min(2, 5) + min(9, 1) + min(3, 7) = 16
    q = _problem([5.0, 10.0, 7.0, 1.0], edges=[(0, 1), (3, 1), (1, 2)], size_out=[2, 3, 0, 9])
    _assert_nudged(float(closed_form.neighbourhood_bound(q)), 16.0)
    assert bounds.simple_bound(q, 4).value <= reference.brute_force(q, 4)


def test_neighbourhood_valid_where_it_binds() -> None:
    """Communication-heavy small graphs, where the neighbourhood term is often the best
    closed-form bound: never above the brute-force optimum, and sometimes equal to it.
    At bandwidths 0.25 and 0.1 tensors often cost more than the work of the neighbour
    that would keep them inside (without the ``min`` the bound fails on 116 of 180)."""
    binding = tight = 0
    for i in range(60):
        p = dataclasses.replace(regal_like(900 + i, n=4 + i % 5, family="sbm"), bandwidth=(1.0, 0.25, 0.1)[i % 3])
        nb = float(closed_form.neighbourhood_bound(p))
        for k in KS:
            opt = reference.brute_force(p, k)
            assert nb <= opt + _tol(opt), (i, k)
            assert bounds.simple_bound(p, k).value <= opt + _tol(opt)
            binding += nb > float(closed_form.lemma33_work(p, k))
            tight += nb >= opt - _tol(opt)
    assert binding >= 20 and tight >= 5, (binding, tight)


def test_simple_per_node_overflow() -> None:
    # One node: param 10, its own output 1 (ws = 1), M = 4, B = 2: 1 + (10 + 1 - 4) / 2.
    p = _problem([1.0], size_out=[1], size_param=[10], memory=4, bandwidth=2.0)
    b = bounds.simple_bound(p, 3)
    _assert_nudged(b.value, 4.5)
    assert b.value <= reference.brute_force(p, 3)
    _assert_nudged(b.value, reference.brute_force(p, 3))


def test_simple_averaged_overflow_is_tight() -> None:
    # Four isolated nodes, param 3 each, M = 4, k = 2: the best split pairs them, each
    # pair overflows by 2, so OPT = 2 + 2 = 4 = (W + (12 - 2 * 4)) / 2.
    p = _problem([1.0] * 4, size_param=[3] * 4, memory=4)
    b = bounds.simple_bound(p, 2)
    _assert_nudged(b.detail["averaged"], 4.0)
    _assert_nudged(b.value, 4.0)
    assert reference.brute_force(p, 2) == 4.0


def _lemma_b2(k: int, eps: float = 0.125) -> PipelineProblem:
    """Appendix B, Lemma B.2: k heavy nodes 1-eps, k light nodes eps, one heavy edge (0, k)."""
    size_out = [0] * (2 * k)
    size_out[0] = 10 * k
    return _problem([1 - eps] * k + [eps] * k, edges=[(0, k)], size_out=size_out)


@pytest.mark.parametrize("k", [2, 3, 4])
def test_lemma_b2_instance_simple(k: int) -> None:
    p = _lemma_b2(k)
    assert reference.brute_force(p, k) == 1.0
    _assert_nudged(bounds.simple_bound(p, k).value, 1.0)


@pytest.mark.mip
@pytest.mark.parametrize("k", [2, 3, 4])
def test_lemma_b2_instance_mip(k: int) -> None:
    p = _lemma_b2(k)
    for method in bounds.METHODS:
        b = bounds.lower_bound(p, k, method, TIME_LIMIT_S)
        assert b.value <= 1.0, method
        assert b.value == pytest.approx(1.0, rel=1e-6), method   # integer scaling costs ~1/s
    ex = bounds.exact_bound(p, k, TIME_LIMIT_S)
    assert ex.status == "optimal"
    assert evaluate(p, ex.detail["blocks"], k=k).objective == 1.0


def test_simple_is_valid_on_random_dags() -> None:
    for i in range(0, N_GRAPHS, 3):
        for k in KS:
            assert bounds.simple_bound(_graph(i), k).value <= _opt(i, k) + _tol(_opt(i, k))


# ---------------------------------------------------------------------------------- MIP sweep
def _check_graph(i: int, k: int, stats: dict[str, int]) -> None:
    p, opt = _graph(i), _opt(i, k)
    # heaviest-block: three of its weightings (each one is valid on its own; its model is
    # checked against enumeration in test_heaviest_block)
    # spectral: its first 50 ascent steps (every step's value is a bound; test_spectral checks
    # the whole ascent against brute force, and the full 2,000 steps took two thirds of this test)
    # end-blocks: two weightings (test_end_blocks checks its models against enumeration)
    few = {"heaviest-block": {"mus": (0.0, 0.3, 1.0)}, "end-blocks": {"mus": (0.0, 0.3)},
           "spectral": {"max_iters": 50}}
    # block-cover: its own 300 brute-force cases (test_block_cover) at a tenth of a second each
    res = {m: bounds.lower_bound(p, k, m, TIME_LIMIT_S, **few.get(m, {})) for m in bounds.METHODS
           if m != "block-cover"}
    for m, b in res.items():
        assert b.value <= opt + _tol(opt), (i, k, m, b.value, opt)
        assert b.status in (("bound-only",) if m in ("spectral", "heaviest-block")
                            else ("bound-only", "timeout") if m == "end-blocks"
                            else ("closed-form", "optimal")), (i, k, m, b.status)
    # the hierarchy: each model relaxes the next one (up to a unit of integer rounding)
    rel = 1e-6 * max(1.0, opt)
    assert res["bottleneck-no-dag"].value <= res["bottleneck"].value + rel
    assert res["bottleneck-no-io"].value <= res["bottleneck"].value + rel
    assert res["bottleneck"].value <= res["guess-the-bottleneck"].value + rel
    assert res["guess-the-bottleneck"].value <= res["exact"].value + rel
    ex = res["exact"]
    got = evaluate(p, ex.detail["blocks"], k=k)   # raises on a cyclic partition
    assert got.objective >= opt - _tol(opt)
    if p.memory is None:
        # exact without memory: the MIP optimum is OPT and its partition attains it
        assert ex.value == pytest.approx(opt, rel=1e-6)
        assert got.objective == pytest.approx(opt, rel=1e-12)
    else:
        stats["mem"] += 1
        stats["mem_equal"] += abs(ex.value - opt) <= 1e-6 * max(1.0, opt)
        stats["mem_ratio_x1000"] += int(1000 * ex.value / opt) if opt > 0 else 1000


def _check_graphs(graphs: range, label: str) -> None:
    stats = {"mem": 0, "mem_equal": 0, "mem_ratio_x1000": 0}
    for i in graphs:
        for k in KS:
            _check_graph(i, k, stats)
    print(f"{label}: exact MIP == OPT on {stats['mem_equal']}/{stats['mem']} memory cases, "
          f"mean exact/OPT {stats['mem_ratio_x1000'] / max(1, stats['mem']) / 1000:.3f}")
    # the peak lower bounds must stay strong (mean ratio about 0.98-0.99 per chunk; 0.97
    # with only the cut and working-set bounds, lower still without overflow)
    assert stats["mem"] > 0 and stats["mem_ratio_x1000"] >= 975 * stats["mem"]


#: the default run's graphs: the first 10 of chunk 0, every size (4..8) with and without a memory
#: limit (i % 4 alternates between 0 and 2), each bandwidth three or four times
FAST_GRAPHS = range(0, 10 * CHUNKS, CHUNKS)


@pytest.mark.mip
def test_bounds_valid_against_brute_force() -> None:
    _check_graphs(FAST_GRAPHS, "default share")


@pytest.mark.mip
@pytest.mark.slow
@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_bounds_valid_against_brute_force_sweep(chunk: int) -> None:
    _check_graphs(range(chunk, N_GRAPHS, CHUNKS), f"chunk {chunk}")


def _check_coarse_scale(graphs: range) -> None:
    for i in graphs:
        for k in KS:
            opt = _opt(i, k)
            for m in bounds.METHODS[1:]:
                if m in ("spectral", "block-cover"):
                    continue   # no integer scale; block-cover's coarse scale: test_block_cover
                b = bounds.lower_bound(_graph(i), k, m, TIME_LIMIT_S)
                assert b.value <= opt + _tol(opt), (i, k, m, b.value, opt)


@pytest.mark.mip
def test_bounds_valid_at_coarse_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    # 15 graphs: every size, with and without memory, every bandwidth
    monkeypatch.setattr(_mip, "SCALE_TARGET", 2 ** 7)
    _check_coarse_scale(range(0, 75, 5))


@pytest.mark.mip
@pytest.mark.slow
def test_bounds_valid_at_coarse_scale_sweep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_mip, "SCALE_TARGET", 2 ** 7)
    _check_coarse_scale(range(0, N_GRAPHS, 5))


@pytest.mark.mip
def test_k1_is_the_whole_graph() -> None:
    for i in range(0, 40):
        p = _graph(i)
        if p.memory is not None:
            continue   # without memory, OPT for k = 1 is the total work
        for m in bounds.METHODS:
            assert bounds.lower_bound(p, 1, m, TIME_LIMIT_S).value == pytest.approx(p.work.sum(), rel=1e-6)


# ---------------------------------------------------------------------- jobs, hints, events
@pytest.mark.mip
def test_guess_jobs_pickle_and_combine() -> None:
    p = _graph(5)
    jobs = bounds.guess_jobs(p, 3)
    assert [j.j for j in jobs] == [1, 2, 3]
    results = [pickle.loads(pickle.dumps(j)).run(TIME_LIMIT_S) for j in jobs]
    combined = bounds.combine_guesses(results[::-1], 3)
    assert combined.value == min(r.value for r in results)
    assert combined.value == bounds.guess_the_bottleneck(p, 3, TIME_LIMIT_S).value
    with pytest.raises(ValueError):
        bounds.combine_guesses(results[:2], 3)
    with pytest.raises(ValueError):
        bounds.combine_guesses(results + results[:1], 3)


@pytest.mark.mip
def test_exact_events_hint_and_stop() -> None:
    p = regal_like(3, n=30)
    events: list[bounds.SolveEvent] = []
    first = bounds.exact_bound(p, 3, 20.0, on_event=events.append)
    assert first.status == "optimal"
    best = evaluate(p, first.detail["blocks"], k=3).objective
    assert first.value <= best
    incumbents = [e for e in events if e.kind == "incumbent"]
    assert incumbents and all(e.blocks is not None for e in incumbents)
    for e in events:
        assert e.bound <= best * (1 + 1e-12)
    for e in incumbents:
        assert evaluate(p, list(e.blocks), k=3).objective >= first.value

    # warm start from the optimum (labels shuffled): the first incumbent is already optimal
    perm = np.array([2, 0, 1])
    hinted: list[bounds.SolveEvent] = []
    bounds.exact_bound(p, 3, 20.0, hint=perm[np.array(first.detail["blocks"])].tolist(),
                       on_event=hinted.append)
    inc = [e for e in hinted if e.kind == "incumbent"]
    assert evaluate(p, list(inc[0].blocks), k=3).objective == pytest.approx(best, rel=1e-12)

    with pytest.raises(InputError):   # more than k blocks
        bounds.exact_bound(p, 3, 1.0, hint=list(range(p.n)))

    big = regal_like(4, n=120)
    stopped = bounds.exact_bound(big, 8, 60.0, should_stop=lambda: True)
    assert stopped.wall_s < 10.0
    assert stopped.status in ("feasible", "bound-only", "timeout")
    # the bottleneck variable starts at the simple bound, so a stopped solve keeps it
    assert stopped.value >= bounds.simple_bound(big, 8).value * (1 - 1e-6)
    if stopped.detail["blocks"] is not None:
        assert stopped.value <= evaluate(big, stopped.detail["blocks"], k=8).objective


@pytest.mark.mip
@pytest.mark.parametrize("case", range(4))
def test_extreme_magnitudes(case: int) -> None:
    p = [
        _problem([1.0, 2.0, 3.0], edges=[(0, 1), (1, 2)], size_out=[10 ** 15, 10 ** 15, 0], bandwidth=1e-9),
        _problem([1e-300, 1e300]),
        _problem([0.0, 0.0], edges=[(0, 1)]),
        _problem([0.1, 0.2, 0.3, 0.4], edges=[(0, 1), (2, 3)], size_out=[3, 1, 4, 1],
                 size_param=[5, 9, 2, 6], memory=10, bandwidth=7.0),
    ][case]
    for k in (1, 2, 3):
        opt = reference.brute_force(p, k)
        for m in bounds.METHODS:
            b = bounds.lower_bound(p, k, m, TIME_LIMIT_S)
            assert b.value <= opt, (m, k, b.value, opt)


def test_bad_arguments() -> None:
    p = _graph(0)
    with pytest.raises(InputError):
        bounds.simple_bound(p, 0)
    with pytest.raises(ValueError):
        bounds.lower_bound(p, 2, "no-such-method")
