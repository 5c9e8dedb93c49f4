"""The intra-op island of the distributed runner: probes, bests."""

from __future__ import annotations

from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.island import IntraopIsland
from gapstop.problems.intraop.relaxed import prepare
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
        island = IntraopIsland(prepare(p), seed)
        reports = _run(island, 6)
        if best is None:
            assert not reports
            continue
        costs = [c for c, _ in reports]
        assert costs == sorted(costs, reverse=True) and len(set(costs)) == len(costs)
        for cost, found in reports:
            ev = evaluate(p, found.solution)
            assert ev.feasible and ev.cost == cost >= best


def test_every_search_makes_its_probe_iterations_before_the_ranking():
    p = random_instance(30, 4, max_k=4, limit_quantile=0.3)
    island = IntraopIsland(prepare(p), 0, probe_iterations=6)
    for _ in range(40):
        island.step(0.002, lambda cost, found: None)
        its = [s.iterations for s in island.searches]
        if min(its) < 6:  # the least advanced goes first: no search gets ahead by more than one
            assert max(its) <= min(its) + 1
    assert min(s.iterations for s in island.searches) >= 6
