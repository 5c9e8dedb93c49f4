"""The solve loop with threads, on a toy problem plugged in through the registry alone:
islands and bound jobs, the head start's hold and its extension, restarts, the bound plan."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

import pytest

from gapstop.engine.coordinator import integral
from gapstop.engine.local_runner import run_local
from gapstop.engine.plan import BoundPlan, slot_plan
from gapstop.engine.protocol import Island, JobSpec
from gapstop.engine.records import Bound
from gapstop.problems import registry
from tests.timing import slack


class _Countdown:
    """A search over the integers that finds ``start - 1``, ``start - 2``, ... one per step,
    down to ``floor``; ``fail_first`` raises in the first step of island 0's first worker."""

    def __init__(self, start: int, floor: int, fail: bool) -> None:
        self.value, self.floor, self.fail = start, floor, fail

    def step(self, budget_s: float, on_improvement: Any, should_stop: Any) -> int:
        if self.fail:
            raise RuntimeError("island failed on purpose")
        time.sleep(min(budget_s, 0.02))
        if self.value > self.floor:
            self.value -= 1
            on_improvement(self.value, self.value)
        return 1


class ToyAdapter:
    """A problem that is a dict ``{"start", "floor", "bound", "job_s", ...}``: the searches count
    down from ``start`` to ``floor`` (the optimum), the dedicated job says it is ready after
    ``ready_after_s`` (default 0; None: never), reports ``bound`` ``job_s`` seconds later and
    then waits for the stop."""

    name = "toy"

    def __init__(self, extend: Any = None) -> None:
        self.extend = extend
        self.asked: list[float] = []
        self.ready_at: list[float] = []
        self.searches_made: list[float] = []
        if extend is not None:
            self.extend_head_start = self._extend

    def _extend(self, last: dict[str, Bound], lb: float | None, waited_s: float) -> bool | None:
        self.asked.append(waited_s)
        return self.extend(waited_s)

    def load(self, path: str) -> Any:
        raise NotImplementedError

    def check_params(self, problem: Any, params: dict[str, Any]) -> None:
        pass

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Any:
        return integral(lambda sol: (int(sol), int(sol)))

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, island: Island) -> Any:
        self.searches_made.append(time.monotonic())
        return _Countdown(problem["start"], problem["floor"], problem.get("fail") and island.index == 0 and island.generation == 0)

    def to_solution(self, found: Any) -> Any:
        return found

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]:
        return []

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"kind": "slow", "dedicated": True, "head_start": True}, {"kind": "quick", "share": 0.5}]

    def prepare_bounds(self) -> None:
        pass

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any, seed: int,
                      num_workers: int) -> None:
        if spec["kind"] == "quick":
            ctx.bound(Bound("quick", problem["floor"] - 5, "bound-only", 0.0, "toy"))
            return
        t_ready = problem.get("ready_after_s", 0.0)  # its set-up; None: never says so
        if t_ready is not None:
            time.sleep(t_ready)
            self.ready_at.append(time.monotonic())
            ctx.ready()
        t_end = time.monotonic() + problem["job_s"]
        while time.monotonic() < t_end and not ctx.should_stop():
            time.sleep(0.01)
        if not ctx.should_stop():
            ctx.bound(Bound("slow", problem["bound"], "optimal", problem["job_s"], "toy"))
        while not ctx.should_stop():
            time.sleep(0.01)

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Any, reason: str,
                   elapsed_s: float) -> dict[str, Any]:
        inc = coord.incumbent
        return {"cost": None if inc is None else inc.cost, "lower_bound": coord.lb, "stopped_because": reason,
                "elapsed_s": elapsed_s}


def _run(tmp: Path, problem: dict[str, Any], adapter: ToyAdapter | None = None, **kw: Any) -> dict[str, Any]:
    adapter = adapter or ToyAdapter()
    registry.register(adapter)
    return run_local(registry.get("toy"), problem, {}, run_dir=str(tmp / "run"), config={"problem": "toy"},
                     target_gap=0.0, seed=0, **kw)


def _times(run_dir: Path) -> list[tuple[float, str, float]]:
    from gapstop.engine.rundir import read_events

    return [(e["t_s"], e["kind"], e["value"]) for e in read_events(run_dir)]


def test_a_new_problem_runs_through_the_registry_alone_and_stops_at_its_proof(tmp_path: Path) -> None:
    doc = _run(tmp_path, {"start": 30, "floor": 10, "bound": 10, "job_s": 0.0}, time_limit_s=60, workers=4,
               head_start_s=0.0)
    assert doc["stopped_because"] == "optimal" and doc["cost"] == doc["lower_bound"] == 10
    assert doc["jobs"] == {"searches": ["search-0", "search-1"], "bounds": ["slow", "quick"]}
    assert doc["workers"]["nodes"].keys() == {"search-0", "search-1", "bound-0", "bound-1"}
    assert doc["elapsed_s"] < slack(10.0)  # against the 60 s limit


