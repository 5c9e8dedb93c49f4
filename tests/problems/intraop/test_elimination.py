"""FindOptStrategy (bucket elimination) against brute force; Theorem 1's invariant step by step."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest

from gapstop.problems.intraop._bound_kernels import EXCL
from gapstop.problems.intraop.bounds import lower_bound
from gapstop.problems.intraop.elimination import find_opt_strategy
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem
from tests.problems.intraop.reference import naive_evaluate, tables


def dense_costs(p: IntraopProblem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every assignment at once as an n-dimensional array: (cost, forbidden, peak usage).

    Written from the file's raw edges (no merging), independent of the eliminator.
    """
    cost, use, ecost = tables(p)
    k = [len(c) for c in cost]
    n = p.n

    def axis(v: int, vals: list[int]) -> np.ndarray:
        return np.array(vals, dtype=np.int64).reshape([k[v] if i == v else 1 for i in range(n)])

    total = np.zeros(k, dtype=np.int64)
    bad = np.zeros(k, dtype=bool)
    for v in range(n):
        c = axis(v, cost[v])
        bad |= c >= FORBIDDEN
        total += np.where(c >= FORBIDDEN, 0, c)
    for e in range(p.m):
        u, v = int(p.edge_u[e]), int(p.edge_v[e])
        t = np.array(ecost[e], dtype=np.int64).reshape(k[u], k[v])
        if u == v:
            c = axis(u, np.diag(t).tolist())
        else:
            shape = [1] * n
            shape[u], shape[v] = k[u], k[v]
            c = (t if u < v else t.T).reshape(shape)
        bad |= c >= FORBIDDEN
        total += np.where(c >= FORBIDDEN, 0, c)
    peak = np.zeros(k, dtype=np.int64)
    for t in range(p.horizon):
        at = np.zeros(k, dtype=np.int64)
        for v in range(n):
            if p.start[v] <= t < p.end[v]:
                at = at + axis(v, use[v])
        peak = np.maximum(peak, at)
    return total, bad, peak


def optima(p: IntraopProblem) -> tuple[float, float]:
    """(unconstrained optimum, constrained optimum); inf where nothing is admissible."""
    total, bad, peak = dense_costs(p)
    free = np.where(bad, np.iinfo(np.int64).max, total)
    unc = float(free.min()) if not bad.all() else math.inf
    ok = ~bad if p.usage_limit is None else ~bad & (peak <= p.usage_limit)
    con = float(total[ok].min()) if ok.any() else math.inf
    return (int(unc) if unc < math.inf else unc), (int(con) if con < math.inf else con)


def optima_of(p: IntraopProblem, sol: list[int]) -> int:
    cost, _ = naive_evaluate(p, sol)
    assert cost is not None
    return cost


def _instance(seed: int) -> IntraopProblem:
    rng = np.random.default_rng(1000 + seed)
    n = int(rng.integers(1, 11))
    return random_instance(n, seed, max_k=4, edge_p=float(rng.choice([0.15, 0.3, 0.5, 0.8])),
                           limit_quantile=None if seed % 3 == 0 else float(rng.random()),
                           forbidden_p=0.08 if seed % 4 == 0 else 0.0, self_loops=seed % 5 == 0)


@pytest.mark.parametrize("block", range(10))
def test_elimination_matches_brute_force_on_300_graphs(block: int) -> None:
    exact_seen = split_seen = 0
    for seed in range(30 * block, 30 * block + 30):
        p = _instance(seed)
        unc, con = optima(p)
        r = find_opt_strategy(p, reduce=seed % 2 == 0)
        assert r.exact, seed  # the default cap is far above any table here
        assert r.value == unc, seed
        if unc < math.inf:
            cost, feasible = naive_evaluate(p, r.solution)
            assert cost == unc and r.evaluation.cost == unc
            assert r.optimal == feasible
            if r.optimal:
                assert unc == con
        assert r.value <= con
        # strategies that can never fit excluded: between the two optima, the optimum if it fits
        pr = find_opt_strategy(p, prune_memory=True, reduce=seed % 2 == 1)
        assert unc <= pr.value <= con, seed
        if pr.optimal:
            assert pr.value == con == naive_evaluate(p, pr.solution)[0]
        # a tiny cap forces mini-buckets: a lower bound, exact only when nothing was split
        tiny = find_opt_strategy(p, table_limit=int(1 + seed % 8), reduce=seed % 3 != 0)
        assert tiny.value <= unc, seed
        if tiny.exact:
            assert tiny.value == unc and tiny.split_buckets == 0
            assert unc == math.inf or naive_evaluate(p, tiny.solution)[0] == unc
        else:
            split_seen += 1
            assert tiny.split_buckets > 0
            if tiny.solution is not None:  # decoded from the mini-buckets: a heuristic
                cost, feasible = naive_evaluate(p, tiny.solution)
                assert tiny.evaluation.cost == cost >= tiny.value
                assert tiny.optimal == (feasible and cost == tiny.value)
                if tiny.optimal:
                    assert cost == con == unc
        exact_seen += tiny.exact
    assert split_seen >= 5  # the mini-bucket path was exercised


