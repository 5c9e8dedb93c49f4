"""The EXCL marker ("no admissible choice") is never reached by a finite value near CAP.

Instances with costs just below the contest's forbidden value (10^18) drive the
integer tables to CAP and the totals past EXCL; their bounds must stay finite and
at most the exhaustive optimum (:func:`tests.problems.intraop.reference.brute_force`,
exact Python ints).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from gapstop.problems.intraop import _bound_kernels as BK
from gapstop.problems.intraop._dual import CAP, EXCL, CoreDual, prepare_bounds
from gapstop.problems.intraop.bounds import lower_bound
from gapstop.problems.intraop.model import IntraopProblem
from tests.problems.intraop.reference import brute_force

H = 9 * 10**17  # just below the forbidden 10^18


def _instance(n: int, node_cost: np.ndarray, edges: list[tuple[int, int, np.ndarray]], usage: np.ndarray | None = None,
              limit: int | None = None) -> IntraopProblem:
    """n nodes of 2 strategies, all live at step 0."""
    return IntraopProblem(name="near-cap", node_ptr=np.arange(n + 1) * 2, node_cost=node_cost,
                          node_usage=np.zeros(2 * n) if usage is None else usage, start=np.zeros(n), end=np.ones(n),
                          edge_u=np.array([u for u, _, _ in edges]), edge_v=np.array([v for _, v, _ in edges]),
                          edge_ptr=np.arange(len(edges) + 1) * 4, edge_cost=np.concatenate([t for _, _, t in edges]),
                          usage_limit=limit)


def _wheel_with_heavy_leaves(seed: int) -> IntraopProblem:
    """Hub 0 (core degree 6) with rim 1..6 and three leaves whose edges cost about H each:
    eliminating the leaves caps the hub's unary costs at CAP."""
    rng = np.random.default_rng(seed)
    edges = [(0, i, rng.integers(0, 100, 4)) for i in range(1, 7)]
    edges += [(i, i % 6 + 1, rng.integers(0, 100, 4)) for i in range(1, 7)]
    edges += [(0, leaf, H + rng.integers(0, 100, 4)) for leaf in (7, 8, 9)]
    return _instance(10, rng.integers(0, 100, 20), edges)


def test_certificate_terms_stay_below_the_marker_for_any_rounded_messages() -> None:
    p = _wheel_with_heavy_leaves(0)
    opt, _ = brute_force(p)
    assert opt is not None and opt < EXCL
    prep = prepare_bounds(p)
    dual = CoreDual(prep, exact_table_limit=0)
    value, _ = dual.bound(prep.unary, iterations=2)
    assert value <= opt
    hub = 0
    assert int(dual.theta[0]) == CAP and prep.plan.adj_ptr[hub + 1] - prep.plan.adj_ptr[hub] == 6
    # messages that rounding clips to the bound: one entry of the hub at -bound, five at +bound,
    # so its node term is CAP + 4 * bound (the extreme a TRW-S run can hand the certificate)
    rng = np.random.default_rng(1)
    for trial in range(20):
        dual.msg[:] = 0.0 if trial == 0 else rng.normal(0, 1e18, len(dual.msg))
        for j, e in enumerate(range(prep.plan.adj_ptr[hub], prep.plan.adj_ptr[hub + 1])):
            o = dual.msg_off[e]
            dual.msg[o:o + 2] = -1e30 if j == 0 else 1e30
        cert = dual.certificate()
        assert cert is not None, "a finite instance certified as empty"
        assert np.all(dual.node_terms < EXCL)
        assert dual.last_base + cert <= opt


def _heavy_cliques(seed: int, limit: bool) -> IntraopProblem:
    """Three disjoint K4 (core nodes of degree 3) with every cost about H: the optimum is about
    2.7e19, past EXCL and 2^63; with ``limit`` the cheaper strategies cannot all fit."""
    rng = np.random.default_rng(seed)
    edges = [(u, v, H + rng.integers(0, 10**6, 4)) for c in range(3)
             for u, v in itertools.combinations(range(4 * c, 4 * c + 4), 2)]
    cost = H + rng.integers(0, 10**6, 24)
    usage = np.tile([0, 3], 12) if limit else None
    return _instance(12, cost, edges, usage, 20 if limit else None)


@pytest.mark.parametrize("limit", [False, True])
def test_bounds_past_the_marker_stay_finite_and_below_the_optimum(limit: bool) -> None:
    p = _heavy_cliques(2, limit)
    opt, _ = brute_force(p)
    assert opt is not None and opt > 2 * EXCL
    for method, kw in (("trivial", {}), ("unconstrained", {}), ("unconstrained", {"exact_table_limit": 0}),
                       ("lagrangian", {"max_iterations": 30}), ("lagrangian", {"exact_table_limit": 0, "max_iterations": 30})):
        b = lower_bound(p, method, 0.5, **kw)
        assert b.status != "infeasible" and math.isfinite(b.value), (method, kw, b)
        assert isinstance(b.value, int) and b.value <= opt, (method, kw, b.value, opt)


def test_exact_core_minimum_is_not_mistaken_for_empty() -> None:
    # three cliques, each solved exactly to about CAP (capped): their sum passes EXCL
    p = _heavy_cliques(3, False)
    prep = prepare_bounds(p)
    dual = CoreDual(prep)
    assert dual.solves_core_exactly
    value, _ = dual.bound(prep.unary)
    opt, _ = brute_force(p)
    assert value != math.inf and EXCL < value <= opt
    assert BK.MSG_ROOM // (dual.msg_bound + 1) >= 2  # the message bound leaves the room it documents


@pytest.mark.mip
def test_cpsat_bound_past_the_marker_stays_below_the_optimum() -> None:
    for p in (_heavy_cliques(2, True), _wheel_with_heavy_leaves(0)):
        opt, _ = brute_force(p)
        b = lower_bound(p, "exact", 10.0, num_workers=1)
        assert math.isfinite(b.value) and b.value <= opt, (b, opt)
