"""Instance generators: denser variants and many-strategy variants of a given instance.

Every generated instance goes through the contest JSON writer and the normal loader, and
costs are checked with the naive reference evaluator (no package evaluator code).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from gapstop.problems.intraop.generators import densify, least_usage_strategies, many_strategies, random_instance
from gapstop.problems.intraop.io import load_problem, problem_to_dict
from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem
from tests.problems.intraop.reference import brute_force, naive_evaluate

ARRAYS = ("node_ptr", "node_cost", "node_usage", "start", "end", "edge_u", "edge_v", "edge_ptr", "edge_cost")


def _same(a: IntraopProblem, b: IntraopProblem) -> bool:
    return a.usage_limit == b.usage_limit and all(np.array_equal(getattr(a, f), getattr(b, f)) for f in ARRAYS)


def _through_loader(p: IntraopProblem, tmp_path) -> IntraopProblem:
    path = tmp_path / f"{p.name}.json"
    path.write_text(json.dumps(problem_to_dict(p)))
    q = load_problem(path, cache=False)
    assert _same(p, q)
    return q


def _base(seed: int) -> tuple[IntraopProblem, list[int]]:
    """A small random instance with forbidden entries and a feasible optimum (by brute force)."""
    for s in range(seed, seed + 50):
        p = random_instance(7, s, max_k=3, edge_p=0.4, limit_quantile=0.5, forbidden_p=0.1)
        cost, sol = brute_force(p)
        if sol is not None:
            return p, sol
    raise AssertionError("no feasible base instance")  # pragma: no cover


def _tables(p: IntraopProblem, lo: int = 0) -> list[np.ndarray]:
    k = p.num_strategies
    return [p.edge_cost[p.edge_ptr[e]:p.edge_ptr[e + 1]].reshape(int(k[p.edge_u[e]]), int(k[p.edge_v[e]]))
            for e in range(lo, p.m)]


@pytest.mark.parametrize("kind", ["resample", "crosscut"])
def test_densify_adds_edges_priced_like_the_instance_and_keeps_the_anchor_feasible(kind: str, tmp_path) -> None:
    for seed in range(4):
        for j in range(30):  # a crosscut needs two nodes with equal counts and anchor strategies
            p, opt = _base(10 * seed + j)
            try:
                q = _through_loader(densify(p, seed, extra=1.0, kind=kind, anchor=np.array(opt)), tmp_path)
                break
            except ValueError:
                assert kind == "crosscut"
        else:
            raise AssertionError("no base instance for a crosscut")
        assert q.m == p.m + p.m  # round(1.0 * m) added, appended after the instance's own
        assert np.array_equal(q.edge_u[:p.m], p.edge_u) and np.array_equal(q.edge_v[:p.m], p.edge_v)
        assert np.array_equal(q.edge_cost[:p.edge_ptr[-1]], p.edge_cost)
        k = p.num_strategies
        own = _tables(p)
        for e, t in zip(range(p.m, q.m), _tables(q, p.m)):
            u, v = int(q.edge_u[e]), int(q.edge_v[e])
            assert u != v
            assert t[opt[u], opt[v]] < FORBIDDEN  # the anchor's entry is never forbidden
            mask = np.ones(t.shape, dtype=bool)
            mask[opt[u], opt[v]] = False  # the only entry the generator may have changed
            if kind == "crosscut":  # an exact equality between nodes the anchor gives the same strategy
                assert k[u] == k[v] > 1 and opt[u] == opt[v]
                want = np.full(t.shape, FORBIDDEN)
                np.fill_diagonal(want, 0)
                assert np.array_equal(t, want)
            else:
                same = [o for o in own if o.shape == t.shape] + [o.T for o in own if o.T.shape == t.shape]
                if same:
                    assert any(np.array_equal(t[mask], o[mask]) for o in same)
                else:  # entries drawn from the instance's own entries
                    assert set(t[mask].tolist()) <= set(p.edge_cost.tolist())
        c0, ok0 = naive_evaluate(p, opt)
        c1, ok1 = naive_evaluate(q, opt)
        assert ok0 and ok1 and c1 >= c0  # added edges only add (finite) terms for the anchor


def test_densify_is_deterministic_by_seed() -> None:
    p = random_instance(40, 3, max_k=4, edge_p=0.08)
    for kind in ("resample", "crosscut"):
        a, b, c = (densify(p, s, extra=0.5, kind=kind) for s in (7, 7, 8))
        assert _same(a, b) and not _same(a, c)
        assert a.name == b.name != c.name


def test_densify_rejects_unknown_kinds() -> None:
    with pytest.raises(ValueError):
        densify(random_instance(5, 0), 0, kind="dense")


def test_least_usage_strategies_skips_forbidden_costs() -> None:
    p = random_instance(30, 1, max_k=4, forbidden_p=0.3)
    a = least_usage_strategies(p)
    for v in range(p.n):
        lo, hi = p.node_ptr[v], p.node_ptr[v + 1]
        cost, use = p.node_cost[lo:hi], p.node_usage[lo:hi]
        ok = cost < FORBIDDEN
        if ok.any():
            assert ok[a[v]] and use[a[v]] == use[ok].min()


def test_many_strategies_keeps_every_solution_and_draws_counts_in_range(tmp_path) -> None:
    for seed in range(3):
        p, opt = _base(7 * seed)
        q, pos = many_strategies(p, seed, lo=4, hi=9)
        q = _through_loader(q, tmp_path)
        k, kq = p.num_strategies, q.num_strategies
        assert np.all(kq[k == 1] == 1)
        assert np.all((kq[k > 1] >= np.maximum(k[k > 1], 4)) & (kq[k > 1] <= 9))
        rng = np.random.default_rng(seed)
        for sol in [opt] + [[int(rng.integers(0, x)) for x in k] for _ in range(30)]:
            mapped = pos[p.node_ptr[:-1] + np.array(sol)].tolist()
            assert naive_evaluate(q, mapped) == naive_evaluate(p, sol)
        # the added strategies are noisy copies: they change the instance (not only its order)
        assert q.node_ptr[-1] > p.node_ptr[-1]


def test_many_strategies_is_deterministic_by_seed() -> None:
    p = random_instance(30, 2, max_k=4, edge_p=0.1)
    (a, pa), (b, pb), (c, _) = (many_strategies(p, s, lo=5, hi=20) for s in (1, 1, 2))
    assert _same(a, b) and np.array_equal(pa, pb) and not _same(a, c)
