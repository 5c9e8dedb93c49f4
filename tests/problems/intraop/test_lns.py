"""CP-SAT neighbourhood moves: exact on the whole graph, never worse or infeasible, usage rows right."""

from __future__ import annotations

import numpy as np
import pytest

from gapstop.problems.intraop import lns
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.relaxed import prepare
from tests.problems.intraop.reference import brute_force_table


def _feasible_start(p, rng):
    """A feasible assignment (random tries, then least usage), or None."""
    k = p.num_strategies
    for _ in range(200):
        sol = np.array([rng.integers(0, x) for x in k], dtype=np.int64)
        if evaluate(p, sol).feasible:
            return sol
    return None


def _best_over(p, sol, free):
    """Least feasible cost over every assignment of ``free`` by enumeration, the others as in ``sol``."""
    best = None
    for combo in np.ndindex(*[int(p.num_strategies[v]) for v in free]):
        alt = sol.copy()
        alt[free] = combo
        e = evaluate(p, alt)
        if e.feasible and (best is None or e.cost < best):
            best = e.cost
    return best


@pytest.mark.mip
@pytest.mark.parametrize("seed", range(30))
def test_whole_graph_neighbourhood_is_the_brute_force_optimum(seed):
    rng = np.random.default_rng(seed)
    p = random_instance(6 + seed % 4, seed, max_k=3, limit_quantile=float(rng.uniform(0.1, 0.8)),
                        forbidden_p=0.1 if seed % 3 == 0 else 0.0)
    best, _ = brute_force_table(p)
    sol = _feasible_start(p, rng)
    if sol is None:
        return
    out, res = lns.solve_neighbourhood(prepare(p), sol, np.arange(p.n), time_limit_s=10)
    ev = evaluate(p, out)
    assert ev.feasible and ev.cost == res.cost == best
    assert res.improved == (evaluate(p, sol).cost > best)


@pytest.mark.mip
@pytest.mark.parametrize("seed", range(30))
def test_partial_neighbourhood_never_worse_and_optimal_over_its_nodes(seed):
    rng = np.random.default_rng(100 + seed)
    p = random_instance(9, 100 + seed, max_k=3, limit_quantile=float(rng.uniform(0.1, 0.8)), edge_p=0.35)
    sol = _feasible_start(p, rng)
    if sol is None:
        return
    free = np.sort(rng.choice(p.n, size=4, replace=False))
    out, res = lns.solve_neighbourhood(prepare(p), sol, free, time_limit_s=10)
    ev = evaluate(p, out)
    assert ev.feasible and ev.cost == res.cost <= evaluate(p, sol).cost
    fixed = np.setdiff1d(np.arange(p.n), free)
    assert np.array_equal(out[fixed], sol[fixed])
    assert res.cost == _best_over(p, sol, free)


def test_trivial_neighbourhood_returns_a_copy():
    p = random_instance(6, 3, max_k=1, limit_quantile=None)
    sol = np.zeros(p.n, dtype=np.int64)
    out, res = lns.solve_neighbourhood(prepare(p), sol, np.arange(p.n))
    assert res.status == "TRIVIAL" and not res.improved and out is not sol and np.array_equal(out, sol)


@pytest.mark.mip
def test_search_steps_keep_the_incumbent_feasible_and_monotone():
    p = random_instance(120, 5, max_k=4, limit_quantile=0.3)
    prep = prepare(p)
    rng = np.random.default_rng(0)
    sol = _feasible_start(p, rng)
    if sol is None:  # least usage everywhere is feasible by construction of the limit
        sol = np.array([int(np.argmin(p.node_usage[p.node_ptr[v]:p.node_ptr[v + 1]])) for v in range(p.n)])
    s = lns.NeighbourhoodSearch(prep, sol, seed=1, size=30, move_time_s=2.0)
    costs = [s.cost]
    for _ in range(4):
        for cost, found in s.step(0.5):
            ev = evaluate(p, found)
            assert ev.feasible and ev.cost == cost < costs[-1]
            costs.append(cost)
    assert s.moves >= 4 and s.cost == costs[-1] == evaluate(p, s.sol).cost
    for kind in lns.NeighbourhoodSearch.KINDS:
        nodes = getattr(s, kind)()
        # a component is taken whole up to max_size; the other kinds follow the adaptive size
        assert len(nodes) <= (s.max_size if kind == "component" else s.size) and len(np.unique(nodes)) == len(nodes)
        assert np.all(prep.net.k[nodes] > 1)


@pytest.mark.parametrize("seed", range(20))
def test_class_components_match_a_plain_union_find(seed):
    """Components of same-strategy-count nodes (k > 1), from the raw edge list by a separate union-find."""
    p = random_instance(50, seed, max_k=3, edge_p=0.08)
    k = p.num_strategies
    parent = list(range(p.n))

    def find(x):
        while parent[x] != x:
            x = parent[x]
        return x

    for u, v in zip(p.edge_u.tolist(), p.edge_v.tolist()):
        if u != v and k[u] == k[v] and k[u] > 1:
            parent[find(u)] = find(v)
    groups = {}
    for v in range(p.n):
        if k[v] > 1:
            groups.setdefault(find(v), []).append(v)
    for min_size in (1, 3):
        want = sorted(sorted(g) for g in groups.values() if len(g) >= min_size)
        got = lns.class_components(prepare(p), min_size)
        assert [len(c) for c in got] == sorted((len(c) for c in got), reverse=True)
        assert sorted(c.tolist() for c in got) == want


@pytest.mark.parametrize("seed", range(6))
def test_fit_keeps_the_longest_prefix_within_the_variable_cap(seed):
    """Counted independently: a node's strategies plus every table entry to an earlier node of the prefix."""
    p = random_instance(60, seed, max_k=4, edge_p=0.1, limit_quantile=None)
    prep = prepare(p)
    net = prep.net
    rng = np.random.default_rng(seed)
    multi = np.nonzero(net.k > 1)[0]
    nodes = rng.permutation(multi)
    tables = {}
    for t in range(len(net.tab_x)):
        a, b = int(net.tab_x[t]), int(net.tab_y[t])
        tables[(a, b)] = tables[(b, a)] = int(net.k[a] * net.k[b])

    def vars_of(prefix):
        total = 0
        for i, v in enumerate(prefix):
            total += int(net.k[v]) + sum(tables.get((int(v), int(u)), 0) for u in prefix[:i])
        return total

    start = _feasible_start(p, rng)
    assert start is not None
    full = vars_of(nodes)
    for cap in (0, 5, full // 3, full - 1, full, full + 10):
        cut = lns.NeighbourhoodSearch(prep, start, seed=0, max_vars=cap).fit(nodes)
        assert np.array_equal(cut, nodes[:len(cut)])
        assert vars_of(cut) <= cap
        assert len(cut) == len(nodes) or vars_of(nodes[:len(cut) + 1]) > cap
