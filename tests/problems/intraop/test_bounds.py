"""Lower bounds against an independent exhaustive optimum on seeded random small instances.

The brute force below shares no code with the package: it enumerates every
assignment with numpy, masks forbidden choices (cost >= 10^18) and usage
violations, and sums costs in int64 (the generated costs keep every total below 2^62).
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

from gapstop.problems.intraop.bounds import METHODS, lower_bound
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.model import IntraopProblem

F = 10**18
DATA = Path("/work/shared/data/iopddl")


def make_instance(seed: int) -> IntraopProblem:
    """n <= 8 nodes, <= 3 strategies; the seed picks limits, forbidden choices, huge costs, multi-edges."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 9))
    k = rng.integers(1, 4, size=n)
    big = seed % 5 == 3  # costs above 2^53: float sums would be inexact
    lo, hi = (2**53, 2**56) if big else (0, 60)
    ptr = np.concatenate([[0], np.cumsum(k)])
    cost = rng.integers(lo, hi, size=ptr[-1])
    usage = rng.integers(0, 12, size=ptr[-1])
    forb_p = 0.2 if seed % 3 == 1 else 0.0
    cost[rng.random(ptr[-1]) < forb_p] = F
    horizon = 6
    start = rng.integers(0, horizon, size=n)
    end = np.minimum(horizon, start + rng.integers(0, 5, size=n))
    density = rng.choice([0.2, 0.45, 0.8])
    pairs = [(u, v) for u in range(n) for v in range(n) if (u != v or seed % 7 == 0) and rng.random() < density / 2]
    eptr = np.concatenate([[0], np.cumsum([k[u] * k[v] for u, v in pairs])]).astype(np.int64)
    ecost = rng.integers(lo, hi, size=eptr[-1])
    ecost[rng.random(eptr[-1]) < forb_p] = F
    limit = None
    if seed % 4 != 0:
        low = np.zeros(horizon, dtype=np.int64)
        for v in range(n):
            low[start[v]:end[v]] += usage[ptr[v]:ptr[v + 1]].min()
        limit = int(low.max(initial=0) + rng.integers(0, 15))
    uv = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return IntraopProblem(name=f"t{seed}", node_ptr=ptr, node_cost=cost, node_usage=usage, start=start, end=end,
                          edge_u=uv[:, 0], edge_v=uv[:, 1], edge_ptr=eptr, edge_cost=ecost, usage_limit=limit)


def brute_force(p: IntraopProblem, memory: bool = True) -> int | None:
    """Exhaustive optimum over assignments free of forbidden choices (and within the limit); None if none."""
    k = np.diff(p.node_ptr)
    grid = np.stack(np.meshgrid(*[np.arange(x) for x in k], indexing="ij"), -1).reshape(-1, len(k))
    total = np.zeros(len(grid), dtype=np.int64)
    ok = np.ones(len(grid), dtype=bool)
    T = int(p.end.max(initial=0))
    use = np.zeros((len(grid), T + 1), dtype=np.int64)
    for v in range(len(k)):
        c = p.node_cost[p.node_ptr[v] + grid[:, v]]
        ok &= c < F
        total += np.where(c < F, c, 0)
        use[:, p.start[v]:p.end[v]] += p.node_usage[p.node_ptr[v] + grid[:, v]][:, None]
    for e in range(len(p.edge_u)):
        u, v = p.edge_u[e], p.edge_v[e]
        c = p.edge_cost[p.edge_ptr[e] + grid[:, u] * k[v] + grid[:, v]]
        ok &= c < F
        total += np.where(c < F, c, 0)
    if memory and p.usage_limit is not None:
        ok &= use.max(axis=1) <= p.usage_limit
    return int(total[ok].min()) if ok.any() else None


SEEDS = range(320)


@pytest.fixture(scope="module")
def cases():
    return [(make_instance(s), s) for s in SEEDS]


def _as_int(value):
    assert value in (math.inf, -math.inf) or float(value).is_integer(), value
    return value


def test_generator_covers_the_cases(cases):
    ps = [p for p, _ in cases]
    assert sum(p.usage_limit is not None for p in ps) > 150
    assert sum(bool((p.node_cost >= F).any()) for p in ps) > 50
    assert sum(int(p.node_cost[p.node_cost < F].max(initial=0)) > 2**53 for p in ps) > 50
    assert sum(brute_force(p) is None for p in ps) > 5
    assert sum(p.n == 8 for p in ps) > 20


