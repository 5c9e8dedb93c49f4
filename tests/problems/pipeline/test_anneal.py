"""Annealing over stage labels: incremental costs equal the evaluator's, states stay acyclic, and
on small graphs it reaches the brute-force optimum."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gapstop.problems.pipeline.anneal import Annealer, _state, anneal
from gapstop.problems.pipeline.decoder import SliceDecoder
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag, regal_like
from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline.reference import brute_force


def _start(p: PipelineProblem, k: int, seed: int) -> np.ndarray:
    """Labels from random cut points of a random topological order (monotone on every edge)."""
    rng = np.random.default_rng(seed)
    order = SliceDecoder(p, k).order(rng.random(p.n))
    cuts = np.sort(rng.integers(0, p.n + 1, size=k - 1))
    y = np.empty(p.n, np.int64)
    y[order] = np.searchsorted(cuts, np.arange(p.n), side="right")
    return y


def _args(p: PipelineProblem, k: int) -> tuple:
    return (k, p.work, p.size_out, p.succ_ptr, p.succ, p.pred_ptr, p.pred, p.bandwidth)


def _evaluator_costs(p: PipelineProblem, y: np.ndarray, k: int) -> np.ndarray:
    """Stage costs per label 0..k-1 (0 for an empty stage), from the exact evaluator."""
    ev = evaluate(p, y, k=k)
    out = np.zeros(k)
    for label in np.unique(y):
        out[label] = ev.block_costs[ev.blocks[np.flatnonzero(y == label)[0]]]
    return out


CASES = [(n, seed, k) for n in (7, 12, 30) for seed in range(6) for k in (2, 3, 5)]


@pytest.mark.parametrize("n,seed,k", CASES)
def test_incremental_costs_and_best_agree_with_the_evaluator(n: int, seed: int, k: int) -> None:
    p = random_dag(n, seed, memory=False, k_hint=k)
    y = _start(p, k, seed)
    np.testing.assert_allclose(_state(y, *_args(p, k)[:5], p.bandwidth)[4], _evaluator_costs(p, y, k),
                               rtol=1e-12, atol=1e-9)
    start = float(_evaluator_costs(p, y, k).max())
    # a hot walk visits many states; the final state's kept costs must still be exact
    best, best_y, final = anneal(y, *_args(p, k), 5000, 0.5 * start, 0.01 * start, 6.0, seed)
    assert (y[p.edges[:, 0]] <= y[p.edges[:, 1]]).all() and y.min() >= 0 and y.max() < k
    assert (best_y[p.edges[:, 0]] <= best_y[p.edges[:, 1]]).all()
    np.testing.assert_allclose(final, _evaluator_costs(p, y, k), rtol=1e-9, atol=1e-6)
    assert best == pytest.approx(evaluate(p, best_y, k=k).objective, rel=1e-9)
    assert best <= start * (1 + 1e-12)


@pytest.mark.parametrize("n,seed,k", [(n, s, k) for n in (6, 8) for s in range(8) for k in (2, 3)])
def test_annealer_reaches_the_brute_force_optimum_on_small_graphs(n: int, seed: int, k: int) -> None:
    p = random_dag(n, seed, memory=False, k_hint=k)
    ann = Annealer(p, k, np.random.default_rng(seed))
    ann.reset(_start(p, k, seed))
    while ann.state()["restarts"] < 2:   # two whole restarts, cooled to the end
        ann.run(0.0)
    assert ann.best is not None
    opt = brute_force(p, k)
    assert ann.best.objective == pytest.approx(opt, rel=1e-9)
    # the best is the evaluator's own record of that partition
    assert ann.best.objective == evaluate(p, ann.best.blocks, k=k).objective


def test_annealer_never_gets_worse_and_is_deterministic() -> None:
    p = regal_like(3, n=60)
    runs = []
    for _ in range(2):
        ann = Annealer(p, 8, np.random.default_rng(1))
        ann.reset(_start(p, 8, 0))
        trace = [ann.best.objective]
        for _ in range(5):
            ann.run(0.0)   # one slice of fixed length: the same moves whatever the machine's speed
            trace.append(ann.best.objective)
        runs.append(trace)
    assert runs[0] == runs[1]
    assert all(b <= a for a, b in zip(runs[0], runs[0][1:]))
    assert runs[0][-1] < runs[0][0]


def test_annealer_refuses_a_memory_limit() -> None:
    p = random_dag(10, 0, memory=True, k_hint=3)
    assert p.memory is not None
    with pytest.raises(ValueError, match="memory"):
        Annealer(p, 3, np.random.default_rng(0))


def test_island_annealing_lifts_a_stuck_population_and_reports_exact_values() -> None:
    from gapstop.engine.workers import source_name
    from gapstop.problems.pipeline.memetic import TaggedSplit
    from tests.problems.pipeline.test_memetic import _stuck_island
    from tests.problems.pipeline.test_moves import _lemma_b2

    p, bad = _lemma_b2()                  # every split of the seeded order costs 20; the optimum is 10
    search = _stuck_island(p, bad)
    search.anneal_share, search.lns_share = 1.0, 0.0
    found: list[tuple[float, TaggedSplit]] = []
    search.step(0.05, lambda v, s: found.append((v, s)))
    assert found and found[-1][0] == 10.0 and found[-1][1].via == "anneal"
    assert source_name("search-0", found[-1][1]) == "search-0/anneal"
    assert evaluate(p, found[-1][1].blocks, found[-1][1].order, k=2).objective == 10.0
    assert search.ga.best_cost == 10.0   # and the population holds it


def test_islands_anneal_only_without_a_memory_limit() -> None:
    from gapstop.problems.pipeline.search import ANNEAL_SHARE, PipelineSearch

    free = random_dag(12, 0, memory=False, k_hint=3)
    limited = random_dag(12, 0, memory=True, k_hint=3)
    assert PipelineSearch(free, 3, np.random.default_rng(0)).anneal_share == ANNEAL_SHARE > 0
    assert PipelineSearch(limited, 3, np.random.default_rng(0)).anneal_share == 0.0
    with pytest.raises(ValueError, match="memory"):
        PipelineSearch(limited, 3, np.random.default_rng(0), anneal_share=0.5)


def test_a_stalled_annealer_gives_time_back_until_the_island_improves() -> None:
    from gapstop.problems.pipeline import search as search_mod
    from tests.problems.pipeline.test_memetic import _stuck_island
    from tests.problems.pipeline.test_moves import _lemma_b2

    p, bad = _lemma_b2()
    island = _stuck_island(p, bad)
    island.anneal_share, island.lns_share = 0.5, 0.0
    island.step(0.02)                                   # the annealer finds the optimum, 10
    ann = island._annealer
    assert ann.best.objective == 10.0 and island._anneal_share_now() == 0.5
    while ann.restarts_without_gain < search_mod.ANNEAL_STALL_RESTARTS:
        ann.run(0.0)                                     # nothing below the optimum: no gain
    assert island._anneal_share_now() == search_mod.ANNEAL_SHARE_STALLED
    ann.best = dataclasses.replace(ann.best, objective=11.0)   # as if the island now held a better one
    assert island._anneal_share_now() == 0.5
