"""Thin Ray actors over engine/ and problems/ code.

The plain classes live in their modules (testable without Ray); ``ray.remote`` is
applied once, here, on first use: importing the package does not import Ray (about
0.7 s on a small machine), which a run in this process never needs.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CoordinatorActor", "SearchWorkerActor", "BoundWorkerActor"]

_remote: dict[str, Any] = {}


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if not _remote:
        import ray

        from gapstop.actors.bound_worker import BoundWorker
        from gapstop.actors.coordinator import CoordinatorActor as _Coordinator
        from gapstop.actors.search_worker import SearchWorker

        _remote.update(CoordinatorActor=ray.remote(_Coordinator), SearchWorkerActor=ray.remote(SearchWorker),
                       BoundWorkerActor=ray.remote(BoundWorker))
    return _remote[name]
