"""Seeded random intra-operator sharding instances for tests and benchmarks."""

from __future__ import annotations

import numpy as np

from problems.intraop.model import FORBIDDEN, IntraopProblem


def random_instance(n: int, seed: int, *, max_k: int = 3, edge_p: float | None = None,
                    limit_quantile: float | None = 0.5, horizon: int = 12,
                    forbidden_p: float = 0.0, duplicates: bool = True, self_loops: bool = False) -> IntraopProblem:
    """A random instance with small integer costs (so exhaustive checks are exact).

    Args:
        n: number of nodes.
        seed: RNG seed; equal seeds give equal instances.
        max_k: strategies per node are drawn from ``1..max_k``.
        edge_p: probability of an edge between each ordered pair (default about 2.5/n).
        limit_quantile: the usage limit is placed this far between the least and the
            largest possible peak usage (0: tightest, 1: loosest); None: no limit.
        horizon: number of time steps.
        forbidden_p: share of node and edge costs set to ``FORBIDDEN``.
        duplicates: allow repeated and opposite edges between the same pair.
        self_loops: allow edges (v, v).
    """
    rng = np.random.default_rng(seed)
    if edge_p is None:
        edge_p = min(0.7, 2.5 / max(n, 1))
    k = rng.integers(1, max_k + 1, size=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(k, out=ptr[1:])
    cost = rng.integers(0, 100, size=ptr[-1])
    usage = rng.integers(0, 20, size=ptr[-1])
    cost[rng.random(ptr[-1]) < forbidden_p] = FORBIDDEN
    start = rng.integers(0, horizon, size=n)
    end = np.minimum(horizon, start + rng.integers(0, horizon // 2 + 1, size=n))
    pairs = [(u, v) for u in range(n) for v in range(n)
             if (u < v or (duplicates and u != v) or (self_loops and u == v)) and rng.random() < edge_p]
    eptr = np.zeros(len(pairs) + 1, dtype=np.int64)
    np.cumsum([k[u] * k[v] for u, v in pairs], out=eptr[1:])
    ecost = rng.integers(0, 100, size=eptr[-1])
    ecost[rng.random(eptr[-1]) < forbidden_p] = FORBIDDEN
    limit = None
    if limit_quantile is not None:
        lo = _peak(start, end, np.minimum.reduceat(usage, ptr[:-1]), horizon)
        hi = _peak(start, end, np.maximum.reduceat(usage, ptr[:-1]), horizon)
        limit = int(lo + limit_quantile * (hi - lo))
    uv = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return IntraopProblem(name=f"random-n{n}-s{seed}", node_ptr=ptr, node_cost=cost, node_usage=usage,
                          start=start, end=end, edge_u=uv[:, 0], edge_v=uv[:, 1], edge_ptr=eptr,
                          edge_cost=ecost, usage_limit=limit)


def _peak(start: np.ndarray, end: np.ndarray, use: np.ndarray, horizon: int) -> int:
    prof = np.zeros(horizon + 1, dtype=np.int64)
    np.add.at(prof, start, use)
    np.add.at(prof, end, -use)
    return int(np.cumsum(prof).max())
