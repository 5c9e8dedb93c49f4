"""``launch.py intraop ...`` through click's runner: output formats, result file, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gapstop.launch import main

EXAMPLE = str(Path(__file__).parent / "data" / "example.json")


def _solve_args() -> list[str]:
    """``intraop solve`` in threads, also where the command defaults to a Ray cluster."""
    help_text = CliRunner().invoke(main, ["intraop", "solve", "--help"]).output
    return ["intraop", "solve"] + (["--in-process"] if "--in-process" in help_text else [])


def test_solve_contest_format(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    r = CliRunner().invoke(main, [*_solve_args(), EXAMPLE, "--time-limit", "5", "--format", "contest", "--quiet",
                                  "--run-dir", str(tmp_path / "rd")])
    assert r.exit_code == 0, r.output
    assert r.output.strip() == "[0, 0, 2, 1, 0]"


def test_solve_writes_result_file(tmp_path, monkeypatch):
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "r" / "result.json"
    r = CliRunner().invoke(main, [*_solve_args(), EXAMPLE, "--time-limit", "5", "--seed", "4",
                                  "--workers", "2", "--out", str(out), "--quiet", "--run-dir", str(tmp_path / "rd")])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    assert json.loads(r.output) == doc
    assert doc["cost"] == 445 and doc["feasible"] is True and doc["solution"] == [0, 0, 2, 1, 0]
    # the islands and the bound jobs of a Ray run: the exact model proves the optimum at once
    assert doc["lower_bound"] == 445 and doc["gap"] == 0.0 and doc["stopped_because"] == "optimal"
    assert doc["jobs"]["searches"] == ["search-0"] and doc["jobs"]["bounds"][0] == "exact"
    ev = CliRunner().invoke(main, ["intraop", "evaluate", EXAMPLE, str(out)])
    assert ev.exit_code == 0 and json.loads(ev.output)["cost"] == 445


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    bad = tmp_path / "bad.json"
    doc = json.loads(Path(EXAMPLE).read_text())
    doc["problem"]["edges"]["nodes"][1] = [0, 9]
    bad.write_text(json.dumps(doc))
    r = CliRunner().invoke(main, [*_solve_args(), str(bad), "--time-limit", "1"])
    assert r.exit_code == 2
    assert r.output.count("\n") == 1 and r.output.startswith("error: ")
    assert "problem.edges.nodes[1]" in r.output and "Traceback" not in r.output


def test_evaluate_reports_infeasible(tmp_path):
    sol = tmp_path / "sol.json"
    sol.write_text("[0, 0, 1, 1, 0]")
    r = CliRunner().invoke(main, ["intraop", "evaluate", EXAMPLE, str(sol)])
    assert r.exit_code == 1 and json.loads(r.output)["violated_step"] == 50


def test_intraop_code_does_not_import_ray():
    root = Path(__file__).resolve().parents[3] / "problems" / "intraop"
    for f in root.glob("*.py"):
        text = f.read_text()
        assert "import ray" not in text and "from ray" not in text, f
