"""Bound worker actor: runs bound job specs of a problem and reports as bounds improve."""

from __future__ import annotations

import time
from typing import Any

import ray

from gapstop.engine.records import Bound
from gapstop.problems import registry


class RemoteContext:
    """The ``ctx`` a bound job reports through, backed by the coordinator actor.

    ``should_stop`` is true when the coordinator stops the run, at the deadline, or,
    for a member of a case split (e.g. LB_j), once this job's own bound reaches the
    incumbent: that case cannot hold a better solution, and its current value keeps
    the group's minimum valid.
    """

    def __init__(self, coord: Any, name: str, deadline: float, poll_s: float = 0.25) -> None:
        self.coord, self.name, self.deadline, self.poll_s = coord, name, deadline, poll_s
        self._last_poll = 0.0
        self._stop = False
        self._ub: float | None = None
        self._own_best: float | None = None
        self._member = False

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._last_poll >= self.poll_s:
            self._last_poll = now
            st = ray.get(self.coord.poll.remote())
            self._stop = st["stop"] is not None
            self._ub = st["ub"]

    def should_stop(self) -> bool:
        if time.monotonic() >= self.deadline:
            return True
        self._refresh()
        if self._member and self._own_best is not None and self._ub is not None and self._own_best >= self._ub:
            return True
        return self._stop

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def bound(self, b: Bound) -> None:
        if b.detail and "group" in b.detail:
            self._member = True
        if self._own_best is None or b.value > self._own_best:
            self._own_best = b.value
        self.coord.report_bound.remote(b, self.name)

    def solution(self, solution: Any, source: str) -> None:
        self.coord.report_solution.remote(solution, source)

    def incumbent(self) -> tuple[float | None, Any]:
        return ray.get(self.coord.incumbent.remote())


class BoundWorker:
    def __init__(self, problem_name: str, problem: Any, params: dict[str, Any], seed: int, name: str,
                 num_threads: int = 1) -> None:
        self.adapter = registry.get(problem_name)
        self.problem, self.params, self.seed, self.name = problem, params, seed, name
        self.num_threads = num_threads
        # heavy imports (solvers) now, while the coordinator starts, not when the first job runs
        self.adapter.prepare_bounds()

    def run(self, coord: Any, spec: dict[str, Any], deadline_in_s: float) -> str:
        """Run one job spec until done, the deadline, or the coordinator stops. Returns the spec's name."""
        coord.hello.remote(self.name, ray.get_runtime_context().get_node_id())
        ctx = RemoteContext(coord, f"{self.name}:{spec['kind']}", time.monotonic() + deadline_in_s)
        self.adapter.run_bound_job(self.problem, self.params, spec, ctx, self.seed, parallel=True,
                                   num_workers=self.num_threads)
        return spec["kind"]
