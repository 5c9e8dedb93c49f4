"""In-process runner: the solve loop (:mod:`engine.solve_loop`) with threads for workers.

The numba decoders and kernels run with ``nogil`` and OR-Tools solvers release the GIL,
so threads give real parallelism on a laptop without Ray. The islands, bound jobs, plan,
session and run directory are the ones a Ray run has (:mod:`actors.runner`); only the
workers differ.
"""

from __future__ import annotations

import contextlib
import os
import queue
import sys
import threading
import time
import traceback
from typing import Any, Callable, Iterator

from gapstop.engine.session import Session
from gapstop.engine.solve_loop import EPOCH_S, OutFile, drive, plan_run
from gapstop.engine.interrupts import signals_held, sigterm_raises
from gapstop.engine.workers import JobContext, run_island, run_job
from gapstop.engine.protocol import Island, JobSpec, RunStatus

#: how often an in-process bound job asks the session whether to stop (seconds)
JOB_POLL_S = 0.05
#: longest wait for the worker threads when the run ends, all together. Every job sees the run's
#: stop within one of its steps (:mod:`engine.cancel`), so a healthy run never waits this long;
#: a job still running then is named on stderr and in the event log, and the process ends
#: without it (its thread is a daemon; the result is already written)
JOIN_S = 5.0
#: longest wait of the islands' set-up for a head-start job to be ready (see :class:`ThreadBackend`)
SETUP_WAIT_S = 1.0
#: the interpreter's thread switch interval during a run (seconds; Python's default is 0.005).
#: A thread back from nogil code waits for the GIL until the holder's interval ends, so with
#: the default a bound job building CP-SAT models in Python stalls the islands' glue between
#: kernels: on instance S an intra-op island made 168 iterations in 40 s beside neighbourhood
#: moves against 305 alone; at 1e-4 s, 258 (and the moves made 133, not 114).
SWITCH_INTERVAL_S = 1e-4