def test_islands_wait_after_their_first_epoch_during_the_head_start(tmp_path: Path) -> None:
    # the island needs 90 steps of 20 ms; the job proves the bound after 1.5 s; the head start is 1 s
    doc = _run(tmp_path, {"start": 100, "floor": 10, "bound": 10, "job_s": 1.5}, time_limit_s=20, workers=2,
               head_start_s=1.0)
    assert doc["stopped_because"] == "optimal" and doc["cost"] == 10
    uppers = [(t, v) for t, kind, v in _times(tmp_path / "run") if kind == "upper"]
    early = [v for t, v in uppers if t < 0.9]
    assert early and min(early) >= 100 - 26  # one epoch (0.5 s of 20 ms steps), not 0.9 s of them
    assert any(t > 1.0 for t, _ in uppers)  # and the island goes on after it


def test_in_process_islands_set_up_once_the_head_start_job_is_ready(tmp_path: Path) -> None:
    adapter = ToyAdapter()
    doc = _run(tmp_path, {"start": 100, "floor": 10, "bound": 10, "job_s": 0.3, "ready_after_s": 0.4}, adapter,
               time_limit_s=20, workers=3, head_start_s=1.0)
    assert doc["stopped_because"] == "optimal"
    assert len(adapter.searches_made) == 2 and len(adapter.ready_at) == 1
    assert min(adapter.searches_made) >= adapter.ready_at[0]


