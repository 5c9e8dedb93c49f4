"""Problem-agnostic coordinator state: the best solution, the best bound, the gap, the stop.

This is plain Python (no Ray, no threads): the in-process runner calls it under a
lock and the Ray coordinator actor wraps it. Invariants:

* every incumbent is re-scored by the problem's exact evaluator before it is
  accepted; a worker's claimed cost is never trusted;
* the best upper bound never rises and the best lower bound never falls;
* merging is idempotent and order-insensitive (a report that is not an
  improvement is ignored, whatever order reports arrive in);
* a bound of +inf ("no feasible solution exists") never stands next to a feasible
  incumbent, nor a bound above the incumbent's exact cost (for a real-valued objective:
  more than the relative tolerance ``OPTIMAL_GAP`` above it):
  the contradiction is an internal error, logged as an ``error`` event and warned about
  once, and the run goes on with the other bounds (never a gap of 0 from it).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Any, Callable

from gapstop.engine.records import Bound, Incumbent, relative_gap
from gapstop.engine.stopping import OPTIMAL_GAP, Clock, Criterion, Progress

#: evaluate(solution) -> (exact cost, canonical JSON-serialisable solution); raises on infeasible.
#: The cost is a float or an exact Python int; the coordinator never converts it.
Evaluator = Callable[[Any], tuple[float, Any]]


def integral(evaluate: Evaluator) -> Evaluator:
    """Mark ``evaluate`` as the evaluator of an *integral* objective and return it.

    Its costs are exact Python ints and so are the problem's bounds; a
    :class:`Coordinator` built on it compares them exactly: "optimal" then means
    ``bound >= cost``, with no tolerance (see :class:`engine.stopping.Optimal`).
    """
    evaluate.integral_objective = True  # type: ignore[attr-defined]
    return evaluate


@dataclass(frozen=True)
class Event:
    """One accepted improvement, as written to the event log."""

    t_s: float
    worker: str
    kind: str  # "upper" | "lower" | "error" (an internal error the run survived; ``status`` says which)
    value: float | int  # exact: Python ints stay ints
    method: str
    status: str


class Coordinator:
    """Keeps the certificate of a run and decides when to stop.

    Args:
        evaluate: the exact evaluator (see :data:`Evaluator`).
        criterion: stopping criterion (e.g. :func:`engine.stopping.standard`).
        clock: shared clock; ``t_s`` of records is measured on it.
        on_event: called with every accepted :class:`Event` (e.g. to persist it).
        on_incumbent: called with every accepted :class:`Incumbent` (e.g. to write it to disk).
        integral: whether the objective is integral (optimal only when ``bound >= cost``);
            None: as the evaluator declares it (see :func:`integral`).
    """

    def __init__(self, evaluate: Evaluator, criterion: Criterion, clock: Clock | None = None,
                 on_event: Callable[[Event], None] | None = None,
                 on_incumbent: Callable[[Incumbent], None] | None = None,
                 integral: bool | None = None) -> None:
        self._evaluate = evaluate
        self.integral = bool(getattr(evaluate, "integral_objective", False)) if integral is None else integral
        self.criterion = criterion
        self.clock = clock or Clock()
        self.incumbent: Incumbent | None = None
        self.bound: Bound | None = None
        self.bounds: dict[str, Bound] = {}
        self.groups: dict[str, dict[int, Bound]] = {}
        self.events: list[Event] = []
        self.rejected: list[tuple[str, str]] = []
        self.errors: list[str] = []  # internal errors the run survived (also logged as "error" events)
        self._on_event = on_event
        self._on_incumbent = on_incumbent
        self._forced: str | None = None
        self._group_size: dict[str, int] = {}

    # -- reports ------------------------------------------------------------------------
    def offer_solution(self, solution: Any, source: str) -> bool:
        """Re-score ``solution`` exactly; keep it if strictly better. Returns True if accepted."""
        try:
            cost, canonical = self._evaluate(solution)
        except Exception as e:  # a bad solution from a worker is data, not a crash
            self.rejected.append((source, f"{type(e).__name__}: {e}"))
            return False
        if (isinstance(cost, float) and not math.isfinite(cost)) or (
                self.incumbent is not None and cost >= self.incumbent.cost):
            return False
        # keep the evaluator's type: exact Python ints stay exact (intra-op costs exceed 2^53)
        self.incumbent = Incumbent(cost=cost, solution=canonical, source=source, t_s=self.clock.elapsed())
        self._event(Event(self.incumbent.t_s, source, "upper", cost, source, "feasible"))
        if self.bound is not None and self._contradicts(self.bound.value):
            self._drop_contradicted_bounds(source)
        if self._on_incumbent is not None:
            self._on_incumbent(self.incumbent)
        return True

    def offer_bound(self, bound: Bound, worker: str = "") -> bool:
        """Merge a proven lower bound. Returns True if it raised the best bound.

        A *group member* (``detail`` has ``group``, ``member`` and ``members``) is a bound
        only for one case of a case split, e.g. guess-the-bottleneck's LB_j. The
        coordinator keeps each member's best value and offers ``min`` over the members
        as the group's bound once every member has reported: valid at every moment.
        """
        if math.isnan(bound.value):
            return False
        group = bound.detail.get("group") if bound.detail else None
        if group is not None:  # one member may be +inf (its case is impossible); their minimum is checked below
            return self._offer_member(bound, worker, str(group))
        if self.incumbent is not None and self._contradicts(bound.value):
            self._internal_error(worker or bound.method, bound.method,
                                 f"bound {bound.method!r} = {bound.value} lies above the feasible incumbent "
                                 f"from {self.incumbent.source!r} (cost {self.incumbent.cost}); bound ignored")
            return False
        prev = self.bounds.get(bound.method)
        if prev is None or bound.value > prev.value or (bound.value == prev.value and bound.status != prev.status
                                                        and bound.status == "optimal"):
            self.bounds[bound.method] = bound
        if self.bound is not None and bound.value <= self.bound.value:
            return False
        if bound.value == -math.inf:
            return False
        self.bound = bound
        self._event(Event(self.clock.elapsed(), worker or bound.method, "lower", bound.value, bound.method,
                          bound.status))
        return True

    def _offer_member(self, bound: Bound, worker: str, group: str) -> bool:
        n = int(bound.detail["members"])
        m = int(bound.detail["member"])
        known = self._group_size.setdefault(group, n)
        if n != known or not 1 <= m <= n:
            # the minimum is a bound only over exactly the members 1..n of one case split
            self.rejected.append((worker or bound.method, f"group {group!r}: member {m} of {n} "
                                                          f"(the group has members 1..{known})"))
            return False
        members = self.groups.setdefault(group, {})
        prev = members.get(m)
        if prev is None or bound.value > prev.value or (bound.value == prev.value and bound.status == "optimal"):
            members[m] = bound
        if len(members) < n:
            return False
        worst = min(members.values(), key=lambda b: b.value)
        status = "optimal" if all(b.status == "optimal" for b in members.values()) else "feasible"
        per = [members[j].value for j in sorted(members)]
        combined = Bound(group, worst.value, status, max(b.wall_s for b in members.values()), worst.solver,
                         {"per_member": per, "argmin_member": int(worst.detail["member"])})
        return self.offer_bound(combined, worker)

    def _internal_error(self, worker: str, method: str, message: str) -> None:
        """Log an internal error as an ``error`` event; warn about the first one only."""
        self.errors.append(message)
        self._event(Event(self.clock.elapsed(), worker, "error", math.inf, method, f"error: {message}"))
        if len(self.errors) == 1:
            warnings.warn(f"internal error (the run goes on; please file a bug): {message}", RuntimeWarning,
                          stacklevel=3)

    def _contradicts(self, value: float | int) -> bool:
        """Whether a bound ``value`` is impossible next to the incumbent: +inf (no feasible
        solution), or, for an integral objective, above its exact cost; a real-valued
        objective's bound may lie a rounding above it, but not more than the optimality
        tolerance :data:`~engine.stopping.OPTIMAL_GAP` (relative) above."""
        if self.incumbent is None:
            return False
        cost = self.incumbent.cost
        if self.integral:
            return value == math.inf or value > cost
        return value == math.inf or value > cost + OPTIMAL_GAP * abs(cost)

    def _drop_contradicted_bounds(self, source: str) -> None:
        """A new incumbent contradicts bound(s) held: report, drop them, fall back to the best other."""
        bad = [b for b in self.bounds.values() if self._contradicts(b.value)]
        self._internal_error(source, ",".join(b.method for b in bad),
                             f"bound(s) {[(b.method, b.value) for b in bad]} lie above the feasible solution "
                             f"{source!r} found (cost {self.incumbent.cost if self.incumbent else None}); "
                             "bound(s) dropped")
        for b in bad:
            del self.bounds[b.method]
        rest = [b for b in self.bounds.values() if b.value != -math.inf]
        self.bound = max(rest, key=lambda b: b.value) if rest else None

    def member_bounds(self, group: str) -> dict[int, float]:
        """Current best value of each reported member of a group."""
        return {j: b.value for j, b in self.groups.get(group, {}).items()}

    def force_stop(self, reason: str) -> None:
        """Stop for an outside reason (e.g. ``"interrupted"``); the first reason sticks."""
        if self._forced is None:
            self._forced = reason

    # -- queries ------------------------------------------------------------------------
    @property
    def ub(self) -> float | None:
        return None if self.incumbent is None else self.incumbent.cost

    @property
    def lb(self) -> float | None:
        return None if self.bound is None else self.bound.value

    @property
    def gap(self) -> float | None:
        return relative_gap(self.ub, self.lb)

    def stop_reason(self) -> str | None:
        """Why the run should stop now, or None to go on."""
        if self._forced is not None:
            return self._forced
        return self.criterion.reason(Progress(self.ub, self.lb, self.clock.elapsed(), self.integral))

    def _event(self, e: Event) -> None:
        self.events.append(e)
        if self._on_event is not None:
            self._on_event(e)
