"""Thin Ray actors over engine/ and problems/ code.

The plain classes live in their modules (testable without Ray); ``ray.remote`` is
applied once, here.
"""

from __future__ import annotations

import ray

from actors.bound_worker import BoundWorker
from actors.coordinator import CoordinatorActor as _Coordinator
from actors.search_worker import SearchWorker

CoordinatorActor = ray.remote(_Coordinator)
SearchWorkerActor = ray.remote(SearchWorker)
BoundWorkerActor = ray.remote(BoundWorker)

__all__ = ["CoordinatorActor", "SearchWorkerActor", "BoundWorkerActor"]
