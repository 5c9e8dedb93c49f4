"""Independent, deliberately naive reference implementations for cross-checks.

Written from the contest definition with Python lists and ints, sharing no code
with the package: a per-time-step evaluator (like iopddl.cc's loop), and
exhaustive search of the constrained and of the relaxed (penalised) problem.
"""

from __future__ import annotations

import itertools
from typing import Sequence

from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem


def tables(p: IntraopProblem) -> tuple[list[list[int]], list[list[int]], list[list[int]]]:
    ptr = p.node_ptr.tolist()
    cost = [p.node_cost.tolist()[ptr[v]:ptr[v + 1]] for v in range(p.n)]
    use = [p.node_usage.tolist()[ptr[v]:ptr[v + 1]] for v in range(p.n)]
    eptr = p.edge_ptr.tolist()
    ec = p.edge_cost.tolist()
    return cost, use, [ec[eptr[e]:eptr[e + 1]] for e in range(p.m)]


def naive_evaluate(p: IntraopProblem, sol: Sequence[int]) -> tuple[int | None, bool]:
    """(cost, feasible) exactly as the contest's loop would compute it; cost None if malformed.

    ``feasible`` also requires that no chosen cost is FORBIDDEN (10^18) or more.
    """
    cost, use, ecost = tables(p)
    if len(sol) != p.n or any(not 0 <= s < len(cost[v]) for v, s in enumerate(sol)):
        return None, False
    total = 0
    forbidden = False
    usage_at = [0] * max([int(e) for e in p.end] + [0])
    for v, s in enumerate(sol):
        total += cost[v][s]
        forbidden |= cost[v][s] >= FORBIDDEN
        for t in range(int(p.start[v]), int(p.end[v])):
            usage_at[t] += use[v][s]
    for e in range(p.m):
        u, v = int(p.edge_u[e]), int(p.edge_v[e])
        c = ecost[e][sol[u] * len(cost[v]) + sol[v]]
        total += c
        forbidden |= c >= FORBIDDEN
    ok = p.usage_limit is None or all(x <= p.usage_limit for x in usage_at)
    return total, ok and not forbidden


def all_solutions(p: IntraopProblem) -> itertools.product:
    return itertools.product(*[range(int(x)) for x in p.num_strategies])


def brute_force(p: IntraopProblem) -> tuple[int | None, list[int] | None]:
    """Optimal feasible (cost, solution), or (None, None) if nothing is feasible."""
    best: tuple[int | None, list[int] | None] = (None, None)
    for sol in all_solutions(p):
        c, ok = naive_evaluate(p, sol)
        if ok and (best[0] is None or c < best[0]):
            best = (c, list(sol))
    return best


def relaxed_value(p: IntraopProblem, weight: Sequence[int], sol: Sequence[int]) -> int:
    """``sum_v c_v + w_v m_v + sum_edges c_uv`` (usage limit ignored), in exact ints."""
    cost, use, ecost = tables(p)
    total = sum(cost[v][s] + weight[v] * use[v][s] for v, s in enumerate(sol))
    for e in range(p.m):
        u, v = int(p.edge_u[e]), int(p.edge_v[e])
        total += ecost[e][sol[u] * len(cost[v]) + sol[v]]
    return total


def relaxed_optimum(p: IntraopProblem, weight: Sequence[int]) -> int:
    return min(relaxed_value(p, weight, sol) for sol in all_solutions(p))


def brute_force_table(p: IntraopProblem) -> tuple[int | None, list[int] | None]:
    """Same as :func:`brute_force`, vectorised over all assignments (numpy, int64).

    Forbidden entries are tracked as a mask, so the int64 cost sums cannot overflow.
    """
    import numpy as np

    cost, use, ecost = tables(p)
    S = np.array(list(all_solutions(p)), dtype=np.int64).reshape(-1, p.n)
    total = np.zeros(len(S), dtype=np.int64)
    bad = np.zeros(len(S), dtype=bool)
    T = max([int(e) for e in p.end] + [0])
    prof = np.zeros((len(S), T), dtype=np.int64)
    for v in range(p.n):
        c = np.array(cost[v], dtype=np.int64)[S[:, v]]
        bad |= c >= FORBIDDEN
        total += np.where(c >= FORBIDDEN, 0, c)
        prof[:, int(p.start[v]):int(p.end[v])] += np.array(use[v], dtype=np.int64)[S[:, v], None]
    for e in range(p.m):
        u, v = int(p.edge_u[e]), int(p.edge_v[e])
        c = np.array(ecost[e], dtype=np.int64)[S[:, u] * len(cost[v]) + S[:, v]]
        bad |= c >= FORBIDDEN
        total += np.where(c >= FORBIDDEN, 0, c)
    if p.usage_limit is not None and T:
        bad |= prof.max(axis=1) > p.usage_limit
    if bad.all():
        return None, None
    i = int(np.argmin(np.where(bad, np.iinfo(np.int64).max, total)))
    return int(total[i]), S[i].tolist()
