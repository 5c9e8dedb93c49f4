"""The one solve loop: start the islands and bound jobs, watch, restart, hold, stop.

Both runners call :func:`drive`: in-process the workers are threads
(:mod:`engine.local_runner`), on Ray they are actors (:mod:`actors.runner`); a
*backend* starts them and says when they end. The plan (which job runs where and for
how long) is :mod:`engine.plan`'s; every decision about solutions and bounds is the
session's (:class:`engine.session.Session`).

Head start: the dedicated bound job (a MIP that may prove optimality in seconds) gets the
cores to itself for its first ``head_s`` seconds: the session holds the islands after
their first epoch (which reports the seeded solutions, often enough to meet the target
gap against a simple bound) until ``head_s`` after the job's worker said hello (at the
latest :data:`engine.plan.HELLO_WAIT_S` later). When that time is up, the problem's
``extend_head_start`` (if given) may keep the hold to the end of the run.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Protocol

from gapstop.engine.interrupts import stop_reason
from gapstop.engine.persist import WriteFailures
from gapstop.engine.plan import HELLO_WAIT_S, BoundPlan, default_head_start, slot_plan
from gapstop.engine.protocol import Island, JobSpec, RunStatus

log = logging.getLogger("gapstop")

#: an island's epoch: its improvements and evaluations reach the session after each
EPOCH_S = 0.5
#: an island's first epoch when a head start holds the islands after it: enough for the seeded
#: solutions (the first generation is evaluated whole), short because it takes CPU from the job
#: that may end the run within seconds (docs/decisions/0001-exact-mip-head-start.md)
HELD_FIRST_EPOCH_S = 0.1


class Backend(Protocol):
    def start_search(self, slot: int, name: str, island: Island, first_epoch_s: float) -> Any:
        """Start ``island`` as worker ``name``, its first epoch ``first_epoch_s`` long; returns a handle."""

    def start_bound(self, slot: int, spec: JobSpec, budget_s: float, fresh: bool) -> Any:
        """Run bound job ``spec`` for at most ``budget_s`` on bound slot ``slot`` (``fresh``:
        on a new worker, the old one failed); returns a handle. The slot's worker says
        ``hello`` to the session as ``bound-SLOT...``."""

    def wait(self, handles: list[Any], timeout_s: float) -> list[tuple[Any, str | None]]:
        """The handles that ended within ``timeout_s``, each with its failure (text) or None."""


class OutFile:
    """``--out``: the running result document, rewritten (atomically) whenever the best
    cost changes, then the final one. The driver writes it, so it lands on the caller's
    machine wherever the session runs; a failed write is one line and the run goes on."""

    def __init__(self, path: str | None, doc: Callable[[], dict[str, Any]] | None = None,
                 failures: WriteFailures | None = None) -> None:
        self.path = path
        self.failures = failures if failures is not None else WriteFailures()  # the caller's: one warning per file
        self.last: Any = None
        self.doc = doc  # the session's running_doc

    def update(self, st: RunStatus) -> None:
        if self.path is None or self.doc is None or st.ub is None or st.ub == self.last:
            return
        self.last = st.ub
        self.failures.write_json(self.path, self.doc())

    def final(self, doc: dict[str, Any]) -> None:
        if self.path is not None:
            self.failures.write_json(self.path, doc)


def other_bound(bounds: dict[str, Any], besides: str = "spectral") -> float | None:
    """The best bound value among methods other than ``besides``, or None."""
    vals = [b.value for m, b in bounds.items() if m != besides and math.isfinite(b.value)]
    return max(vals) if vals else None


@dataclass(frozen=True)
class RunPlan:
    """What both runners set up before :func:`drive`: the bound plan, the islands and bound slots,
    the head start, the problem's ``extend_head_start`` (when the head start is the default one),
    and the fields the run's ``config.json`` records about them."""

    plan: BoundPlan
    n_search: int
    n_bound: int
    head_s: float
    extend: Callable[..., bool | None] | None
    config: dict[str, Any]


def plan_run(adapter: Any, problem: Any, params: dict[str, Any], *, total: int, bounds: bool, islands: int | None,
             time_limit_s: float, head_start_s: float | None, runner: str, single_node: bool = True) -> RunPlan:
    """The run's plan on ``total`` worker slots (:func:`engine.plan.slot_plan`). ``head_start_s``
    None: :func:`engine.plan.default_head_start` on a single node (extended as the problem's
    ``extend_head_start`` decides), none across several nodes."""
    n_search, n_bound = slot_plan(total, bounds, islands)
    plan = BoundPlan(adapter.bound_job_specs(problem, params) if bounds else [], time_limit_s)
    if head_start_s is not None:
        head = head_start_s
    else:
        head = default_head_start(time_limit_s) if single_node else 0.0
    extend = getattr(adapter, "extend_head_start", None) if head_start_s is None else None
    config = {"workers": n_search + n_bound, "search_workers": n_search, "bound_workers": n_bound,
              "head_start_s": head if plan.head_start_wanted else 0.0, "runner": runner}
    return RunPlan(plan, n_search, n_bound, head, extend, config)


