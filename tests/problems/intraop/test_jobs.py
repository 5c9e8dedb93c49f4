"""The Lagrangian job's hand-over from its priced search to neighbourhood moves on the incumbent."""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from gapstop.problems.intraop import jobs
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.relaxed import prepare
from tests.problems.intraop.reference import all_solutions, brute_force_table
from tests.timing import slack, wall_s_without_compiling, watch_compiling


class _Coordinator:
    """A bound job's context whose incumbent is the cheapest solution known: a starting one, then
    every solution the job reports (re-scored exactly, as the coordinator does)."""

    def __init__(self, p: Any, seconds: float, start: list[int] | None) -> None:
        self.p, self.deadline = p, time.monotonic() + seconds
        self.best = None if start is None else (evaluate(p, start).cost, list(start))
        self.reported: list[tuple[int, str]] = []

    def should_stop(self) -> bool:
        return time.monotonic() >= self.deadline

    def incumbent(self) -> tuple[float | None, Any]:
        return self.best if self.best is not None else (None, None)

    def solution(self, solution: Any, source: str) -> None:
        ev = evaluate(self.p, solution)
        assert ev.feasible
        self.reported.append((ev.cost, source))
        if self.best is None or ev.cost < self.best[0]:
            self.best = (ev.cost, list(solution))


def _search(iterations: int, best_cost: int | None, best_iteration: int = 0) -> Any:
    best = None if best_cost is None else SimpleNamespace(cost=best_cost, iteration=best_iteration)
    return SimpleNamespace(iterations=iterations, best=lambda: best)


def test_the_priced_search_hands_over_only_when_stalled_and_behind() -> None:
    ub = jobs._incumbent_cost(SimpleNamespace(incumbent=lambda: (100, [0])))
    n = jobs.PRICED_STALL
    assert not jobs._stalled_behind(_search(n - 1, 120, 0), ub)  # not stalled yet
    assert jobs._stalled_behind(_search(n, 120, 0), ub)  # stalled, and the incumbent is cheaper
    assert not jobs._stalled_behind(_search(n + 5, 100, 0), ub)  # it holds the incumbent's cost
    assert not jobs._stalled_behind(_search(n + 5, 130, 10), ub)  # improved 55 iterations ago
    assert jobs._stalled_behind(_search(n, None), ub)  # nothing feasible of its own
    none_yet = jobs._incumbent_cost(SimpleNamespace(incumbent=lambda: (None, None)))
    assert not jobs._stalled_behind(_search(n, None), none_yet)


def _worst_feasible(p: Any) -> list[int] | None:
    worst = None
    for s in all_solutions(p):
        ev = evaluate(p, list(s))
        if ev.feasible and (worst is None or ev.cost > worst[0]):
            worst = (ev.cost, list(s))
    return None if worst is None else worst[1]


@pytest.mark.mip
def test_neighbourhood_moves_take_a_poor_incumbent_to_the_brute_force_optimum() -> None:
    checked = 0
    # compile the kernels first: on a fresh checkout that alone overran the deadline below
    warm = random_instance(8, 0, max_k=3, limit_quantile=0.3)
    if _worst_feasible(warm) is not None:
        jobs.neighbourhood_moves(prepare(warm), _Coordinator(warm, 5.0, _worst_feasible(warm)),
                                 time.perf_counter() + 0.1, 0)
    watch_compiling()
    for seed in range(8):
        p = random_instance(8, seed, max_k=3, limit_quantile=0.3)
        opt, _ = brute_force_table(p)
        start = _worst_feasible(p)
        if opt is None or start is None or evaluate(p, start).cost == opt:
            continue
        ctx = _Coordinator(p, 5.0, start)
        t0 = time.monotonic()
        jobs.neighbourhood_moves(prepare(p), ctx, time.perf_counter() + 1.0, seed)
        assert wall_s_without_compiling(t0) < slack(2.0)  # keeps to its deadline of 1 s
        costs = [c for c, _ in ctx.reported]
        assert costs and costs == sorted(costs, reverse=True) and len(set(costs)) == len(costs)
        assert costs[0] < evaluate(p, start).cost and costs[-1] == opt  # the whole graph fits one move
        assert {s for _, s in ctx.reported} == {"lagrangian-neighbourhood"}
        checked += 1
        if checked == 4:   # each case runs its 1 s deadline out
            break
    assert checked >= 4


