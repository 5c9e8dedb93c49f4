"""The Ray driver loop: start the coordinator and workers, watch, restart, stop, report.

Worker plan for ``workers`` slots of ``cpus_per_worker`` CPUs each: half the slots
(at least one) run bound jobs, the rest search islands. The first bound slot runs
the exact MIP for the whole run (its incumbents are upper bounds too); further
bound slots run the cheaper relaxations, guess-the-bottleneck members in time
slices, re-running the member with the smallest current bound with a doubled
slice once all have reported. Which job is dedicated, and each job's share of the
time, come from the problem's adapter. A worker that dies is replaced (up to
``max_restarts`` times per slot); the coordinator never loses what was reported.

Head start: on a single node the dedicated job (a MIP that may prove optimality in
seconds) gets the cores to itself for its first seconds: the coordinator holds the
search islands after their first epoch (which reports the seeded solutions, often
enough to meet the target gap against a simple bound) until ``head_start_s`` after
the job's worker started it. Without it the islands halve the MIP's CPU exactly when
a quick proof would end the run. On a local run that starts Ray itself, the head
start happens before Ray starts (:mod:`actors.prelude`): a run it settles never
starts Ray; otherwise the job goes on in its own process and stands for bound slot 0.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import sys
import threading
import time
import uuid
from typing import Any, Callable, Iterator

from gapstop.actors.prelude import Prelude
from gapstop.actors.prelude import available as prelude_available
from gapstop.engine.deadline import run_end
from gapstop.engine.errors import InputError
from gapstop.engine.persist import WriteFailures, file_digest


log = logging.getLogger("gapstop")


#: how long a finished run waits for the head-start job to stop before terminating it: the
#: result is written, and CP-SAT can take 0.2 s to notice a stop it gets mid-search
FINISHED_STOP_WAIT_S = 0.05


def _finish_prelude(prelude: Prelude, reason: str) -> dict[str, Any]:
    doc = prelude.finish(reason)
    _stop_prelude(prelude, FINISHED_STOP_WAIT_S)
    return doc


def _stop_prelude(prelude: Prelude, timeout_s: float = 5.0) -> None:
    prelude.stop(timeout_s)
    if prelude.error is not None:
        log.warning("the head-start bound job failed:\n%s", prelude.error)


@contextlib.contextmanager
def _deferred_interrupt() -> Iterator[list[bool]]:
    """Hold Ctrl-C (SIGINT) back while the block runs; yields a flag list, ``[True]`` if one came.

    Between Ray's start and the coordinator actor's main loop the run's state is half
    handed over (the driver's coordinator to the actor); an interrupt there used to
    escape as a bare KeyboardInterrupt and lose the result. The block takes seconds at
    most; the interrupt is then handled as in the main loop. Only the main thread can
    take signals, so elsewhere nothing changes.
    """
    got = [False]
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def note(signum: int, frame: Any) -> None:
        got[0] = True

    previous = signal.signal(signal.SIGINT, note)
    try:
        yield got
    finally:
        signal.signal(signal.SIGINT, previous)


def _on_this_node() -> Any:
    """A scheduling strategy that keeps an actor on the driver's node (hard affinity: the
    coordinator needs no CPU, so it always fits there)."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    return NodeAffinitySchedulingStrategy(node_id=ray.get_runtime_context().get_node_id(), soft=False)


