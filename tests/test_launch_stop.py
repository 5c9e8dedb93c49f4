"""Stop means stop: the process ends within a second or two of deciding to, whatever the reason
(target gap, proven optimum, Ctrl-C, SIGTERM), with its final result on disk and resumable.

Each test runs ``launch.py`` as a user would, in a process of its own. In-process a run ends
within one job step of the decision plus the interpreter's exit: about 0.1 s, against an
allowance of 2 s. On Ray the result is written as fast, then the driver shuts down the local
cluster it started and waits for its processes to exit (``ray.shutdown``: 1.1-1.9 s on 2 cores),
hence 3 s there. Both allowances are for a quiet machine and scaled by the load slack of
``tests/timing.py``; a run that did not stop would go on to its time limit, far beyond them."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.io import load_problem, problem_to_dict
from tests.timing import slack

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "tests" / "problems" / "intraop" / "data" / "example.json")
#: the process's end, after the run has decided to stop (seconds; see the module docstring)
ALLOWANCE_S = slack(2.0)
RAY_ALLOWANCE_S = slack(3.0)


@pytest.fixture(scope="module")
def lagrangian_instance(tmp_path_factory: Any) -> Path:
    """An instance on which the Lagrangian bound job runs for many seconds and meets a 6 % gap
    mid-loop (its first bounds come after the exact model's share of the run)."""
    p = random_instance(1500, 1, max_k=8, limit_quantile=0.3, horizon=40)
    path = tmp_path_factory.mktemp("stop") / "r1500.json"
    path.write_text(json.dumps(problem_to_dict(p)))
    return path


def _launch(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(ROOT / "launch.py"), *args], cwd=cwd,
                            env={**os.environ, "PYTHONPATH": str(ROOT)}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def _finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[str, str]:
    try:
        return proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)


def _timed_run(args: list[str], cwd: Path) -> tuple[subprocess.CompletedProcess, float]:
    t0 = time.monotonic()
    proc = _launch(args, cwd)
    out, err = _finish(proc)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), time.monotonic() - t0


