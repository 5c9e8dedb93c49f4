"""The coordinator actor: one :class:`engine.coordinator.Coordinator` plus the run directory.

Thin: every decision (re-scoring, monotone merges, group bounds, the stop rule)
is the engine's. This class adds a lock (the actor serves calls concurrently),
persistence, eval counters, the migration pool and the worker roll-call.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from gapstop.engine.coordinator import Coordinator
from gapstop.engine.records import Bound
from gapstop.engine.rundir import RunDir
from gapstop.engine.stopping import Clock, standard
from gapstop.problems import registry


class CoordinatorActor:
    """Holds the certificate of a run and decides when to stop.

    Args:
        problem_name: registry name of the problem.
        problem: the problem instance (passed as an object-store reference by the driver).
        params: problem parameters (e.g. ``{"k": 8}``).
        run_dir: where to persist; ``config`` is written there.
        target_gap, time_limit_s: the stopping rule of this session.
        resume: restore incumbent and bounds from ``run_dir``'s checkpoint (a new session).
        taken_over_from: continue the session another coordinator on this machine (the
            driver's, before Ray started) began in ``run_dir`` at this ``time.time()``: same
            clock (``time_limit_s`` counts from then), same event log, its checkpointed
            incumbent and bounds restored without logging them again.

    Also usable as a plain object, in the driver, without Ray.
    """

    def __init__(self, problem_name: str, problem: Any, params: dict[str, Any], run_dir: str,
                 config: dict[str, Any], target_gap: float, time_limit_s: float, resume: bool = False,
                 taken_over_from: float | None = None) -> None:
        self.adapter = registry.get(problem_name)
        self.problem, self.params = problem, params
        self.started_at = time.time() if taken_over_from is None else taken_over_from
        self.clock = Clock(time.time() - self.started_at)
        self.lock = threading.Lock()
        self.rundir = RunDir(run_dir, config, resume=resume, take_over=taken_over_from is not None)
        self._quiet = False  # while restoring a taken-over session: nothing new to log
        self.coord = Coordinator(self.adapter.evaluator(problem, params), standard(target_gap, time_limit_s),
                                 self.clock, on_event=self._on_event, on_incumbent=self._on_incumbent)
        self.evals: dict[str, int] = {}
        self.nodes: dict[str, str] = {}
        self.pool: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.hold = False  # search workers pause between epochs while set (a bound job's head start)
        self.final: dict[str, Any] | None = None  # the result document, once finalized
        if resume:
            self.rundir.restore_into(self.coord)
        elif taken_over_from is not None:
            self._quiet = True
            self.rundir.restore_into(self.coord, prefix="")
            self._quiet = False
        for b in self.adapter.initial_bounds(problem, params):
            self.coord.offer_bound(b, "coordinator")
        self.rundir.checkpoint(self.coord, self.clock.elapsed())

    def _on_event(self, e: Any) -> None:
        if not self._quiet:
            self.rundir.record_event(e)

    def _on_incumbent(self, inc: Any) -> None:
        if self._quiet:
            return
        self.rundir.record_incumbent(inc)
        self.rundir.write_result(self.adapter.result_doc(self.problem, self.params, self.coord, "running",
                                                         self.clock.elapsed()))

    # -- reports from workers -----------------------------------------------------------
    def hello(self, worker: str, node_id: str) -> None:
        with self.lock:
            self.nodes[worker] = node_id

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
            if self.final is not None:
                return False
            ok = self.coord.offer_bound(bound, worker)
            if ok:
                self.rundir.checkpoint(self.coord, self.clock.elapsed())
            return ok

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

    # -- queries ------------------------------------------------------------------------
    def set_hold(self, hold: bool) -> None:
        """Ask search workers to pause after their current epoch (``True``) or to go on."""
        with self.lock:
            self.hold = bool(hold)

    def poll(self) -> dict[str, Any]:
        """Stop reason (or None), incumbent cost, bound, gap, evaluations, elapsed seconds,
        worker nodes, whether search workers are held, and the run directory's failed
        writes (one line per directory; on Ray the driver prints them: an actor's stderr is not shown)."""
        with self.lock:
            return {"stop": self.coord.stop_reason(), "ub": self.coord.ub, "lb": self.coord.lb,
                    "gap": self.coord.gap, "evals": sum(self.evals.values()), "elapsed": self.clock.elapsed(),
                    "nodes": dict(self.nodes), "hold": self.hold,
                    "write_failures": list(self.rundir.write_failures.lines)}

    def running_doc(self) -> dict[str, Any]:
        """The result document of the run so far (``"stopped_because": "running"``), as
        ``result.json`` has it."""
        with self.lock:
            return self.adapter.result_doc(self.problem, self.params, self.coord, "running", self.clock.elapsed())

    def node(self) -> str:
        """The id of the Ray node this coordinator runs on ("" outside Ray)."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""

    def incumbent(self) -> tuple[float | None, Any]:
        with self.lock:
            inc = self.coord.incumbent
            return (None, None) if inc is None else (inc.cost, inc.solution)

    def member_bounds(self, group: str) -> dict[int, float]:
        with self.lock:
            return self.coord.member_bounds(group)

    def finalize(self, reason: str) -> dict[str, Any]:
        """Fix the stop reason, write checkpoint and result; return the result document."""
        with self.lock:
            self.coord.force_stop(reason)
            elapsed = self.clock.elapsed()
            doc = self.adapter.result_doc(self.problem, self.params, self.coord, reason, elapsed)
            doc["evaluations"] = sum(self.evals.values())
            doc["workers"] = {"evals": dict(self.evals), "nodes": dict(self.nodes)}
            doc["run_dir"] = str(self.rundir.path)
            self.rundir.checkpoint(self.coord, elapsed)
            self.rundir.write_result(doc)
            self.final = doc
            return doc
