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
    island._polished_cost = island.best.cost  # the stand-ins' solutions are not the instance's
    return island


def test_a_leader_with_recent_gains_gets_every_other_slice_and_the_rest_go_round_robin():
    from gapstop.problems.intraop.island import LEADER_STALL

    searches = [_Scripted(100 + i, found_at=50, iterations=50) for i in range(4)]  # leader just improved
    island = _island_over(searches)
    slices = 8 * (LEADER_STALL // 8)  # the leader stays short of its stall throughout
    island.step(60.0, lambda cost, found: None, should_stop=lambda: sum(s.steps for s in searches) >= slices)
    # half the slices, plus its turn in the round-robin over all four
    assert searches[0].steps == slices // 2 + slices // 8
    assert [s.steps for s in searches[1:]] == [slices // 8] * 3


def test_a_stalled_leader_shares_the_time_evenly_with_every_search():
    from gapstop.problems.intraop.island import LEADER_STALL

    # the leader's best came LEADER_STALL iterations ago: all four alternate (the worst too,
    # which may be a search from a high weight still lowering it)
    searches = [_Scripted(100 + i, found_at=0, iterations=LEADER_STALL) for i in range(4)]
    island = _island_over(searches)
    island.step(60.0, lambda cost, found: None, should_stop=lambda: sum(s.steps for s in searches) >= 40)
    assert [s.steps for s in searches] == [10, 10, 10, 10]


class _Clock:
    """A stand-in for the island's ``time`` module: one second per slice."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now


def test_told_the_time_left_the_island_halves_the_race_at_each_stage(monkeypatch):
    import gapstop.problems.intraop.island as island_mod
    from gapstop.problems.intraop.island import LEADER_STALL, STAGE_SHARE

    clock = _Clock()
    monkeypatch.setattr(island_mod, "time", clock)
    searches = [_Scripted(100 + i, found_at=0, iterations=LEADER_STALL) for i in range(4)]  # stalled: even shares
    stepped: list[tuple[float, int]] = []
    for i, s in enumerate(searches):
        def step(budget_s, s=s, i=i):
            stepped.append((clock.now, i))
            clock.now += 1.0
            return _Scripted.step(s, budget_s)
        s.step = step
    island = _island_over(searches)
    island.set_time_left(80.0)
    island.step(1e9, lambda cost, found: None, should_stop=lambda: clock.now >= 80.0)
    first = STAGE_SHARE * 80.0
    second = first + STAGE_SHARE * (80.0 - first)
    # the worse half races only in the first stage, the second best until the second stage ends
    assert max(t for t, i in stepped if i >= 2) < first
    assert max(t for t, i in stepped if i == 1) < second
    assert [t for t, i in stepped if t >= second] and all(i == 0 for t, i in stepped if t >= second)
    # within a stage the racers share evenly
    assert [sum(1 for t, j in stepped if t < first and j == i) for i in range(4)] == [first // 4] * 4


def test_without_a_time_limit_no_search_drops_out():
    import math

    searches = [_Scripted(100 + i, found_at=0, iterations=10**6) for i in range(4)]
    island = _island_over(searches)
    island.set_time_left(math.inf)
    island.step(60.0, lambda cost, found: None, should_stop=lambda: sum(s.steps for s in searches) >= 400)
    assert [s.steps for s in searches] == [100] * 4


def test_near_the_end_every_new_best_is_polished_at_once():
    p = random_instance(30, 3, max_k=4, limit_quantile=0.4)
    prep = prepare(p)
    far = IntraopIsland(prep, 0, polish_every_s=1e9)  # the spacing alone never allows a polish
    far.set_time_left(1000.0)
    _run(far, 5, budget_s=0.05)
    assert far.best is not None and far._polished_cost is None
    near = IntraopIsland(prep, 0, polish_every_s=1e9)
    near.set_time_left(2.0)  # within FINAL_POLISH_S of the end
    reports = _run(near, 5, budget_s=0.05)
    assert near.best is not None and near._polished_cost == near.best.cost
    assert reports[-1][0] == near.best.cost  # what a polish found was reported as well
