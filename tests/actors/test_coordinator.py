"""The coordinator class (used as a Ray actor and, before Ray starts, in the driver)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("ray")

from gapstop.actors.coordinator import CoordinatorActor  # noqa: E402
from gapstop.problems.intraop.io import load_problem  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "problems" / "intraop" / "data" / "example.json"


def test_reports_after_finalize_leave_the_result_as_it_was(tmp_path: Path) -> None:
    problem = load_problem(str(EXAMPLE))
    rd = tmp_path / "rd"
    c = CoordinatorActor("intraop", problem, {}, str(rd), {"problem": "intraop"}, 0.0, 60.0)
    doc = c.finalize("interrupted")
    assert doc["stopped_because"] == "interrupted" and doc["cost"] is None
    # a worker's report racing the stop: refused, and result.json keeps the final document
    assert not c.report_solution([0, 0, 2, 1, 0], "late")
    result = json.loads((rd / "result.json").read_text())
    assert result["stopped_because"] == "interrupted" and result["cost"] is None
    assert not (rd / "best_solution.json").exists()
