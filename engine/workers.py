"""What a worker slot runs, whether it is a thread or a Ray actor: an island loop or a bound job.

Both talk to the run's session (:class:`engine.session.Session`, or on Ray a handle
whose reports are sent without waiting) through the same calls: ``hello``, ``started``,
``report_solution``, ``report_bound``, ``report_evals``, ``exchange_migrants``,
``incumbent``, ``poll``.

A *search* has ``step(budget_s, on_improvement, should_stop) -> evaluations`` and reports
solutions through ``on_improvement(value, found)``; a ``found`` with a non-empty ``via``
attribute (the piece of the search that found it) is logged as ``WORKER/VIA``
(:func:`source_name`). A search with ``migrants``/``accept_migrants`` exchanges elites with
the other islands, one with ``accept_incumbent(cost, solution)`` is handed the run's
incumbent, and one with ``prepare()`` is asked once, after its first epoch, to get ready for the
rest (the time a head start holds it is then not lost to, say, compiling kernels). A *bound job* is run by the problem's adapter (``run_bound_job``) and reports
through a :class:`JobContext`.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from gapstop.engine import cancel
from gapstop.engine.records import Bound
from gapstop.engine.protocol import JobSpec

#: how often a held search worker asks whether it may go on (seconds)
HOLD_POLL_S = 0.1


def source_name(worker: str, found: Any) -> str:
    """The event-log source of a search worker's solution: ``worker``, or ``worker/via``."""
    via = getattr(found, "via", "")
    return f"{worker}/{via}" if via else worker


def never() -> bool:
    return False


def run_island(search: Any, session: Any, name: str, to_solution: Callable[[Any], Any],
               quit: Callable[[], bool] = never, epoch_s: float = 0.5, migrate_every: int = 4,
               migrate_n: int = 3, first_epoch_s: float | None = None,
               pause: Callable[[float], Any] = time.sleep) -> int:
    """Run ``search`` in epochs of ``epoch_s`` seconds until the session says stop (or ``quit()``).

    After each epoch its best new solution (``to_solution`` of what it found) and its
    evaluation count go to the session; the island's very first solution goes at once, from
    inside the step (a run stopped then has an answer, although the step, e.g. a seeded first
    generation, may go on for seconds). A search with ``set_time_left(seconds)`` is told
    the run's time left (inf without a limit); every ``migrate_every`` epochs it trades elites
    with the other islands and takes the run's incumbent. While the session holds the
    search workers (a bound job's head start) it waits between epochs: its first epoch
    still runs (``first_epoch_s`` long, default ``epoch_s``), so seeded and early solutions
    are reported at once. ``pause(s)``: how it waits while held (e.g. an event's ``wait``,
    so that a stop wakes it at once). Returns evaluations made.
    """
    with cancel.stop_scope(quit):  # the loops inside a step see ``quit`` too
        total = 0
        epoch = 0
        first_out = False

        def improved(value: float, sol: Any) -> None:
            nonlocal first_out
            if first_out:
                found.append(sol)
            else:
                first_out = True
                session.report_solution(to_solution(sol), source_name(name, sol))

        while True:
            found: list[Any] = []
            n: int = search.step(epoch_s if epoch or first_epoch_s is None else first_epoch_s, improved, quit)
            total += n
            epoch += 1
            if found:  # only the last (best) improvement of an epoch matters
                session.report_solution(to_solution(found[-1]), source_name(name, found[-1]))
            session.report_evals(name, n)
            if epoch == 1 and hasattr(search, "prepare"):
                search.prepare()  # e.g. compile what later epochs run: while held, it costs the run nothing
            if migrate_every and epoch % migrate_every == 0:
                if hasattr(search, "migrants"):
                    keys, costs = search.migrants(migrate_n)
                    mk, mc = session.exchange_migrants(name, keys, costs, migrate_n)
                    if len(mc):
                        search.accept_migrants(mk, mc)
                if hasattr(search, "accept_incumbent"):
                    cost, sol = session.incumbent()  # e.g. the exact MIP's: the island builds on it
                    if sol is not None:
                        search.accept_incumbent(cost, sol)
            st = session.poll()
            if hasattr(search, "set_time_left"):  # e.g. to stage its own time
                search.set_time_left(st.time_left)
            while st.stop is None and st.hold and not quit():  # another job has the CPUs for now
                pause(HOLD_POLL_S)
                st = session.poll()
            if st.stop is not None or quit():
                return total


def run_job(adapter: Any, problem: Any, params: dict[str, Any], spec: JobSpec, ctx: JobContext,
            seed: int, num_workers: int) -> None:
    """Run bound job ``spec`` with ``ctx.should_stop`` as its thread's stop (:mod:`engine.cancel`):
    every loop inside the job then ends within one of its steps of the run's stop."""
    with cancel.stop_scope(ctx.should_stop):
        adapter.run_bound_job(problem, params, spec, ctx, seed, num_workers=num_workers)


class JobContext:
    """The ``ctx`` a bound job reports through, backed by the run's session.

    ``should_stop`` is true when the session stops the run, at the deadline, on
    ``quit()``, or, for a member of a case split (e.g. LB_j), once this job's own bound
    reaches the incumbent: that case cannot hold a better solution, and its current
    value keeps the group's minimum valid. The session is asked at most every ``poll_s``.
    ``on_ready``: called by :meth:`ready` (the in-process runner lets the islands set up then).
    """

    def __init__(self, session: Any, name: str, deadline: float, quit: Callable[[], bool] = never,
                 poll_s: float = 0.25, on_ready: Callable[[], None] | None = None) -> None:
        self.session, self.name, self.deadline, self.quit, self.poll_s = session, name, deadline, quit, poll_s
        self.on_ready = on_ready
        self._last_poll = -math.inf
        self._stop = False
        self._ub: float | None = None
        self._own_best: float | None = None
        self._member = False

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._last_poll >= self.poll_s:
            self._last_poll = now
            st = self.session.poll()
            self._stop = st.stop is not None
            self._ub = st.ub

    def should_stop(self) -> bool:
        if time.monotonic() >= self.deadline or self.quit():
            return True
        self._refresh()
        if self._member and self._own_best is not None and self._ub is not None and self._own_best >= self._ub:
            return True
        return self._stop

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def ready(self) -> None:
        """Say that the job's set-up (imports, model building: Python) is done and that it now
        runs mostly in native code that releases the interpreter lock (a solver)."""
        if self.on_ready is not None:
            self.on_ready()

    def bound(self, b: Bound) -> None:
        if b.detail and "group" in b.detail:
            self._member = True
        if self._own_best is None or b.value > self._own_best:
            self._own_best = b.value
        self.session.report_bound(b, self.name)

    def solution(self, solution: Any, source: str) -> None:
        self.session.report_solution(solution, source)

    def incumbent(self) -> tuple[float | None, Any]:
        cost, solution = self.session.incumbent()
        return (None if cost is None else float(cost)), solution


#: a bound job with less time than this left does not start
MIN_JOB_BUDGET_S = 0.05


def job_budget(ctx: Any) -> float | None:
    """Seconds a bound job may use (the time left on its context), or None if it should not start."""
    left: float = ctx.time_left()
    if left <= MIN_JOB_BUDGET_S or ctx.should_stop():
        return None
    return left


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
