"""``--time-limit`` is the whole process's wall clock: the process ends before it, with its answer
on disk and printed (the commands as a user runs them, in a subprocess)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "tests" / "problems" / "intraop" / "data" / "example.json"
RESNET = ROOT / "examples" / "resnet50.json.gz"
REGAL = ROOT / "examples" / "regal_like_60.json"


def _run(args: list[str], limit: float, tmp_path: Path) -> tuple[float, subprocess.CompletedProcess, dict]:
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(ROOT / "launch.py"), *args, "--time-limit", str(limit), "--out", str(out),
           "--quiet", "--run-dir", str(tmp_path / "run")]
    env = {**__import__("os").environ, "GAPSTOP_CACHE": str(tmp_path / "cache")}
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env, timeout=limit + 60)
    wall = time.monotonic() - t0
    assert out.exists(), proc.stderr
    return wall, proc, json.loads(out.read_text())


def _check_intraop(wall: float, limit: float, proc: subprocess.CompletedProcess, doc: dict, fmt: str) -> None:
    assert wall < limit, f"took {wall:.2f} s for --time-limit {limit}"
    assert proc.returncode == 0 and doc["feasible"] and doc["cost"] == 445  # the example's optimum
    printed = json.loads(proc.stdout.strip().splitlines()[-1])
    assert printed == (doc["solution"] if fmt == "contest" else doc)


@pytest.mark.parametrize("fmt", ["json", "contest"])
def test_intraop_in_process_ends_within_the_limit_with_its_answer(fmt: str, tmp_path: Path) -> None:
    limit = 6.0
    wall, proc, doc = _run(["intraop", "solve", str(EXAMPLE), "--in-process", "--format", fmt], limit, tmp_path)
    _check_intraop(wall, limit, proc, doc, fmt)


def test_pipeline_in_process_ends_within_the_limit_with_its_answer(tmp_path: Path) -> None:
    limit = 4.0
    wall, proc, doc = _run(["pipeline", "solve", str(REGAL), "-k", "4", "--in-process", "--no-bounds"], limit,
                           tmp_path)
    assert wall < limit, f"took {wall:.2f} s for --time-limit {limit}"
    assert proc.returncode == 0 and doc["objective"] is not None
    assert f"objective {doc['objective']:.6g}" in proc.stdout


@pytest.mark.ray
@pytest.mark.slow
@pytest.mark.parametrize("fmt", ["json", "contest"])
def test_intraop_on_ray_ends_within_the_limit_with_its_answer(fmt: str, tmp_path: Path) -> None:
    limit = 25.0
    wall, proc, doc = _run(["intraop", "solve", str(EXAMPLE), "--format", fmt], limit, tmp_path)
    _check_intraop(wall, limit, proc, doc, fmt)


@pytest.mark.ray
@pytest.mark.slow
def test_pipeline_on_ray_ends_within_the_limit_with_its_answer(tmp_path: Path) -> None:
    limit = 25.0
    wall, proc, doc = _run(["pipeline", "solve", str(RESNET), "-k", "8"], limit, tmp_path)
    assert wall < limit, f"took {wall:.2f} s for --time-limit {limit}"
    assert proc.returncode == 0 and doc["objective"] is not None


def test_when_the_watchdog_answers_the_run_directory_gets_its_final_result(tmp_path: Path) -> None:
    """A finish that never ends (here: the session's final writes hang): the watchdog prints the
    answer and ends the process before the limit, and the run directory's result.json is that
    answer, not the running document the run left."""
    limit = 4.0
    run_dir = tmp_path / "run"
    script = (
        "import sys, time\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "import launch\n"
        "import gapstop.engine.session as session\n"
        "session.Session.finalize = lambda self, reason: time.sleep(3600)\n"
        f"sys.argv = ['launch.py', 'pipeline', 'solve', {str(REGAL)!r}, '-k', '4', '--in-process', '--no-bounds',"
        f" '--quiet', '--time-limit', '{limit}', '--run-dir', {str(run_dir)!r}]\n"
        "launch.run()\n")
    env = {**__import__("os").environ, "GAPSTOP_CACHE": str(tmp_path / "cache")}
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, env=env,
                          timeout=limit + 60)
    wall = time.monotonic() - t0
    assert wall < limit + 1.0, f"took {wall:.2f} s for --time-limit {limit}"   # the interpreter's start
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((run_dir / "result.json").read_text())
    assert doc["stopped_because"] == "time-limit" and doc["objective"] is not None
    assert doc["jobs"]["searches"] and doc["run_dir"] == str(run_dir)   # the run's fields, as at a normal end
    assert f"objective {doc['objective']:.6g}" in proc.stdout and "stopped: time-limit" in proc.stdout
