"""A run's session: one :class:`engine.coordinator.Coordinator` plus the run directory.

Every decision (re-scoring, monotone merges, group bounds, the stop rule) is the
coordinator's. The session adds a lock (workers report from threads, or the Ray actor
serves calls concurrently), persistence, eval counters, the migration pool, the hold
flag of a head start, and the roll-call of the workers and jobs that ran. Both runners
drive the same class: in-process (:mod:`engine.local_runner`) as a plain object, on Ray
(:mod:`actors.coordinator`) wrapped in an actor.
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any

import numpy as np

from gapstop.engine.coordinator import Coordinator, Event
from gapstop.engine.records import Bound, Incumbent
from gapstop.engine.protocol import RunStatus
from gapstop.engine.rundir import RunDir
from gapstop.engine.stopping import Clock, standard

#: least seconds between two rewrites of ``result.json`` for a better bound alone (an incumbent
#: always rewrites it at once)
RESULT_BOUND_EVERY_S = 1.0


class Session:
    """Holds the certificate of a run and decides when to stop.

    Args:
        adapter: the problem's adapter (:mod:`problems.registry`): evaluator, initial
            bounds, result document.
        problem: the problem instance.
        params: problem parameters (e.g. ``{"k": 8}``).
        run_dir: where to persist; ``config`` is written there.
        target_gap, time_limit_s: the stopping rule of this session.
        resume: restore incumbent and bounds from ``run_dir``'s checkpoint (a new session).
    """

    def __init__(self, adapter: Any, problem: Any, params: dict[str, Any], run_dir: str,
                 config: dict[str, Any], target_gap: float, time_limit_s: float, resume: bool = False) -> None:
        self.adapter = adapter
        self.problem, self.params = problem, params
        self.started_at = time.time()
        self.clock = Clock()
        self.time_limit_s = float(time_limit_s)
        self.lock = threading.Lock()
        self.rundir = RunDir(run_dir, config, resume=resume)
        self.coord = Coordinator(adapter.evaluator(problem, params), standard(target_gap, time_limit_s),
                                 self.clock, on_event=self.rundir.record_event, on_incumbent=self._on_incumbent)
        self.evals: dict[str, int] = {}
        self.nodes: dict[str, str] = {}
        self.jobs: dict[str, list[str]] = {"searches": [], "bounds": []}
        self.pool: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.hold = False  # search workers pause between epochs while set (a bound job's head start)
        self.last: dict[str, Bound] = {}  # the last bound reported of each method, kept or not
        self.errors: list[str] = []
        self.notes: dict[str, Any] = {}
        self.final: dict[str, Any] | None = None  # the result document, once finalized
        self._result_written = -math.inf
        self._bound_unwritten = False  # a better bound than result.json's is known
        if resume:
            self.rundir.restore_into(self.coord)
        for b in adapter.initial_bounds(problem, params):
            self.coord.offer_bound(b, "coordinator")
        self.rundir.checkpoint(self.coord, self.clock.elapsed())
        if resume and self.coord.incumbent is not None:
            # the restored incumbent rewrote result.json before its bounds were back: the answer
            # given if this session is cut short must carry them
            self._write_running()

    def _on_incumbent(self, inc: Any) -> None:
        self.rundir.record_incumbent(inc)
        self._write_running()

    def _write_running(self) -> None:
        self.rundir.write_result(self._doc("running", self.clock.elapsed()))
        self._result_written = time.monotonic()
        self._bound_unwritten = False

    # -- reports from workers -----------------------------------------------------------
    def hello(self, worker: str, node_id: str) -> None:
        with self.lock:
            self.nodes[worker] = node_id

    def started(self, kind: str, name: str) -> None:
        """Record that a ``kind`` (``"searches"`` or ``"bounds"``) job ``name`` started (once per name)."""
        with self.lock:
            if name not in self.jobs[kind]:
                self.jobs[kind].append(name)

    def report_solution(self, solution: Any, source: str) -> bool:
        with self.lock:
            if self.final is not None:  # reports racing the stop must not reopen result.json
                return False
            ok = self.coord.offer_solution(solution, source)
            if ok:
                self.rundir.checkpoint(self.coord, self.clock.elapsed())
            return ok

    def report_bound(self, bound: Bound, worker: str) -> bool:
        with self.lock:
            self.last[bound.method] = bound
            if self.final is not None:
                return False
            ok = self.coord.offer_bound(bound, worker)
            if ok:
                self.rundir.checkpoint(self.coord, self.clock.elapsed())
                self._bound_unwritten = True
                self._catch_up()
            return ok

    def _catch_up(self) -> None:
        """Rewrite result.json for bounds it lacks, at most once per :data:`RESULT_BOUND_EVERY_S`
        (lock held). It is also the answer given at the deadline when the finish runs late
        (launch.py's watchdog), so its bound must not lag far behind; but live bounds come in
        bursts (the spectral bound's, CP-SAT's), and the intra-op document holds a strategy per
        node. :meth:`poll` calls it too, so the last bound of a burst is written within about
        that time."""
        if (self._bound_unwritten and self.final is None and self.coord.incumbent is not None
                and time.monotonic() - self._result_written >= RESULT_BOUND_EVERY_S):
            self._write_running()

    def report_evals(self, worker: str, n: int) -> None:
        with self.lock:
            self.evals[worker] = self.evals.get(worker, 0) + int(n)

    def exchange_migrants(self, island: str, keys: np.ndarray, costs: np.ndarray, n: int
                          ) -> tuple[np.ndarray, np.ndarray]:
        """Post this island's elites; get back the best ``n`` posted by the other islands."""
        with self.lock:
            self.pool[island] = (np.asarray(keys), np.asarray(costs))
            others = [v for name, v in self.pool.items() if name != island]
        if not others:
            return np.zeros((0, 0)), np.zeros(0)
        k = np.vstack([o[0] for o in others])
        c = np.concatenate([o[1] for o in others])
        best = np.argsort(c, kind="stable")[:n]
        return k[best], c[best]

    def report_error(self, worker: str, text: str) -> None:
        """A worker failed (it is replaced): the failure goes into ``worker_errors``."""
        with self.lock:
            self.errors.append(f"{worker}: {text}")

    def report_overrun(self, workers: list[str], waited_s: float) -> None:
        """Workers still running ``waited_s`` after the run's end: an ``error`` event each (the
        result is final by then; a healthy run never has one)."""
        with self.lock:
            for w in workers:
                self.rundir.record_event(Event(self.clock.elapsed(), w, "error", math.inf, "stop",
                                               f"error: still running {waited_s:.1f} s after the run's end"))

    def annotate(self, key: str, value: Any) -> None:
        """Add ``key: value`` to the final result document (e.g. how the run used its time)."""
        with self.lock:
            self.notes[key] = value

    # -- queries ------------------------------------------------------------------------
    def set_hold(self, hold: bool) -> None:
        """Ask search workers to pause after their current epoch (``True``) or to go on."""
        with self.lock:
            self.hold = bool(hold)

    def poll(self) -> RunStatus:
        """Stop reason (or None), incumbent cost, bound, gap, evaluations, elapsed seconds,
        seconds left to the time limit (``time_left``; inf without one), worker nodes, whether
        search workers are held, and the run directory's failed writes (one line per directory;
        on Ray the driver prints them: an actor's stderr is not shown)."""
        with self.lock:
            self._catch_up()
            return RunStatus(stop=self.coord.stop_reason(), ub=self.coord.ub, lb=self.coord.lb, gap=self.coord.gap,
                             evals=sum(self.evals.values()), elapsed=self.clock.elapsed(),
                             time_left=max(0.0, self.time_limit_s - self.clock.elapsed()), nodes=dict(self.nodes),
                             hold=self.hold, write_failures=tuple(self.rundir.write_failures.lines))

    def running_doc(self) -> dict[str, Any]:
        """The result document of the run so far (``"stopped_because": "running"``), as
        ``result.json`` has it."""
        with self.lock:
            return self._doc("running", self.clock.elapsed())

    def _doc(self, reason: str, elapsed: float) -> dict[str, Any]:
        """The problem's result document with the run's fields (:meth:`finalize`); lock held.
        The running document has them too: at the deadline it may be the answer."""
        doc: dict[str, Any] = self.adapter.result_doc(self.problem, self.params, self.coord, reason, elapsed)
        doc["evaluations"] = sum(self.evals.values())
        doc["workers"] = {"evals": dict(self.evals), "nodes": dict(self.nodes)}
        doc["jobs"] = {kind: list(names) for kind, names in self.jobs.items()}
        doc["run_dir"] = str(self.rundir.path)
        if self.errors:
            doc["worker_errors"] = list(self.errors)
        doc.update(self.notes)
        return doc

    def incumbent(self) -> tuple[float | None, Any]:
        with self.lock:
            inc = self.coord.incumbent
            return (None, None) if inc is None else (inc.cost, inc.solution)

    def incumbent_record(self) -> Incumbent | None:
        """The incumbent with its source and time (what a copy of the run's answer needs)."""
        with self.lock:
            return self.coord.incumbent

    def member_bounds(self, group: str) -> dict[int, float]:
        with self.lock:
            return self.coord.member_bounds(group)

    def bounds(self) -> dict[str, Bound]:
        """The best bound of each method so far."""
        with self.lock:
            return dict(self.coord.bounds)

    def last_bounds(self) -> dict[str, Bound]:
        """The last bound reported of each method (improving or not: e.g. a final record)."""
        with self.lock:
            return dict(self.last)

    def finalize(self, reason: str) -> dict[str, Any]:
        """Fix the stop reason, write checkpoint and result; return the result document.

        Beyond the problem's fields the document has ``evaluations``, ``workers``
        (``{"evals": {worker: n}, "nodes": {worker: node id}}``), ``jobs`` (``{"searches":
        [...], "bounds": [...]}``: the names of the search islands and bound jobs that
        ran, in start order), ``run_dir``, ``worker_errors`` (when a worker failed) and the
        notes of :meth:`annotate`."""
        with self.lock:
            self.coord.force_stop(reason)
            elapsed = self.clock.elapsed()
            doc = self._doc(reason, elapsed)
            self.rundir.checkpoint(self.coord, elapsed)
            self.rundir.write_result(doc)
            self.final = doc
            return doc
