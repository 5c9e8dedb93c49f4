"""The memetic step: moves on the island's elites, injected back and reported with their source."""

from __future__ import annotations

import numpy as np

from gapstop.engine.workers import source_name
from gapstop.problems.pipeline.decoder import SliceDecoder
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import regal_like
from gapstop.problems.pipeline.memetic import TaggedSplit, improve_by_moves, memetic_step, order_keys
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.run import PipelineEvaluator, split_to_solution
from gapstop.problems.pipeline.search import PipelineSearch
from tests.problems.pipeline.test_moves import _lemma_b2


def test_order_keys_reproduce_the_order() -> None:
    p = regal_like(2024, n=50)
    dec = SliceDecoder(p, 4)
    order = dec.order(np.random.default_rng(3).random(p.n))
    assert dec.order(order_keys(order)).tolist() == order.tolist()


def _stuck_island(p: PipelineProblem, order: list[int], k: int = 2) -> PipelineSearch:
    """An island whose whole first generation is the Kahn order ``order``, evaluated."""
    keys = order_keys(np.array(order, np.int32))
    search = PipelineSearch(p, k, np.random.default_rng(0), population=10, random_share=0.0,
                            seeds=np.repeat(keys[None, :], 10, axis=0), polish_improvements=False,
                            memetic_every=0)
    search.step(0.0)
    return search


def test_memetic_step_lifts_a_stuck_population() -> None:
    p, bad = _lemma_b2()
    search = _stuck_island(p, bad)  # all ten are the bad order, value 20
    assert search.ga.best_cost == 20.0
    assert memetic_step(search, np.random.default_rng(1)) >= 1
    assert search.ga.best_cost == 10.0
    value, split = search.best()
    assert value == 10.0 and evaluate(p, split.blocks, split.order, k=2).objective == 10.0


def test_improve_by_moves_never_worse_and_exact() -> None:
    for seed in range(3):
        p = regal_like(3000 + seed, n=80)
        dec = SliceDecoder(p, 8)
        split = dec.decode(np.random.default_rng(seed).random(p.n))
        res = improve_by_moves(dec, split, np.random.default_rng(seed))
        assert res.value <= split.value
        assert evaluate(p, res.blocks, res.order, k=8).objective == res.value


def test_island_reports_tagged_exact_improvements() -> None:
    p = regal_like(4040, n=80)
    k = 8
    search = PipelineSearch(p, k, np.random.default_rng(5), population=20, memetic_every=1)
    ev = PipelineEvaluator(p, k)
    found: list[tuple[float, TaggedSplit]] = []
    search.step(1.5, lambda v, s: found.append((v, s)))
    assert found
    values = [v for v, _ in found]
    assert values == sorted(values, reverse=True) and len(set(values)) == len(values)
    for v, s in found:
        assert isinstance(s, TaggedSplit) and s.via in ("", "polish", "moves", "anneal")
        assert source_name("search-0", s) == ("search-0/" + s.via if s.via else "search-0")
        assert evaluate(p, s.blocks, s.order, k=k).objective == v
        assert ev(split_to_solution(s))[0] <= v


def test_island_takes_a_better_incumbent_only() -> None:
    p, bad = _lemma_b2()
    search = _stuck_island(p, bad)
    cost, sol = PipelineEvaluator(p, 2)({"blocks": [0, 1, 0, 1]})
    assert cost == 10.0
    assert not search.accept_incumbent(25.0, sol)  # worse than the island's 20: ignored
    assert search.ga.best_cost == 20.0
    assert search.accept_incumbent(cost, sol)
    assert not search.accept_incumbent(cost - 1.0, sol)  # the same partition again: taken once
    value, split = search.best()
    assert value == 10.0 and evaluate(p, split.blocks, split.order, k=2).objective == 10.0


def test_memetic_step_improves_an_injected_incumbent() -> None:
    p, bad = _lemma_b2()
    search = _stuck_island(p, bad)
    assert search.ga.best_cost == 20.0
    # the order (1, 0, 2, 3) slices best as {1}, {0, 2, 3} = 11; a move of node 3 gives 10
    assert search.accept_incumbent(11.0, {"blocks": [1, 0, 1, 1], "order": [1, 0, 2, 3]})
    assert search.ga.best_cost == 11.0
    search._memetic_seen.add(order_keys(np.array(bad, np.int32)).tobytes())  # the seeded elites: done
    assert memetic_step(search, np.random.default_rng(1), seen=search._memetic_seen) == 1
    assert search.ga.best_cost == 10.0
