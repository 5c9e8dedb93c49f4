"""Search worker actor: one island of a problem's search, run by :func:`engine.workers.run_island`."""

from __future__ import annotations

from typing import Any

import ray

from gapstop.actors.session_handle import SessionHandle
from gapstop.engine.workers import run_island
from gapstop.engine.protocol import Island
from gapstop.problems import registry


class SearchWorker:
    def __init__(self, problem_name: str, problem: Any, params: dict[str, Any], seed: int, island: Island,
                 name: str) -> None:
        self.adapter = registry.get(problem_name)
        self.args = (problem, params, seed, island)
        self.name = name

    def run(self, coord: Any, first_epoch_s: float | None = None) -> int:
        """Search until the coordinator says stop; returns evaluations made.

        The worker says hello before it builds its search: building may compile kernels
        (tens of seconds on a node that has not run this code yet), and the run should
        know meanwhile where its workers are, as it does for threads."""
        session = SessionHandle(coord)
        session.hello(self.name, ray.get_runtime_context().get_node_id())
        search = self.adapter.make_search(*self.args)
        return run_island(search, session, self.name, self.adapter.to_solution, first_epoch_s=first_epoch_s)
