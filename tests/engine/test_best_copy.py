"""The driver's copy of a run's answer (engine.best_copy): fetched only when the polls show a
change, and turned into a result document that re-scores what it holds."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest

from gapstop.engine.best_copy import BOUNDS_EVERY_S, COORDINATOR_LOST, BestCopy
from gapstop.engine.records import Bound, Incumbent
from gapstop.engine.session import Session
from gapstop.problems import registry

EXAMPLE = Path(__file__).resolve().parents[1] / "problems" / "intraop" / "data" / "example.json"


class Counting:
    """A session whose answers the copy asks for are counted."""

    def __init__(self, session: Session) -> None:
        self.session, self.calls = session, {"incumbent_record": 0, "bounds": 0}

    def __getattr__(self, name: str) -> Any:
        if name in self.calls:
            self.calls[name] += 1
        return getattr(self.session, name)


def _feasible_by_cost(adapter: Any, problem: Any) -> list[tuple[int, list[int]]]:
    """Every feasible solution of the example with its exact cost, worst first."""
    score = adapter.evaluator(problem, {})
    found = {}
    for sol in itertools.product(*[range(int(n)) for n in problem.num_strategies]):
        try:
            cost, canonical = score(list(sol))
        except ValueError:
            continue
        found[cost] = canonical
    return sorted(found.items(), reverse=True)


def test_fetches_on_change_and_rescores_what_it_holds(tmp_path: Path) -> None:
    adapter = registry.get("intraop")
    problem = adapter.load(str(EXAMPLE))
    ranked = _feasible_by_cost(adapter, problem)
    assert len(ranked) >= 3 and ranked[-1][0] == 445  # the example's optimum
    (_, worse), (better_cost, better), (best_cost, best) = ranked[0], ranked[-2], ranked[-1]
    session = Session(adapter, problem, {}, str(tmp_path / "rd"), {}, 0.0, 60.0)
    seen = Counting(session)
    clock = [100.0]
    kept = BestCopy(adapter, problem, {}, 0.0, 60.0, now=lambda: clock[0])

    session.report_solution(worse, "search-0")
    kept.update(seen, session.poll())
    kept.update(seen, session.poll())
    assert seen.calls == {"incumbent_record": 1, "bounds": 1}  # the trivial bound is in from the start
    session.report_solution(better, "search-1")
    kept.update(seen, session.poll())
    assert seen.calls == {"incumbent_record": 2, "bounds": 1}
    assert kept.incumbent is not None and kept.incumbent.cost == better_cost

    doc = kept.document(COORDINATOR_LOST)
    assert (doc["cost"], doc["solution"], doc["found_by"]) == (better_cost, better, "search-1")
    assert doc["lower_bound"] == session.poll()["lb"] and doc["stopped_because"] == COORDINATOR_LOST

    # a better bound alone is fetched at most once per BOUNDS_EVERY_S (one still valid: below 445)
    assert doc["lower_bound"] + 1 <= best_cost
    session.report_bound(Bound("quick", doc["lower_bound"] + 1, "bound-only", 0.0, "test"), "bound-0")
    clock[0] += BOUNDS_EVERY_S / 2
    kept.update(seen, session.poll())
    assert seen.calls["bounds"] == 1
    clock[0] += BOUNDS_EVERY_S / 2
    kept.update(seen, session.poll())
    assert seen.calls["bounds"] == 2 and kept.document(COORDINATOR_LOST)["lower_bound"] == doc["lower_bound"] + 1

    # a copy is re-scored, never trusted: a wrong cost in it does not reach the document
    kept.incumbent = Incumbent(cost=1, solution=better, source="search-1")
    assert kept.document(COORDINATOR_LOST)["cost"] == better_cost

    # an improvement after the last poll is in the run directory's checkpoint: offered too
    session.report_solution(best, "search-0")
    assert kept.document(COORDINATOR_LOST, tmp_path / "rd")["cost"] == best_cost == 445
    assert kept.document(COORDINATOR_LOST, tmp_path / "missing")["cost"] == better_cost


def test_the_command_of_a_run_whose_coordinator_was_lost_exits_with_3() -> None:
    from gapstop.engine.cli import exit_for

    with pytest.raises(SystemExit) as e:
        exit_for({"stopped_because": COORDINATOR_LOST, "objective": 1.0})
    assert e.value.code == 3