def test_neighbourhood_moves_continue_from_a_cheaper_incumbent_found_meanwhile(monkeypatch) -> None:
    from gapstop.problems.intraop import lns

    class Moves:
        """Each step finds one solution 1 cheaper; records what it was offered."""

        recent_move_s = 0.01

        def __init__(self, prep: Any, sol: Any, seed: int) -> None:
            self.sol, self.cost, self.offers = np.array(sol), int(sol[0]), []
            made.append(self)

        def step(self, budget_s: float) -> list[tuple[int, Any]]:
            time.sleep(0.01)
            self.cost -= 1
            self.sol = np.array([self.cost])
            return [(self.cost, self.sol.copy())]

        def offer(self, sol: Any, cost: int) -> None:
            self.offers.append(cost)
            self.sol, self.cost = np.array(sol), cost

    made: list[Moves] = []
    monkeypatch.setattr(lns, "NeighbourhoodSearch", Moves)
    reported: list[int] = []
    state = {"inc": (1000, [1000]), "calls": 0}

    def incumbent() -> tuple[int, list[int]]:
        state["calls"] += 1
        if state["calls"] == 4:  # another job's solution, far cheaper than the moves' line
            state["inc"] = (500, [500])
        return state["inc"]

    def solution(sol: list[int], source: str) -> None:
        assert source == "lagrangian-neighbourhood"
        reported.append(sol[0])
        if sol[0] < state["inc"][0]:
            state["inc"] = (sol[0], sol)

    ctx = SimpleNamespace(incumbent=incumbent, solution=solution, should_stop=lambda: len(reported) >= 8)
    jobs.neighbourhood_moves(None, ctx, time.perf_counter() + 5.0, 0)
    assert len(made) == 1 and made[0].offers == [500]  # its own solutions are never offered back
    assert reported == [999, 998, 997, 499, 498, 497, 496, 495]


@pytest.mark.parametrize("gain, finds_for_s, expect_s", [
    (1000, 0.3, 0.4),  # worth their time for 0.3 s: they run until a window after the last find
    (1, 0.3, 0.1),  # below min_gain from the start: they end after the first window
])
def test_neighbourhood_moves_end_when_they_stop_paying(monkeypatch, gain: int, finds_for_s: float,
                                                       expect_s: float) -> None:
    from gapstop.problems.intraop import lns

    class Moves:
        """Each step lowers the cost by ``gain`` during the first ``finds_for_s`` seconds, then finds nothing."""

        recent_move_s = 0.01

        def __init__(self, prep: Any, sol: Any, seed: int) -> None:
            self.cost, self.t0 = int(sol[0]), time.perf_counter()

        def step(self, budget_s: float) -> list[tuple[int, Any]]:
            time.sleep(0.01)
            if time.perf_counter() - self.t0 > finds_for_s:
                return []
            self.cost -= gain
            return [(self.cost, np.array([self.cost]))]

        def offer(self, sol: Any, cost: int) -> None:
            raise AssertionError("no other job improves the incumbent here")

    monkeypatch.setattr(lns, "NeighbourhoodSearch", Moves)
    reported: list[int] = []
    ctx = SimpleNamespace(incumbent=lambda: (10**6, [10**6]), should_stop=lambda: False,
                          solution=lambda sol, source: reported.append(sol[0]))
    t0 = time.perf_counter()
    # min_gain 1e-3 of about 1e6: 1000 units a window (0.1 s, some 9 steps) is enough, 9 units is not
    jobs.neighbourhood_moves(None, ctx, t0 + 5.0, 0, window_s=0.1, min_gain=1e-3)
    took = time.perf_counter() - t0
    assert expect_s - 0.02 <= took < expect_s + 0.5  # and long before the end, 5 s away
    assert reported and reported == sorted(reported, reverse=True)
