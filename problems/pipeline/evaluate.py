"""The exact MTPP evaluator: the single source of truth for every reported cost.

A solution is a block label per node plus the schedule (a topological order of
all nodes) that each block runs in; the cost of a block is defined in
:mod:`problems.pipeline._kernels`. The objective is the cost of the bottleneck
(most expensive) block. Partitions whose quotient graph has a cycle are rejected.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.problems.pipeline import _kernels
from gapstop.problems.pipeline.constraints import (Constraints, ConstraintViolation, dynamic_violation,
                                                   static_violation)
from gapstop.problems.pipeline.model import PipelineProblem


@dataclass(frozen=True)
class Evaluation:
    """An exactly evaluated partition.

    Attributes:
        objective: cost of the bottleneck block (time units).
        blocks: int64[n], block per node, renumbered 0..p-1 in DAG order of the
            quotient graph (every edge goes to the same or a later block); empty blocks dropped.
        order: int32[n], the schedule used; blocks are contiguous in it.
        block_costs: float64[p], cost of each block.
        work, in_bytes, out_bytes, param_bytes, peak_bytes: per-block components.
    """

    objective: float
    blocks: NDArray[np.int64]
    order: NDArray[np.int32]
    block_costs: NDArray[np.float64]
    work: NDArray[np.float64]
    in_bytes: NDArray[np.int64]
    out_bytes: NDArray[np.int64]
    param_bytes: NDArray[np.int64]
    peak_bytes: NDArray[np.int64]

    def to_dict(self) -> dict[str, Any]:
        return {"objective": self.objective, "blocks": self.blocks.tolist(), "order": self.order.tolist(),
                "block_costs": self.block_costs.tolist()}


def _quotient_rank(problem: PipelineProblem, blocks: NDArray[np.int64]) -> NDArray[np.int64]:
    """Map each used block label to its rank in a topological order of the quotient graph."""
    labels = np.unique(blocks)
    q = len(labels)
    qsucc: list[list[int]] = [[] for _ in range(q)]
    indeg = [0] * q
    if problem.m:   # the distinct block pairs of the edges that cross blocks
        bi = np.searchsorted(labels, blocks)
        bu, bv = bi[problem.edges[:, 0]], bi[problem.edges[:, 1]]
        cross = bu != bv
        for a, b in np.unique(np.stack([bu[cross], bv[cross]], axis=1), axis=0).tolist():
            qsucc[a].append(b)
            indeg[b] += 1
    # Kahn by smallest original label: a partition already in DAG order keeps its numbering.
    import heapq
    ready = [i for i in range(q) if indeg[i] == 0]
    heapq.heapify(ready)
    rank = np.full(q, -1, dtype=np.int64)
    r = 0
    while ready:
        i = heapq.heappop(ready)
        rank[i] = r
        r += 1
        for j in qsucc[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, j)
    if r < q:
        stuck = [int(labels[i]) for i in range(q) if rank[i] < 0]
        raise InputError(f"partition: the quotient graph has a cycle among blocks {stuck[:10]}")
    return rank[np.searchsorted(labels, blocks)]


def canonical_order(problem: PipelineProblem, blocks: NDArray[np.int64]) -> NDArray[np.int32]:
    """Schedule used when none is given: blocks in DAG order, within a block Kahn by smallest index.

    ``blocks`` must already be numbered in DAG order.
    """
    n = problem.n
    prio = -(blocks.astype(np.float64) * n + np.arange(n, dtype=np.float64))
    return _kernels.kahn_order(prio, problem.succ_ptr, problem.succ, problem.pred_ptr)


def check_order(problem: PipelineProblem, order: Any) -> NDArray[np.int32]:
    """Validate that ``order`` is a topological order of all nodes; return it as int32."""
    o = np.asarray(order)
    n = problem.n
    if o.shape != (n,) or not np.issubdtype(o.dtype, np.integer):
        raise InputError(f"order: expected {n} integer node indices")
    pos = np.full(n, -1, dtype=np.int64)
    for t, v in enumerate(o):
        if not 0 <= v < n or pos[v] >= 0:
            raise InputError(f"order[{t}]: node {int(v)} out of range or repeated")
        pos[v] = t
    if problem.m:
        bad = np.nonzero(pos[problem.edges[:, 0]] > pos[problem.edges[:, 1]])[0]
        if len(bad):
            u, v = problem.edges[bad[0]]
            raise InputError(f"order: not topological: node {u} comes after its consumer {v}")
    return o.astype(np.int32)


def evaluate(problem: PipelineProblem, blocks: Any, order: Any = None,
             k: int | None = None, constraints: Constraints | None = None) -> Evaluation:
    """Exactly evaluate a partition.

    Args:
        problem: the instance.
        blocks: block label per node (any non-negative integers).
        order: optional schedule, a topological order of all nodes; each block runs
            its nodes in this order. Default: :func:`canonical_order`.
        k: if given, reject partitions with more than k non-empty blocks.
        constraints: MCM constraints to check (:mod:`problems.pipeline.constraints`);
            with ``ring`` the labels are chip ids and are kept as they are.
    Raises:
        InputError: wrong length, negative labels, more than k blocks, a cyclic
            quotient graph, or an order that is not topological.
        ConstraintViolation: an active MCM constraint is violated (its ``name`` says which).
    """
    b = np.asarray(blocks)
    if b.shape != (problem.n,) or not np.issubdtype(b.dtype, np.integer):
        raise InputError(f"blocks: expected {problem.n} integer block labels")
    if len(b) and b.min() < 0:
        raise InputError(f"blocks[{int(np.argmin(b))}]: negative block label")
    cons = constraints if constraints is not None and constraints.any else None
    if cons is not None and cons.ring:  # before the cycle test, so a back edge is named as such
        _raise_if(static_violation(problem, cons, b.astype(np.int64)))
    rank = _quotient_rank(problem, b.astype(np.int64))
    nb = int(rank.max()) + 1
    if k is not None and nb > k:
        raise InputError(f"blocks: {nb} non-empty blocks, more than k = {k}")
    if cons is not None and not cons.ring:
        _raise_if(static_violation(problem, cons, rank))
    o = canonical_order(problem, rank) if order is None else check_order(problem, order)
    cost, wk, inb, outb, prm, pk = _kernels.block_costs(
        o, rank, nb, problem.work, problem.size_param, problem.size_out, problem.succ_ptr,
        problem.succ, problem.pred_ptr, problem.pred, problem.bandwidth, problem.memory_or_minus1)
    ev = Evaluation(objective=float(cost.max()), blocks=rank, order=o, block_costs=cost, work=wk,
                    in_bytes=inb, out_bytes=outb, param_bytes=prm, peak_bytes=pk)
    if cons is not None:
        _raise_if(dynamic_violation(problem, cons, ev, rank))
    return ev


def _raise_if(found: tuple[str, str] | None) -> None:
    if found is not None:
        raise ConstraintViolation(*found)
