"""The Ray runner: the solve loop (:mod:`engine.solve_loop`) with Ray actors for workers.

The coordinator actor holds the run's session (on the driver's node, so the run
directory is written where the command runs); search and bound workers are actors of
``cpus_per_worker`` CPUs each, planned as in-process (:mod:`engine.plan`). The problem
is put in the object store once and every actor reads it from there. A bound slot keeps
its actor from job to job; a worker that dies is replaced (up to ``max_restarts`` times
per slot) and the session never loses what was reported.

Head start: on a single node the dedicated job (the pipeline's exact MIP) runs alone
after the islands' first epoch, as in-process; on several nodes the islands mostly run
elsewhere, and there is none.
"""

from __future__ import annotations

import math
import signal
import sys
import uuid
from pathlib import Path
from typing import Any, Callable

from gapstop.engine.best_copy import COORDINATOR_LOST, BestCopy
from gapstop.engine.deadline import run_end
from gapstop.engine.errors import InputError
from gapstop.engine.interrupts import Terminated, reason_of, signals_held, sigterm_raises
from gapstop.engine.rundir import holds_run, run_config
from gapstop.engine.solve_loop import OutFile, drive, plan_run
from gapstop.engine.protocol import Island, JobSpec, RunStatus


def _on_this_node() -> Any:
    """A scheduling strategy that keeps an actor on the driver's node (hard affinity: the
    coordinator needs no CPU, so it always fits there)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def _print_new(lines: list[str], shown: set[str]) -> None:
    """Print the coordinator actor's write failures not shown yet (its own stderr is not shown)."""
    for line in lines:
        if line not in shown:
            shown.add(line)
            print(line, file=sys.stderr, flush=True)


class RayBackend:
    """Workers as Ray actors (see :class:`engine.solve_loop.Backend`)."""

    def __init__(self, problem_name: str, problem_ref: Any, params: dict[str, Any], coord: Any, seed: int,
                 n_search: int, cpus_per_worker: float) -> None:
        from gapstop.actors import BoundWorkerActor, SearchWorkerActor

        self.search_cls, self.bound_cls = SearchWorkerActor, BoundWorkerActor
        self.problem_name, self.problem_ref, self.params, self.coord = problem_name, problem_ref, params, coord
        self.seed, self.n_search, self.cpus = seed, n_search, cpus_per_worker
        self.actors: dict[Any, Any] = {}  # handle -> actor
        self.bound_actors: dict[int, Any] = {}
        self.generation: dict[int, int] = {}

    def bound_actor(self, slot: int, fresh: bool = False) -> Any:
        """Bound slot ``slot``'s actor (a new one when ``fresh``)."""
        if fresh or slot not in self.bound_actors:
            g = self.generation.get(slot, 0)
            self.generation[slot] = g + 1
            name = f"bound-{slot}" + (f"r{g}" if g else "")
            self.bound_actors[slot] = self.bound_cls.options(num_cpus=self.cpus, name=name).remote(
                self.problem_name, self.problem_ref, self.params, self.seed, name, max(1, int(self.cpus)))
        return self.bound_actors[slot]

    def start_search(self, slot: int, name: str, island: Island, first_epoch_s: float) -> Any:
        a = self.search_cls.options(num_cpus=self.cpus, name=name).remote(
            self.problem_name, self.problem_ref, self.params, self.seed, island, name)
        ref = a.run.remote(self.coord, first_epoch_s)
        self.actors[ref] = a
        return ref

    def start_bound(self, slot: int, spec: JobSpec, budget_s: float, fresh: bool) -> Any:
        a = self.bound_actor(slot, fresh)
        ref = a.run.remote(self.coord, spec, budget_s)
        self.actors[ref] = a
        return ref

    def wait(self, handles: list[Any], timeout_s: float) -> list[tuple[Any, str | None]]:
        import ray

        done, _ = ray.wait(handles, num_returns=len(handles), timeout=timeout_s)
        out = []
        for ref in done:
            self.actors.pop(ref, None)
            try:
                ray.get(ref)
                out.append((ref, None))
            except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError,
                    ray.exceptions.WorkerCrashedError) as e:
                out.append((ref, str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__))
        return out

    def stop(self) -> None:
        import ray

        for a in [*self.actors.values(), *self.bound_actors.values()]:
            ray.kill(a, no_restart=True)