def drive(session: Any, backend: Backend, plan: BoundPlan, n_search: int, n_bound: int, *, t_end: float,
          head_s: float = 0.0, extend: Callable[..., bool | None] | None = None, poll_s: float = 0.1,
          on_tick: Callable[[RunStatus], None] | None = None, max_restarts: int = 3) -> str:
    """Run the plan until the session says stop, ``t_end`` (``time.monotonic()``), or no
    worker is left; returns the stop reason (``"interrupted"`` on Ctrl-C, ``"terminated"`` on
    SIGTERM when :func:`engine.interrupts.sigterm_raises` is in force).

    ``session``: the session, or a handle with the same methods that waits for their
    answers. ``head_s``: the dedicated job's head start (0: none). ``extend(last_bounds,
    other_lb, waited_s)``: the problem's ``extend_head_start``, asked when the head start is
    over: True holds the islands to the end of the run, None asks again (the job keeps the
    cores meanwhile). ``on_tick(poll)`` is called after every poll. A worker that fails is
    replaced, up to ``max_restarts`` times per slot; its failure goes to the session
    (``worker_errors``).
    """
    running: dict[Any, tuple[str, int, JobSpec | None]] = {}  # handle -> (kind, slot, spec)
    restarts: dict[tuple[str, int], int] = {}
    generation: dict[int, int] = {}

    def start_search(slot: int) -> None:
        g = generation.get(slot, 0)
        generation[slot] = g + 1
        name = f"search-{slot}" + (f"r{g}" if g else "")
        session.started("searches", name)
        first = HELD_FIRST_EPOCH_S if holding else EPOCH_S
        running[backend.start_search(slot, name, Island(slot, n_search, g), first)] = ("search", slot, None)

    def start_bound(slot: int, fresh: bool = False) -> None:
        left = t_end - time.monotonic()
        st: RunStatus = session.poll()
        if left <= 0.5 or st.stop is not None:  # e.g. the job that ended proved optimality
            return
        spec, budget = plan.next(slot, left, st.ub, session.member_bounds)
        if spec is None:
            return
        session.started("bounds", spec.name)
        running[backend.start_bound(slot, spec, budget, fresh)] = ("bound", slot, spec)

    holding = head_s > 0 and plan.head_start_wanted and n_bound > 0
    plan.set_head_start(head_s if holding else 0.0)
    if holding:
        session.set_hold(True)
    for slot in range(n_bound):
        start_bound(slot)
    t_start = time.monotonic()
    hello = not holding
    t_release = t_start + head_s + (0.0 if hello else HELLO_WAIT_S)
    decided = extend is None
    for slot in range(n_search):
        start_search(slot)

    reason: str | None = None
    try:
        while reason is None:
            if holding:
                now = time.monotonic()
                dedicated = any(sp is not None and sp.dedicated for _, _, sp in running.values())
                release = not dedicated
                if not release and now >= t_release:
                    verdict: bool | None = False
                    if not decided and extend is not None:
                        verdict = extend(session.last_bounds(), other_bound(session.bounds()), now - t_release)
                        if verdict is not None:
                            decided = True
                    if verdict is None and now < t_end:
                        pass  # undecided: the job keeps the cores
                    elif verdict:
                        t_release = t_end
                        session.annotate("head_start_extended_to_s", round(t_end - t_start, 3))
                        log.info("head start extended to the end of the run")
                    else:
                        release = True
                if release:
                    session.set_hold(False)
                    holding = False
            done = backend.wait(list(running), poll_s) if running else []
            for handle, error in done:
                kind, slot, spec = running.pop(handle)
                if error is None:
                    if kind == "bound":
                        start_bound(slot)
                    continue
                session.report_error(f"{kind}-{slot}", error)
                key = (kind, slot)
                restarts[key] = restarts.get(key, 0) + 1
                if restarts[key] > max_restarts:
                    continue  # drop the slot; the run goes on with the others
                if kind == "search":
                    start_search(slot)
                else:
                    if spec is not None:
                        plan.put_back(spec)
                    start_bound(slot, fresh=True)
            st = session.poll()
            if not hello and any(w.startswith("bound-0") for w in st.nodes):
                hello = True
                t_release = min(t_release, time.monotonic() + head_s)
            if on_tick is not None:
                on_tick(st)
            reason = st.stop
            if reason is None and time.monotonic() >= t_end:
                reason = "time-limit"
            if reason is None and not running:
                reason = "exhausted"
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM where :mod:`engine.interrupts` raises it
        reason = stop_reason(e)
    return reason
