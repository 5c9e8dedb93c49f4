"""The intra-operator sharding (IOPDDL contest) instance as immutable arrays.

Semantics follow google/iopddl ``iopddl.cc``: node ``v`` chooses one of its
``k_v`` strategies; strategy ``s`` costs ``node_cost[node_ptr[v] + s]`` and
occupies ``node_usage[node_ptr[v] + s]`` units of memory at every time step of
the half-open interval ``[start[v], end[v])``. Edge ``e = (u, v)`` costs
``edge_cost[edge_ptr[e] + s_u * k_v + s_v]``. Costs and usages are contest
units (dimensionless non-negative integers); costs of :data:`FORBIDDEN` or more
mark choices that must not be taken.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

#: Cost value the contest uses for a forbidden strategy (or strategy pair).
FORBIDDEN = 10**18


def _frozen(a: NDArray[Any], dtype: Any) -> NDArray[Any]:
    a = np.ascontiguousarray(a, dtype=dtype)
    a.flags.writeable = False
    return a


def interval_sum(values: NDArray[Any], start: NDArray[np.int64], end: NDArray[np.int64],
                 horizon: int) -> NDArray[Any]:
    """Per time step ``t`` in ``[0, horizon)``: the sum of ``values[i]`` over the ``i`` live
    then (``start[i] <= t < end[i]``). Same dtype as ``values`` (int64 sums are exact
    while they stay below 2^63)."""
    values = np.asarray(values)
    diff = np.zeros(horizon + 1, dtype=values.dtype)
    np.add.at(diff, start, values)
    np.add.at(diff, end, -values)
    return np.cumsum(diff[:-1])


@dataclass(frozen=True, eq=False)
class IntraopProblem:
    """Strategy tables of ``n`` nodes and ``m`` edges, in CSR form.

    Edges are kept exactly as in the file (order, direction and duplicates), so
    the evaluator sums the same terms as the contest's. All arrays are
    read-only; ``__post_init__`` checks shapes and index ranges (``ValueError``).

    Attributes:
        name: instance name.
        node_ptr: int64[n + 1], node ``v``'s strategies are ``node_ptr[v]:node_ptr[v+1]``
            (every node has at least one).
        node_cost: int64[K], cost of each strategy (``K = node_ptr[-1]``).
        node_usage: int64[K], memory usage of each strategy, ``>= 0``.
        start: int64[n], first live time step of each node.
        end: int64[n], one past the last live time step (``start <= end``; equal: never live).
        edge_u: int32[m], first endpoint of each edge (its strategy picks the row).
        edge_v: int32[m], second endpoint (picks the column).
        edge_ptr: int64[m + 1], edge ``e``'s cost table is ``edge_cost[edge_ptr[e]:edge_ptr[e+1]]``,
            row-major ``k_u x k_v``.
        edge_cost: int64[edge_ptr[-1]], edge cost tables.
        usage_limit: memory available at each time step, or None (unconstrained).
        meta: the file's ``meta`` object, if any (generated instances name their ops and
            configurations there); costs never read it.
    """

    name: str
    node_ptr: NDArray[np.int64]
    node_cost: NDArray[np.int64]
    node_usage: NDArray[np.int64]
    start: NDArray[np.int64]
    end: NDArray[np.int64]
    edge_u: NDArray[np.int32]
    edge_v: NDArray[np.int32]
    edge_ptr: NDArray[np.int64]
    edge_cost: NDArray[np.int64]
    usage_limit: int | None
    meta: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        for f, dt in (("node_ptr", np.int64), ("node_cost", np.int64), ("node_usage", np.int64),
                      ("start", np.int64), ("end", np.int64), ("edge_u", np.int32),
                      ("edge_v", np.int32), ("edge_ptr", np.int64), ("edge_cost", np.int64)):
            object.__setattr__(self, f, _frozen(getattr(self, f), dt))
        n = len(self.start)
        ptr, eptr = self.node_ptr, self.edge_ptr
        if len(ptr) != n + 1 or ptr[0] != 0 or np.any(np.diff(ptr) < 1):
            raise ValueError("node_ptr must be n+1 increasing offsets from 0 (each node >= 1 strategy)")
        if not (len(self.node_cost) == len(self.node_usage) == ptr[-1]):
            raise ValueError("node_cost and node_usage must have node_ptr[-1] entries")
        if len(self.end) != n or np.any(self.start < 0) or np.any(self.end < self.start):
            raise ValueError("intervals must satisfy 0 <= start <= end")
        if np.any(self.node_usage < 0) or np.any(self.node_cost < 0) or np.any(self.edge_cost < 0):
            raise ValueError("costs and usages must be >= 0")
        m = len(self.edge_u)
        if len(self.edge_v) != m or len(eptr) != m + 1 or eptr[0] != 0:
            raise ValueError("edge_u, edge_v and edge_ptr must describe the same m edges")
        if m:
            if min(self.edge_u.min(), self.edge_v.min()) < 0 or max(self.edge_u.max(), self.edge_v.max()) >= n:
                raise ValueError("edge endpoint out of range")
            k = self.num_strategies
            if np.any(np.diff(eptr) != k[self.edge_u].astype(np.int64) * k[self.edge_v]):
                raise ValueError("edge cost tables must have k_u * k_v entries")
        if len(self.edge_cost) != eptr[-1]:
            raise ValueError("edge_cost must have edge_ptr[-1] entries")
        if self.usage_limit is not None:
            object.__setattr__(self, "usage_limit", int(self.usage_limit))

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.start)

    @property
    def m(self) -> int:
        """Number of edges as listed in the file (duplicates included)."""
        return len(self.edge_u)

    @property
    def num_strategies(self) -> NDArray[np.int64]:
        """int64[n], ``k_v`` for each node."""
        return np.diff(self.node_ptr)

    @property
    def horizon(self) -> int:
        """Number of time steps ``T = max(end)`` (0 for an empty instance)."""
        return int(self.end.max()) if self.n else 0

    @property
    def limit_or_minus1(self) -> int:
        """``usage_limit`` for the numba kernels, with -1 meaning unconstrained."""
        return -1 if self.usage_limit is None else self.usage_limit

    def describe(self) -> dict[str, Any]:
        """Summary for result files and logs."""
        return {"name": self.name, "n": self.n, "m": self.m, "strategies": int(self.node_ptr[-1]),
                "edge_table_entries": int(self.edge_ptr[-1]), "horizon": self.horizon,
                "usage_limit": self.usage_limit}
