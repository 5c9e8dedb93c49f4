"""The exact evaluator: the single source of truth for every reported cost.

Follows google/iopddl ``Evaluate``: the cost is the sum of the chosen node
strategy costs plus, for every edge as listed in the file, the cost of the
chosen strategy pair, summed exactly (Python ints; totals can exceed 2^63).
A solution is infeasible if at some time step the summed usage of the nodes
live then (``start <= t < end``) exceeds ``usage_limit``. In addition to the
contest, a choice whose cost is :data:`~problems.intraop.model.FORBIDDEN` or
more also makes the solution infeasible (the contest only scores it as huge).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem, interval_sum


@dataclass(frozen=True)
class Evaluation:
    """Outcome of :func:`evaluate`.

    Attributes:
        cost: exact total cost (Python int), or None when the solution is malformed
            (wrong length or a strategy index out of range), like the contest's error status.
        feasible: True iff well-formed, within the usage limit and free of forbidden choices.
        reason: "" when feasible, else a one-line explanation.
        violated_step: first time step whose usage exceeds the limit, or None.
        peak_usage: maximum summed usage over all time steps (0 if malformed).
    """

    cost: int | None
    feasible: bool
    reason: str = ""
    violated_step: int | None = None
    peak_usage: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"cost": self.cost, "feasible": self.feasible, "reason": self.reason,
                "violated_step": self.violated_step, "peak_usage": self.peak_usage}


def usage_profile(problem: IntraopProblem, solution: NDArray[np.int64]) -> NDArray[np.int64]:
    """int64[T], summed usage of the live nodes at each time step (solution must be in range).

    The loader guarantees total usage < 2^62, so int64 prefix sums are exact.
    """
    use = problem.node_usage[problem.node_ptr[:-1] + solution]
    return interval_sum(use, problem.start, problem.end, problem.horizon)


def evaluate(problem: IntraopProblem, solution: Sequence[int] | NDArray[np.integer]) -> Evaluation:
    """Exactly evaluate one strategy index per node.

    Args:
        problem: the instance.
        solution: ``n`` strategy indices, ``0 <= s_v < k_v``.

    Returns:
        The :class:`Evaluation`; never raises for a bad solution (a malformed one has
        ``cost=None``).
    """
    try:
        s = np.asarray(solution)
    except (TypeError, ValueError):
        return Evaluation(None, False, "solution is not a list of integers")
    if s.ndim != 1 or len(s) != problem.n:
        return Evaluation(None, False, f"solution has {s.size} entries, expected {problem.n}")
    if s.dtype == bool or not (np.issubdtype(s.dtype, np.integer) or len(s) == 0):
        return Evaluation(None, False, "solution entries must be integers")
    s = s.astype(np.int64)
    k = problem.num_strategies
    bad = np.nonzero((s < 0) | (s >= k))[0]
    if len(bad):
        v = int(bad[0])
        return Evaluation(None, False, f"solution[{v}] = {int(s[v])} out of range [0, {int(k[v])})")
    node_terms = problem.node_cost[problem.node_ptr[:-1] + s]
    eu, ev = problem.edge_u, problem.edge_v
    edge_terms = problem.edge_cost[problem.edge_ptr[:-1] + s[eu] * k[ev] + s[ev]]
    cost = sum(node_terms.tolist()) + sum(edge_terms.tolist())
    prof = usage_profile(problem, s)
    peak = int(prof.max()) if len(prof) else 0
    limit = problem.usage_limit
    if limit is not None and peak > limit:
        t = int(np.argmax(prof > limit))
        return Evaluation(cost, False, f"usage {int(prof[t])} exceeds usage_limit {limit} at time step {t}", t, peak)
    if node_terms.max(initial=0) >= FORBIDDEN or edge_terms.max(initial=0) >= FORBIDDEN:
        v = np.nonzero(node_terms >= FORBIDDEN)[0]
        what = f"node {int(v[0])}" if len(v) else f"edge {int(np.argmax(edge_terms >= FORBIDDEN))}"
        return Evaluation(cost, False, f"forbidden choice (cost >= 10^18) at {what}", None, peak)
    return Evaluation(cost, True, "", None, peak)
