"""SliceGraph, Kahn and the evaluator against the independent brute force in reference.py."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gapstop.problems.pipeline import _kernels
from gapstop.problems.pipeline.decoder import SliceDecoder
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline import reference as ref

CASES = [(seed, 3 + seed % 6, 2 + seed % 3, seed % 2 == 0) for seed in range(300)]


def _o(order: list[int]) -> np.ndarray:
    return np.array(order, dtype=np.int32)


@pytest.mark.parametrize("seed,n,k,memory", CASES)
def test_slicegraph_over_all_orders_reaches_brute_force_optimum(seed: int, n: int, k: int, memory: bool) -> None:
    # Theorem 4.3: some topological order, optimally sliced, is optimal.
    p = random_dag(n, seed, memory=memory, k_hint=k)
    d = SliceDecoder(p, k)
    best = min(d.slice(_o(o)).value for o in ref.topological_orders(p))
    assert best == pytest.approx(ref.brute_force(p, k), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed,n,k,memory", CASES)
def test_slicegraph_equals_exhaustive_split_of_the_order(seed: int, n: int, k: int, memory: bool) -> None:
    p = random_dag(n, seed, memory=memory, k_hint=k)
    rng = np.random.default_rng(seed)
    d = SliceDecoder(p, k)
    split = d.decode(rng.random(n))
    order = split.order.tolist()
    assert split.exact
    assert split.value == pytest.approx(ref.best_split(p, order, k), rel=1e-12, abs=1e-12)
    # the evaluator re-scores the returned blocks to the same value, bit for bit
    ev = evaluate(p, split.blocks, split.order, k=k)
    assert ev.objective == split.value
    assert len(np.unique(split.blocks)) <= k


@pytest.mark.parametrize("seed", range(60))
def test_evaluator_matches_reference_block_costs(seed: int) -> None:
    n = 2 + seed % 7
    p = random_dag(n, seed, memory=True, k_hint=3)
    rng = np.random.default_rng(seed)
    order = list(ref.topological_orders(p))[0]
    # random acyclic partition: random cut points on a random topological order
    orders = list(itertools.islice(ref.topological_orders(p), 50))
    order = orders[int(rng.integers(len(orders)))]
    cuts = sorted(set(rng.integers(1, n, size=2).tolist())) if n > 1 else []
    blocks = np.zeros(n, dtype=np.int64)
    for c in cuts:
        blocks[np.array(order[c:])] += 1
    ev = evaluate(p, blocks, _o(order))
    bounds = [0, *cuts, n]
    want = [ref.block_cost(p, order[bounds[i]:bounds[i + 1]]) for i in range(len(bounds) - 1)]
    assert ev.block_costs.tolist() == pytest.approx(want, rel=1e-12, abs=1e-12)


def test_cutoff_keeps_values_below_it_exact_and_others_not_better() -> None:
    for seed in range(40):
        p = random_dag(8, seed, memory=seed % 2 == 0)
        d = SliceDecoder(p, 3)
        order = d.order(np.random.default_rng(seed).random(8))
        exact = d.slice(order).value
        for cutoff in (exact * 0.9, exact, exact * 1.1):
            s = d.slice(order, cutoff)
            if exact < cutoff:
                assert s.exact and s.value == exact
            else:
                assert s.value >= exact
            assert evaluate(p, s.blocks, s.order).objective == s.value


def test_a_read_only_key_batch_decodes_alike_without_another_compile() -> None:
    p = random_dag(12, 3)
    d = SliceDecoder(p, 3)
    keys = np.random.default_rng(3).random((5, 12))
    writable = d.values(keys)
    kinds = len(_kernels.decode_batch.signatures)
    frozen = keys.copy()
    frozen.flags.writeable = False
    assert np.array_equal(d.values(frozen), writable)
    assert np.array_equal(writable, [d.decode(row).value for row in keys])
    assert len(_kernels.decode_batch.signatures) == kinds  # numba types a read-only array apart


def test_kahn_respects_priorities_and_ties() -> None:
    p = PipelineProblem(name="t", work=np.ones(5), size_param=np.zeros(5, np.int64),
                        size_out=np.ones(5, np.int64), edges=np.array([[0, 3], [1, 3], [3, 4]]),
                        bandwidth=1.0, memory=None)
    order = _kernels.kahn_order(np.array([0.1, 0.9, 0.5, 1.0, 1.0]), p.succ_ptr, p.succ, p.pred_ptr)
    assert order.tolist() == [1, 2, 0, 3, 4]
    tie = _kernels.kahn_order(np.zeros(5), p.succ_ptr, p.succ, p.pred_ptr)
    assert tie.tolist() == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("k", [2, 3, 4])
def test_lemma_b2_instance(k: int) -> None:
    """Archer et al. 2024, Lemma B.2: slicing the bad order costs k * OPT; OPT = 1."""
    eps = 1.0 / 64
    n = 2 * k
    work = np.array([1 - eps] * k + [eps] * k)
    size_out = np.zeros(n, np.int64)
    size_out[0] = 10 * k
    p = PipelineProblem(name="b2", work=work, size_param=np.zeros(n, np.int64), size_out=size_out,
                        edges=np.array([[0, k]]), bandwidth=1.0, memory=None)
    bad = list(range(k)) + list(range(2 * k - 1, k - 1, -1))
    d = SliceDecoder(p, k)
    assert d.slice(_o(bad)).value == pytest.approx(k * 1.0)
    good = [x for i in range(k) for x in (i, k + i)]
    assert d.slice(_o(good)).value == pytest.approx(1.0)
    if n <= 8:
        assert ref.brute_force(p, k) == pytest.approx(1.0)


def test_evaluator_rejects_cyclic_quotient_and_bad_orders() -> None:
    from gapstop.engine.errors import InputError
    p = PipelineProblem(name="t", work=np.ones(3), size_param=np.zeros(3, np.int64), size_out=np.ones(3, np.int64),
                        edges=np.array([[0, 1], [1, 2]]), bandwidth=1.0, memory=None)
    with pytest.raises(InputError, match="cycle"):
        evaluate(p, [0, 1, 0])
    with pytest.raises(InputError, match="not topological"):
        evaluate(p, [0, 0, 0], order=[1, 0, 2])
    with pytest.raises(InputError, match="more than k"):
        evaluate(p, [0, 1, 2], k=2)
    ev = evaluate(p, [5, 9, 9])  # arbitrary labels are renumbered in DAG order
    assert ev.blocks.tolist() == [0, 1, 1]
    assert ev.objective == pytest.approx(max(1 + 1.0, 2 + 1.0))


def test_peak_and_overflow_by_hand() -> None:
    # chain a -> b -> c in one block; sizes 4, 2, 1; param 10; M = 12; B = 2
    p = PipelineProblem(name="t", work=np.array([1.0, 1.0, 1.0]), size_param=np.array([10, 0, 0]),
                        size_out=np.array([4, 2, 1]), edges=np.array([[0, 1], [1, 2]]), bandwidth=2.0,
                        memory=12)
    ev = evaluate(p, [0, 0, 0])
    # live: step a {a}=4; step b {a,b}=6; step c {b,c}=3 (c is a model output) -> peak 6
    assert ev.peak_bytes.tolist() == [6]
    assert ev.objective == pytest.approx(3.0 + (10 + 6 - 12) / 2.0)
    ev2 = evaluate(p, [0, 1, 1])
    # block 0 = {a}: out 4 bytes; peak 4; overflow (10 + 4 - 12)/2 = 1
    assert ev2.block_costs.tolist() == pytest.approx([1 + 4 / 2 + 1.0, 2 + 4 / 2 + max(0, 0 + 4 + 3 - 12) / 2])
    assert math.isfinite(ev2.objective)


@pytest.mark.parametrize("seed", range(40))
def test_improve_split_keeps_a_valid_order_and_never_worsens(seed: int) -> None:
    p = random_dag(8, seed, memory=seed % 2 == 0)
    k = 2 + seed % 3
    d = SliceDecoder(p, k)
    s = d.decode(np.random.default_rng(seed).random(8))
    starts = np.flatnonzero(np.diff(s.blocks[s.order], prepend=-1)).astype(np.int64)
    order, new_starts = _kernels.improve_split(s.order, starts, *d._args, 100)
    from gapstop.problems.pipeline.evaluate import check_order
    check_order(p, order)  # still topological
    blocks = np.zeros(8, dtype=np.int64)
    for i, st in enumerate(new_starts):
        blocks[order[st:]] = i
    ev = evaluate(p, blocks, order, k=k)
    assert ev.objective <= s.value
    assert d.slice(order).value <= ev.objective
