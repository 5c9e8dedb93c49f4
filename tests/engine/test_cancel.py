"""A run's stop as the loops inside a job see it: scopes, deadlines, CP-SAT's watcher, the runner's
last resort, and the intra-op Lagrangian's passes ending at the stop rather than at their deadline."""

from __future__ import annotations

import math
import threading
import time
from pathlib import Path
from typing import Any

from gapstop.engine import cancel
from gapstop.engine.protocol import RunStatus
from gapstop.engine.records import Bound
from tests.timing import cpu_s, slack


def test_expired_is_the_deadline_outside_any_scope() -> None:
    assert not cancel.stop_requested()
    assert not cancel.expired(math.inf)
    assert cancel.expired(time.perf_counter() - 1.0)
    assert cancel.expired(5.0, now=lambda: 5.0) and not cancel.expired(5.0, now=lambda: 4.9)


def test_scopes_nest_and_belong_to_their_thread() -> None:
    outer, inner = threading.Event(), threading.Event()
    seen_elsewhere: list[bool] = []
    with cancel.stop_scope(outer.is_set):
        with cancel.stop_scope(inner.is_set):
            assert not cancel.expired(math.inf)
            outer.set()  # the enclosing scope's stop reaches the inner loop
            assert cancel.expired(math.inf)
            t = threading.Thread(target=lambda: seen_elsewhere.append(cancel.stop_requested()))
            t.start()
            t.join()
            handed = cancel.current()
        outer.clear()
        inner.set()
        assert not cancel.stop_requested()  # the inner scope is closed
        assert handed()  # a callable handed to another thread keeps the scopes it was taken in
    assert seen_elsewhere == [False]  # another thread is outside this thread's scopes
    assert not cancel.stop_requested()


def _hard_model() -> Any:
    """A CP-SAT model that takes far longer than the tests wait (pigeons into fewer holes)."""
    from gapstop.engine import cpsat
    cp_model = cpsat.load()
    m = cp_model.CpModel()
    n = 14
    x = [[m.new_bool_var("") for _ in range(n - 1)] for _ in range(n)]
    for row in x:
        m.add_exactly_one(row)
    for h in range(n - 1):
        m.add_at_most_one(x[p][h] for p in range(n))
    return cp_model, m


def test_cpsat_watch_stops_a_solve_at_the_runs_stop_even_if_asked_before_it_began() -> None:
    cp_model, m = _hard_model()
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = 60.0
    solver.parameters.num_workers = 1
    solver.parameters.symmetry_level = 0  # no symmetry breaking: the pigeonhole stays hard
    solver.parameters.catch_sigint_signal = False
    t0 = time.monotonic()
    with cancel.stop_scope(lambda: True):  # already stopped when the solve starts
        with cancel.cpsat_stop_watch(solver):
            status = solver.solve(m)
    assert time.monotonic() - t0 < slack(5.0)  # against 60 s
    assert status in (cp_model.UNKNOWN, cp_model.INFEASIBLE)


def test_lagrangian_bound_ends_at_the_runs_stop_with_a_valid_bound() -> None:
    from gapstop.problems.intraop.bounds import lower_bound
    from gapstop.problems.intraop.generators import random_instance

    p = random_instance(1500, 1, max_k=8, limit_quantile=0.3, horizon=40)
    lower_bound(p, "lagrangian", 0.5)  # compile the kernels before timing
    t_stop = time.monotonic() + 0.5
    t0, c0 = time.monotonic(), cpu_s()
    with cancel.stop_scope(lambda: time.monotonic() >= t_stop):
        b = lower_bound(p, "lagrangian", 60.0)
    took, cpu = time.monotonic() - t0, cpu_s() - c0
    # CPU seconds, which a loaded machine does not stretch: 1-2 s with the stop obeyed (wall
    # seconds on a quiet machine), against the 60 s budget when it is not
    assert cpu < 3.0 and took < 30.0, f"the Lagrangian ran {took:.1f} s ({cpu:.1f} s of CPU) past a stop at 0.5 s"
    assert b.status == "bound-only" and math.isfinite(b.value)
    assert b.value > lower_bound(p, "trivial", 1.0).value  # it did work before the stop


def test_a_job_that_ignores_the_stop_is_named_and_the_run_still_ends(tmp_path: Path, monkeypatch: Any,
                                                                     capsys: Any) -> None:
    from gapstop.engine import local_runner
    from gapstop.engine.rundir import read_events
    from gapstop.problems import registry
    from tests.engine.test_solve_loop import ToyAdapter

    class Stubborn(ToyAdapter):
        name = "toy-stubborn"

        def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
            return [{"kind": "stubborn", "share": 1.0}]

        def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any, seed: int,
                          num_workers: int) -> None:
            problem["release"].wait(problem["job_s"])  # polls nothing

    class Obedient(Stubborn):
        name = "toy-obedient"

        def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any, seed: int,
                          num_workers: int) -> None:
            ctx.bound(Bound("quick", problem["floor"], "bound-only", 0.0, "toy"))
            while not cancel.expired(math.inf):  # only the scope can end it: no ctx, no deadline
                time.sleep(0.01)

    monkeypatch.setattr(local_runner, "JOIN_S", 0.3)
    release = threading.Event()  # set at the end: the stubborn job's thread does not outlive the test
    problem = {"start": 100, "floor": 90, "bound": 90, "job_s": 30.0, "release": release}
    try:
        for adapter, late in ((Stubborn(), True), (Obedient(), False)):
            registry.register(adapter)
            t0 = time.monotonic()
            doc = local_runner.run_local(registry.get(adapter.name), problem, {}, run_dir=str(tmp_path / adapter.name),
                                         config={"problem": adapter.name}, target_gap=0.0, seed=0, time_limit_s=1.0,
                                         workers=2, head_start_s=0.0)
            assert time.monotonic() - t0 < slack(2.0)  # against the stubborn job's 30 s
            err = capsys.readouterr().err
            errors = [e for e in read_events(tmp_path / adapter.name) if e["kind"] == "error"]
            if late:
                assert doc["stopped_because"] == "time-limit"
                assert "bound-0:stubborn did not stop" in err
                assert [e["worker"] for e in errors] == ["bound-0:stubborn"] and errors[0]["method"] == "stop"
            else:
                assert doc["stopped_because"] == "optimal"  # the island reached the job's bound
                assert "did not stop" not in err and errors == []
    finally:
        release.set()


def test_run_island_sees_quit_inside_its_step() -> None:
    from gapstop.engine.workers import run_island

    quit = threading.Event()

    class Session:
        def report_solution(self, *a: Any) -> None: ...
        def report_evals(self, *a: Any) -> None: ...
        def poll(self) -> RunStatus:
            return RunStatus(stop=None, ub=None, lb=None, gap=None, evals=0, elapsed=0.0, time_left=math.inf)

    class Search:
        def step(self, budget_s: float, on_improvement: Any, should_stop: Any) -> int:
            while not cancel.expired(math.inf):  # a loop deep inside that knows no should_stop
                time.sleep(0.01)
            return 1

    threading.Timer(0.2, quit.set).start()
    t0 = time.monotonic()
    run_island(Search(), Session(), "search-0", lambda f: f, quit.is_set, epoch_s=30.0)
    assert time.monotonic() - t0 < slack(2.0)  # against an epoch of 30 s
