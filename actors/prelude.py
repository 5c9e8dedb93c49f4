"""The first seconds of a local run, before Ray starts: the head-start job next to the driver.

Starting Ray and its actors on a small machine takes about 5 s, longer than the exact
MIP needs to prove many real-model partitions optimal. So a local run (no
``--address``, Ray not yet started in this process) whose problem has a dedicated
bound job asking for a head start begins without Ray: the coordinator logic (the
plain :class:`~actors.coordinator.CoordinatorActor` class, writing the run directory)
and one epoch of the first search island (its seeded solutions, in a thread) in this
process, and that job in a child process forked before anything else starts.

Everything this process does during the head start takes CPU from the job, which has
the cores to itself when CP-SAT runs alone. So the driver imports neither OR-Tools
(``cp_model`` imports pandas: 0.35 s of CPU) nor pandas (through pyarrow; the event
log is built from buffers), and its island epoch is short.

If that settles the run (target gap, optimality, time limit) within the head start,
the run ends there and Ray is never started. Otherwise Ray starts, the coordinator
actor takes the session over (same run directory, clock and event log), and the job
keeps running in its process, its reports now forwarded to the actor: no work is lost
or repeated. The job then stands for bound slot 0. The time limit counts from the
prelude's start, so Ray's start-up is part of it. The islands start when Ray is up,
about as late as they did when the head start began after Ray's start-up.

The job's process first runs at the driver's niceness: during the head start it has
the cores to itself, as plain CP-SAT would. Once Ray is up it drops to the niceness Ray
gives its workers (:meth:`Prelude.demote`), so it shares the CPUs with the islands as a
bound actor would (at the driver's niceness it took ~95 % of them: an island actor
needed 15 s to start instead of 0.7 s).

Why a process and not a thread: Ray starts its daemons with ``preexec_fn``, which is
not safe while other threads of the forking process run (solver threads hold locks
the child may need): a thread here made ``ray.init`` hang now and then.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import queue
import signal
import threading
import time
import traceback
from typing import Any, Callable

from gapstop.engine.records import Bound
from gapstop.problems import registry

log = logging.getLogger(__name__)

#: seconds of the first island's single epoch: enough for its seeded solutions (the first
#: generation is always evaluated whole). It shares the cores with the job: 0.1 s instead
#: of 0.5 s proved resnet50/mobilenet_v2 optimal 0.1-0.4 s sooner (BENCHMARKS.md); running
#: on in a niced thread for the rest of the head start cost the job 0.3 s at k = 8.
EPOCH_S = 0.1
#: longest wait for the island epoch's thread when the prelude stops (it normally takes
#: well under a second; this only bounds a stuck one)
EPOCH_JOIN_S = 10.0
#: Ray starts its worker processes at this niceness (its ``worker_niceness``); the job
#: takes the same once Ray is up
WORKER_NICENESS = 15


class _ChildContext:
    """The job's ``ctx`` in the child process: reports go up the pipe.

    A sender thread does the writing, so a solver callback never blocks on a full
    pipe while the driver is busy (e.g. starting Ray). The job sees the run's incumbent
    as the driver last sent it down the same pipe (:meth:`Prelude.send_incumbent`; none
    at first: the job starts first), and stops on the driver's signal, at the deadline,
    or when the driver is gone.
    """

    def __init__(self, conn: Any, stop: Any, deadline: float, parent: int) -> None:
        self.conn, self.stop, self.deadline, self.parent = conn, stop, deadline, parent
        self.out: queue.SimpleQueue[tuple[Any, ...] | None] = queue.SimpleQueue()
        self.sender = threading.Thread(target=self._send, daemon=True)
        self.sender.start()
        self._incumbent: tuple[float | None, Any] = (None, None)

    def _send(self) -> None:
        while (msg := self.out.get()) is not None:
            try:
                self.conn.send(msg)
            except (OSError, ValueError):  # the driver is gone
                return

    def close(self, error: str | None) -> None:
        self.out.put(("done", error))
        self.out.put(None)
        self.sender.join(timeout=10.0)

    def should_stop(self) -> bool:
        return self.stop.is_set() or time.monotonic() >= self.deadline or os.getppid() != self.parent

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def bound(self, b: Bound) -> None:
        self.out.put(("bound", b))

    def solution(self, solution: Any, source: str) -> None:
        self.out.put(("solution", solution, source))

    def incumbent(self) -> tuple[float | None, Any]:
        # only this (the job's) thread reads the pipe; the sender thread only writes it
        try:
            while self.conn.poll():
                msg = self.conn.recv()
                if msg[0] == "incumbent":
                    self._incumbent = (msg[1], msg[2])
        except (EOFError, OSError):  # the driver is gone: the job stops on its own
            pass
        return self._incumbent


def available() -> bool:
    """Whether this platform can run a prelude (it forks the job's process)."""
    return "fork" in multiprocessing.get_all_start_methods()


def _die_with_parent() -> None:
    """Linux: have the kernel kill this process when the driver dies (even while stopped)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # elsewhere the job still stops at its deadline or when it sees the driver gone


def _child_main(problem_name: str, problem: Any, params: dict[str, Any], spec: dict[str, Any], seed: int,
                num_threads: int, conn: Any, stop: Any, deadline: float, parent: int) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the driver's; it stops us
    _die_with_parent()
    ctx = _ChildContext(conn, stop, deadline, parent)
    error = None
    try:
        registry.get(problem_name).run_bound_job(problem, params, spec, ctx, seed, parallel=True,
                                                 num_workers=num_threads)
    except Exception:  # reported to the driver; the run goes on without this job
        error = traceback.format_exc(limit=5)
    ctx.close(error)


class Prelude:
    """The driver's part of a local run: see the module docstring.

    Create it before anything starts threads in this process (it forks).

    Args:
        problem_name, problem, params: the run's problem.
        spec: the dedicated bound job (run with ``num_threads`` solver threads).
        run_dir, config, target_gap, time_limit_s: as for the coordinator.
        seed: the run's seed (the job's and the first island's).
        islands: how many search islands the run will have (the first one's seeds are
            the ones the island actor ``search-0`` will use).
    """

    def __init__(self, problem_name: str, problem: Any, params: dict[str, Any], spec: dict[str, Any],
                 run_dir: str, config: dict[str, Any], target_gap: float, time_limit_s: float, seed: int,
                 islands: int, num_threads: int) -> None:
        self.adapter = registry.get(problem_name)
        self.problem, self.params, self.seed, self.islands = problem, params, seed, islands
        self.name = f"driver:{spec['kind']}"
        self.t_start = time.monotonic()
        self.t_end = self.t_start + time_limit_s
        mp = multiprocessing.get_context("fork")
        self.conn, child_conn = mp.Pipe()
        self.stop_event = mp.Event()
        self.proc = mp.Process(target=_child_main, name="gapstop-head-start", daemon=True,
                               args=(problem_name, problem, params, spec, seed, num_threads, child_conn,
                                     self.stop_event, self.t_end, os.getpid()))
        self.proc.start()
        child_conn.close()
        # imported after the fork: it loads pyarrow, which the job does not need
        from gapstop.actors.coordinator import CoordinatorActor

        self.local = CoordinatorActor(problem_name, problem, params, run_dir, config, target_gap, time_limit_s)
        self.local.hello(self.name, "driver")
        self.actor: Any = None  # the Ray coordinator, once it has taken over
        self.done = False
        self.error: str | None = None
        self.evals = 0
        self.job_bounds: dict[str, Bound] = {}  # the job's last report of each method
        self.extended_to: float | None = None
        self._sent: float | None = None  # cost of the last incumbent sent to the job
        self._epoch = threading.Thread(target=self._run_epoch, name="gapstop-island-epoch", daemon=True)
        self._epoch_out: tuple[int, Any, BaseException | None] = (0, None, None)
        self._epoch_done = False

    @property
    def sent(self) -> float | None:
        """Cost of the last incumbent sent to the job (:meth:`send_incumbent`), or None."""
        return self._sent

    @property
    def started_at(self) -> float:
        """``time.time()`` at the start of the session (for the taking-over coordinator)."""
        return self.local.started_at

    def pump(self) -> None:
        """Forward what the job reported since the last call to the current coordinator."""
        while not self.done:
            try:
                if not self.conn.poll():
                    return
                msg = self.conn.recv()
            except (EOFError, OSError):
                self.done = True
                if self.error is None and self.proc.exitcode not in (0, None):
                    self.error = f"exited with code {self.proc.exitcode}"
                return
            if msg[0] == "bound":
                self.job_bounds[msg[1].method] = msg[1]
                if self.actor is None:
                    self.local.report_bound(msg[1], self.name)
                else:
                    self.actor.report_bound.remote(msg[1], self.name)
            elif msg[0] == "solution":
                if self.actor is None:
                    self.local.report_solution(msg[1], msg[2])
                else:
                    self.actor.report_solution.remote(msg[1], msg[2])
            elif msg[0] == "done":
                self.done, self.error = True, msg[1]

    def send_incumbent(self, cost: float | None, solution: Any) -> None:
        """Send the run's incumbent to the job (it reads it when it asks for one), if it
        improved since the last one sent."""
        if cost is None or solution is None or self.done or (self._sent is not None and cost >= self._sent):
            return
        try:
            self.conn.send(("incumbent", cost, solution))
            self._sent = cost
        except (OSError, ValueError):  # the job is gone; pump() records why
            pass

    def _wait(self, timeout_s: float) -> None:
        """Sleep up to ``timeout_s``, waking as soon as the job reports (a proof ends the run
        at once, not at the next poll)."""
        try:
            if not self.done:
                self.conn.poll(timeout_s)
                return
        except (EOFError, OSError):
            pass  # the job is gone; pump() records why
        time.sleep(timeout_s)

    def job_running(self) -> bool:
        self.pump()
        return not self.done and self.proc.is_alive()

    def run(self, head_s: float, progress: Callable[[dict[str, Any]], None] | None = None,
            poll_s: float = 0.1, extend_to: float | None = None) -> str | None:
        """Run one island epoch and wait until the run stops, the job ends, or ``head_s``
        seconds from the start have passed. Returns the stop reason, or None to go on.

        ``extend_to``: when ``head_s`` is reached, ask the problem's adapter
        (``extend_head_start``) whether the job should go on alone, and if so wait until
        ``extend_to`` seconds from the start instead (:attr:`extended_to` records it). While
        the adapter is undecided (it may wait for a bound the job computes from then on),
        the job keeps the machine (Ray does not start), but not beyond ``extend_to``.

        The epoch runs in a thread: its first numba calls load the compiled kernels
        (0.2-0.5 s of CPU), and a proof arriving meanwhile must end the run at once, not
        after them. Its solution is reported from this thread once it is over."""
        self._epoch.start()
        decide = getattr(self.adapter, "extend_head_start", None) if extend_to is not None else None
        until = self.t_start + head_s
        try:
            while True:
                running = self.job_running()
                self._collect_epoch()
                st = self.local.poll()
                if progress is not None:
                    progress(st)
                if st["stop"] is not None:
                    return str(st["stop"])
                now = time.monotonic()
                if now >= self.t_end:
                    # the coordinator's clock started a little after ours: at a head start as
                    # long as the run it would not yet say so, and Ray would start for nothing
                    return "time-limit"
                if now >= until and running and decide is not None and extend_to is not None:
                    verdict = decide(self.job_bounds, self._other_lb(), now - until)
                    if verdict is None and now < self.t_start + extend_to:
                        self._wait(poll_s)
                        continue
                    decide = None
                    if verdict and extend_to > head_s:
                        until = self.t_start + extend_to
                        self.extended_to = extend_to
                        log.info("head start extended to %.1f s", extend_to)
                        continue
                if now >= until or not running:
                    self._collect_epoch(wait=True)  # Ray must not start next to a running thread
                    return None
                self._wait(min(poll_s, max(0.0, until - now)))
        except KeyboardInterrupt:
            return "interrupted"

    def _other_lb(self) -> float | None:
        """The best bound held by the coordinator from methods other than the job's spectral one."""
        vals = [b.value for m, b in self.local.coord.bounds.items() if m != "spectral"]
        return max(vals) if vals else None

    def _run_epoch(self) -> None:
        """The island epoch (thread body): its result is reported by the main thread."""
        found: list[Any] = []
        try:
            search = self.adapter.make_search(self.problem, {**self.params, "_islands": self.islands}, self.seed, 0)
            evals = search.step(EPOCH_S, lambda value, sol: found.append(sol))
            self._epoch_out = (evals, found[-1] if found else None, None)
        except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
            self._epoch_out = (0, None, e)

    def _collect_epoch(self, wait: bool = False) -> None:
        """Report the epoch's solution and evaluations once it is over (``wait``: join it first)."""
        if self._epoch_done or self._epoch.ident is None:
            return
        if wait:
            self._epoch.join()
        if self._epoch.is_alive():
            return
        self._epoch_done = True
        evals, sol, err = self._epoch_out
        if err is not None:
            raise err
        self.evals = evals
        if sol is not None:
            self.local.report_solution(self.adapter.to_solution(sol), "search-0")
        self.local.report_evals("search-0", evals)

    def finish(self, reason: str) -> dict[str, Any]:
        """End the run here: write and return the result document (then call :meth:`stop`)."""
        self.pump()
        if self.local.coord.incumbent is None and self._epoch.ident is not None:
            self._epoch.join(EPOCH_JOIN_S)  # its seeded solutions beat ending with nothing feasible
        try:
            self._collect_epoch()  # nothing while it still runs
        except Exception:  # noqa: BLE001 - the run's result matters more than the epoch's failure
            log.warning("the island epoch failed:\n%s", traceback.format_exc())
        return self.local.finalize(reason)

    def hand_over(self, coord: Any) -> None:
        """Let the coordinator actor ``coord`` (created with ``taken_over_from=``
        :attr:`started_at`, so it restored the local checkpoint) take the session over."""
        self.actor = coord
        coord.hello.remote(self.name, "driver")
        coord.report_evals.remote("search-0-driver", self.evals)

    def demote(self) -> None:
        """Lower the job's priority to Ray's worker niceness (all its threads: on Linux
        niceness is per thread, and the solver's threads already exist)."""
        pid = self.proc.pid
        if pid is None:
            return
        try:
            tids = [int(t) for t in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            tids = [pid]
        for tid in tids:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, max(WORKER_NICENESS, os.getpriority(os.PRIO_PROCESS, tid)))
            except OSError:  # the thread ended, or the platform cannot: priorities stay as they are
                pass

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the job and reap its process (terminated if it does not stop in time)."""
        self.stop_event.set()
        self.proc.join(timeout_s)
        if self.proc.is_alive():
            self.proc.terminate()
            self.proc.join(1.0)
        if self.error is None and self.proc.exitcode not in (0, None, -signal.SIGTERM):
            self.error = f"exited with code {self.proc.exitcode}"
        # not left running behind the caller, who may start Ray next (see the module's last
        # paragraph); it ends on its own within its kernels' loading and one short epoch
        if self._epoch.ident is not None:
            self._epoch.join(EPOCH_JOIN_S)