def test_target_gap_met_while_the_lagrangian_runs_ends_the_process_at_once(tmp_path: Path,
                                                                         lagrangian_instance: Path) -> None:
    rd = tmp_path / "rd"
    # the exact model has the first fifth of the limit (6 s); the Lagrangian then meets the gap
    # within a few seconds, well before the limit
    res, wall = _timed_run(["intraop", "solve", str(lagrangian_instance), "--target-gap", "0.06", "--time-limit", "30",
                            "--quiet", "--run-dir", str(rd)], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["stopped_because"] == "target-gap"
    assert doc["lower_bound_method"] == "lagrangian"  # the bound job was mid-loop: its live bound met the gap
    assert wall - doc["elapsed_s"] <= ALLOWANCE_S, (wall, doc["elapsed_s"])


def test_an_optimum_proven_while_the_island_runs_ends_the_process_at_once(tmp_path: Path) -> None:
    res, wall = _timed_run(["intraop", "solve", EXAMPLE, "--time-limit", "60", "--quiet",
                            "--run-dir", str(tmp_path / "rd")], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["stopped_because"] == "optimal" and doc["cost"] == 445  # the example's optimum
    assert wall - doc["elapsed_s"] <= ALLOWANCE_S, (wall, doc["elapsed_s"])


def _signal_mid_run(tmp_path: Path, instance: Path, sig: int, extra: list[str], allowance_s: float = ALLOWANCE_S,
                    time_limit_s: int = 20, when: str = "lagrangian") -> None:
    """Send ``sig`` to a run once its Lagrangian bound job is under way (``when="lagrangian"``) or
    once it has a first solution (``"incumbent"``); check the exit, the final result and that the
    run directory resumes."""
    rd = tmp_path / "rd"
    proc = _launch(["intraop", "solve", str(instance), "--time-limit", str(time_limit_s), "--quiet", "--run-dir", str(rd),
                    *extra], tmp_path)
    try:
        t_end = time.monotonic() + 60
        while time.monotonic() < t_end and proc.poll() is None:
            try:
                seen = json.loads((rd / "result.json").read_text())
                if when == "incumbent" or seen.get("lower_bound_method") == "lagrangian":
                    break
            except (OSError, ValueError):
                pass
            time.sleep(0.1)
        else:
            pytest.fail(f"no {when} within 60 s")
        os.kill(proc.pid, sig)  # the driver alone, as a job runner does
        t_sig, t_sig_wall = time.monotonic(), time.time()
        out, err = _finish(proc)
        took = time.monotonic() - t_sig
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    reason = "terminated" if sig == signal.SIGTERM else "interrupted"
    assert proc.returncode == 128 + sig, err[-2000:]
    assert took <= allowance_s, f"{took:.2f} s from the signal to the exit"
    written = (rd / "result.json").stat().st_mtime - t_sig_wall
    assert written <= slack(1.0), f"the final result was written {written:.2f} s after the signal"
    assert "Traceback" not in err
    doc = json.loads((rd / "result.json").read_text())
    shown = json.loads(out)
    assert doc["stopped_because"] == reason == shown["stopped_because"]
    assert (shown["cost"], shown["solution"], shown["lower_bound"]) == (doc["cost"], doc["solution"], doc["lower_bound"])
    ev = evaluate(load_problem(str(instance)), doc["solution"])
    assert ev.feasible and ev.cost == doc["cost"]
    again = subprocess.run([sys.executable, str(ROOT / "launch.py"), "intraop", "solve", str(instance), "--resume",
                            str(rd), "--time-limit", "4", "--quiet", "--in-process"], cwd=tmp_path,
                           env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    resumed = json.loads(again.stdout)
    assert resumed["cost"] <= doc["cost"] and resumed["lower_bound"] >= doc["lower_bound"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_local_run_with_its_result_written(tmp_path: Path, lagrangian_instance: Path,
                                                           sig: int) -> None:
    _signal_mid_run(tmp_path, lagrangian_instance, sig, [])


@pytest.mark.ray
@pytest.mark.cluster  # its own Ray, in the command's process
@pytest.mark.parametrize("sig", [pytest.param(signal.SIGINT, marks=pytest.mark.slow), signal.SIGTERM],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_ends_a_ray_run_with_its_result_written(tmp_path: Path, lagrangian_instance: Path,
                                                         sig: int) -> None:
    # the driver's handling is what differs on Ray: the signal comes at the first solution
    _signal_mid_run(tmp_path, lagrangian_instance, sig, ["--workers", "2"], RAY_ALLOWANCE_S, 60, "incumbent")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_before_the_instance_is_loaded_is_one_line_and_writes_nothing(tmp_path: Path, sig: int) -> None:
    fifo = tmp_path / "instance.json"
    os.mkfifo(fifo)  # the loader blocks on it until the test writes, so the signal lands mid-load
    rd, out = tmp_path / "rd", tmp_path / "out.json"
    proc = _launch(["intraop", "solve", str(fifo), "--time-limit", "60", "--quiet", "--run-dir", str(rd),
                    "--out", str(out)], tmp_path)
    writer = None
    try:
        t_end = time.monotonic() + 60
        while writer is None and time.monotonic() < t_end and proc.poll() is None:
            try:  # succeeds once the process has the file open for reading (it then waits for data)
                writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno != errno.ENXIO:
                    raise
                time.sleep(0.05)
        assert writer is not None, "the command never opened the instance"
        time.sleep(0.2)
        os.kill(proc.pid, sig)
        stdout, stderr = _finish(proc, timeout=30)
    finally:
        if writer is not None:
            os.close(writer)
    assert proc.returncode == 128 + sig, stderr
    assert stderr.count("\n") == 1 and stderr.startswith("error: "), stderr
    assert stdout == "" and not rd.exists() and not out.exists()


def test_a_terminal_gets_a_summary_and_a_pipe_the_document(tmp_path: Path) -> None:
    import pty

    args = [sys.executable, str(ROOT / "launch.py"), "intraop", "solve", EXAMPLE, "--time-limit", "30", "--quiet"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    piped = subprocess.run([*args, "--run-dir", str(tmp_path / "a")], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=120)
    doc = json.loads(piped.stdout)  # not a terminal: the whole document, as before
    primary, secondary = pty.openpty()
    proc = subprocess.Popen([*args, "--run-dir", str(tmp_path / "b")], cwd=tmp_path, env=env, stdout=secondary,
                            stderr=subprocess.PIPE, text=True)
    os.close(secondary)
    chunks = []
    while True:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # the terminal's other end closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    proc.wait(timeout=120)
    os.close(primary)
    shown = b"".join(chunks).decode().replace("\r\n", "\n")
    assert proc.returncode == 0
    lines = shown.strip().splitlines()
    assert 5 <= len(lines) <= 8, shown
    assert lines[1].split()[:2] == ["cost", f"{doc['cost']:,}"] and "optimal" in shown
    assert str(tmp_path / "b" / "result.json") in shown and '"solution"' not in shown


def test_format_summary_shows_the_pipeline_stage_table(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from gapstop.launch import main

    graph = str(ROOT / "examples" / "regal_like_60.json")
    res = CliRunner().invoke(main, ["pipeline", "solve", graph, "-k", "4", "--time-limit", "2", "--quiet",
                                    "--in-process", "--run-dir", str(tmp_path / "rd"), "--format", "summary"])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "rd" / "result.json").read_text())
    stage_rows = [line for line in res.stdout.splitlines() if line.lstrip().startswith("stage ")]
    assert len(stage_rows) == len(doc["stages"]) and sum("<- bottleneck" in r for r in stage_rows) >= 1
    worst = max(doc["stages"], key=lambda s: s["cost"])
    assert f"stage {worst['stage']}: {worst['cost']:.6g}" in res.stdout
    js = CliRunner().invoke(main, ["pipeline", "solve", graph, "-k", "4", "--time-limit", "2", "--quiet",
                                   "--in-process", "--run-dir", str(tmp_path / "rd2"), "--format", "json"])
    shown = json.loads(js.stdout)
    assert shown == json.loads((tmp_path / "rd2" / "result.json").read_text()) and shown["stages"]


@pytest.mark.ray
@pytest.mark.cluster  # its own Ray, in the command's process
def test_sigterm_while_ray_starts_ends_with_143_and_no_stack_trace(tmp_path: Path) -> None:
    # Ray's start replaces the driver's SIGTERM handling (a C++ handler that prints a stack trace
    # and exits 1; then ray.init's own sys.exit): neither may decide how the command ends
    rd = tmp_path / "rd"
    proc = _launch(["intraop", "solve", EXAMPLE, "--time-limit", "60", "--quiet", "--workers", "2",
                    "--run-dir", str(rd)], tmp_path)
    time.sleep(2.5)  # imports done, Ray starting (it takes 3-6 s here)
    os.kill(proc.pid, signal.SIGTERM)
    out, err = _finish(proc)
    assert proc.returncode == 143, err[-2000:]
    assert "Traceback" not in err and "logging.cc" not in err
    if (rd / "result.json").exists():  # the run had begun: its final document says why it ended
        assert json.loads((rd / "result.json").read_text())["stopped_because"] == "terminated"
    else:
        assert err.strip().splitlines() == ["error: SIGTERM: stopped before a result was ready"] and out == ""


@pytest.mark.parametrize("args, flag", [
    (["intraop", "solve", EXAMPLE, "--in-process", "--address", "auto"], "--address"),
    (["intraop", "solve", EXAMPLE, "--cpus-per-worker", "2"], "--cpus-per-worker"),
    (["intraop", "solve", EXAMPLE, "--method", "elimination", "--seed", "3"], "--seed"),
    (["intraop", "solve", EXAMPLE, "--method", "elimination", "--run-dir", "rd"], "--run-dir"),
    (["intraop", "solve", EXAMPLE, "--max-table", "100"], "--max-table"),
    (["pipeline", "solve", str(ROOT / "examples" / "regal_like_60.json"), "-k", "2", "--contiguous", "--islands", "2"],
     "--islands"),
])
def test_a_flag_the_mode_would_ignore_is_one_line_and_exit_2(tmp_path: Path, args: list[str], flag: str) -> None:
    from click.testing import CliRunner

    from gapstop.launch import main

    res = CliRunner().invoke(main, args)
    assert res.exit_code == 2, res.output
    assert res.stderr.count("\n") == 1 and res.stderr.startswith(f"error: {flag}: does not apply"), res.stderr
    assert not (tmp_path / "rd").exists() and not (tmp_path / "runs").exists()
