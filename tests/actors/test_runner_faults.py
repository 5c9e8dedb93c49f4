"""The Ray driver when the run directory cannot be written: the run goes on, ``--out`` follows
every improvement, and the coordinator stays on the driver's node."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from gapstop.actors.runner import run  # noqa: E402
from gapstop.problems.pipeline.evaluate import evaluate  # noqa: E402
from gapstop.problems.pipeline.generators import regal_like  # noqa: E402
from gapstop.problems.pipeline.io import load_graph, save_graph  # noqa: E402
pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("shared_ray")]


def test_unwritable_run_dir_on_ray_prints_the_result_and_out_follows_improvements(tmp_path: Path, monkeypatch,
                                                                                   capsys) -> None:
    g = tmp_path / "g.json"
    save_graph(regal_like(7, n=60, family="sbm"), g)
    blocker = tmp_path / "file"
    blocker.write_text("")  # a directory below a regular file cannot be created, even by root
    out = tmp_path / "out.json"
    seen: list[tuple[float, dict]] = []

    first: list[float] = []

    def progress(st: dict) -> None:
        if st["ub"] is not None and (not seen or seen[-1][0] != st["ub"]):
            seen.append((st["ub"], json.loads(out.read_text())))
            first[:] = first or [st["elapsed"]]
        if first and st["elapsed"] > first[0] + 2.0:  # improvements came for 2 s: end as Ctrl-C does
            os.kill(os.getpid(), signal.SIGINT)

    # a limit no loaded machine reaches before its first solution: the run is interrupted after it
    doc = run("pipeline", str(g), {"k": 4}, time_limit_s=60, target_gap=0.0, seed=0, run_dir=str(blocker / "rd"),
              workers=2, progress=progress, out_path=str(out), head_start_s=0.0)
    assert doc["objective"] is not None and doc["stopped_because"] in ("interrupted", "optimal")
    ev = evaluate(load_graph(g), doc["blocks"], doc["order"], k=4)
    assert ev.objective == doc["objective"]
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning: cannot write")]
    assert len(warnings) == 1 and str(blocker / "rd") in warnings[0], warnings
    # --out was rewritten as the incumbent improved, not only at the end
    assert seen and all(d["stopped_because"] == "running" and d["objective"] <= ub for ub, d in seen)
    assert json.loads(out.read_text()) == doc
    assert doc["workers"]["coordinator_node"] == ray.get_runtime_context().get_node_id()


def test_a_dead_coordinator_loses_nothing_the_driver_kept(tmp_path: Path, capsys) -> None:
    """The coordinator actor is killed mid-run: the run ends "coordinator-lost" with the best
    solution and bound seen before, re-scored, in the run directory's result.json and in --out,
    and one error line. The coordinator's own files are removed first (as if the run directory
    were on another machine), so the answer is the driver's copy."""
    from gapstop.engine.interrupts import exit_code

    from tests import ray_session

    g = tmp_path / "g.json"
    save_graph(regal_like(7, n=60, family="sbm"), g)
    rd, out = tmp_path / "rd", tmp_path / "out.json"
    at_kill: dict = {}

    def kill_once_solved(st: dict) -> None:
        if at_kill or st["ub"] is None or st["lb"] is None:
            return
        at_kill.update(ub=st["ub"], lb=st["lb"])
        coord = ray.get_actor("coordinator", namespace=ray_session.NAMESPACE)
        ray.kill(coord, no_restart=True)
        for _ in range(100):  # until it is gone: it writes no file after the ones removed below
            try:
                ray.get(coord.poll.remote(), timeout=10)
            except ray.exceptions.RayActorError:
                break
        for name in ("checkpoint.json", "best_solution.json", "result.json"):
            (rd / name).unlink(missing_ok=True)

    doc = run("pipeline", str(g), {"k": 4}, time_limit_s=30, target_gap=0.0, seed=0, run_dir=str(rd), workers=2,
              progress=kill_once_solved, out_path=str(out), head_start_s=0.0, namespace=ray_session.NAMESPACE)
    assert at_kill, "the run ended before it had a solution and a bound"
    assert doc["stopped_because"] == "coordinator-lost" and exit_code(doc["stopped_because"]) == 3
    assert doc["objective"] <= at_kill["ub"] and doc["lower_bound"] >= at_kill["lb"]
    ev = evaluate(load_graph(g), doc["blocks"], doc["order"], k=4)
    assert ev.objective == doc["objective"]
    assert json.loads((rd / "result.json").read_text()) == doc == json.loads(out.read_text())
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "coordinator" in errors[0] and str(rd / "result.json") in errors[0], errors
