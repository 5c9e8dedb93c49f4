"""Deep graphs: the band-pruned SliceGraph against a plain DP, the linear-time split, the first plan."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from gapstop.engine import cancel
from gapstop.problems.pipeline import _kernels
from gapstop.problems.pipeline import first_plan as first_plan_module
from gapstop.problems.pipeline import search as search_module
from gapstop.problems.pipeline.closed_form import exact_sum, simple_parts
from gapstop.problems.pipeline.decoder import SliceDecoder
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import chained, model_like, random_dag, regal_like
from gapstop.problems.pipeline.constraints import Constraints
from gapstop.problems.pipeline.first_plan import VIA, FirstPlanFirst, first_plan
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.search import PipelineSearch


def _args(p: PipelineProblem) -> tuple:
    return (p.work, p.size_param, p.size_out, p.succ_ptr, p.succ, p.pred_ptr, p.pred, p.bandwidth,
            p.memory_or_minus1)


def plain_split_value(p: PipelineProblem, order: np.ndarray, k: int) -> float:
    """Every split of ``order`` into at most k blocks, by a DP over all O(n^2) segment costs."""
    n = len(order)
    pos = np.empty(n, np.int64)
    pos[order] = np.arange(n)
    maxcons = _kernels._max_consumer_pos(pos, p.succ_ptr, p.succ)
    stamp = np.full(n, -1, np.int64)
    cost = np.full((n, n), math.inf)
    for l in range(n):
        for r in range(l, n):
            stamp[:] = -1
            cost[l, r] = _kernels._segment_cost(order, pos, l, r, maxcons, p.work, p.size_param, p.size_out,
                                                p.pred_ptr, p.pred, p.bandwidth, p.memory_or_minus1, stamp)
    dp = np.full((k + 1, n + 1), math.inf)
    dp[:, 0] = 0.0
    for j in range(1, k + 1):
        for r in range(1, n + 1):
            dp[j, r] = min(dp[j - 1, r], min(max(dp[j - 1, l], cost[l, r - 1]) for l in range(r)))
    return float(dp[k, n])


def _graphs() -> list[PipelineProblem]:
    base = random_dag(12, 3, memory=True, k_hint=3)
    return [random_dag(60, 1), random_dag(60, 2, memory=True, k_hint=4), regal_like(5, n=70),
            model_like(80, 4), model_like(80, 5, memory=False), chained(base, 8, memory=base.memory),
            chained(random_dag(10, 7), 9)]


@pytest.mark.parametrize("graph", range(7))
@pytest.mark.parametrize("k", [1, 2, 3, 5, 8, 16])
def test_band_pruned_slicegraph_equals_a_plain_dp(graph: int, k: int) -> None:
    p = _graphs()[graph]
    rng = np.random.default_rng(graph * 100 + k)
    d = SliceDecoder(p, k)
    for _ in range(3):
        split = d.decode(rng.random(p.n))
        assert split.exact
        assert split.value == pytest.approx(plain_split_value(p, split.order, k), rel=1e-12)
        assert evaluate(p, split.blocks, split.order, k=k).objective == split.value


@pytest.mark.parametrize("seed", range(20))
def test_bisected_split_is_a_valid_split_scored_exactly(seed: int) -> None:
    p = random_dag(40 + seed, seed, memory=seed % 2 == 0, k_hint=4)
    k = 1 + seed % 6
    order = _kernels.kahn_order(np.random.default_rng(seed).random(p.n), p.succ_ptr, p.succ, p.pred_ptr)
    value, starts = _kernels.bisect_split(order, k, -1, 40, *_args(p))
    assert 1 <= len(starts) <= k and starts[0] == 0 and np.all(np.diff(starts) > 0)
    blocks = np.empty(p.n, np.int64)
    blocks[order] = np.searchsorted(starts, np.arange(p.n), side="right") - 1
    assert evaluate(p, blocks, order, k=k).objective == value
    # never worse than the equal-work split, never better than the optimal split of the order
    assert SliceDecoder(p, k).slice(order).value <= value


def test_bisected_split_meets_a_hard_memory_cap_or_says_it_cannot() -> None:
    p = random_dag(50, 11, memory=True, k_hint=4)
    order = _kernels.kahn_order(-np.arange(p.n, dtype=np.float64), p.succ_ptr, p.succ, p.pred_ptr)
    ev_one = evaluate(p, np.zeros(p.n, np.int64), order)
    cap = int(ev_one.param_bytes[0] + ev_one.peak_bytes[0]) // 3
    value, starts = _kernels.bisect_split(order, 8, cap, 40, *_args(p))
    assert math.isfinite(value)
    blocks = np.empty(p.n, np.int64)
    blocks[order] = np.searchsorted(starts, np.arange(p.n), side="right") - 1
    ev = evaluate(p, blocks, order, k=8)
    assert np.all(ev.param_bytes + ev.peak_bytes <= cap)
    value, _ = _kernels.bisect_split(order, 2, cap, 40, *_args(p))
    assert value == math.inf


def _reference_parts(p: PipelineProblem, k: int) -> dict[str, Fraction]:
    """The closed forms term by term in Fractions (the definitions in closed_form.py)."""
    bw = Fraction(p.bandwidth)
    work = [Fraction(float(w)) for w in p.work]
    size = [int(x) for x in p.size_out]
    best = Fraction(0)
    for v in range(p.n):
        total = work[v]
        for u in set(p.pred[p.pred_ptr[v]:p.pred_ptr[v + 1]].tolist()):
            total += min(Fraction(size[u]) / bw, work[u])
        cons = set(p.succ[p.succ_ptr[v]:p.succ_ptr[v + 1]].tolist())
        if cons:
            total += min(Fraction(size[v]) / bw, sum((work[w] for w in cons), Fraction(0)))
        best = max(best, total)
    parts = {"lemma_3_3": max(max(work), sum(work, Fraction(0)) / k), "neighbourhood": best}
    if p.memory is not None:
        ws = [size[v] + sum(size[u] for u in p.pred[p.pred_ptr[v]:p.pred_ptr[v + 1]].tolist()) for v in range(p.n)]
        parts["per_node"] = max(work[v] + Fraction(max(0, int(p.size_param[v]) + ws[v] - p.memory)) / bw
                                for v in range(p.n))
        spill = max(0, int(p.size_param.sum()) + max(ws) - k * p.memory)
        parts["averaged"] = (sum(work, Fraction(0)) + Fraction(spill) / bw) / k
    return parts


@pytest.mark.parametrize("seed", range(12))
def test_vectorised_closed_forms_are_the_exact_ones(seed: int) -> None:
    rng = np.random.default_rng(seed)
    p = random_dag(30 + seed, seed, memory=seed % 2 == 0, k_hint=3)
    # non-integer works of mixed magnitudes: the exact sum is not the float one
    p = PipelineProblem(p.name, p.work * rng.uniform(0.1, 1e3, p.n) / 3.0, p.size_param, p.size_out, p.edges,
                        bandwidth=7.3, memory=p.memory)
    for k in (1, 3, 8):
        assert simple_parts(p, k) == _reference_parts(p, k)
    assert exact_sum(p.work) == sum((Fraction(float(w)) for w in p.work), Fraction(0))


def _blocks_of(order: np.ndarray, starts: np.ndarray) -> np.ndarray:
    blocks = np.empty(len(order), np.int64)
    blocks[order] = np.searchsorted(starts, np.arange(len(order)), side="right") - 1
    return blocks


@pytest.mark.parametrize("seed", range(16))
def test_first_plan_is_feasible_and_exactly_scored(seed: int) -> None:
    p = random_dag(30 + 3 * seed, seed, memory=seed % 2 == 1, k_hint=3) if seed < 12 else regal_like(seed, n=60)
    for k in (1, 2, 4, 7):
        ev = first_plan(p, k)
        assert ev is not None and len(ev.block_costs) <= k
        again = evaluate(p, ev.blocks, ev.order, k=k)
        assert again.objective == ev.objective and np.array_equal(again.blocks, ev.blocks)
        # no better than the optimal split of its own order, never worse than an equal-work one
        assert SliceDecoder(p, k).slice(ev.order).value <= ev.objective


def test_first_plan_under_a_hard_memory_limit_fits_or_is_none() -> None:
    d = random_dag(40, 4, memory=True, k_hint=3)
    # a limit some 4-stage split meets: what the stages of an equal split of the program order need
    order = _kernels.kahn_order(-np.arange(d.n, dtype=np.float64), d.succ_ptr, d.succ, d.pred_ptr)
    equal = evaluate(d, _blocks_of(order, np.array([0, 10, 20, 30])), order)
    p = PipelineProblem(d.name, d.work, d.size_param, d.size_out, d.edges, bandwidth=d.bandwidth,
                        memory=int((equal.param_bytes + equal.peak_bytes).max()))
    cons = Constraints(4, memory_hard=True)
    ev = first_plan(p, 4, cons)
    assert ev is not None and np.all(ev.param_bytes + ev.peak_bytes <= p.memory)
    evaluate(p, ev.blocks, ev.order, k=4, constraints=cons)   # raises if it violated the limit
    tight = PipelineProblem(p.name, p.work, p.size_param, p.size_out, p.edges, bandwidth=p.bandwidth,
                            memory=int(p.size_param.max()) - 1)
    assert first_plan(tight, 4, cons) is None


def test_an_island_reports_the_first_plan_at_once_and_the_seeded_generation_when_it_fits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    p = chained(random_dag(12, 2), 10)
    built: list[int] = []

    def build() -> PipelineSearch:
        built.append(1)
        return PipelineSearch(p, 4, np.random.default_rng(0), population=20)

    plan = first_plan(p, 4).objective
    # a first generation too long for the first step: the plan alone, the island not built yet
    monkeypatch.setattr(first_plan_module, "FIRST_GENERATION_MAX_S", 0.0)
    island = FirstPlanFirst(p, 4, build, population=20)
    found: list[tuple[float, str]] = []
    assert island.step(0.0, lambda v, s: found.append((v, s.via))) == 0
    assert found == [(plan, VIA)] and not built
    island.prepare()                      # the island proper is built while held, the plan in it
    assert built and island.inner.ga.best_cost <= plan
    # a short one: the seeded generation in the same (however short) step, never reported worse
    monkeypatch.setattr(first_plan_module, "FIRST_GENERATION_MAX_S", 60.0)
    island2 = FirstPlanFirst(p, 4, build, population=20)
    found.clear()
    assert island2.step(0.0, lambda v, s: found.append((v, s.via))) >= 19   # the plan is one of the 20
    values = [v for v, _ in found]
    assert found[0] == (plan, VIA) and values == sorted(values, reverse=True) and len(set(values)) == len(values)


def test_an_island_decodes_each_chromosome_once_and_stops_mid_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    p = chained(random_dag(10, 1), 6)
    island = PipelineSearch(p, 3, np.random.default_rng(1), population=12)
    batch = island.ga.ask()
    whole = island.decoder.values(batch.keys, batch.cutoff)
    monkeypatch.setattr(search_module, "DECODE_CALL_S", 1e-12)   # one row per call
    calls: list[int] = []
    orig = island.decoder.values
    monkeypatch.setattr(island.decoder, "values", lambda keys, cutoff: calls.append(len(keys)) or orig(keys, cutoff))
    assert np.array_equal(island._score(batch), whole) and calls == [1] * len(whole)
    calls.clear()
    with cancel.stop_scope(lambda: True):
        values = island._score(batch)
    assert calls == [1] and values[0] == whole[0] and np.all(np.isinf(values[1:]))


def test_a_graph_of_zero_costs_decodes_to_zero() -> None:
    p = PipelineProblem("zeros", np.zeros(6), np.zeros(6, np.int64), np.zeros(6, np.int64),
                        np.array([(0, 1), (1, 2), (3, 4)]), bandwidth=1.0, memory=None)
    for k in (1, 2, 4):
        split = SliceDecoder(p, k).decode(np.linspace(0, 1, 6))
        assert split.value == 0.0 and split.exact
        assert first_plan(p, k).objective == 0.0


@pytest.mark.parametrize("seed", range(30))
def test_quotient_ranks_are_kahn_by_smallest_label(seed: int) -> None:
    from gapstop.engine.errors import InputError
    from gapstop.problems.pipeline.evaluate import _quotient_rank

    p = random_dag(8 + seed, seed, p=0.15)
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 4, p.n) * 3
    labels = sorted(set(blocks.tolist()))
    succ = {a: set() for a in labels}
    for u, v in p.edges.tolist():
        if blocks[u] != blocks[v]:
            succ[int(blocks[u])].add(int(blocks[v]))
    indeg = {b: sum(b in s for s in succ.values()) for b in labels}
    rank: dict[int, int] = {}
    while len(rank) < len(labels):
        ready = [b for b in labels if b not in rank and indeg[b] == 0]
        if not ready:
            with pytest.raises(InputError, match="cycle"):
                _quotient_rank(p, blocks)
            return
        b = min(ready)
        rank[b] = len(rank)
        for c in succ[b]:
            indeg[c] -= 1
    assert _quotient_rank(p, blocks).tolist() == [rank[int(b)] for b in blocks]
