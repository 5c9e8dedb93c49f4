"""In-process runner: search workers and bound workers as threads around one Coordinator.

The numba decoders run with ``nogil`` and OR-Tools solvers release the GIL, so
threads give real parallelism on a laptop without Ray. The Ray runner wraps the
same worker objects in actors.

A *search worker* has ``step(budget_s, on_improvement, should_stop) -> evals`` and
reports solutions through ``on_improvement(value, solution)``; a solution with a non-empty
``via`` attribute (the piece of the search that found it) is logged as ``WORKER/VIA``
(:func:`source_name`). A worker with ``accept_incumbent(cost, solution)`` is handed the run's
incumbent between steps. A *bound job* is a
callable ``job(ctx) -> None`` that reports through ``ctx.bound(...)`` and
``ctx.solution(...)`` and should return early when ``ctx.should_stop()``.
"""

from __future__ import annotations

import contextlib
import math
import signal
import threading
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Protocol

from gapstop.engine.coordinator import Coordinator
from gapstop.engine.records import Bound


def source_name(worker: str, found: Any) -> str:
    """The event-log source of a search worker's solution: ``worker``, or ``worker/via``."""
    via = getattr(found, "via", "")
    return f"{worker}/{via}" if via else worker


class SearchWorker(Protocol):
    def step(self, budget_s: float, on_improvement: Callable[[float, Any], None],
             should_stop: Callable[[], bool]) -> int: ...


@dataclass
class JobContext:
    """What a bound job sees: the shared coordinator (locked), stop flag and deadline."""

    coordinator: Coordinator
    lock: threading.Lock
    stop_event: threading.Event
    deadline: float  # time.monotonic() value
    name: str = ""

    def should_stop(self) -> bool:
        return self.stop_event.is_set() or time.monotonic() >= self.deadline

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def bound(self, b: Bound) -> None:
        with self.lock:
            self.coordinator.offer_bound(b, self.name or b.method)

    def solution(self, solution: Any, source: str) -> None:
        with self.lock:
            self.coordinator.offer_solution(solution, source)

    def incumbent(self) -> tuple[float | None, Any]:
        with self.lock:
            inc = self.coordinator.incumbent
            return (None, None) if inc is None else (inc.cost, inc.solution)


BoundJob = Callable[[JobContext], None]

#: a bound job with less time than this left does not start
MIN_JOB_BUDGET_S = 0.05


def job_budget(ctx: Any, spec: dict[str, Any], parallel: bool) -> float | None:
    """Seconds a bound job spec may use, or None if it should not start.

    Run in parallel (one job per worker) a job may use all the time left on its context;
    run one after another (in-process) it takes its ``share`` of the time left.
    """
    left = ctx.time_left()
    budget = left if parallel else left * float(spec.get("share", 1.0))
    if budget <= MIN_JOB_BUDGET_S or ctx.should_stop():
        return None
    return budget


def live_bound(ctx: Any, method: str, solver: str, rel_step: float) -> Callable[[float], None]:
    """A reporter of a running solver's proven bounds: sends ``value`` to ``ctx.bound`` as a
    ``bound-only`` record when it is finite and the first, or above the last one sent by
    ``rel_step`` (relative). Each accepted bound is a checkpoint and an event on disk, so
    tiny steps stay local; the caller reports the final bound itself."""
    t0 = time.monotonic()
    last = -math.inf

    def report(value: float) -> None:
        nonlocal last
        # ``value - last``: exact for Python ints (``last + step`` would round above 2^53)
        if math.isfinite(value) and (last == -math.inf or value - last > rel_step * abs(last)):
            last = value
            ctx.bound(Bound(method, value, "bound-only", time.monotonic() - t0, solver))

    return report


@dataclass
class RunStats:
    evals: int = 0
    errors: list[str] = field(default_factory=list)


def run_threads(coordinator: Coordinator, searches: list[SearchWorker], bound_jobs: list[BoundJob],
                time_limit_s: float, poll_s: float = 0.05, step_s: float = 0.25,
                on_tick: Callable[[RunStats], None] | None = None,
                to_solution: Callable[[Any], Any] = lambda s: s) -> tuple[str, RunStats]:
    """Run until the coordinator says stop (or the time limit). Returns (reason, stats).

    ``to_solution`` turns what a search reports into what the evaluator takes.
    Ctrl-C sets the reason ``"interrupted"``; the best solution is kept.
    """
    lock = threading.Lock()
    stop = threading.Event()
    deadline = time.monotonic() + time_limit_s
    stats = RunStats()

    def search_loop(worker: SearchWorker, name: str) -> None:
        def improved(value: float, sol: Any) -> None:
            with lock:
                coordinator.offer_solution(to_solution(sol), source_name(name, sol))
        try:
            while not stop.is_set() and time.monotonic() < deadline:
                n = worker.step(min(step_s, max(0.0, deadline - time.monotonic())), improved, stop.is_set)
                with lock:
                    stats.evals += n
                    inc = coordinator.incumbent
                # the run's incumbent (e.g. the exact MIP's) into the island, which builds on it
                if inc is not None and hasattr(worker, "accept_incumbent"):
                    worker.accept_incumbent(inc.cost, inc.solution)
        except Exception:
            stats.errors.append(f"{name}: {traceback.format_exc(limit=3)}")

    def bound_loop() -> None:
        for i, job in enumerate(bound_jobs):
            if stop.is_set() or time.monotonic() >= deadline:
                return
            ctx = JobContext(coordinator, lock, stop, deadline, name=getattr(job, "name", f"bound-{i}"))
            try:
                job(ctx)
            except Exception:
                stats.errors.append(f"{ctx.name}: {traceback.format_exc(limit=3)}")

    threads = [threading.Thread(target=search_loop, args=(w, f"search-{i}"), daemon=True)
               for i, w in enumerate(searches)]
    if bound_jobs:
        threads.append(threading.Thread(target=bound_loop, daemon=True))
    for t in threads:
        t.start()
    reason: str | None = None
    try:
        while reason is None:
            time.sleep(poll_s)
            with lock:
                reason = coordinator.stop_reason()
            if reason is None and time.monotonic() >= deadline:
                reason = "time-limit"
            if reason is None and not any(t.is_alive() for t in threads):
                reason = "exhausted"
            if on_tick is not None:
                on_tick(stats)
    except KeyboardInterrupt:
        reason = "interrupted"
    stop.set()
    with sigint_held():  # the workers are stopping; a second Ctrl-C must not lose the result
        for t in threads:
            t.join(timeout=30)
    return reason, stats


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Ignore Ctrl-C while the block runs (main thread only: elsewhere signals cannot be set)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
