"""A job's stop, as every loop inside it sees it.

A bound job (a Lagrangian's TRW-S passes, a cycle search, a CP-SAT solve) runs loops
several calls deep that were written against a time budget. The run may decide to stop
long before that budget ends: the target gap is met, another job proves the optimum,
Ctrl-C or SIGTERM arrives. The runner that starts a job opens a :func:`stop_scope` with the
job's ``should_stop`` around it, and every long loop below asks :func:`expired` instead of
comparing the clock with its deadline, so it sees the run's stop within one of its steps
without a stop callback in every signature.

A scope belongs to the thread that opened it (a thread-local stack); a job that starts
threads of its own hands them :func:`current` (e.g. :func:`cpsat_stop_watch`).
Contract: a loop that asks :func:`expired` between steps ends within one step of the
decision plus the scope's polling interval (:class:`engine.workers.JobContext` asks the
session at most every ``poll_s``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Callable, Iterator

_local = threading.local()

#: how often a CP-SAT solve's watcher asks whether the run stopped (seconds)
WATCH_S = 0.05


def _never() -> bool:
    return False


def current() -> Callable[[], bool]:
    """The calling thread's stop: true once any enclosing :func:`stop_scope`'s callback is."""
    stack: list[Callable[[], bool]] = getattr(_local, "stack", [])
    if not stack:
        return _never
    if len(stack) == 1:
        return stack[0]
    scopes = tuple(stack)
    return lambda: any(s() for s in scopes)


def stop_requested() -> bool:
    """True once the run this thread works for has decided to stop (False outside any scope)."""
    return current()()


def expired(deadline: float, now: Callable[[], float] = time.perf_counter) -> bool:
    """True at ``deadline`` (a value of the ``now`` clock) or once the run has decided to stop."""
    return now() >= deadline or stop_requested()


@contextlib.contextmanager
def stop_scope(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Run the block with ``should_stop`` as (one more condition of) this thread's stop."""
    stack: list[Callable[[], bool]] = getattr(_local, "stack", None) or []
    _local.stack = stack
    stack.append(should_stop)
    try:
        yield
    finally:
        stack.pop()


@contextlib.contextmanager
def cpsat_stop_watch(solver: Any, should_stop: Callable[[], bool] | None = None) -> Iterator[None]:
    """Stop ``solver`` (a CP-SAT ``CpSolver``) within :data:`WATCH_S` of the run's stop while the
    block solves. ``should_stop``: the condition to watch (default: this thread's :func:`current`).
    A stopped solve ends as at its time limit: its proven bound stays valid. Nothing is started
    outside a scope."""
    stop = should_stop if should_stop is not None else current()
    if stop is _never:
        yield
        return
    done = threading.Event()

    def watch() -> None:
        while not done.wait(WATCH_S):
            if stop():  # again at every tick: a call before the solve has begun is lost
                solver.stop_search()

    t = threading.Thread(target=watch, name="gapstop-cpsat-stop", daemon=True)
    t.start()
    try:
        yield
    finally:
        done.set()
        t.join()