def _slot_plan(total: int, with_bounds: bool) -> tuple[int, int]:
    if not with_bounds:
        return max(1, total), 0
    n_bound = max(1, total // 2)
    return max(1, total - n_bound), n_bound


#: longest wait for the dedicated job's worker to start before the head start counts anyway
HELLO_WAIT_S = 5.0


def default_head_start(time_limit_s: float) -> float:
    """Seconds the dedicated bound job runs alone: 20 % of the run, within [2 s, 20 s].

    10 % within [2 s, 10 s] (6 s at a 60 s limit) was too short for exact-MIP proofs that
    take plain CP-SAT 7-14 s (resnet50 and mobilenet_v2 at k = 16): they then came
    after Ray's start-up, at about twice that time. On the REGAL graphs, where the MIP
    proves nothing, the gaps at 60 s stayed within run-to-run noise (BENCHMARKS.md)."""
    return min(20.0, max(2.0, 0.2 * time_limit_s))


def extended_head_start(time_limit_s: float) -> float:
    """The head start's length when the problem's adapter extends it (``extend_head_start``:
    the pipeline's exact MIP where communication does not matter): the whole run.

    With the 20 % head start, proofs that plain CP-SAT finds in 10-30 s (bert_base, gpt2 and
    vit_base16 at k = 16) took 1.3-1.8x as long, the MIP then sharing the two cores with Ray's
    start-up and an island; with half the run (at most 120 s), gpt2 at k = 16 and 60 s still
    did (its proof comes at about 30 s). Where the extension applies, the islands found no
    final partition after their first epoch (which still runs, in the driver) in any measured
    run, lstm_lm_unrolled included, which the MIP does not prove in 60 s: BENCHMARKS.md. Ray
    still starts if the job ends without settling the run."""
    return time_limit_s


def _ray_started() -> bool:
    ray = sys.modules.get("ray")  # not imported yet (or only partly, if interrupted): certainly not started
    return ray is not None and hasattr(ray, "is_initialized") and ray.is_initialized()


#: ``ray_used`` is set once a run in this process has connected to Ray: Ray's native threads outlive
#: ``ray.shutdown()``, and a job forked next to them (the prelude's) can die before its
#: first line (SIGSEGV seen in 2 of 9 such forks in one test process, none from a new one)
_PROCESS = {"ray_used": False}


class _OutFile:
    """``--out``: the running result document, rewritten (atomically) whenever the best
    cost changes, then the final one. The driver writes it, so it lands on the caller's
    machine wherever the coordinator runs; a failed write is one line and the run goes on."""

    def __init__(self, path: str | None) -> None:
        self.path = path
        self.failures = WriteFailures()
        self.last: Any = None
        self.doc: Callable[[], dict[str, Any]] | None = None  # the current coordinator's running_doc

    def update(self, st: dict[str, Any]) -> None:
        if self.path is None or self.doc is None or st["ub"] is None or st["ub"] == self.last:
            return
        self.last = st["ub"]
        self.failures.write_json(self.path, self.doc())

    def final(self, doc: dict[str, Any]) -> None:
        if self.path is not None:
            self.failures.write_json(self.path, doc)


def _print_new(lines: list[str], shown: set[str]) -> None:
    """Print the coordinator actor's write failures not shown yet (its own stderr is not shown)."""
    for line in lines:
        if line not in shown:
            shown.add(line)
            print(line, file=sys.stderr, flush=True)


def holds_run(run_dir: str | os.PathLike[str]) -> bool:
    """Whether ``run_dir`` already holds a run (its config or checkpoint)."""
    return any(os.path.exists(os.path.join(run_dir, f)) for f in ("config.json", "checkpoint.json"))


def run(problem_name: str, problem_path: str, params: dict[str, Any], *, time_limit_s: float,
        target_gap: float, seed: int, run_dir: str, resume: bool = False, address: str | None = None,
        workers: int | None = None, cpus_per_worker: float = 1.0, bounds: bool = True,
        progress: Callable[[dict[str, Any]], None] | None = None, max_restarts: int = 3,
        poll_s: float = 0.1, namespace: str | None = None, head_start_s: float | None = None,
        out_path: str | None = None) -> dict[str, Any]:
    """Run one certified search on Ray (local or cluster) and return the result document.

    ``head_start_s``: seconds the dedicated bound job (if the problem has one that asks
    for it) runs before the search islands start; ``None``: :func:`default_head_start`
    on a single-node cluster, 0 on several nodes (the islands then mostly run elsewhere).
    ``out_path``: also write the result document there, rewritten at every improvement
    (``"stopped_because": "running"``) and at the end.

    Raises:
        InputError: ``run_dir`` already holds a run and ``resume`` is not set.
    """
    if not resume and holds_run(run_dir):
        raise InputError(f"--run-dir: {run_dir} already holds a run; continue it with --resume {run_dir} "
                         "or choose another directory")
    out = _OutFile(out_path)
    doc = _run(problem_name, problem_path, params, time_limit_s=time_limit_s, target_gap=target_gap, seed=seed,
               run_dir=run_dir, resume=resume, address=address, workers=workers, cpus_per_worker=cpus_per_worker,
               bounds=bounds, progress=progress, max_restarts=max_restarts, poll_s=poll_s, namespace=namespace,
               head_start_s=head_start_s, out=out)
    out.final(doc)
    return doc


def _run(problem_name: str, problem_path: str, params: dict[str, Any], *, time_limit_s: float,
         target_gap: float, seed: int, run_dir: str, resume: bool, address: str | None,
         workers: int | None, cpus_per_worker: float, bounds: bool,
         progress: Callable[[dict[str, Any]], None] | None, max_restarts: int,
         poll_s: float, namespace: str | None, head_start_s: float | None, out: _OutFile) -> dict[str, Any]:
    from gapstop.problems import registry

    def show(st: dict[str, Any]) -> None:
        out.update(st)
        if progress is not None:
            progress(st)

    adapter = registry.get(problem_name)
    problem = adapter.load(problem_path)
    adapter.check_params(problem, params)
    namespace = namespace or f"gapstop-{uuid.uuid4().hex[:8]}"
    # a "dedicated" job owns bound slot 0 for the whole run; the others queue for the
    # remaining slots and get their "share" of the time left (members: a time slice)
    specs = adapter.bound_job_specs(problem, params) if bounds else []
    exact = [s for s in specs if s.get("dedicated")]
    wants_head = any(s.get("head_start") for s in exact)
    config = {"problem": problem_name, "problem_path": str(problem_path), "problem_digest": file_digest(problem_path),
              "params": params, "seed": seed, "target_gap": target_gap, "time_limit_s": time_limit_s,
              "address": address, "cpus_per_worker": cpus_per_worker}

    prelude = None
    if (address is None and not resume and not _ray_started() and not _PROCESS["ray_used"] and wants_head
            and prelude_available()):
        head = default_head_start(time_limit_s) if head_start_s is None else head_start_s
        if head > 0:  # the head start runs in this process, before Ray starts (actors/prelude.py)
            total = workers or max(1, int((os.cpu_count() or 1) // cpus_per_worker))
            n_search, n_bound = _slot_plan(total, bounds)
            config.update(workers=total, search_workers=n_search, bound_workers=n_bound, head_start_s=head,
                          head_start_in_driver=True)
            spec = {**exact.pop(), "head_start_s": head}
            prelude = Prelude(problem_name, problem, params, spec, run_dir, config, target_gap, time_limit_s, seed,
                              n_search, max(1, int(cpus_per_worker)))
            out.doc = prelude.local.running_doc
            extend_to = extended_head_start(time_limit_s) if head_start_s is None else None
            reason = prelude.run(head, show, poll_s, extend_to=extend_to)
            if prelude.extended_to is not None:
                config["head_start_extended_to_s"] = prelude.extended_to
            if reason is not None:
                return _finish_prelude(prelude, reason)
    try:
        # Ray is imported only now, so that the head-start job above was forked without
        # waiting for it; the import takes a second, and Ctrl-C then must not lose the result
        import ray

        from gapstop.actors import BoundWorkerActor, CoordinatorActor, SearchWorkerActor
        from gapstop.cluster.connect import connect

        _PROCESS["ray_used"] = True  # from the attempt on: a failed start may leave threads as well
        resources = connect(address, None if workers is None else max(1, math.ceil(workers * cpus_per_worker)),
                            namespace=namespace)
    except KeyboardInterrupt:
        if prelude is None:
            raise
        if _ray_started():
            sys.modules["ray"].shutdown()  # whatever of Ray had started
        return _finish_prelude(prelude, "interrupted")  # the driver still holds the whole state
    except BaseException:
        if prelude is not None:
            _stop_prelude(prelude)
        raise
    running: dict[Any, tuple[str, int, Any, Any]] = {}  # ref -> (kind, slot, actor, spec)
    restarts: dict[tuple[str, int], int] = {}
    generation: dict[tuple[str, int], int] = {}

    def start_search(slot: int) -> None:
        g = generation.get(("search", slot), 0)
        generation[("search", slot)] = g + 1
        name = f"search-{slot}" + (f"r{g}" if g else "")
        a = SearchWorkerActor.options(num_cpus=cpus_per_worker, name=name).remote(
            problem_name, problem_ref, {**params, "_islands": n_search},
            seed, slot + 1000 * g, name)
        running[a.run.remote(coord)] = ("search", slot, a, None)

    others = [s for s in specs if not s.get("dedicated")]
    members = [s for s in others if "j" in s]
    slice_s = max(5.0, time_limit_s / max(2, 2 * len(members))) if members else 0.0

    def budget_of(s: dict[str, Any]) -> float:
        return slice_s if "j" in s else float(s.get("share", 1.0)) * max(0.0, t_end - time.monotonic())

    queue: list[dict[str, Any]] = list(others)
    bound_actors: dict[int, Any] = {}

    def bound_actor(slot: int, fresh: bool = False) -> Any:
        if fresh or slot not in bound_actors:
            g = generation.get(("bound", slot), 0)
            generation[("bound", slot)] = g + 1
            name = f"bound-{slot}" + (f"r{g}" if g else "")
            bound_actors[slot] = BoundWorkerActor.options(num_cpus=cpus_per_worker, name=name).remote(
                problem_name, problem_ref, params, seed, name, max(1, int(cpus_per_worker)))
        return bound_actors[slot]

    def start_bound(slot: int, fresh: bool = False) -> None:
        left = t_end - time.monotonic()
        if left <= 0.5:
            return
        if slot == 0 and exact:
            spec, budget = exact.pop(), left  # once; a restarted slot 0 puts it back
        elif queue:
            spec = queue.pop(0)
            budget = budget_of(spec)
        else:
            spec, budget = _rerun_weakest(coord, members, slice_s)
            if spec is None:
                return
        a = bound_actor(slot, fresh)
        running[a.run.remote(coord, spec, min(budget, left))] = ("bound", slot, a, spec)

    def _rerun_weakest(coord: Any, members: list[dict[str, Any]], base: float) -> tuple[Any, float]:
        if not members:
            return None, 0.0
        cur = ray.get(coord.member_bounds.remote("guess-the-bottleneck"))
        st = ray.get(coord.poll.remote())
        open_ = [s for s in members if cur.get(s["j"], -math.inf) < (st["ub"] or math.inf)]
        if not open_:
            return None, 0.0
        weakest = min(open_, key=lambda s: cur.get(s["j"], -math.inf))
        rounds = weakest.setdefault("_rounds", 1)
        weakest["_rounds"] = rounds + 1
        return weakest, base * (2 ** rounds)

    # Ctrl-C from here to the main loop is held back (see _deferred_interrupt)
    with _deferred_interrupt() as interrupted:
        if prelude is not None:
            # the job kept going while Ray started; if that settled the run, no actor is needed
            prelude.pump()
            settled = prelude.local.poll()["stop"]
            if settled is not None:
                return _finish_prelude(prelude, str(settled))
            head = 0.0  # the head start was the prelude
            prelude.demote()  # from now on it shares the CPUs with the actors
        else:
            total = workers or max(1, int(resources.get("CPU", 1) // cpus_per_worker))
            n_search, n_bound = _slot_plan(total, bounds)
            if head_start_s is None:
                single_node = sum(1 for nd in ray.nodes() if nd.get("Alive")) <= 1
                head_start_s = default_head_start(time_limit_s) if single_node else 0.0
            head = head_start_s if wants_head else 0.0
            for s in exact:
                s["head_start_s"] = head
            config.update(workers=total, search_workers=n_search, bound_workers=n_bound, head_start_s=head)
        problem_ref = ray.put(problem)  # shipped once; every actor reads it from the object store
        # on the driver's node, so that the run directory is written where the command runs
        # (with a ray:// client: on the head node, where the client's driver runs)
        coord = CoordinatorActor.options(num_cpus=0, max_concurrency=64, name="coordinator",
                                         scheduling_strategy=_on_this_node()).remote(
            problem_name, problem_ref, params, run_dir, config, target_gap, time_limit_s, resume,
            None if prelude is None else prelude.started_at)
        # with a prelude, its job (in the driver) stands for bound slot 0
        bound_slots = range(1 if prelude is not None else 0, n_bound)
        # Bound actors are created while the coordinator starts, so their process start-up and
        # imports overlap its; on a small machine start-up is CPU-bound, and the dedicated job
        # is the one that may end the run within seconds, so the islands come after it.
        for i in bound_slots:
            bound_actor(i)
        try:
            ray.get(coord.poll.remote())  # surfaces constructor errors (e.g. a mismatched resume) here
        except Exception:
            for a in [*bound_actors.values(), coord]:
                ray.kill(a, no_restart=True)
            if prelude is not None:
                _stop_prelude(prelude)
            raise
        out.doc = lambda: ray.get(coord.running_doc.remote())
        if prelude is not None:
            prelude.hand_over(coord)
            t_end = prelude.t_end
        else:
            t_end = time.monotonic() + time_limit_s
        t_end = min(t_end, run_end())  # a process deadline (launch.py) counts Ray's start-up too
        if head > 0:
            ray.get(coord.set_hold.remote(True))
        for i in bound_slots:
            start_bound(i)
        # The head start runs from the moment the dedicated job's worker starts it (its hello),
        # or at the latest HELLO_WAIT_S from now. Islands start at once: their first epoch
        # reports the seeded solutions, then they wait until the hold is lifted.
        started = head <= 0
        holding = not started
        t_release = time.monotonic() + head + (0.0 if started else HELLO_WAIT_S)
        for i in range(n_search):
            start_search(i)

    reason = "interrupted" if interrupted[0] else None
    # the head start's failures were printed in this process already
    shown: set[str] = set(prelude.local.rundir.write_failures.lines) if prelude is not None else set()
    try:
        while reason is None:
            if prelude is not None:
                prelude.pump()  # the head-start job's reports, on to the coordinator actor
            dedicated_running = any(sp is not None and sp.get("dedicated") for _, _, _, sp in running.values())
            if holding and (time.monotonic() >= t_release or not dedicated_running):
                ray.get(coord.set_hold.remote(False))
                holding = False
            done, _ = ray.wait(list(running), num_returns=len(running), timeout=poll_s) if running else ([], [])
            for ref in done:
                kind, slot, actor, spec = running.pop(ref)
                try:
                    ray.get(ref)
                    failed = False
                except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError, ray.exceptions.WorkerCrashedError):
                    failed = True
                key = (kind, slot)
                if failed:
                    restarts[key] = restarts.get(key, 0) + 1
                    if restarts[key] > max_restarts:
                        continue  # drop the slot; the run goes on with the others
                    if kind == "search":
                        start_search(slot)
                    else:
                        if spec is not None and spec.get("dedicated"):
                            exact.append({**spec, "head_start_s": 0.0})
                        elif spec is not None:
                            queue.insert(0, spec)
                        start_bound(slot, fresh=True)
                elif kind == "bound":
                    start_bound(slot)
            st = ray.get(coord.poll.remote())
            if prelude is not None and st["ub"] is not None and (prelude.sent is None or st["ub"] < prelude.sent):
                prelude.send_incumbent(*ray.get(coord.incumbent.remote()))  # e.g. for the job's LNS
            _print_new(st["write_failures"], shown)
            if not started and any(w.startswith("bound-0") for w in st["nodes"]):
                started = True
                t_release = min(t_release, time.monotonic() + head)
            show(st)
            reason = st["stop"]
            if reason is None and time.monotonic() >= t_end:
                reason = "time-limit"
            if reason is None and not running:
                reason = "exhausted"
    except KeyboardInterrupt:
        reason = "interrupted"
    with _deferred_interrupt():  # the result is being written: a second Ctrl-C must not lose it
        doc = ray.get(coord.finalize.remote(reason))
        _print_new(ray.get(coord.poll.remote())["write_failures"], shown)
        doc["workers"]["coordinator_node"] = ray.get(coord.node.remote())
    if prelude is not None:
        _stop_prelude(prelude)
    for _, _, actor, _ in list(running.values()):
        ray.kill(actor, no_restart=True)
    for a in bound_actors.values():
        ray.kill(a, no_restart=True)
    ray.kill(coord, no_restart=True)
    return doc
