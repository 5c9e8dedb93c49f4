"""Greedy swaps: feasibility kept, cost never up, local optimality (checked by enumeration), segment tree."""

from __future__ import annotations

import numpy as np
import pytest

from gapstop.problems.intraop import repair
from gapstop.problems.intraop.evaluate import evaluate, usage_profile
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.relaxed import prepare
from tests.problems.intraop.reference import naive_evaluate


def test_segment_tree_matches_a_plain_array():
    rng = np.random.default_rng(0)
    for T in (1, 2, 5, 16, 33):
        prof = rng.integers(0, 50, size=T).astype(np.int64)
        size = max(2, 1 << (T - 1).bit_length())
        t, d = np.zeros(2 * size, np.int64), np.zeros(size, np.int64)
        repair.seg_build(t, d, size, prof)
        ref = prof.copy()
        for _ in range(200):
            lo, hi = sorted(rng.integers(0, T + 1, size=2))
            if rng.random() < 0.5:
                x = int(rng.integers(-20, 21))
                repair.seg_add(t, d, size, lo, hi, x)
                ref[lo:hi] += x
            elif hi > lo:
                assert repair.seg_max(t, d, size, lo, hi) == ref[lo:hi].max()
            assert t[1] == ref.max()
            assert ref[repair.seg_argmax(t, d, size)] == ref.max()


@pytest.mark.parametrize("seed", range(40))
def test_improve_keeps_feasibility_and_reaches_a_local_optimum(seed):
    rng = np.random.default_rng(seed)
    p = random_instance(8, seed, max_k=4, limit_quantile=0.6)
    prep = prepare(p)
    tracker = repair.UsageTracker(prep)
    for _ in range(5):
        sol = np.array([rng.integers(0, k) for k in p.num_strategies], dtype=np.int64)
        before = evaluate(p, sol)
        if not before.feasible:
            continue
        repair.improve(tracker, sol)
        after = evaluate(p, sol)
        assert after.feasible and after.cost <= before.cost
        for v in range(p.n):  # no single feasible swap improves
            for s in range(int(p.num_strategies[v])):
                alt = sol.tolist()
                alt[v] = s
                c, ok = naive_evaluate(p, alt)
                assert not (ok and c < after.cost)


def _improve_every_node(p, sol):
    """Rounds over every node in index order, each to its cheapest single swap that keeps the
    limit (first on ties), until a round moves none: the rule ``improve`` documents, naively."""
    sol = list(sol)
    moves = 0
    while True:
        moved = 0
        for v in range(p.n):
            best_c, _ = naive_evaluate(p, sol)
            best_s = sol[v]
            for s in range(int(p.num_strategies[v])):
                alt = sol.copy()
                alt[v] = s
                c, ok = naive_evaluate(p, alt)
                if ok and c < best_c:
                    best_c, best_s = c, s
            if best_s != sol[v]:
                sol[v] = best_s
                moved += 1
        moves += moved
        if moved == 0:
            return sol, moves


@pytest.mark.parametrize("seed", range(30))
def test_improve_makes_the_same_swaps_as_looking_at_every_node_every_round(seed):
    # improve skips nodes that cannot have moved since it last looked (no neighbour moved, no
    # usage freed while they wanted room); the result must be that of the plain rule
    rng = np.random.default_rng(seed)
    p = random_instance(14, seed, max_k=5, limit_quantile=[0.2, 0.5, 0.8][seed % 3], edge_p=0.2)
    tracker = repair.UsageTracker(prepare(p))
    checked = 0
    for _ in range(20):
        sol = np.array([rng.integers(0, k) for k in p.num_strategies], dtype=np.int64)
        if not (repair.repair(tracker, sol) and evaluate(p, sol).feasible):
            continue
        want, want_moves = _improve_every_node(p, sol.tolist())
        got_moves = repair.improve(tracker, sol)
        assert sol.tolist() == want and got_moves == want_moves
        checked += 1
    assert checked >= 10


