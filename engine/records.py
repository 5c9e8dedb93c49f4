"""Records that travel between searches, bound computations and the coordinator.

Everything a worker reports is one of these frozen records. Costs are in the
problem's own units (µs for pipeline partitioning, contest cost units for
intra-operator sharding); times are wall-clock seconds.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class Incumbent:
    """A feasible solution and its exact cost.

    Attributes:
        cost: objective value as re-computed by the problem's exact evaluator (a float, or an
            exact Python int for problems whose costs exceed 2^53).
        solution: problem-specific, JSON-serialisable payload (e.g. block per node).
        source: which search produced it (e.g. ``"brkga"``, ``"exact-mip"``).
        t_s: seconds since the start of the run when it was found.
    """

    cost: float | int
    solution: Any
    source: str = ""
    t_s: float = 0.0


@dataclass(frozen=True, slots=True)
class Bound:
    """A proven lower bound on the optimum.

    Attributes:
        method: bound method name (e.g. ``"simple"``, ``"guess-the-bottleneck"``).
        value: the bound; guaranteed ``<=`` the true optimum. ``-inf`` when the
            method proved nothing (e.g. the solver timed out before its first bound).
        status: solver status string (``"optimal"``, ``"feasible"``, ``"bound-only"``,
            ``"timeout"``, ``"closed-form"``, ``"infeasible"``, ``"error: ..."``).
        wall_s: wall-clock seconds spent computing it.
        solver: the solver that proved it (``"cp-sat"``, ``"closed-form"``, ...).
        detail: method-specific extras (e.g. per-guess values), JSON-serialisable.
    """

    method: str
    value: float
    status: str
    wall_s: float
    solver: str = ""
    detail: dict[str, Any] = field(default_factory=dict)

    def to_dict(self, drop: tuple[str, ...] = ("blocks", "solution")) -> dict[str, Any]:
        """JSON-ready record; ``drop`` removes bulky solution payloads from ``detail``."""
        d = asdict(self)
        d["detail"] = {k: v for k, v in d["detail"].items() if k not in drop}
        if not math.isfinite(d["value"]):
            d["value"] = None
        return d


def exact_text(x: float | int) -> str:
    """``x`` as text that :func:`exact_value` turns back into exactly ``x``: Python ints in
    decimal (any size), floats by ``repr`` (shortest round-trip form, ``inf``, ``nan``)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise TypeError(f"not a number: {x!r}")
    return str(int(x)) if isinstance(x, numbers.Integral) else repr(float(x))


def exact_value(x: Any) -> float | int:
    """The number a run directory stored: a JSON int or float as it is, a decimal string
    (see :func:`exact_text`) parsed as an int when it is one. Never rounds an int to float.

    Raises:
        ValueError: ``x`` is not a number or such a string.
    """
    if isinstance(x, bool):
        raise ValueError(f"not a number: {x!r}")
    if isinstance(x, (int, float)):
        return x
    if isinstance(x, str):
        try:
            return int(x)
        except ValueError:
            return float(x)
    raise ValueError(f"not a number: {x!r}")


def relative_gap(ub: float | int | None, lb: float | int | None) -> float | None:
    """The certified optimality gap ``1 - lb/ub = (ub - lb)/ub`` of a minimisation problem.

    Computed as ``(ub - lb) / ub``: for exact Python ints the difference is exact and
    the quotient correctly rounded, so the gap is 0.0 exactly when ``lb >= ub`` (a bound
    one unit below a cost of 10^19 gives about 1e-19, never 0); for floats close values
    subtract exactly too.

    Edge cases (all tested):
      * no incumbent (``ub`` is None or inf) or no bound (``lb`` None/-inf): None
        (unknown gap, never mistaken for a small one);
      * ``lb`` = +inf (the bound claims there is no feasible solution) next to a finite
        ``ub``: a contradiction, None (never a gap of 0);
      * ``ub <= 0``: 0.0 if ``lb >= ub`` (the incumbent is proven optimal) else None,
        since a ratio to a non-positive objective is meaningless;
      * ``lb <= 0 < ub``: 1.0 (the bound proves nothing useful);
      * otherwise ``max(0, (ub - lb)/ub)``; a bound above the incumbent (only possible
        through rounding) gives 0.0.
    """
    if ub is None or lb is None:
        return None
    if _nan(ub) or _nan(lb) or ub == math.inf or lb == -math.inf or lb == math.inf:
        return None
    if ub <= 0:
        return 0.0 if lb >= ub else None
    if lb <= 0:
        return 1.0
    return max(0.0, (ub - lb) / ub)


def _nan(x: float | int) -> bool:
    return isinstance(x, float) and math.isnan(x)
