"""The max-throughput pipeline partitioning (MTPP) instance as immutable arrays.

Units follow the graph file: ``work`` in time units (µs for the bundled models),
``size_param`` and ``size_out`` in bytes, ``bandwidth`` in bytes per time unit,
``memory`` in bytes per stage (``None``: unlimited, no overflow cost).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray


def _frozen(a: NDArray[Any]) -> NDArray[Any]:
    a = np.ascontiguousarray(a)
    a.flags.writeable = False
    return a


@dataclass(frozen=True, eq=False)
class PipelineProblem:
    """A computation graph ``G = (V, E)`` with node weights, bandwidth and stage memory.

    Edges are deduplicated (one tensor edge per producer/consumer pair) and
    stored twice in CSR form: ``succ[succ_ptr[u]:succ_ptr[u+1]]`` are the
    consumers of ``u``'s output tensor, ``pred[pred_ptr[v]:pred_ptr[v+1]]`` the
    producers ``v`` reads. The graph is guaranteed acyclic by the loader.

    Attributes:
        name: graph name.
        work: float64[n], running time of each op.
        size_param: int64[n], parameter bytes of each op.
        size_out: int64[n], bytes of each op's single output tensor.
        edges: int32[m, 2], unique (producer, consumer) pairs, sorted.
        bandwidth: B > 0, bytes per time unit between stages.
        memory: fast memory per stage in bytes, or None for unlimited.
        names: optional node names (for reports only).
        meta: free-form metadata from the file.
        ops: optional per-node op metadata (``graph.nodes.ops``: an object or None per node),
            written by the importers; carried through, never used for costs.
    """

    name: str
    work: NDArray[np.float64]
    size_param: NDArray[np.int64]
    size_out: NDArray[np.int64]
    edges: NDArray[np.int32]
    bandwidth: float
    memory: int | None
    names: tuple[str, ...] | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    ops: tuple[dict[str, Any] | None, ...] | None = None
    succ_ptr: NDArray[np.int64] = field(init=False, repr=False)
    succ: NDArray[np.int32] = field(init=False, repr=False)
    pred_ptr: NDArray[np.int64] = field(init=False, repr=False)
    pred: NDArray[np.int32] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        n = len(self.work)
        work = np.asarray(self.work, dtype=np.float64)
        size_param = np.asarray(self.size_param, dtype=np.int64)
        size_out = np.asarray(self.size_out, dtype=np.int64)
        if not (len(size_param) == len(size_out) == n):
            raise ValueError("work, size_param and size_out must have the same length")
        edges = np.asarray(self.edges, dtype=np.int64).reshape(-1, 2)
        if len(edges):
            if edges.min() < 0 or edges.max() >= n:
                raise ValueError("edge endpoint out of range")
            edges = np.unique(edges, axis=0)
        edges = edges.astype(np.int32)
        if not (self.bandwidth > 0 and np.isfinite(self.bandwidth)):
            raise ValueError("bandwidth must be a positive finite number")
        if self.memory is not None and self.memory < 0:
            raise ValueError("memory must be >= 0 or None")
        object.__setattr__(self, "work", _frozen(work))
        object.__setattr__(self, "size_param", _frozen(size_param))
        object.__setattr__(self, "size_out", _frozen(size_out))
        object.__setattr__(self, "edges", _frozen(edges))
        object.__setattr__(self, "bandwidth", float(self.bandwidth))
        for (ptr_name, adj_name, src, dst) in (("succ_ptr", "succ", 0, 1), ("pred_ptr", "pred", 1, 0)):
            order = np.lexsort((edges[:, dst], edges[:, src])) if len(edges) else np.zeros(0, np.int64)
            counts = np.bincount(edges[:, src], minlength=n) if len(edges) else np.zeros(n, np.int64)
            ptr = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(counts, out=ptr[1:])
            adj = edges[order, dst].astype(np.int32) if len(edges) else np.zeros(0, np.int32)
            object.__setattr__(self, ptr_name, _frozen(ptr))
            object.__setattr__(self, adj_name, _frozen(adj))

    @property
    def n(self) -> int:
        """Number of nodes."""
        return len(self.work)

    @property
    def m(self) -> int:
        """Number of unique edges."""
        return len(self.edges)

    @property
    def memory_or_minus1(self) -> int:
        """``memory`` for the numba kernels, with -1 meaning unlimited."""
        return -1 if self.memory is None else int(self.memory)

    def describe(self) -> dict[str, Any]:
        """Summary for result files and logs."""
        return {"name": self.name, "n": self.n, "m": self.m, "bandwidth": self.bandwidth,
                "memory": self.memory, "total_work": float(self.work.sum())}
