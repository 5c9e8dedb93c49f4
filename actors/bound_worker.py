"""Bound worker actor: runs bound job specs of a problem, reporting through :class:`engine.workers.JobContext`."""

from __future__ import annotations

import time
from typing import Any

import ray

from gapstop.actors.session_handle import SessionHandle
from gapstop.engine.workers import JobContext, run_job
from gapstop.engine.protocol import JobSpec
from gapstop.problems import registry


class BoundWorker:
    def __init__(self, problem_name: str, problem: Any, params: dict[str, Any], seed: int, name: str,
                 num_threads: int = 1) -> None:
        self.adapter = registry.get(problem_name)
        self.problem, self.params, self.seed, self.name = problem, params, seed, name
        self.num_threads = num_threads
        # heavy imports (solvers) now, while the coordinator starts, not when the first job runs
        self.adapter.prepare_bounds()

    def run(self, coord: Any, spec: JobSpec, deadline_in_s: float) -> str:
        """Run one job spec until done, the deadline, or the coordinator stops. Returns the spec's kind."""
        session = SessionHandle(coord, track=True)
        session.hello(self.name, ray.get_runtime_context().get_node_id())
        ctx = JobContext(session, f"{self.name}:{spec.kind}", time.monotonic() + deadline_in_s)
        try:
            run_job(self.adapter, self.problem, self.params, spec, ctx, self.seed, self.num_threads)
        finally:
            session.flush()
        return spec.kind