def run(problem_name: str, problem_path: str, params: dict[str, Any], *, time_limit_s: float,
        target_gap: float, seed: int, run_dir: str, resume: bool = False, address: str | None = None,
        workers: int | None = None, cpus_per_worker: float = 1.0, bounds: bool = True, islands: int | None = None,
        progress: Callable[[RunStatus], None] | None = None, max_restarts: int = 3,
        poll_s: float = 0.1, namespace: str | None = None, head_start_s: float | None = None,
        out_path: str | None = None, out_failures: Any = None, problem: Any = None) -> dict[str, Any]:
    """Run one certified search on Ray (local or cluster) and return the result document.

    ``head_start_s``: seconds the dedicated bound job (if the problem has one that asks
    for it) runs before the search islands go on; ``None``: :func:`engine.plan.default_head_start`
    on a single-node cluster (extended as the problem's ``extend_head_start`` decides), 0 on
    several nodes. ``out_path``: also write the result document there, rewritten at every
    improvement (``"stopped_because": "running"``) and at the end (a failed write reported
    through ``out_failures``, a :class:`engine.persist.WriteFailures`, if given). ``problem``:
    ``problem_path`` already loaded and checked (None: loaded here).

    Raises:
        InputError: ``run_dir`` already holds a run and ``resume`` is not set.
    """
    if not resume and holds_run(run_dir):
        raise InputError(f"--run-dir: {run_dir} already holds a run; continue it with --resume {run_dir} "
                         "or choose another directory")
    out = OutFile(out_path, failures=out_failures)
    doc = _run(problem_name, problem_path, params, time_limit_s=time_limit_s, target_gap=target_gap, seed=seed,
               run_dir=run_dir, resume=resume, address=address, workers=workers, cpus_per_worker=cpus_per_worker,
               bounds=bounds, islands=islands, progress=progress, max_restarts=max_restarts, poll_s=poll_s,
               namespace=namespace, head_start_s=head_start_s, out=out, problem=problem)
    out.final(doc)
    return doc


