"""Degree <= 2 elimination is exact: the relaxed optimum is unchanged (brute force decides)."""

from __future__ import annotations

import numpy as np
import pytest

from gapstop.problems.intraop import _kernels as K
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.network import build_network
from gapstop.problems.intraop.reduce import new_work, plan_reduction, reconstruct, run_plan
from gapstop.problems.intraop.relaxed import RelaxedSolver, prepare
from tests.problems.intraop.reference import relaxed_optimum, relaxed_value


def _reduced_optimum(p, weight, max_fill, contract=False):
    net = build_network(p)
    plan = plan_reduction(net, max_fill=max_fill, max_work=None if max_fill is None else 1 << 22, contract=contract)
    theta = np.empty(len(net.unary))
    K.penalised_unary(net.unary, net.usage, net.ptr, weight.astype(np.float64), theta)
    work = new_work(net, plan)
    run_plan(plan, net, theta, work)
    sol = np.zeros(p.n, dtype=np.int64)
    core_value = 0.0
    if len(plan.core):
        core_value = K.exhaustive(plan.core, sol, theta, net.ptr, net.k, plan.adj_ptr, plan.adj_nbr,
                                  plan.adj_tab, work, plan.tab_off, plan.tab_x)
    reconstruct(plan, net, theta, work, sol)
    return plan, sol, core_value


@pytest.mark.parametrize("seed", range(120))
def test_elimination_keeps_the_relaxed_optimum(seed):
    rng = np.random.default_rng(seed)
    n = 2 + seed % 7
    p = random_instance(n, seed, max_k=3, edge_p=0.15 + 0.1 * (seed % 5), self_loops=seed % 3 == 0)
    w = rng.integers(0, 4, size=n)
    plan, sol, core_value = _reduced_optimum(p, w, None if seed % 2 else 2)
    want = relaxed_optimum(p, w.tolist())
    assert relaxed_value(p, w.tolist(), sol.tolist()) == want
    if len(plan.core):  # the core's own optimum plus eliminated parts is the same value
        assert all(d >= 3 for d in np.diff(plan.adj_ptr)[plan.core]) or seed % 2 == 0
    assert len(plan.core) + plan.num_ops == n


def test_trees_and_cycles_reduce_completely():
    for seed in range(20):
        p = random_instance(8, seed, edge_p=0.1)
        plan = plan_reduction(build_network(p), max_fill=None, max_work=None)
        assert len(plan.core) == 0 or min(np.diff(plan.adj_ptr)[plan.core]) >= 3


@pytest.mark.parametrize("seed", range(40))
def test_relaxed_solver_is_exact_on_tiny_cores(seed):
    p = random_instance(7, seed, max_k=3, edge_p=0.5, limit_quantile=None)
    w = np.random.default_rng(seed).integers(0, 3, size=7)
    s = RelaxedSolver(prepare(p)).solve(w.astype(np.float64), np.random.default_rng(0))
    assert relaxed_value(p, w.tolist(), s.tolist()) == relaxed_optimum(p, w.tolist())


def test_core_search_never_worsens_and_finds_optimum_mostly(monkeypatch):
    """TRW-S + induced-forest descent without the exhaustive shortcut."""
    import gapstop.problems.intraop.relaxed as RX
    monkeypatch.setattr(RX, "EXHAUSTIVE_LIMIT", 0)
    hits = total = 0
    for seed in range(60):
        p = random_instance(8, seed, max_k=3, edge_p=0.5, limit_quantile=None)
        prep = prepare(p, max_fill=None)
        if not len(prep.plan.core):
            continue
        w = np.zeros(p.n)
        solver = RX.RelaxedSolver(prep)
        start = np.zeros(p.n, dtype=np.int64)
        s = solver.solve(w, np.random.default_rng(seed), warm=start)
        got = relaxed_value(p, [0] * p.n, s.tolist())
        full_start = start.copy()
        reconstruct(prep.plan, prep.net, solver.theta, solver.work, full_start)
        assert got <= relaxed_value(p, [0] * p.n, full_start.tolist())
        total += 1
        hits += got == relaxed_optimum(p, [0] * p.n)
    print(f"core search optimal on {hits}/{total}")
    assert total >= 20 and hits >= 0.85 * total