def _brute_min(factors, const: int, k: np.ndarray) -> float:
    """min over the factors' nodes of their sum plus ``const`` (Python ints; EXCL as infinity)."""
    nodes = sorted({x for s, _ in factors for x in s})
    if const >= EXCL:
        return math.inf
    best = math.inf
    for a in itertools.product(*[range(int(k[x])) for x in nodes]):
        val = dict(zip(nodes, a))
        tot = const
        for s, arr in factors:
            c = int(arr[tuple(val[x] for x in s)])
            if c >= EXCL:
                tot = math.inf
                break
            tot += c
        best = min(best, tot)
    return best


@pytest.mark.parametrize("seed", range(24))
def test_theorem_1_invariant_after_every_step(seed: int) -> None:
    p = random_instance(2 + seed % 6, seed, max_k=3, edge_p=0.6, limit_quantile=None,
                        forbidden_p=0.1 if seed % 3 == 0 else 0.0)
    unc, _ = optima(p)
    k = p.num_strategies
    steps: list[float] = []
    r = find_opt_strategy(p, reduce=False, trace=lambda fs, c: steps.append(_brute_min(fs, c, k)))
    assert len(steps) == p.n and all(s == unc for s in steps)
    assert r.value == unc
    # with mini-buckets the same minimum never rises above the optimum
    steps.clear()
    find_opt_strategy(p, reduce=False, table_limit=2, trace=lambda fs, c: steps.append(_brute_min(fs, c, k)))
    assert all(s <= unc for s in steps)


def test_clique_width_and_timeout_bound() -> None:
    n = 6
    pairs = [(u, v) for u in range(n) for v in range(u + 1, n)]
    rng = np.random.default_rng(3)
    k = 3
    p = IntraopProblem(name="clique", node_ptr=np.arange(n + 1) * k, node_cost=rng.integers(0, 50, n * k),
                       node_usage=np.zeros(n * k), start=np.zeros(n), end=np.zeros(n),
                       edge_u=[u for u, _ in pairs], edge_v=[v for _, v in pairs],
                       edge_ptr=np.arange(len(pairs) + 1) * k * k,
                       edge_cost=rng.integers(0, 50, len(pairs) * k * k), usage_limit=None)
    unc, _ = optima(p)
    r = find_opt_strategy(p)
    assert (r.width, r.max_table, r.value, r.exact) == (n - 1, k ** n, unc, True)
    small = find_opt_strategy(p, table_limit=k ** 3)
    assert not small.exact and small.split_buckets > 0 and small.max_table <= k ** 3 and small.value <= unc
    cost = optima_of(p, small.solution)  # decoded from the mini-buckets: between the bound and anything
    assert small.value <= unc <= cost == small.evaluation.cost
    stopped = find_opt_strategy(p, time_limit_s=0.0)
    assert stopped.timed_out and not stopped.exact and stopped.value <= unc


def test_bound_method_and_usage_limit() -> None:
    for seed in range(12):
        p = random_instance(7, seed, max_k=3, edge_p=0.4, limit_quantile=0.3)
        unc, con = optima(p)
        b = lower_bound(p, "elimination", 10.0)
        assert unc <= b.value <= con
        assert lower_bound(p, "elimination", 10.0, prune_memory=False).value == unc
        assert b.status == ("optimal" if b.detail["optimal"] else "relaxation-optimal")
        if b.status == "optimal":
            assert b.value == con
        loose = dataclasses.replace(p, usage_limit=None)
        assert lower_bound(loose, "elimination", 10.0).status == "optimal"
    tiny = lower_bound(random_instance(9, 4, max_k=4, edge_p=0.7), "elimination", 10.0, table_limit=2)
    assert tiny.status == "bound-only" and tiny.solver == "mini-bucket elimination"


def test_cli_solve_and_bound_by_elimination(tmp_path, monkeypatch) -> None:
    import json
    from pathlib import Path

    from click.testing import CliRunner

    from gapstop.launch import main
    from gapstop.problems.intraop.io import load_problem

    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    example = str(Path(__file__).parent / "data" / "example.json")
    unc, con = optima(load_problem(example))
    r = CliRunner().invoke(main, ["intraop", "solve", example, "--method", "elimination", "--time-limit", "5"])
    doc = json.loads(r.output.splitlines()[0])
    assert unc <= doc["lower_bound"] <= con and doc["elimination"]["exact"]
    # the unconstrained optimum (415) does not fit; with never-fitting strategies excluded it does (445)
    assert unc < con and doc["feasible"] and r.exit_code == 0
    assert doc["cost"] == doc["lower_bound"] == con and doc["gap"] == 0.0
    b = CliRunner().invoke(main, ["intraop", "bound", example, "--method", "elimination", "--max-table", "1"])
    assert b.exit_code == 0 and json.loads(b.output)["value"] <= con
    bad = CliRunner().invoke(main, ["intraop", "bound", example, "--method", "elimination", "--max-table", "0"])
    assert bad.exit_code == 2 and bad.output.startswith("error: --max-table")
