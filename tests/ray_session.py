"""The Ray instance the tests share (see ``shared_ray`` in conftest.py)."""

from __future__ import annotations

import time

#: the namespace of the shared instance: a test that looks up a run's named actors uses it
NAMESPACE = "gapstop-tests"
#: its size, as the runs under test ask for (``workers=2``)
NUM_CPUS = 2


def start() -> None:
    """Start the shared instance unless Ray is already up in this process."""
    import ray

    from gapstop.cluster.connect import connect

    if not ray.is_initialized():
        connect(None, NUM_CPUS, namespace=NAMESPACE)


def wait_until_the_coordinator_is_gone(timeout_s: float = 30.0) -> None:
    """A run kills its actors as it ends, and Ray frees their names a moment later; the next run
    on the same instance names its actors the same (``coordinator``, ``search-0``, ...), so wait
    until no named actor is left."""
    import ray

    deadline = time.monotonic() + timeout_s
    while ray.util.list_named_actors():
        if time.monotonic() > deadline:
            raise AssertionError(f"actors of the previous run still alive: {ray.util.list_named_actors()}")
        time.sleep(0.05)