def _with_bijections(p, seed, count):
    """``p`` plus ``count`` edges between equal-k nodes whose tables are random permutations
    with random finite costs on them (FORBIDDEN elsewhere), some in cycles and parallel."""
    from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem

    rng = np.random.default_rng(seed)
    k = p.num_strategies
    us, vs, tabs = [], [], []
    for _ in range(count):
        u = int(rng.integers(p.n))
        same = [v for v in range(p.n) if v != u and k[v] == k[u]]
        if k[u] < 2 or not same:
            continue
        v = int(rng.choice(same))
        t = np.full((k[u], k[u]), FORBIDDEN, dtype=np.int64)
        t[np.arange(k[u]), rng.permutation(k[u])] = rng.integers(0, 30, size=k[u])
        us.append(u)
        vs.append(v)
        tabs.append(t.ravel())
    if not tabs:
        return p
    eptr = np.concatenate([p.edge_ptr, p.edge_ptr[-1] + np.cumsum([len(t) for t in tabs])])
    return IntraopProblem(name=p.name, node_ptr=p.node_ptr, node_cost=p.node_cost, node_usage=p.node_usage,
                          start=p.start, end=p.end, edge_u=np.concatenate([p.edge_u, us]),
                          edge_v=np.concatenate([p.edge_v, vs]), edge_ptr=eptr,
                          edge_cost=np.concatenate([p.edge_cost, *tabs]), usage_limit=p.usage_limit)


@pytest.mark.parametrize("seed", range(80))
def test_bijection_contraction_keeps_the_relaxed_optimum(seed):
    from gapstop.problems.intraop.model import FORBIDDEN

    rng = np.random.default_rng(seed)
    n = 3 + seed % 6
    p = random_instance(n, seed, max_k=3, edge_p=0.2 + 0.1 * (seed % 4), limit_quantile=None)
    p = _with_bijections(p, seed, 1 + seed % 5)
    w = rng.integers(0, 4, size=n)
    want = relaxed_optimum(p, w.tolist())
    plan, sol, _ = _reduced_optimum(p, w, None, contract=True)
    if want < FORBIDDEN:  # some solution avoids every forbidden entry: the optimum is kept exactly
        assert relaxed_value(p, w.tolist(), sol.tolist()) == want
    # every node merged, eliminated or core (MOVE and FOLD ops come with a node's MERGE or ELIM0)
    assert len(plan.core) + int(np.sum(plan.op_kind < 4)) == n


def test_contraction_merges_what_elimination_cannot():
    """A 4-clique of nodes tied by bijections: no node has degree <= 2, contraction leaves one node."""
    from gapstop.problems.intraop.model import IntraopProblem

    k = 3
    p0 = random_instance(4, 0, max_k=1, edge_p=0.0, limit_quantile=None)
    ptr = np.arange(0, 4 * k + 1, k)
    perm = np.full((k, k), 10**18, dtype=np.int64)
    perm[np.arange(k), [2, 0, 1]] = [1, 2, 3]
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    p = IntraopProblem(name="clique", node_ptr=ptr, node_cost=np.arange(4 * k), node_usage=np.zeros(4 * k),
                       start=p0.start, end=p0.end, edge_u=[a for a, _ in pairs], edge_v=[b for _, b in pairs],
                       edge_ptr=np.arange(0, 6 * k * k + 1, k * k), edge_cost=np.tile(perm.ravel(), 6),
                       usage_limit=None)
    net = build_network(p)
    assert len(plan_reduction(net).core) == 4
    assert len(plan_reduction(net, contract=True).core) == 0


@pytest.mark.parametrize("seed", range(60))
def test_single_strategy_nodes_leave_the_core_exactly(seed):
    """Dense random networks with single-strategy nodes of high degree: with ``contract`` none stays in
    the core, and the relaxed optimum (brute force) is kept for any network, forbidden entries or not."""
    rng = np.random.default_rng(1000 + seed)
    n = 4 + seed % 5
    p = random_instance(n, 1000 + seed, max_k=2 + seed % 3, edge_p=0.5 + 0.1 * (seed % 4), limit_quantile=None,
                        self_loops=seed % 2 == 0, forbidden_p=0.15 if seed % 3 == 0 else 0.0)
    w = rng.integers(0, 4, size=n)
    plan, sol, _ = _reduced_optimum(p, w, None, contract=True)
    assert not np.any(p.num_strategies[plan.core] == 1)
    want = relaxed_optimum(p, w.tolist())
    if want < 10**18 or not np.any(plan.op_kind == 3):  # only a bijection merge needs a non-forbidden optimum
        assert relaxed_value(p, w.tolist(), sol.tolist()) == want
    assert len(plan.core) + int(np.sum(plan.op_kind < 4)) == n


