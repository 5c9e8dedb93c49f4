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

    def __init__(self, actor: Any, track: bool = False) -> None:
        self.actor = actor
        self.track = track  # keep the reports' refs for :meth:`flush` (a bound job's few; not an island's many)
        self.sent: list[Any] = []

    def _send(self, method: Any, args: tuple[Any, ...]) -> None:
        ref = method.remote(*args)
        if self.track:
            self.sent.append(ref)

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.actor, name)
        if name in _FIRE_AND_FORGET:
            return lambda *args: self._send(method, args)
        return lambda *args: ray.get(method.remote(*args))

    def flush(self) -> None:
        """Wait until every report sent so far has been handled (a job's last bound must
        count before the driver plans the next job)."""
        ray.get(self.sent)
        self.sent.clear()