@pytest.mark.parametrize("method", ["trivial", "unconstrained", "lagrangian"])
def test_cheap_bounds_never_exceed_the_optimum(cases, method):
    for p, seed in cases:
        opt = brute_force(p)
        kw = {}
        if method != "trivial":
            kw["exact_table_limit"] = 0 if seed % 2 else 1 << 21  # both the dual and the exact core path
        if method == "lagrangian":
            kw.update(max_iterations=25)
        b = lower_bound(p, method, 2.0, **kw)
        _as_int(b.value)
        assert b.method == method
        if opt is None:
            continue
        assert b.value <= opt, (seed, method, b)
        if method == "unconstrained" and b.detail.get("exact"):
            assert b.value == brute_force(p, memory=False), (seed, b)


@pytest.mark.mip
def test_exact_equals_the_optimum(cases):
    for p, seed in cases:
        opt = brute_force(p)
        b = lower_bound(p, "exact", 10.0, num_workers=1)
        if opt is None:
            assert b.value == math.inf and b.status == "infeasible", (seed, b)
            continue
        assert _as_int(b.value) <= opt, (seed, b)
        assert b.detail["solution_cost"] == opt and evaluate(p, b.detail["solution"]).feasible, (seed, b)
        if b.detail["scale_pow10"] == 0:
            assert b.status == "optimal" and b.value == opt, (seed, b)


def test_lagrangian_dual_direction_never_exceeds_the_optimum(cases):
    for p, seed in cases[::3]:
        opt = brute_force(p)
        b = lower_bound(p, "lagrangian", 2.0, max_iterations=25, direction="dual",
                        exact_table_limit=0 if seed % 2 else 1 << 21)
        _as_int(b.value)
        if opt is not None:
            assert b.value <= opt, (seed, b)
    with pytest.raises(ValueError, match="unknown direction"):
        lower_bound(cases[1][0], "lagrangian", 1.0, direction="nope")


def _dual_value_at_fixed_messages(dual, prep, unary, usage, w):
    """The certified dual value for unary ``unary + floor(w * usage)`` with the dual's current messages."""
    from gapstop.problems.intraop import _bound_kernels as BK

    net = prep.net
    theta = np.empty_like(unary)
    BK.penalty_unary(unary, usage, net.ptr, w, theta)
    base = dual._replay(theta)
    dual._arc_consistency()
    BK.to_float(dual.theta, dual.theta_f)
    return base + dual.certificate()


def test_expected_usage_is_a_supergradient_of_the_dual_bound():
    # D(w') <= D(w) + g . (w' - w) for the concave dual value D at fixed messages, up to the
    # integer rounding of penalties and messages (at most a few units per node and table)
    from gapstop.problems.intraop import _bound_kernels as BK
    from gapstop.problems.intraop._dual import CoreDual, prepare_bounds

    checked = 0
    for seed in range(60):
        p = make_instance(seed)
        if seed % 5 == 3 or p.n < 4:
            continue
        prep = prepare_bounds(p)
        if len(prep.plan.core) == 0:
            continue
        rng = np.random.default_rng(seed)
        dual = CoreDual(prep, exact_table_limit=0)
        w = rng.random(p.n) * 3
        theta = np.empty_like(prep.unary)
        BK.penalty_unary(prep.unary, p.node_usage, p.node_ptr, w, theta)
        if dual.bound(theta, iterations=5, label=True)[0] == math.inf:
            continue
        d0 = _dual_value_at_fixed_messages(dual, prep, prep.unary, p.node_usage, w)
        g = dual.expected_usage(p.node_usage)
        assert g is not None and g.shape == (p.n,)
        tol = 2 * (p.n + 2 * prep.net.num_tables) + 2
        for _ in range(5):
            w2 = np.maximum(0.0, w + rng.normal(0, 2, p.n))
            d1 = _dual_value_at_fixed_messages(dual, prep, prep.unary, p.node_usage, w2)
            if d1 >= 2**61 or d0 >= 2**61:
                continue
            assert d1 <= d0 + float(g @ (w2 - w)) + tol, (seed, d0, d1)
            checked += 1
    assert checked > 20


def test_lagrangian_multipliers_improve_on_a_binding_limit():
    # two nodes that both want their memory-hungry cheap strategy; the limit allows only one
    p = IntraopProblem(name="two", node_ptr=np.array([0, 2, 4]), node_cost=np.array([0, 10, 0, 10]),
                       node_usage=np.array([5, 0, 5, 0]), start=np.array([0, 0]), end=np.array([1, 1]),
                       edge_u=np.zeros(0), edge_v=np.zeros(0), edge_ptr=np.zeros(1), edge_cost=np.zeros(0),
                       usage_limit=5)
    assert brute_force(p) == 10
    assert lower_bound(p, "unconstrained", 1.0).value == 0
    b = lower_bound(p, "lagrangian", 2.0, max_iterations=200)
    assert 8 <= b.value <= 10
    b = lower_bound(p, "lagrangian", 2.0, max_iterations=200, direction="dual", exact_table_limit=0)
    assert 8 <= b.value <= 10