def test_single_strategy_hub_is_folded():
    """A single-strategy node joined to a 4-clique of 2-strategy nodes (all degrees 4): plain elimination
    keeps all five in the core; ``contract`` folds the hub's 4 tables into the clique."""
    from gapstop.problems.intraop.model import IntraopProblem
    from gapstop.problems.intraop.reduce import FOLD

    k = [1, 2, 2, 2, 2]
    ptr = np.concatenate([[0], np.cumsum(k)])
    pairs = [(0, 1), (0, 2), (0, 3), (0, 4), (1, 2), (1, 3), (1, 4), (2, 3), (2, 4), (3, 4)]
    rng = np.random.default_rng(7)
    costs = [rng.integers(0, 20, size=k[a] * k[b]) for a, b in pairs]
    p = IntraopProblem(name="hub", node_ptr=ptr, node_cost=rng.integers(0, 9, size=ptr[-1]),
                       node_usage=np.zeros(ptr[-1], dtype=np.int64), start=np.zeros(5, dtype=np.int64),
                       end=np.ones(5, dtype=np.int64), edge_u=[a for a, _ in pairs], edge_v=[b for _, b in pairs],
                       edge_ptr=np.concatenate([[0], np.cumsum([len(c) for c in costs])]),
                       edge_cost=np.concatenate(costs), usage_limit=None)
    net = build_network(p)
    assert 0 in plan_reduction(net, max_fill=None, max_work=None).core.tolist()
    plan = plan_reduction(net, max_fill=None, max_work=None, contract=True)
    assert int(np.sum(plan.op_kind == FOLD)) == 4 and 0 not in plan.core.tolist()
    s = RelaxedSolver(prepare(p)).solve(np.zeros(5), np.random.default_rng(0))
    assert relaxed_value(p, [0] * 5, s.tolist()) == relaxed_optimum(p, [0] * 5)


@pytest.mark.parametrize("seed", range(40))
def test_replay_matches_the_full_replay_up_to_constants(seed):
    """The split replay gives, per core table and per node's unary costs, the same numbers up to a
    constant as penalising every node and replaying every op (float sums: to 1e-9 relative)."""
    from gapstop.problems.intraop.model import IntraopProblem
    from gapstop.problems.intraop.reduce import plan_replay, run_replay
    from gapstop.problems.intraop.relaxed import penalised_nodes

    rng = np.random.default_rng(2000 + seed)
    n = 6 + seed % 8
    p = random_instance(n, 2000 + seed, max_k=3, edge_p=0.3 + 0.1 * (seed % 4), limit_quantile=None)
    p = _with_bijections(p, seed, seed % 4)
    usage = p.node_usage.copy()
    for v in rng.choice(n, size=n // 2, replace=False):  # half the nodes: the same usage for every strategy
        usage[p.node_ptr[v]:p.node_ptr[v + 1]] = usage[p.node_ptr[v]]
    p = IntraopProblem(name=p.name, node_ptr=p.node_ptr, node_cost=p.node_cost, node_usage=usage, start=p.start,
                       end=p.end, edge_u=p.edge_u, edge_v=p.edge_v, edge_ptr=p.edge_ptr, edge_cost=p.edge_cost,
                       usage_limit=None)
    net = build_network(p)
    plan = plan_reduction(net, max_fill=None if seed % 2 else 2, max_work=None, contract=seed % 3 > 0)
    replay = plan_replay(plan, net, penalised_nodes(net))
    assert replay.num_ops <= plan.num_ops
    work2 = replay.base_work.copy()
    for _ in range(3):  # the constant tables stay valid from one weight vector to the next
        w = rng.random(n) * 5
        theta = np.empty(len(net.unary))
        K.penalised_unary(net.unary, net.usage, net.ptr, w, theta)
        work = new_work(net, plan)
        run_plan(plan, net, theta, work)
        theta2 = np.empty(len(net.unary))
        run_replay(replay, plan, net, w, theta2, work2)
        for t in set(plan.adj_tab.tolist()):  # a table made from an unpenalised node: shifted by a constant
            a = slice(plan.tab_off[t], plan.tab_off[t] + net.k[plan.tab_x[t]] * net.k[plan.tab_y[t]])
            assert np.ptp(work2[a] - work[a]) <= 1e-9 * (1 + np.abs(work[a]).max())
        for v in range(n):  # every node: eliminated ones are read again by the reconstruction
            d = theta2[net.ptr[v]:net.ptr[v + 1]] - theta[net.ptr[v]:net.ptr[v + 1]]
            assert np.ptp(d) <= 1e-9 * (1 + np.abs(theta[net.ptr[v]:net.ptr[v + 1]]).max())


def test_reset_messages_solves_as_a_fresh_solver():
    """TRW-S from zero messages: a solver used before gives what a new one gives (same rng, warm start)."""
    p = random_instance(40, 5, max_k=4, edge_p=0.3, limit_quantile=None)
    prep = prepare(p)
    assert len(prep.plan.core) > 5 and not RelaxedSolver(prep).exhaustive
    rng = np.random.default_rng(0)
    used = RelaxedSolver(prep)
    warm = used.solve(rng.random(p.n) * 3, np.random.default_rng(1))
    used.solve(rng.random(p.n) * 3, np.random.default_rng(2), warm)
    assert np.any(used.msg != 0)
    w = rng.random(p.n) * 3
    a = used.solve(w, np.random.default_rng(3), warm, reset_messages=True, trws_iterations=20)
    b = RelaxedSolver(prep).solve(w, np.random.default_rng(3), warm, trws_iterations=20)
    assert a.tolist() == b.tolist()
