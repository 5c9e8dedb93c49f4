"""Adjacent-stage node/boundary moves: exact incremental costs, monotone key, acyclic stages."""

from __future__ import annotations

import numpy as np
import pytest

from gapstop.problems.pipeline.decoder import SliceDecoder
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag, regal_like
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.moves import local_search
from tests.problems.pipeline.reference import brute_force, quotient_acyclic


def _key(costs: np.ndarray) -> tuple[float, int, float]:
    mx = float(costs.max())
    return mx, int((costs == mx).sum()), float((costs * costs).sum())


def _start(p: PipelineProblem, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Random cut points in a random topological order (not sliced optimally: moves have work to do)."""
    rng = np.random.default_rng(seed)
    order = SliceDecoder(p, k).order(rng.random(p.n))
    cuts = np.sort(rng.integers(0, p.n + 1, size=k - 1))
    blocks = np.empty(p.n, np.int64)
    blocks[order] = np.searchsorted(cuts, np.arange(p.n), side="right")
    return blocks, order


CASES = [(n, seed, mem, k) for n, seed, mem, k in
         [(n, s, s % 3 == 0, 2 + s % 3) for n in (6, 9, 13) for s in range(12)]]


@pytest.mark.parametrize("n,seed,memory,k", CASES)
def test_every_accepted_move_keeps_exact_costs(n: int, seed: int, memory: bool, k: int) -> None:
    p = random_dag(n, seed, memory=memory, k_hint=k)
    blocks, order = _start(p, k, seed)
    start = evaluate(p, blocks, order, k=k)
    prev = _key(start.block_costs)
    total = local_search(p, blocks, order, k, np.random.default_rng(seed)).moves
    for m in range(1, total + 1):  # the search is deterministic: m moves = a prefix of the full run
        r = local_search(p, blocks, order, k, np.random.default_rng(seed), max_moves=m)
        assert r.moves == m
        assert (p.m == 0) or (r.blocks[p.edges[:, 0]] <= r.blocks[p.edges[:, 1]]).all()
        assert quotient_acyclic(p, tuple(int(b) for b in r.blocks))
        for sched in (r.order, order):  # stages contiguous, or the input schedule: same restriction
            ev = evaluate(p, r.blocks, sched, k=k)
            assert ev.block_costs.tolist() == r.stage_costs.tolist()
            assert ev.objective == r.value
        key = _key(r.stage_costs)
        assert key < prev  # every accepted move lowers the key strictly
        prev = key
    assert local_search(p, blocks, order, k, np.random.default_rng(seed)).value <= start.objective


def test_never_worse_and_deterministic_on_regal_like() -> None:
    for seed in range(3):
        p = regal_like(1000 + seed, n=60)
        for k in (4, 8):
            blocks, order = _start(p, k, seed)
            start = evaluate(p, blocks, order, k=k).objective
            a = local_search(p, blocks, order, k, np.random.default_rng(7))
            b = local_search(p, blocks, order, k, np.random.default_rng(7))
            assert a.value <= start
            assert a.blocks.tolist() == b.blocks.tolist() and a.value == b.value
            assert evaluate(p, a.blocks, a.order, k=k).objective == a.value


def _lemma_b2() -> tuple[PipelineProblem, list[int]]:
    """Archer et al. 2024, Lemma B.2 with k = 2: heavy 0, 1 (work 9), light 2, 3 (work 1),
    one big tensor 0 -> 2. Every split of the order (0, 1, 3, 2) cuts it."""
    p = PipelineProblem(name="lemma-b2", work=np.array([9.0, 9.0, 1.0, 1.0]),
                        size_param=np.zeros(4, np.int64), size_out=np.array([100, 0, 0, 0]),
                        edges=np.array([[0, 2]]), bandwidth=1.0, memory=None)
    return p, [0, 1, 3, 2]


def test_escapes_the_slicing_worst_case() -> None:
    p, order = _lemma_b2()
    k = 2
    split = SliceDecoder(p, k).slice(np.array(order, np.int32))
    assert split.value == 20.0  # one block: any cut pays the tensor
    assert brute_force(p, k) == 10.0  # {0, 2}, {1, 3}
    r = local_search(p, split.blocks, split.order, k, np.random.default_rng(0))
    assert r.value == 10.0
    assert evaluate(p, r.blocks, r.order, k=k).objective == 10.0


@pytest.mark.parametrize("seed", range(6))
def test_local_optimum_is_feasible_and_not_below_brute_force(seed: int) -> None:
    p = random_dag(7, 100 + seed, memory=seed % 2 == 1, k_hint=3)
    blocks, order = _start(p, 3, seed)
    r = local_search(p, blocks, order, 3, np.random.default_rng(seed))
    assert r.value >= brute_force(p, 3)


def test_rejects_a_backward_edge() -> None:
    p, _ = _lemma_b2()
    with pytest.raises(ValueError):
        local_search(p, np.array([1, 0, 0, 0]), np.array([0, 1, 2, 3]), 2, np.random.default_rng(0))
