"""The command line when files cannot be written or a run directory is reused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from gapstop.launch import main
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import regal_like
from gapstop.problems.pipeline.io import load_graph, save_graph

ROOT = Path(__file__).resolve().parents[1]


def test_an_unwritable_run_dir_still_prints_the_best_result(tmp_path: Path) -> None:
    # k = 2 on this graph: the exact MIP proves it in the head start, before Ray would start
    g = tmp_path / "g.json"
    save_graph(regal_like(5, n=24, family="sbm"), g)
    blocker = tmp_path / "file"
    blocker.write_text("")  # a directory below a regular file cannot be created, even by root
    out = tmp_path / "out.json"
    res = subprocess.run([sys.executable, str(ROOT / "launch.py"), "pipeline", "solve", str(g), "-k", "2",
                          "--time-limit", "60", "--quiet", "--run-dir", str(blocker / "rd"), "--out", str(out)],
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("warning: cannot write ")]
    assert len(warnings) == 1 and str(blocker / "rd") in warnings[0]  # one line for the whole run dir
    doc = json.loads(out.read_text())
    assert f"objective {doc['objective']:.6g}" in res.stdout
    ev = evaluate(load_graph(g), doc["blocks"], doc["order"], k=2)
    assert ev.objective == doc["objective"]


def test_an_unwritable_out_file_is_one_line_and_the_result_is_printed(tmp_path: Path) -> None:
    from tests.problems.intraop.test_cli import EXAMPLE

    blocker = tmp_path / "file"
    blocker.write_text("")
    res = CliRunner().invoke(main, ["intraop", "solve", EXAMPLE, "--in-process", "--time-limit", "5", "--quiet",
                                    "--run-dir", str(tmp_path / "rd"), "--out", str(blocker / "r.json")])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["cost"] == 445
    assert res.stderr.count("\n") == 1 and res.stderr.startswith(f"warning: cannot write {blocker / 'r.json'}: ")


def test_reusing_a_run_dir_without_resume_is_refused(tmp_path: Path) -> None:
    g = tmp_path / "g.json"
    save_graph(regal_like(5, n=24, family="sbm"), g)
    rd = tmp_path / "rd"
    rd.mkdir()
    (rd / "config.json").write_text("{}")
    for problem, args in (("pipeline", [str(g), "-k", "2"]), ("intraop", [])):
        if problem == "intraop":
            from tests.problems.intraop.test_cli import EXAMPLE
            args = [EXAMPLE]
        res = CliRunner().invoke(main, [problem, "solve", *args, "--run-dir", str(rd)])
        assert res.exit_code == 2, res.output
        assert res.stderr.count("\n") == 1 and res.stderr.startswith("error: --run-dir: ")
        assert str(rd) in res.stderr and "--resume" in res.stderr
    assert (rd / "config.json").read_text() == "{}"  # untouched


def _interrupted(tmp_path: Path, args: list[str], out: Path, after_s: float
                 ) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Run ``launch.py ARGS`` in its own process group and press Ctrl-C (SIGINT to the whole
    group, as a terminal does) ``after_s`` seconds after ``out`` first appears. Returns the
    finished process and ``out``'s first content (None if it did not appear within 60 s)."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "launch.py"), *args], cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        t_end = time.monotonic() + 60
        while not out.exists() and proc.poll() is None and time.monotonic() < t_end:
            time.sleep(0.05)
        first = json.loads(out.read_text()) if out.exists() else None
        time.sleep(after_s)
        os.killpg(proc.pid, signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr), first


@pytest.mark.mip
def test_ctrl_c_during_a_cpsat_bound_keeps_the_in_process_pipeline_result(tmp_path: Path) -> None:
    # CP-SAT's own SIGINT handler used to abort the process (std::bad_function_call) when the
    # bound job's solve ran in a thread, losing the best partition
    g = tmp_path / "g.json"
    save_graph(regal_like(3, n=120, family="sbm"), g)  # k = 8: the bottleneck MIP runs for seconds
    out = tmp_path / "out.json"
    res, _ = _interrupted(tmp_path, ["pipeline", "solve", str(g), "-k", "8", "--in-process", "--time-limit", "60",
                                     "--quiet", "--out", str(out)], out, 1.0)
    assert res.returncode == 130, res.stderr[-2000:]  # 128 + SIGINT, after the result is written
    doc = json.loads(out.read_text())
    assert doc["stopped_because"] == "interrupted" and doc["elapsed_s"] < 30
    assert f"objective {doc['objective']:.6g}" in res.stdout and "stopped: interrupted" in res.stdout
    ev = evaluate(load_graph(g), doc["blocks"], doc["order"], k=8)
    assert ev.objective == doc["objective"]


@pytest.mark.slow
@pytest.mark.ray
def test_ctrl_c_on_ray_keeps_the_result_and_rewrites_out(tmp_path: Path) -> None:
    from gapstop.problems.intraop.evaluate import evaluate as evaluate_intraop
    from gapstop.problems.intraop.generators import random_instance
    from gapstop.problems.intraop.io import problem_to_dict

    p = random_instance(400, 1, max_k=4, limit_quantile=0.3)
    inst = tmp_path / "inst.json"
    inst.write_text(json.dumps(problem_to_dict(p)))
    out = tmp_path / "out.json"
    # --out appears at the first improvement, which on Ray comes from a worker: the driver's
    # main loop is running when the whole process group gets SIGINT
    res, first = _interrupted(tmp_path, ["intraop", "solve", str(inst), "--time-limit", "120", "--quiet",
                                         "--out", str(out), "--run-dir", str(tmp_path / "rd")], out, 1.0)
    assert res.returncode == 130, res.stderr[-2000:]  # 128 + SIGINT, after the result is written
    assert first is not None and first["stopped_because"] == "running"  # written during the run
    doc = json.loads(res.stdout)
    assert doc["stopped_because"] == "interrupted" and doc["elapsed_s"] < 100
    assert json.loads(out.read_text()) == doc
    assert json.loads((tmp_path / "rd" / "result.json").read_text())["stopped_because"] == "interrupted"
    ev = evaluate_intraop(p, doc["solution"])
    assert ev.feasible and ev.cost == doc["cost"]