def test_lagrangian_starts_from_settled_messages():
    """On dense cores, multiplier steps taken from 3-pass messages could end below the
    unconstrained bound (the Lagrangian at multipliers 0); settled first, they do not."""
    from gapstop.problems.intraop.generators import random_instance

    below_unsettled = 0
    for seed in (1, 2, 16, 23, 37, 46):
        p = random_instance(40, seed, max_k=6, edge_p=0.15, limit_quantile=0.5)
        kw = {"exact_table_limit": 0, "max_iterations": 30, "cycle_share": 0.0}  # TRW-S; ends by iterations
        free = lower_bound(p, "unconstrained", 30.0, exact_table_limit=0).value
        assert lower_bound(p, "lagrangian", 30.0, **kw).value >= free, seed
        below_unsettled += lower_bound(p, "lagrangian", 30.0, settle_share=0.0, **kw).value < free
    assert below_unsettled >= 3


def test_unknown_method():
    with pytest.raises(ValueError, match="unknown bound method"):
        lower_bound(make_instance(1), "nope", 1.0)
    assert METHODS == ("trivial", "unconstrained", "lagrangian", "exact", "elimination")


def _anchors():
    f = DATA / "contest_anchors.csv"
    if not f.exists():
        return {}
    return {r["instance"]: int(r["best_known"]) for r in csv.DictReader(f.open())}


@pytest.mark.skipif(not DATA.is_dir(), reason="contest instances not available")
# the large instances (8-10 s each) in the slow run; the bounds' validity against the optimum
# is checked on small instances in the default run (test_cheap_bounds_never_exceed_the_optimum)
@pytest.mark.parametrize("name", ["G", *(pytest.param(n, marks=pytest.mark.slow) for n in ("A", "M", "S"))])
def test_cheap_bounds_below_best_known_on_contest_instances(name):
    from gapstop.problems.intraop.io import load_problem

    path = DATA / f"asplos-2025-iopddl-{name}.json.gz"
    if not path.exists():
        pytest.skip(f"{path} absent")
    best = _anchors()[name]
    p = load_problem(path)
    for method in ("trivial", "unconstrained", "lagrangian"):
        b = lower_bound(p, method, 3.0)
        assert b.value <= best, f"{name} {method}: bound {b.value} above the best known cost {best}"