def test_a_head_start_job_that_never_says_ready_holds_the_islands_set_up_briefly(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gapstop.engine import local_runner

    monkeypatch.setattr(local_runner, "SETUP_WAIT_S", 0.3)
    adapter = ToyAdapter()
    t0 = time.monotonic()
    # the islands are set up after SETUP_WAIT_S, not when the job ends (its bound, at 3.5 s, ends the run)
    doc = _run(tmp_path, {"start": 100, "floor": 10, "bound": 10, "job_s": 3.5, "ready_after_s": None}, adapter,
               time_limit_s=20, workers=2, head_start_s=6.0)
    assert doc["stopped_because"] == "optimal" and not adapter.ready_at
    assert 0.25 <= adapter.searches_made[0] - t0 < min(slack(1.0), 3.0)
    assert any(t < min(slack(1.0), 3.0) for t, kind, _ in _times(tmp_path / "run") if kind == "upper")


@pytest.mark.parametrize("verdict", [True, False])
def test_the_problem_may_extend_the_head_start_to_the_end(tmp_path: Path, verdict: bool) -> None:
    adapter = ToyAdapter(extend=lambda waited: None if waited < 0.3 else verdict)
    doc = _run(tmp_path, {"start": 1000, "floor": 0, "bound": -1, "job_s": 0.1}, adapter, time_limit_s=2.5,
               workers=2, head_start_s=None)
    assert doc["stopped_because"] == "time-limit"
    assert adapter.asked and max(adapter.asked) >= 0.3 and len(adapter.asked) >= 2  # asked again while undecided
    ups = [t for t, kind, _ in _times(tmp_path / "run") if kind == "upper"]
    if verdict:  # held to the end: nothing after the first epoch
        assert max(ups) < 0.8 and doc.get("head_start_extended_to_s") is not None
    else:  # released after the head start (2 s minimum) and the undecided 0.3 s
        assert max(ups) > 2.0 and "head_start_extended_to_s" not in doc


def test_a_failed_island_is_replaced_and_its_failure_reported(tmp_path: Path) -> None:
    doc = _run(tmp_path, {"start": 15, "floor": 10, "bound": 10, "job_s": 0.0, "fail": True}, time_limit_s=20,
               workers=2, head_start_s=0.0)
    assert doc["stopped_because"] == "optimal"
    assert doc["jobs"]["searches"] == ["search-0", "search-0r1"]
    assert len(doc["worker_errors"]) == 1 and "island failed on purpose" in doc["worker_errors"][0]


def test_slot_plan() -> None:
    assert slot_plan(1, True) == (1, 1) and slot_plan(2, True) == (1, 1) and slot_plan(5, True) == (3, 2)
    assert slot_plan(4, False) == (4, 0) and slot_plan(8, True, islands=2) == (2, 4)


def test_bound_plan_dedicated_queue_then_the_weakest_open_member_with_doubled_slices() -> None:
    specs = [{"kind": "a", "share": 0.5}, {"kind": "m", "j": 1, "group": "g"}, {"kind": "m", "j": 2, "group": "g"},
             {"kind": "x", "dedicated": True}]
    plan = BoundPlan(specs, time_limit_s=40.0)
    assert plan.slice_s == 10.0
    assert plan.next(1, 30.0, None, dict) == ({"kind": "a", "share": 0.5}, 15.0)
    assert plan.next(0, 30.0, None, dict) == ({"kind": "x", "dedicated": True}, 30.0)
    assert plan.next(0, 30.0, None, dict)[0]["j"] == 1
    assert plan.next(1, 30.0, None, dict)[0]["j"] == 2
    members = {"g": {1: 5.0, 2: 3.0}}
    spec, budget = plan.next(1, 100.0, 10.0, members.get)
    assert spec["j"] == 2 and budget == 20.0
    spec, budget = plan.next(1, 100.0, 10.0, members.get)
    assert spec["j"] == 2 and budget == 40.0  # doubled again
    assert plan.next(1, 100.0, 3.0, members.get) == (None, 0.0)  # both closed at ub 3 (member 1 at 5, 2 at 3)
    plan.put_back({"kind": "x", "dedicated": True})
    assert plan.next(0, 9.0, None, dict) == (JobSpec("x", dedicated=True, head_start_s=0.0), 9.0)
    assert math.isfinite(plan.slice_s)


def test_a_member_that_ends_at_once_is_rerun_without_its_slice_overflowing() -> None:
    plan = BoundPlan([{"kind": "m", "j": 1, "group": "g"}], time_limit_s=40.0)
    plan.next(1, 30.0, None, dict)
    members = {"g": {1: -math.inf}}   # e.g. a model that skips itself: never closed, never stronger
    for _ in range(2000):
        spec, budget = plan.next(1, 30.0, 10.0, members.get)
        assert spec is not None and budget == 30.0


def test_bound_plan_fallback_takes_turns_with_the_queued_jobs_on_slot_0() -> None:
    specs = [{"kind": "a", "share": 0.5}, {"kind": "m", "j": 1, "group": "g"}, {"kind": "b", "share": 0.25},
             {"kind": "f", "fallback": True}, {"kind": "x", "dedicated": True}]
    plan = BoundPlan(specs, time_limit_s=40.0)
    f = {"kind": "f", "fallback": True}
    assert plan.next(0, 40.0, None, dict)[0]["kind"] == "x"
    assert plan.next(0, 40.0, None, dict) == ({"kind": "a", "share": 0.5}, 20.0)   # a queued job,
    assert plan.next(0, 40.0, None, dict) == (JobSpec.of({**f, "yield_when_stalled": True, "turn": 0}), 40.0)  # a turn,
    assert plan.next(0, 40.0, None, dict) == ({"kind": "b", "share": 0.25}, 10.0)  # the next (members skipped)
    # nothing else for slot 0: the fallback to the end, once
    assert plan.next(0, 30.0, None, dict) == (JobSpec.of({**f, "yield_when_stalled": False, "turn": 1}), 30.0)
    assert plan.next(1, 30.0, None, dict)[0] == {"kind": "m", "j": 1, "group": "g"}  # members: other slots
    assert plan.next(0, 30.0, None, lambda g: {})[0] == {"kind": "m", "j": 1, "group": "g"}  # ... and 0 after it
    # a failed fallback comes back, without its turn's flags
    plan.put_back({**f, "yield_when_stalled": False, "turn": 1})
    assert plan.next(0, 20.0, None, dict) == (JobSpec.of({**f, "yield_when_stalled": False, "turn": 2}), 20.0)


def test_bound_plan_fallback_never_goes_to_other_slots_nor_before_the_dedicated_job() -> None:
    specs = [{"kind": "a", "share": 0.5}, {"kind": "f", "fallback": True}, {"kind": "x", "dedicated": True}]
    plan = BoundPlan(specs, time_limit_s=40.0)
    assert plan.next(1, 30.0, None, dict)[0]["kind"] == "a"
    assert plan.next(1, 30.0, None, dict) == (None, 0.0)
    assert plan.next(0, 30.0, None, dict)[0]["kind"] == "x"
    assert plan.next(0, 30.0, None, dict)[0] == JobSpec("f", fallback=True, yield_when_stalled=False, turn=0)


def test_result_json_catches_up_with_better_bounds_at_most_once_a_second(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """result.json is also the answer given at the deadline when the finish runs late: a better
    bound reaches it at once after a quiet second, else with the next poll a second after the
    last rewrite."""
    import json
    import types

    from gapstop.engine import session
    from gapstop.engine.session import RESULT_BOUND_EVERY_S, Session

    # the session's clock moves only when the test says so: "within the second" holds however
    # long the steps below take on a loaded machine
    now = [1000.0]
    monkeypatch.setattr(session, "time", types.SimpleNamespace(monotonic=lambda: now[0], time=time.time))
    adapter = ToyAdapter()
    s = Session(adapter, {"start": 30, "floor": 10}, {}, str(tmp_path / "run"), {"problem": "toy"}, 0.0, 60.0)
    path = tmp_path / "run" / "result.json"
    lower = lambda: json.loads(path.read_text())["lower_bound"]  # noqa: E731
    assert s.report_solution(20, "x") and lower() is None
    assert s.report_bound(Bound("a", 5.0, "bound-only", 0.0, "toy"), "w")
    assert lower() is None   # within the second after the incumbent's rewrite
    s.poll()
    assert lower() is None
    now[0] += RESULT_BOUND_EVERY_S - 0.01
    s.poll()
    assert lower() is None   # still within the second
    now[0] += 0.01
    s.poll()
    assert lower() == 5.0
    now[0] += RESULT_BOUND_EVERY_S
    assert s.report_bound(Bound("a", 7.0, "bound-only", 0.0, "toy"), "w")
    assert lower() == 7.0   # a quiet second before it: at once
    s.finalize("time-limit")
    assert s.report_bound(Bound("a", 8.0, "bound-only", 0.0, "toy"), "w") is False
    s.poll()
    assert json.loads(path.read_text())["stopped_because"] == "time-limit"


def test_a_resumed_run_keeps_the_best_solution_and_bound_and_numbers_its_session(tmp_path: Path) -> None:
    from gapstop.engine.rundir import read_events

    first = _run(tmp_path, {"start": 100, "floor": 10, "bound": 3, "job_s": 0.0}, time_limit_s=0.6, workers=2,
                 head_start_s=0.0)
    assert first["stopped_because"] == "time-limit" and first["lower_bound"] == 3 and 10 < first["cost"] < 100
    # the second session's searches start from 100 again: the resumed incumbent stays the best at first
    second = _run(tmp_path, {"start": 100, "floor": 10, "bound": 3, "job_s": 0.0}, time_limit_s=0.3, workers=2,
                  head_start_s=0.0, resume=True)
    assert second["cost"] <= first["cost"] and second["lower_bound"] == 3
    assert {e["session"] for e in read_events(tmp_path / "run")} == {0, 1}


def test_an_island_that_asks_is_told_the_runs_time_left(tmp_path: Path) -> None:
    """run_island passes the session's time left to a search with ``set_time_left``
    (the intra-op island stages its searches by it); inf without a time limit."""
    import math

    from gapstop.engine.session import Session
    from gapstop.engine.workers import run_island

    class Search:
        def __init__(self) -> None:
            self.told: list[float] = []
            self.steps = 0

        def step(self, budget_s, on_improvement, should_stop):
            self.steps += 1
            return 1

        def set_time_left(self, seconds: float) -> None:
            self.told.append(seconds)

    for limit in (60.0, math.inf):
        s = Session(ToyAdapter(), {"start": 30, "floor": 10}, {}, str(tmp_path / f"run{limit}"),
                    {"problem": "toy"}, 0.0, limit)
        search = Search()
        run_island(search, s, "island-0", lambda sol: sol, quit=lambda: search.steps >= 3, epoch_s=0.01,
                   migrate_every=0)
        assert len(search.told) == 3
        if limit == math.inf:
            assert search.told == [math.inf] * 3
        else:
            assert all(limit - 5.0 < t <= limit for t in search.told)
            assert search.told == sorted(search.told, reverse=True)


def test_an_in_process_run_shortens_the_thread_switch_interval_and_restores_it(tmp_path: Path) -> None:
    import sys

    from gapstop.engine import local_runner

    seen: list[float] = []

    class Watching(ToyAdapter):
        def run_bound_job(self, problem, params, spec, ctx, seed, num_workers) -> None:
            seen.append(sys.getswitchinterval())
            super().run_bound_job(problem, params, spec, ctx, seed, num_workers)

    before = sys.getswitchinterval()
    assert before != local_runner.SWITCH_INTERVAL_S
    doc = _run(tmp_path, {"start": 30, "floor": 10, "bound": 10, "job_s": 0.0}, Watching(), time_limit_s=20,
               workers=2, head_start_s=0.0)
    assert doc["stopped_because"] == "optimal"
    assert seen and all(abs(s - local_runner.SWITCH_INTERVAL_S) < 1e-9 for s in seen)
    assert sys.getswitchinterval() == before