def _run(problem_name: str, problem_path: str, params: dict[str, Any], *, time_limit_s: float,
         target_gap: float, seed: int, run_dir: str, resume: bool, address: str | None,
         workers: int | None, cpus_per_worker: float, bounds: bool, islands: int | None,
         progress: Callable[[RunStatus], None] | None, max_restarts: int,
         poll_s: float, namespace: str | None, head_start_s: float | None, out: OutFile,
         problem: Any = None) -> dict[str, Any]:
    import time

    from gapstop.cluster.ray_import import import_ray

    ray = import_ray()  # before anything else imports it: the driver keeps its signals

    from gapstop.actors import CoordinatorActor
    from gapstop.actors.session_handle import SessionHandle
    from gapstop.cluster.connect import connect
    from gapstop.problems import registry

    adapter = registry.get(problem_name)
    if problem is None:  # else loaded and checked by the caller
        problem = adapter.load(problem_path)
        adapter.check_params(problem, params)
    namespace = namespace or f"gapstop-{uuid.uuid4().hex[:8]}"
    config = run_config(problem_name, problem_path, params, seed, target_gap, time_limit_s, address, cpus_per_worker)
    # From Ray's start to the main loop the run's state is being set up (Ray started, actors
    # created): a signal there must not escape as a bare KeyboardInterrupt and lose the result;
    # it is held back (seconds) and then ends the run as in the main loop
    with signals_held() as interrupted:
        try:
            resources = connect(address, None if workers is None else max(1, math.ceil(workers * cpus_per_worker)),
                                namespace=namespace)
        except SystemExit as e:  # ray.init's own SIGTERM handler (sys.exit) during its start: no run yet
            if e.code != signal.SIGTERM:
                raise
            raise Terminated() from None
    # ray.init replaced SIGTERM's handler with its own for good: hold it back again
    with signals_held() as held:
        held += interrupted
        interrupted = held
        rp = plan_run(adapter, problem, params, total=workers or max(1, int(resources.get("CPU", 1) // cpus_per_worker)),
                      bounds=bounds, islands=islands, time_limit_s=time_limit_s, head_start_s=head_start_s,
                      runner="ray", single_node=sum(1 for nd in ray.nodes() if nd.get("Alive")) <= 1)
        config.update(rp.config)
        problem_ref = ray.put(problem)  # shipped once; every actor reads it from the object store
        # on the driver's node, so that the run directory is written where the command runs
        # (with a ray:// client: on the head node, where the client's driver runs)
        coord = CoordinatorActor.options(num_cpus=0, max_concurrency=64, name="coordinator",
                                         scheduling_strategy=_on_this_node()).remote(
            problem_name, problem_ref, params, run_dir, config, target_gap, time_limit_s, resume)
        backend = RayBackend(problem_name, problem_ref, params, coord, seed, rp.n_search, cpus_per_worker)
        # Bound actors are created while the coordinator starts, so their process start-up and
        # imports overlap its; on a small machine start-up is CPU-bound, and the dedicated job
        # is the one that may end the run within seconds, so the islands come after it.
        for i in range(rp.n_bound):
            backend.bound_actor(i)
        try:
            ray.get(coord.poll.remote())  # surfaces constructor errors (e.g. a mismatched resume) here
        except Exception:
            for a in [*backend.bound_actors.values(), coord]:
                ray.kill(a, no_restart=True)
            raise
        session = SessionHandle(coord)
        out.doc = session.running_doc
        elapsed = session.poll().elapsed
        t_end = min(time.monotonic() + time_limit_s - elapsed, run_end())  # a process deadline counts Ray's start-up
    shown: set[str] = set()
    kept = BestCopy(adapter, problem, params, target_gap, time_limit_s)  # what a lost coordinator leaves

    def tick(st: RunStatus) -> None:
        _print_new(list(st.write_failures), shown)
        kept.update(session, st)
        out.update(st)
        if progress is not None:
            progress(st)

    try:
        if interrupted:
            reason = reason_of(interrupted[0])
        else:
            with sigterm_raises():  # ray.init's own handler would end the driver at once (sys.exit)
                reason = drive(session, backend, rp.plan, rp.n_search, rp.n_bound, t_end=t_end, head_s=rp.head_s,
                               extend=rp.extend, poll_s=poll_s, on_tick=tick, max_restarts=max_restarts)
        with signals_held():  # the result is being written: a second signal must not lose it
            doc = ray.get(coord.finalize.remote(reason))
            _print_new(list(ray.get(coord.poll.remote()).write_failures), shown)
            doc["workers"]["coordinator_node"] = ray.get(coord.node.remote())
    except ray.exceptions.RayActorError as e:  # only the session's calls reach the coordinator actor
        with signals_held():
            doc = _coordinator_lost(kept, run_dir, e, out)
    with signals_held():
        backend.stop()
        ray.kill(coord, no_restart=True)
    return doc


def _coordinator_lost(kept: BestCopy, run_dir: str, error: Exception, out: OutFile) -> dict[str, Any]:
    """End a run whose coordinator actor died: the result document from the driver's copy,
    written to the run directory's ``result.json``, and one error line."""
    why = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    doc = kept.document(COORDINATOR_LOST, run_dir)
    doc["error"] = f"the coordinator actor was lost: {why}"
    out.failures.write_json(Path(run_dir) / "result.json", doc)
    print(f"error: {doc['error']}; {Path(run_dir) / 'result.json'} holds the best solution found before, "
          "re-scored", file=sys.stderr, flush=True)
    return doc