def test_cli_bound_prints_one_json_line(tmp_path):
    import json

    from click.testing import CliRunner

    from gapstop.launch import main

    example = str(Path(__file__).parent / "data" / "example.json")
    out = tmp_path / "bound.json"
    r = CliRunner().invoke(main, ["intraop", "bound", example, "--method", "exact", "--time-limit", "5",
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output.strip())
    assert len(r.output.strip().splitlines()) == 1
    assert doc["method"] == "exact" and doc["status"] == "optimal" and doc["value"] == doc["detail"]["solution_cost"]
    assert json.loads(out.read_text())["value"] == doc["value"]
    r = CliRunner().invoke(main, ["intraop", "bound", example, "--method", "trivial", "--time-limit", "0"])
    assert r.exit_code == 2 and "--time-limit" in r.output


def test_multiplier_weights_price_each_node_by_its_steps():
    from gapstop.problems.intraop.bounds import multiplier_weights
    from gapstop.problems.intraop.generators import random_instance

    assert multiplier_weights(random_instance(10, 1, limit_quantile=None), 1.0) is None
    seen_positive = False
    for seed in range(20):
        p = random_instance(12, seed, max_k=3, limit_quantile=0.1, horizon=6)
        w = multiplier_weights(p, 0.5)
        if w is None:
            continue
        assert w.shape == (p.n,) and np.all(w >= 0)
        assert np.all(w[p.end <= p.start] == 0)  # never live: never priced
        # nodes live over the same steps carry the same sum of multipliers
        for u in range(p.n):
            for v in range(p.n):
                if p.start[u] == p.start[v] and p.end[u] == p.end[v]:
                    assert w[u] == w[v]
        # a node live over a superset of another's steps is priced at least as high
        for u in range(p.n):
            for v in range(p.n):
                if p.start[u] <= p.start[v] < p.end[v] <= p.end[u]:
                    assert w[u] >= w[v] * (1 - 1e-9) - 1e-12
        seen_positive |= bool(np.any(w > 0))
    assert seen_positive


def test_lagrangian_hands_the_best_multipliers_prices_to_the_caller():
    import time

    from gapstop.problems.intraop.bounds import MultiplierSearch
    from gapstop.problems.intraop.generators import random_instance

    handed = 0
    for seed in range(20):
        p = random_instance(12, seed, max_k=3, limit_quantile=0.1, horizon=6)
        got: list[np.ndarray] = []
        b = lower_bound(p, "lagrangian", 30.0, max_iterations=15, cycle_share=0.0, price_reserve=0.5,
                        on_prices=got.append)
        ms = MultiplierSearch(p, settle_s=0.1 * 0.5 * 30.0)  # the same search, run alone: same steps and multipliers
        ms.run(time.perf_counter() + 30.0, 15)
        w = ms.weights()
        if w is None:
            assert not got
            continue
        handed += 1
        assert len(got) == 1 and np.array_equal(got[0], w)
        assert b.value == ms.best
    assert handed >= 5
    # no usage limit: nothing to price, and no time is held back
    got = []
    lower_bound(random_instance(12, 1, limit_quantile=None), "lagrangian", 5.0, price_reserve=0.5,
                on_prices=got.append)
    assert not got
    with pytest.raises(ValueError, match="price_reserve"):
        lower_bound(random_instance(8, 0), "lagrangian", 1.0, price_reserve=1.0)


def test_lagrangian_leaves_its_price_reserve_unused():
    from gapstop.problems.intraop.generators import random_instance

    # a search that does not converge within the limit runs to its end, less the reserve
    p = random_instance(300, 3, max_k=6, limit_quantile=0.05, horizon=60)
    got: list[np.ndarray] = []
    b = lower_bound(p, "lagrangian", 4.0, patience=10**6, price_reserve=0.5, on_prices=got.append)
    assert got and b.wall_s < 2.6


def test_arc_consistency_matches_a_set_based_fixpoint_and_keeps_every_admissible_assignment():
    """The shared arc-consistency kernel (bound side: exclusions; cycle side: tight entries within
    ``tol`` of a per-table base) against a plain Python fixpoint, and never clearing a label of an
    assignment whose every entry is admissible (brute force)."""
    import itertools

    from gapstop.problems.intraop import _bound_kernels as BK

    rng = np.random.default_rng(5)
    kept_total = cleared_total = 0
    for case in range(150):
        n = int(rng.integers(2, 6))
        k = rng.integers(1, 4, n).astype(np.int64)
        ptr = np.concatenate([[0], np.cumsum(k)]).astype(np.int64)
        pairs = [(u, v) for u in range(n) for v in range(u + 1, n) if rng.random() < 0.6]
        sizes = [int(k[u] * k[v]) for u, v in pairs]
        tab_off = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        tab_x = np.array([u for u, _ in pairs], np.int32)
        vals = rng.integers(0, 10, int(tab_off[-1])).astype(np.int64)
        vals[rng.random(len(vals)) < 0.3] = BK.EXCL
        base = np.array([vals[tab_off[t]:tab_off[t + 1]].min() for t in range(len(pairs))], np.int64)
        tol = float(rng.choice([np.inf, 0.0, 3.0]))
        if tol == np.inf:
            base[:] = 0
        adj = [[] for _ in range(n)]
        for t, (u, v) in enumerate(pairs):
            adj[u].append((v, t))
            adj[v].append((u, t))
        adj_ptr = np.concatenate([[0], np.cumsum([len(a) for a in adj])]).astype(np.int64)
        adj_nbr = np.array([j for a in adj for j, _ in a], np.int32)
        adj_tab = np.array([t for a in adj for _, t in a], np.int32)
        alive0 = rng.random(int(ptr[-1])) < 0.9

        def entry(t, v, a, j, b):
            return int(vals[tab_off[t] + (a * k[j] + b if tab_x[t] == v else b * k[v] + a)])

        def ok(t, v, a, j, b):
            h = entry(t, v, a, j, b)
            return h < BK.EXCL and h - int(base[t]) <= tol

        ref = {(v, a) for v in range(n) for a in range(k[v]) if alive0[ptr[v] + a]}
        changed = True
        while changed:
            drop = {(v, a) for v, a in ref
                    if any(not any((j, b) in ref and ok(t, v, a, j, b) for b in range(k[j])) for j, t in adj[v])}
            changed = bool(drop)
            ref -= drop
        alive = alive0.copy()
        removed = BK.arc_consistency(np.arange(n, dtype=np.int64), alive, ptr, k, adj_ptr, adj_nbr, adj_tab, vals,
                                     tab_off, tab_x, base, tol)
        got = {(v, a) for v in range(n) for a in range(k[v]) if alive[ptr[v] + a]}
        assert got == ref, case
        assert removed == int(alive0.sum() - alive.sum())
        for sol in itertools.product(*[range(int(x)) for x in k]):
            if all(alive0[ptr[v] + sol[v]] for v in range(n)) and \
                    all(ok(t, u, sol[u], v, sol[v]) for t, (u, v) in enumerate(pairs)):
                assert all(alive[ptr[v] + sol[v]] for v in range(n)), case
                kept_total += 1
        cleared_total += removed
    assert kept_total > 20 and cleared_total > 50  # both sides of the property were exercised
