"""The session as workers and the driver see it on Ray: the coordinator actor behind plain calls."""

from __future__ import annotations

from typing import Any

import ray

#: calls whose answer nobody waits for: a report must not stall a search or a solver callback
_FIRE_AND_FORGET = frozenset({"hello", "started", "report_solution", "report_bound", "report_evals",
                              "report_error"})


class SessionHandle:
    """Calls the coordinator actor's methods: reports are sent without waiting, queries
    wait for their answer (what :mod:`engine.workers` and :mod:`engine.solve_loop` expect)."""

    def __init__(self, actor: Any) -> None:
        self.actor = actor

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.actor, name)
        if name in _FIRE_AND_FORGET:
            return lambda *args: method.remote(*args)
        return lambda *args: ray.get(method.remote(*args))
