"""The island loop's prepare hook and live bound reporting of bound jobs (engine/workers)."""

from __future__ import annotations

import math
from typing import Any

from gapstop.engine.protocol import RunStatus
from gapstop.engine.records import Bound
from gapstop.engine.workers import live_bound


class _Ctx:
    def __init__(self) -> None:
        self.sent: list[Bound] = []

    def bound(self, b: Bound) -> None:
        self.sent.append(b)


def test_live_bound_sends_the_first_value_and_real_steps_only() -> None:
    ctx = _Ctx()
    report = live_bound(ctx, "exact", "cp-sat", 1e-4)
    for v in (-math.inf, math.nan, 100.0, 100.005, 100.02, 99.0, 200.0, math.inf):
        report(v)
    assert [b.value for b in ctx.sent] == [100.0, 100.02, 200.0]
    assert all(b.method == "exact" and b.status == "bound-only" and b.solver == "cp-sat" for b in ctx.sent)


def test_live_bound_from_zero_and_negative() -> None:
    ctx = _Ctx()
    report = live_bound(ctx, "spectral", "eigenvalues", 1e-3)
    for v in (0.0, 0.0, 1e-9, -5.0):
        report(v)
    assert [b.value for b in ctx.sent] == [0.0, 1e-9]


def test_live_bound_every_rise_with_integer_values() -> None:
    ctx = _Ctx()
    report = live_bound(ctx, "lagrangian", "trw-s", 0.0)
    for v in (5, 5, 4, 6, 10**20):
        report(v)
    assert [b.value for b in ctx.sent] == [5, 6, 10**20]


def test_live_bound_compares_integers_exactly_above_float_precision() -> None:
    ctx = _Ctx()
    report = live_bound(ctx, "lagrangian", "trw-s", 0.0)
    lo = 2**60 + 129  # float(lo) == 2**60 + 256: above the next value
    for v in (lo, lo, 2**60 + 200, 2**60 + 200):
        report(v)
    assert [b.value for b in ctx.sent] == [lo, 2**60 + 200]


class _Session:
    """An island's session that records the solutions sent to it and stops the run at its third poll."""

    def __init__(self) -> None:
        self.polls = 0
        self.sent: list[tuple[Any, str]] = []

    def report_solution(self, sol: Any, source: str) -> None:
        self.sent.append((sol, source))

    def report_evals(self, name: str, n: int) -> None:
        pass

    def poll(self) -> RunStatus:
        self.polls += 1
        return RunStatus(stop="done" if self.polls >= 3 else None, ub=None, lb=None, gap=None, evals=0,
                         elapsed=0.0, time_left=1.0)


def test_run_island_asks_a_search_to_prepare_once_after_its_first_epoch() -> None:
    from gapstop.engine.workers import run_island

    calls: list[str] = []

    class Search:
        def step(self, budget_s, on_improvement, should_stop):  # noqa: ANN001, ANN201
            calls.append("step")
            return 1

        def prepare(self) -> None:
            calls.append("prepare")

    assert run_island(Search(), _Session(), "search-0", lambda s: s, migrate_every=0) == 3
    assert calls == ["step", "prepare", "step", "step"]


def test_run_island_sends_its_first_solution_from_inside_the_step_and_then_the_best_of_each_epoch() -> None:
    """A run stopped during the island's first (possibly long) step still has the island's first
    solution; after that only the last improvement of an epoch goes out, at the epoch's end."""
    from gapstop.engine.workers import run_island

    seen_inside: list[list[tuple[str, str]]] = []

    class Search:
        epochs = [["a", "b", "c"], ["d", "e"], []]

        def step(self, budget_s, on_improvement, should_stop):  # noqa: ANN001, ANN201
            for sol in self.epochs.pop(0):
                on_improvement(0.0, sol)
                seen_inside.append(list(sent))
            return 1

    session = _Session()
    sent = session.sent
    assert run_island(Search(), session, "search-0", lambda s: s.upper(), migrate_every=0) == 3
    assert seen_inside[0] == [("A", "search-0")]          # out before the step goes on
    assert seen_inside[2] == [("A", "search-0")]          # the rest of the epoch waits for its end
    assert sent == [("A", "search-0"), ("C", "search-0"), ("E", "search-0")]
    assert seen_inside[3] == sent[:2]                     # the second epoch's improvements wait too
