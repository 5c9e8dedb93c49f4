"""Composable stopping criteria.

Each criterion looks at a :class:`Progress` snapshot and says whether to stop and
why. Combine with :class:`AnyOf`. The reason strings are the ``stopped_because``
values of result files.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

from gapstop.engine.records import relative_gap

#: for a real-valued objective (pipeline), a gap at or below this counts as proven optimal:
#: it is the resolution of the integer-scaled solver models, whose coefficients are rounded
#: in the safe direction (observed: ~2e-6 relative on a proven optimum). The exact gap is
#: always reported. An integral objective (intra-op) has no tolerance: see :class:`Optimal`.
OPTIMAL_GAP = 1e-5


@dataclass(frozen=True)
class Progress:
    """What stopping criteria see: incumbent cost, best bound, elapsed seconds, and whether
    the objective is integral (costs and bounds exact Python ints, compared exactly)."""

    ub: float | int | None
    lb: float | int | None
    elapsed_s: float
    integral: bool = False

    @property
    def gap(self) -> float | None:
        return relative_gap(self.ub, self.lb)


class Criterion:
    """Base: ``reason(progress)`` returns a stop reason or None."""

    def reason(self, p: Progress) -> str | None:  # pragma: no cover - interface
        raise NotImplementedError


class Optimal(Criterion):
    """Stop when the bound proves the incumbent optimal.

    Integral objective: exactly when ``lb >= ub`` (the bound equals the cost; no
    tolerance, so a bound one unit below a cost of 10^19 is not optimal). Otherwise:
    when the gap is at most :data:`OPTIMAL_GAP`. A bound of +inf without an incumbent
    proves that no feasible solution exists: ``"infeasible"``.
    """

    def reason(self, p: Progress) -> str | None:
        if p.ub is None and p.lb == math.inf:
            return "infeasible"
        if p.integral:
            proven = p.gap is not None and p.lb is not None and p.ub is not None and p.lb >= p.ub
            return "optimal" if proven else None
        g = p.gap
        return "optimal" if g is not None and g <= OPTIMAL_GAP else None


class GapReached(Criterion):
    """Stop when the certified gap is at most ``target`` (a fraction, 0.05 = 5 %)."""

    def __init__(self, target: float) -> None:
        if not 0 <= target < 1:
            raise ValueError("target gap must be in [0, 1)")
        self.target = target

    def reason(self, p: Progress) -> str | None:
        g = p.gap
        return "target-gap" if g is not None and g <= self.target else None


class WallClock(Criterion):
    """Stop after ``limit_s`` seconds."""

    def __init__(self, limit_s: float) -> None:
        self.limit_s = limit_s

    def reason(self, p: Progress) -> str | None:
        return "time-limit" if p.elapsed_s >= self.limit_s else None


class AnyOf(Criterion):
    """Stop as soon as any child says so; the first child's reason wins."""

    def __init__(self, *children: Criterion) -> None:
        self.children = children

    def reason(self, p: Progress) -> str | None:
        for c in self.children:
            r = c.reason(p)
            if r is not None:
                return r
        return None


def standard(target_gap: float, time_limit_s: float) -> Criterion:
    """The default criterion of a run: optimal, then target gap, then time limit."""
    return AnyOf(Optimal(), GapReached(target_gap), WallClock(time_limit_s))


class Clock:
    """Monotonic seconds since construction, plus ``offset_s`` (time already spent elsewhere,
    e.g. by the driver before the coordinator actor took over)."""

    def __init__(self, offset_s: float = 0.0) -> None:
        self.t0 = time.monotonic() - offset_s

    def elapsed(self) -> float:
        return time.monotonic() - self.t0
