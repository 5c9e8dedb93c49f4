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


class _Scripted:
    """A stand-in search with a fixed best: records how often the island steps it."""

    def __init__(self, cost: int, found_at: int, iterations: int) -> None:
        self.cost, self.found_at, self.iterations, self.steps = cost, found_at, iterations, 0

    def best(self):
        from gapstop.problems.intraop.penalty import Found
        import numpy as np

        return Found(self.cost, np.zeros(1, dtype=np.int64), self.found_at, 1.0)

    def step(self, budget_s):
        self.iterations += 1
        self.steps += 1
        return []


def _island_over(searches):
    p = random_instance(6, 0, max_k=2, limit_quantile=0.3)
    island = IntraopIsland(prepare(p), 0, probe_iterations=1)
    island.searches = searches
    island._started = set(island.first)  # the probes are done
    island.best = searches[0].best()
    return island


def test_a_leader_with_recent_gains_gets_three_quarters_of_the_slices():
    from gapstop.problems.intraop.island import LEADER_STALL

    searches = [_Scripted(100 + i, found_at=50, iterations=50) for i in range(4)]  # leader just improved
    island = _island_over(searches)
    slices = 4 * (LEADER_STALL // 4)  # the leader stays short of its stall throughout
    island.step(60.0, lambda cost, found: None, should_stop=lambda: sum(s.steps for s in searches) >= slices)
    assert searches[0].steps == 3 * slices // 4
    assert [s.steps for s in searches[1:]] == [slices // 12] * 3


def test_a_stalled_leader_shares_the_time_evenly_with_the_better_half():
    from gapstop.problems.intraop.island import LEADER_STALL

    # the leader's best came LEADER_STALL iterations ago: the two best (of four) alternate
    searches = [_Scripted(100 + i, found_at=0, iterations=LEADER_STALL) for i in range(4)]
    island = _island_over(searches)
    island.step(60.0, lambda cost, found: None, should_stop=lambda: sum(s.steps for s in searches) >= 40)
    assert [s.steps for s in searches] == [20, 20, 0, 0]
