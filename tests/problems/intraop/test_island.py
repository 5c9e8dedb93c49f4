"""The intra-op island of the distributed runner: probes, pricing by Lagrangian multipliers, bests."""

from __future__ import annotations

from problems.intraop.evaluate import evaluate
from problems.intraop.generators import random_instance
from problems.intraop.island import IntraopIsland
from problems.intraop.relaxed import prepare
from tests.problems.intraop.reference import brute_force_table


def _run(island, steps, budget_s=0.1):
    reports = []
    for _ in range(steps):
        island.step(budget_s, lambda cost, found: reports.append((cost, found)))
    return reports


def test_reports_only_feasible_improvements_never_below_the_optimum():
    for seed in range(8):
        p = random_instance(8, seed, max_k=3, limit_quantile=0.2)
        best, _ = brute_force_table(p)
        island = IntraopIsland(prepare(p), seed, lagrangian_s=0.3, priced_grace_s=0.3)
        reports = _run(island, 6)
        if best is None:
            assert not reports
            continue
        costs = [c for c, _ in reports]
        assert costs == sorted(costs, reverse=True) and len(set(costs)) == len(costs)
        for cost, found in reports:
            ev = evaluate(p, found.solution)
            assert ev.feasible and ev.cost == cost >= best


def test_prices_usage_once_its_budget_is_spent():
    priced = 0
    for seed in range(6):
        p = random_instance(30, seed, max_k=4, limit_quantile=0.15)
        island = IntraopIsland(prepare(p), seed, lagrangian_s=0.3, priced_grace_s=1.0)
        _run(island, 8)
        assert island._multipliers is None  # its network is dropped once the budget is spent
        if island._priced is not None:
            priced += 1
            assert island._priced in island.searches and island._priced.iterations > 0
        plain = IntraopIsland(prepare(p), seed)
        _run(plain, 3)
        assert plain._priced is None
    assert priced >= 3


def test_no_pricing_without_a_usage_limit():
    p = random_instance(30, 1, max_k=4, limit_quantile=None)
    island = IntraopIsland(prepare(p), 0, lagrangian_s=0.3, priced_grace_s=1.0)
    _run(island, 3)
    assert island._priced is None and island._multipliers is None