class _QueuedReports:
    """The session as a bound job sees it in-process: its solutions and bounds are queued and
    handed to the session by one reporter thread, as a Ray actor's reports are sent without
    waiting. A solver's callback (CP-SAT's, in one of its search threads) then returns at
    once instead of waiting while the session re-scores a partition and rewrites the run
    directory: done in the callback, that slowed the exact MIP's proofs
    (docs/decisions/0002-queued-bound-reports.md)."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.pending: queue.Queue[tuple[str, tuple[Any, ...]] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._forward, name="gapstop-reports", daemon=True)
        self.thread.start()

    def _forward(self) -> None:
        while (item := self.pending.get()) is not None:
            try:
                getattr(self.session, item[0])(*item[1])
            finally:
                self.pending.task_done()

    def report_solution(self, solution: Any, source: str) -> None:
        self.pending.put(("report_solution", (solution, source)))

    def report_bound(self, bound: Any, worker: str) -> None:
        self.pending.put(("report_bound", (bound, worker)))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def flush(self) -> None:
        """Wait until every queued report has reached the session."""
        self.pending.join()

    def close(self) -> None:
        self.pending.put(None)
        self.thread.join(timeout=JOIN_S)


class _FirstReport:
    """``reports`` that sets ``event`` at a job's first report (bound or solution): a job that
    never says :meth:`~engine.workers.JobContext.ready` is under way then."""

    def __init__(self, reports: Any, event: threading.Event) -> None:
        self.reports, self.event = reports, event

    def report_bound(self, bound: Any, worker: str) -> None:
        self.event.set()
        self.reports.report_bound(bound, worker)

    def report_solution(self, solution: Any, source: str) -> None:
        self.event.set()
        self.reports.report_solution(solution, source)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reports, name)


class ThreadBackend:
    """Workers as daemon threads of this process (see :class:`engine.solve_loop.Backend`).

    All of them share one interpreter lock. A head-start job's set-up (OR-Tools' import
    and the model's construction: Python, 0.25-0.5 s) is the critical path of a run its
    MIP proves within seconds, and an island's set-up (numba's import, its seeded orders,
    the evaluator's kernels: about 0.5 s, Python too) would take turns with it. So while a
    job with a head start is setting up, the islands wait before theirs: until it says
    :meth:`~engine.workers.JobContext.ready` (its solver starts: the island then sets up
    while the solver presolves, mostly on one core), reports, or ends, at most
    :data:`SETUP_WAIT_S`. On Ray they are processes of their own and start at once.
    """

    def __init__(self, adapter: Any, problem: Any, params: dict[str, Any], session: Session, seed: int,
                 n_search: int, threads_per_job: int) -> None:
        self.adapter, self.problem, self.params, self.session = adapter, problem, params, session
        self.seed, self.n_search, self.threads_per_job = seed, n_search, threads_per_job
        self.quit = threading.Event()
        self.done: queue.SimpleQueue[tuple[int, str | None]] = queue.SimpleQueue()
        self.threads: list[threading.Thread] = []
        self.reports = _QueuedReports(session)
        self.job_under_way = threading.Event()  # cleared while a head-start job sets up
        self.job_under_way.set()

    def _spawn(self, body: Callable[[], Any], name: str) -> int:
        handle = len(self.threads)

        def run() -> None:
            error = None
            try:
                body()
            except Exception:
                error = traceback.format_exc(limit=4)
            self.done.put((handle, error))

        t = threading.Thread(target=run, name=name, daemon=True)
        self.threads.append(t)
        t.start()
        return handle

    def start_search(self, slot: int, name: str, island: Island, first_epoch_s: float) -> int:
        def body() -> None:
            self.session.hello(name, "local")
            self.job_under_way.wait(SETUP_WAIT_S)
            if self.quit.is_set():
                return
            search = self.adapter.make_search(self.problem, self.params, self.seed, island)
            run_island(search, self.session, name, self.adapter.to_solution, self.quit.is_set, EPOCH_S,
                       first_epoch_s=first_epoch_s, pause=self.quit.wait)

        return self._spawn(body, name)

    def start_bound(self, slot: int, spec: JobSpec, budget_s: float, fresh: bool) -> int:
        worker = f"bound-{slot}"
        deadline = time.monotonic() + budget_s
        gate = spec.head_start_s > 0  # the islands' set-up waits for this job's
        if gate:
            self.job_under_way.clear()
        reports = _FirstReport(self.reports, self.job_under_way) if gate else self.reports

        def body() -> None:
            self.session.hello(worker, "local")
            ctx = JobContext(reports, f"{worker}:{spec.kind}", deadline, self.quit.is_set, JOB_POLL_S,
                             on_ready=self.job_under_way.set if gate else None)
            try:
                run_job(self.adapter, self.problem, self.params, spec, ctx, self.seed, self.threads_per_job)
            finally:
                if gate:
                    self.job_under_way.set()
                self.reports.flush()  # its last bound counts before the next job is planned

        return self._spawn(body, f"{worker}:{spec.kind}")

    def wait(self, handles: list[Any], timeout_s: float) -> list[tuple[Any, str | None]]:
        out = []
        try:
            out.append(self.done.get(timeout=timeout_s))
            while True:
                out.append(self.done.get_nowait())
        except queue.Empty:
            pass
        return out

    def stop(self) -> list[str]:
        """Stop every worker and wait for it (a step or a solver's stop check), at most
        :data:`JOIN_S` in all; returns the names of the workers still running then."""
        self.quit.set()
        self.job_under_way.set()
        end = time.monotonic() + JOIN_S
        for t in self.threads:
            t.join(timeout=max(0.0, end - time.monotonic()))
        self.reports.close()
        return [t.name for t in self.threads if t.is_alive()]


def run_local(adapter: Any, problem: Any, params: dict[str, Any], *, run_dir: str, config: dict[str, Any],
              time_limit_s: float, target_gap: float, seed: int, resume: bool = False, workers: int | None = None,
              islands: int | None = None, bounds: bool = True, head_start_s: float | None = None,
              progress: Callable[[RunStatus], None] | None = None, poll_s: float = 0.05,
              out_path: str | None = None, out_failures: Any = None, t_end: float | None = None) -> dict[str, Any]:
    """Run one certified search in this process and return the result document.

    ``workers`` slots (default one per CPU) split as on Ray (:func:`engine.plan.slot_plan`;
    ``islands`` fixes the number of search islands). ``head_start_s``: the dedicated bound
    job's head start (None: :func:`engine.plan.default_head_start`, extended as the problem's
    ``extend_head_start`` decides). ``out_path``: also write the result document there, rewritten
    at every improvement and at the end (a failed write reported through ``out_failures``, a
    :class:`engine.persist.WriteFailures`, if given). ``t_end``: a ``time.monotonic()`` deadline before the
    time limit (the process's). Ctrl-C stops the run; the best solution is kept.
    """
    rp = plan_run(adapter, problem, params, total=workers or max(1, os.cpu_count() or 1), bounds=bounds,
                  islands=islands, time_limit_s=time_limit_s, head_start_s=head_start_s, runner="in-process")
    config = {**config, **rp.config}
    session = Session(adapter, problem, params, run_dir, config, target_gap, time_limit_s, resume=resume)
    out = OutFile(out_path, session.running_doc, out_failures)
    end = time.monotonic() + time_limit_s - session.clock.elapsed()
    if t_end is not None:
        end = min(end, t_end)

    def tick(st: RunStatus) -> None:
        out.update(st)
        if progress is not None:
            progress(st)

    backend = ThreadBackend(adapter, problem, params, session, seed, rp.n_search, 1)
    with switch_interval(SWITCH_INTERVAL_S):
        with sigterm_raises():  # SIGTERM stops the run as Ctrl-C does
            reason = drive(session, backend, rp.plan, rp.n_search, rp.n_bound, t_end=end, head_s=rp.head_s,
                           extend=rp.extend, poll_s=poll_s, on_tick=tick)
        with signals_held():  # the result is being written: a second signal must not lose it
            backend.quit.set()
            backend.reports.flush()  # what the bound jobs reported before the stop counts
            doc = session.finalize(reason)
            out.final(doc)
            t_stop = time.monotonic()
            late = backend.stop()
            if late:
                waited = time.monotonic() - t_stop
                session.report_overrun(late, waited)
                print(f"warning: {', '.join(late)} did not stop within {waited:.1f} s of the run's end; "
                      "the process ends without waiting for it", file=sys.stderr, flush=True)
    return doc


@contextlib.contextmanager
def switch_interval(seconds: float) -> Iterator[None]:
    """Run the block with the interpreter's thread switch interval at ``seconds``, then restore it."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(seconds)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


