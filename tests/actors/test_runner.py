"""End-to-end runs on Ray: stop at the target gap, two-node cluster, a killed worker, resume."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from gapstop.actors.runner import run  # noqa: E402
from gapstop.engine.rundir import read_events  # noqa: E402
from gapstop.problems.pipeline.evaluate import evaluate  # noqa: E402
from gapstop.problems.pipeline.generators import regal_like  # noqa: E402
from gapstop.problems.pipeline.io import load_graph, save_graph  # noqa: E402

pytestmark = [pytest.mark.ray]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _fresh_ray():
    if ray.is_initialized():
        ray.shutdown()
    yield
    if ray.is_initialized():
        ray.shutdown()


@pytest.fixture()
def graph(tmp_path: Path) -> Path:
    f = tmp_path / "g.json"
    save_graph(regal_like(7, n=60, family="sbm"), f)
    return f


def _check_solution(path: Path, doc: dict) -> None:
    p = load_graph(path)
    ev = evaluate(p, doc["blocks"], doc["order"], k=doc["k"])
    assert ev.objective == doc["objective"]


def test_stops_at_target_gap_within_two_seconds(graph: Path, tmp_path: Path) -> None:
    doc = run("pipeline", str(graph), {"k": 4}, time_limit_s=60, target_gap=0.02, seed=0,
              run_dir=str(tmp_path / "rd"), workers=2)
    assert doc["stopped_because"] in ("target-gap", "optimal")
    assert doc["gap"] <= 0.02
    events = read_events(tmp_path / "rd")
    # the moment the gap reached the target: the last event the certificate depends on
    ub_t = min(e["t_s"] for e in events if e["kind"] == "upper" and e["value"] == doc["objective"])
    lb_t = min(e["t_s"] for e in events if e["kind"] == "lower" and e["value"] == doc["lower_bound"])
    assert doc["elapsed_s"] - max(ub_t, lb_t) <= 2.0
    _check_solution(graph, doc)
    assert (tmp_path / "rd" / "best_solution.json").exists() and (tmp_path / "rd" / "config.json").exists()


def test_two_node_cluster_runs_work_on_both_nodes(graph: Path, tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    cluster.add_node(num_cpus=1)
    try:
        cluster.wait_for_nodes()
        doc = run("pipeline", str(graph), {"k": 4}, time_limit_s=12, target_gap=0.0, seed=0,
                  run_dir=str(tmp_path / "rd"), address=cluster.address, workers=2)
        nodes = set(doc["workers"]["nodes"].values())
        assert len(nodes) == 2, doc["workers"]
        # pinned: the run directory is written on the driver's node
        assert doc["workers"]["coordinator_node"] == ray.get_runtime_context().get_node_id()
        assert doc["objective"] is not None
        _check_solution(graph, doc)
    finally:
        ray.shutdown()
        cluster.shutdown()


def test_killed_worker_is_replaced_and_run_finishes(graph: Path, tmp_path: Path) -> None:
    out: dict = {}
    ns = "gapstop-killtest"

    def go() -> None:
        out["doc"] = run("pipeline", str(graph), {"k": 4}, time_limit_s=15, target_gap=0.0, seed=0,
                         run_dir=str(tmp_path / "rd"), workers=2, namespace=ns)

    from gapstop.cluster.connect import connect

    connect(None, 2, namespace=ns)  # the run below joins this instance
    t = threading.Thread(target=go)
    t.start()
    victim = None
    for _ in range(200):
        time.sleep(0.1)
        try:
            victim = ray.get_actor("search-0", namespace=ns)
            break
        except ValueError:  # not created yet
            continue
    assert victim is not None
    time.sleep(3.0)  # let it report something first
    ray.kill(victim, no_restart=True)
    t.join(timeout=120)
    doc = out["doc"]
    assert doc["objective"] is not None
    assert any(name.startswith("search-0r") for name in doc["workers"]["evals"]), doc["workers"]
    _check_solution(graph, doc)


def test_resume_keeps_best_and_bounds(graph: Path, tmp_path: Path) -> None:
    rd = str(tmp_path / "rd")
    first = run("pipeline", str(graph), {"k": 4}, time_limit_s=6, target_gap=0.0, seed=0, run_dir=rd,
                workers=2)
    ray.shutdown()
    second = run("pipeline", str(graph), {"k": 4}, time_limit_s=4, target_gap=0.0, seed=1, run_dir=rd,
                 workers=2, resume=True)
    assert second["objective"] <= first["objective"]
    assert second["lower_bound"] >= first["lower_bound"]
    events = read_events(rd)
    assert {e["session"] for e in events} == {0, 1}
    _check_solution(graph, second)
    with pytest.raises(Exception, match="differs"):
        ray.shutdown()
        run("pipeline", str(graph), {"k": 3}, time_limit_s=2, target_gap=0.0, seed=0, run_dir=rd,
            workers=2, resume=True)


def test_intraop_runs_on_the_same_coordinator_and_proves_optimality(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[1] / "problems" / "intraop" / "data" / "example.json"
    # generous limit: on a fresh machine every worker first compiles the numba kernels
    doc = run("intraop", str(example), {}, time_limit_s=240, target_gap=0.0, seed=0,
              run_dir=str(tmp_path / "rd"), workers=2)
    assert doc["cost"] == 445 and doc["solution"] == [0, 0, 2, 1, 0]
    assert doc["lower_bound"] == 445 and doc["stopped_because"] == "optimal", doc


def test_islands_wait_after_one_epoch_for_the_exact_mips_head_start(tmp_path: Path) -> None:
    from gapstop.cluster.connect import connect

    f = tmp_path / "g.json"
    save_graph(regal_like(3, n=120, family="sbm"), f)  # k=8: not proven within the run
    connect(None, 2)  # Ray already up: the whole head start runs on Ray (no prelude)
    seen: list[tuple[float, int]] = []
    doc = run("pipeline", str(f), {"k": 8}, time_limit_s=8, target_gap=0.0, seed=0, run_dir=str(tmp_path / "rd"),
              workers=2, head_start_s=4.0, progress=lambda st: seen.append((st["elapsed"], st["evals"])))
    assert doc["stopped_because"] == "time-limit"
    # workers=2: one island, reporting its evaluations after every 0.5 s epoch. During the
    # head start (4 s from the MIP's start) it reports its first epoch only, then waits.
    during = [n for t, n in seen if t < 4.0]
    assert len(during) > 10  # the check below was not vacuous
    assert len(set(during) - {0}) <= 1
    assert seen[-1][1] > max(during)  # and it searches after the head start


def _in_new_process(fn: str, *args: Any) -> Any:
    """This module's ``fn(*args)`` run in a new interpreter (arguments and result as JSON).

    A local run forks its head-start job before Ray starts (actors/prelude.py), as the CLI
    does in a new process. Once Ray has run in a process its native threads stay, and a
    job forked next to them can die before its first line, so runs that test the prelude
    do not run in this test process."""
    code = ("import json, sys; import tests.actors.test_runner as m; "
            f"print('RESULT ' + json.dumps(m.{fn}(*json.loads(sys.argv[1]))))")
    r = subprocess.run([sys.executable, "-c", code, json.dumps(args)], cwd=ROOT, capture_output=True, text=True,
                       timeout=300)
    lines = [line for line in r.stdout.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, r.stderr[-3000:]
    return json.loads(lines[-1][len("RESULT "):])


def _settled_run(path: str, rd: str) -> dict:
    doc = run("pipeline", path, {"k": 2}, time_limit_s=60, target_gap=0.0, seed=0, run_dir=rd, workers=2)
    return {"doc": doc, "ray": ray.is_initialized()}


def test_a_run_settled_in_the_prelude_never_starts_ray(tmp_path: Path) -> None:
    f = tmp_path / "g.json"
    save_graph(regal_like(5, n=24, family="sbm"), f)  # k=2: the exact MIP proves it within a second
    rd = tmp_path / "rd"
    got = _in_new_process("_settled_run", str(f), str(rd))
    doc = got["doc"]
    assert doc["stopped_because"] == "optimal", doc
    assert not got["ray"]
    assert doc["elapsed_s"] < 6.0  # the head start (6 s here) was not needed in full
    _check_solution(f, doc)
    events = read_events(rd)
    assert {e["worker"] for e in events if e["kind"] == "lower"} >= {"driver:exact"}
    assert (rd / "best_solution.json").exists() and (rd / "result.json").exists()


def test_no_prelude_in_a_process_that_has_run_ray(tmp_path: Path, monkeypatch) -> None:
    from gapstop.actors import runner

    monkeypatch.setitem(runner._PROCESS, "ray_used", True)
    f = tmp_path / "g.json"
    save_graph(regal_like(5, n=24, family="sbm"), f)
    rd = tmp_path / "rd"
    doc = run("pipeline", str(f), {"k": 2}, time_limit_s=60, target_gap=0.0, seed=0, run_dir=str(rd), workers=2)
    assert doc["stopped_because"] == "optimal", doc
    assert ray.is_initialized()  # the head start ran on Ray, with no job forked from this process
    config = json.loads((rd / "config.json").read_text())
    assert not config.get("head_start_in_driver") and config["head_start_s"] > 0


def _run_with_a_slow_epoch(path: str, rd: str) -> dict:
    from gapstop.problems import registry

    adapter = registry.get("pipeline")
    slow = adapter.make_search

    def make_search(*a, **kw):
        time.sleep(4.0)
        return slow(*a, **kw)

    adapter.make_search = make_search  # this process only
    t0 = time.monotonic()
    doc = run("pipeline", path, {"k": 2}, time_limit_s=60, target_gap=0.0, seed=0, run_dir=rd, workers=2)
    return {"doc": doc, "wall": time.monotonic() - t0,
            "epoch_threads": [t.name for t in threading.enumerate() if t.name == "gapstop-island-epoch"]}


def test_a_proof_ends_the_prelude_while_its_island_epoch_still_runs(tmp_path: Path) -> None:
    # the epoch (kernel loading, seeded solutions) runs next to the driver's wait on the
    # job: a proof that comes first ends the run at once, not after the epoch
    f = tmp_path / "g.json"
    save_graph(regal_like(5, n=24, family="sbm"), f)  # k=2: the exact MIP proves it within a second
    got = _in_new_process("_run_with_a_slow_epoch", str(f), str(tmp_path / "rd"))
    doc = got["doc"]
    assert doc["stopped_because"] == "optimal", doc
    assert doc["elapsed_s"] < 3.0  # in the driver's main thread the epoch alone took 4 s
    _check_solution(f, doc)
    # and the epoch's thread did not outlive the run (the caller may start Ray next)
    assert got["wall"] >= 4.0
    assert not got["epoch_threads"]


def _handed_over_run(path: str, rd: str) -> dict:
    seen: list[dict] = []
    doc = run("pipeline", path, {"k": 8}, time_limit_s=30, target_gap=0.0, seed=0, run_dir=rd, workers=2,
              head_start_s=2.0, progress=seen.append)
    return {"doc": doc, "ray": ray.is_initialized(), "max_elapsed": max(st["elapsed"] for st in seen)}


def test_prelude_hands_over_to_ray_without_losing_reports(tmp_path: Path) -> None:
    f = tmp_path / "g.json"
    save_graph(regal_like(3, n=120, family="sbm"), f)  # k=8: not proven within the run
    rd = tmp_path / "rd"
    got = _in_new_process("_handed_over_run", str(f), str(rd))
    doc = got["doc"]
    assert got["ray"] and doc["stopped_because"] == "time-limit"
    # one clock from the prelude's start: the time limit includes Ray's start-up
    assert 29.0 <= doc["elapsed_s"] <= 32.0
    events = read_events(rd)
    assert {e["session"] for e in events} == {0}
    ts = [e["t_s"] for e in events]
    assert ts == sorted(ts)
    # the prelude's own reports (its island epoch, the MIP in the driver) are in the log ...
    early = [e for e in events if e["t_s"] < 2.0]
    assert any(e["worker"] == "search-0" for e in early) and any(e["kind"] == "lower" for e in early)
    # ... and the run went on on Ray: the island actor searched, the driver's job kept reporting
    assert doc["workers"]["evals"].get("search-0", 0) > 0, doc["workers"]
    assert "driver:exact" in doc["workers"]["nodes"]
    assert got["max_elapsed"] > 20.0
    lbs = [e["value"] for e in events if e["kind"] == "lower"]
    assert doc["lower_bound"] == max(lbs)
    _check_solution(f, doc)


def _threads_then_wait(n: int, ready, release) -> None:
    ts = [threading.Thread(target=release.wait) for _ in range(n)]
    for t in ts:
        t.start()
    ready.set()
    release.wait()


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="per-thread niceness is read from /proc")
def test_prelude_demote_lowers_every_thread_of_the_job() -> None:
    import multiprocessing
    import os
    from types import SimpleNamespace

    from gapstop.actors.prelude import WORKER_NICENESS, Prelude

    mp = multiprocessing.get_context("fork")
    ready, release = mp.Event(), mp.Event()
    proc = mp.Process(target=_threads_then_wait, args=(3, ready, release), daemon=True)
    proc.start()
    try:
        assert ready.wait(10)
        tids = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        assert len(tids) == 4
        base = os.getpriority(os.PRIO_PROCESS, os.getpid())
        assert all(os.getpriority(os.PRIO_PROCESS, t) == base for t in tids)
        Prelude.demote(SimpleNamespace(proc=proc))  # only the process is used
        assert all(os.getpriority(os.PRIO_PROCESS, t) == max(base, WORKER_NICENESS) for t in tids)
    finally:
        release.set()
        proc.join(10)


def _run_interrupted_while_ray_starts(path: str, rd: str) -> dict:
    from gapstop.cluster import connect

    def interrupted_connect(*args, **kwargs):
        raise KeyboardInterrupt

    connect.connect = interrupted_connect  # this process only
    try:
        doc = run("pipeline", path, {"k": 8}, time_limit_s=30, target_gap=0.0, seed=0, run_dir=rd, workers=2,
                  head_start_s=1.0)
    except KeyboardInterrupt:
        return {"escaped": True}
    return {"escaped": False, "doc": doc, "ray": ray.is_initialized()}


def test_interrupt_while_ray_starts_keeps_the_prelude_result(tmp_path: Path) -> None:
    """Ctrl-C during Ray's start-up (10 s on a small machine) must end the run with its result,
    from the driver's coordinator, as during the head start; it used to escape as a bare
    KeyboardInterrupt (exit 1, no result file)."""
    f = tmp_path / "g.json"
    save_graph(regal_like(3, n=120, family="sbm"), f)  # k=8: not settled within the head start
    rd = tmp_path / "rd"
    got = _in_new_process("_run_interrupted_while_ray_starts", str(f), str(rd))
    assert not got["escaped"], "the interrupt escaped the run"
    doc = got["doc"]
    assert doc["stopped_because"] == "interrupted" and doc["objective"] is not None, doc
    assert not got["ray"]
    _check_solution(f, doc)
    assert (rd / "result.json").exists()


def test_deferred_interrupt_holds_sigint_back_and_restores_the_handler() -> None:
    import os
    import signal

    from gapstop.actors.runner import _deferred_interrupt

    before = signal.getsignal(signal.SIGINT)
    with _deferred_interrupt() as got:
        assert got == [False]
        os.kill(os.getpid(), signal.SIGINT)  # would raise KeyboardInterrupt here otherwise
        time.sleep(0.05)
        assert got == [True]
    assert signal.getsignal(signal.SIGINT) is before
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)


def _pipeline_prelude(path: str, rd: str, head_s: float, time_limit_s: float) -> Any:
    """A Prelude of a k = 8 pipeline run whose dedicated job (the exact MIP) has head start ``head_s``."""
    from gapstop.actors.prelude import Prelude
    from gapstop.engine.persist import file_digest
    from gapstop.problems import registry
    from gapstop.problems.pipeline.run import bound_job_specs

    problem = registry.get("pipeline").load(path)
    spec = {**[s for s in bound_job_specs(problem, 8) if s.get("dedicated")][0], "head_start_s": head_s}
    config = {"problem": "pipeline", "problem_path": path, "problem_digest": file_digest(path), "params": {"k": 8}}
    return Prelude("pipeline", problem, {"k": 8}, spec, rd, config, 0.0, time_limit_s, 0, 1, 1)


def _prelude_extension(path: str, rd: str, verdict: bool | None) -> dict:
    from gapstop.problems import registry

    calls: list[float] = []

    def decide(job_bounds, lb, waited_s):  # this process only
        calls.append(waited_s)
        return verdict

    registry.get("pipeline").extend_head_start = decide
    prelude = _pipeline_prelude(path, rd, 1.0, 30.0)
    reason = prelude.run(1.0, extend_to=3.0)
    wall = time.monotonic() - prelude.t_start
    running = prelude.job_running()
    prelude.stop()
    return {"reason": reason, "wall": wall, "extended_to": prelude.extended_to, "calls": len(calls),
            "running": running}


@pytest.mark.parametrize("verdict", [True, False])
def test_prelude_extends_its_head_start_when_the_adapter_says_so(tmp_path: Path, verdict: bool) -> None:
    f = tmp_path / "g.json"
    save_graph(regal_like(3, n=120, family="sbm"), f)  # k=8: not proven within the run
    got = _in_new_process("_prelude_extension", str(f), str(tmp_path / "rd"), verdict)
    assert got["reason"] is None and got["running"], got
    assert got["calls"] == 1  # asked once, when the 1 s head start was over
    if verdict:  # extended to 3 s from the start
        assert got["extended_to"] == 3.0
        assert 3.0 <= got["wall"] < 4.0
    else:  # Ray may start at the head start's end
        assert got["extended_to"] is None
        assert 1.0 <= got["wall"] < 2.0


def _prelude_whole_run(path: str, rd: str) -> dict:
    prelude = _pipeline_prelude(path, rd, 2.0, 2.0)
    reason = prelude.run(2.0)
    wall = time.monotonic() - prelude.t_start
    prelude.stop()
    return {"reason": reason, "wall": wall}


def test_a_head_start_as_long_as_the_run_ends_it_without_ray(tmp_path: Path) -> None:
    # the coordinator's clock starts just after the prelude's: the prelude itself must see the
    # run's end, or Ray would start (seconds) only to stop at once
    f = tmp_path / "g.json"
    save_graph(regal_like(3, n=120, family="sbm"), f)
    got = _in_new_process("_prelude_whole_run", str(f), str(tmp_path / "rd"))
    assert got["reason"] == "time-limit", got
    assert 2.0 <= got["wall"] < 2.5