@pytest.mark.parametrize("seed", range(40))
def test_repair_reaches_the_limit_when_least_usage_fits(seed):
    rng = np.random.default_rng(seed)
    p = random_instance(10, seed, max_k=4, limit_quantile=float(rng.uniform(0.0, 0.5)))
    tracker = repair.UsageTracker(prep := prepare(p))
    sol = np.array([rng.integers(0, k) for k in p.num_strategies], dtype=np.int64)
    ok = repair.repair(tracker, sol)
    # every swap strictly lowers a node's usage, so least-usage strategies are always reachable
    assert ok
    assert usage_profile(p, sol).max(initial=0) <= p.usage_limit
    assert evaluate(p, sol).feasible
    assert prep.problem is p


@pytest.mark.parametrize("seed", range(25))
def test_pair_moves_reach_a_pair_local_optimum(seed):
    rng = np.random.default_rng(seed)
    p = random_instance(7, seed, max_k=3, limit_quantile=0.5, edge_p=0.4)
    prep = prepare(p)
    sol = np.array([rng.integers(0, k) for k in p.num_strategies], dtype=np.int64)
    if not evaluate(p, sol).feasible:
        return
    before = evaluate(p, sol).cost
    repair.improve(repair.UsageTracker(prep), sol, pairs=50)
    after = evaluate(p, sol)
    assert after.feasible and after.cost <= before
    for u, v in zip(prep.net.tab_x.tolist(), prep.net.tab_y.tolist()):
        for a in range(int(p.num_strategies[u])):
            for b in range(int(p.num_strategies[v])):
                alt = sol.tolist()
                alt[u], alt[v] = a, b
                c, ok = naive_evaluate(p, alt)
                assert not (ok and c < after.cost), (u, v, a, b)


def test_a_pair_move_is_priced_without_the_pairs_own_forbidden_entries():
    # u and v must agree (any other pair of choices is forbidden); u's choices cost 1408, 8, 12.
    # Adding the u-v table to u's local costs and taking it off again rounded 12 + 10^18 - 10^18
    # to 0 (the spacing of doubles near 10^18 is 128), so (2, 2) looked cheaper than (1, 1) and
    # the polish went back and forth between them.
    from gapstop.problems.intraop.io import problem_from_dict
    from gapstop.problems.intraop.model import FORBIDDEN

    F = FORBIDDEN
    p = problem_from_dict({"problem": {
        "name": "pair", "usage_limit": 100,
        "nodes": {"intervals": [[0, 1], [0, 1]], "costs": [[1408, 8, 12], [0, 0, 0]], "usages": [[1, 1, 1], [1, 1, 1]]},
        "edges": {"nodes": [[0, 1]], "costs": [[0, F, F, F, 0, F, F, F, 0]]}}})
    tracker = repair.UsageTracker(prepare(p, contract=False, fold=False))
    sol = np.array([1, 1], dtype=np.int64)
    for _ in range(3):
        repair.improve(tracker, sol, pairs=1)
        assert sol.tolist() == [1, 1]
    sol = np.array([2, 2], dtype=np.int64)
    repair.improve(tracker, sol, pairs=1)
    assert sol.tolist() == [1, 1]


def test_pair_moves_never_raise_the_cost_beside_forbidden_entries():
    import itertools

    from gapstop.problems.intraop.io import problem_from_dict, problem_to_dict
    from gapstop.problems.intraop.model import FORBIDDEN

    exercised = 0
    for seed in range(40):
        rng = np.random.default_rng(seed)
        doc = problem_to_dict(random_instance(8, seed, max_k=3, limit_quantile=0.8, edge_p=0.35))
        for costs in doc["problem"]["edges"]["costs"]:  # forbidden pairs, all but one per table at most
            keep = int(rng.integers(len(costs)))
            for i in range(len(costs)):
                if i != keep and rng.random() < 0.25:
                    costs[i] = FORBIDDEN
        p = problem_from_dict(doc)
        tracker = repair.UsageTracker(prepare(p))
        feasible = [s for s in itertools.product(*(range(int(k)) for k in p.num_strategies))
                    if evaluate(p, np.array(s)).feasible]
        if not feasible:
            continue
        exercised += 1
        sol = np.array(feasible[rng.integers(len(feasible))], dtype=np.int64)
        costs = [evaluate(p, sol).cost]
        for _ in range(4):
            repair.improve(tracker, sol, pairs=1)
            ev = evaluate(p, sol)
            assert ev.feasible
            costs.append(ev.cost)
        assert costs == sorted(costs, reverse=True), (seed, costs)
    assert exercised >= 15
