"""Dominance contraction: merge node pairs that some optimal partition keeps in one stage.

Without a memory limit, three local rules each name an edge ``u -> v`` whose two ends
can be put into one stage without raising any stage's cost (bytes in units of ``B``,
the cost model of :mod:`problems.pipeline._kernels`):

* **source**: ``u`` has no producers, ``v`` is its only consumer and
  ``work(u) <= size_out(u) / B``. Moving ``u`` into ``v``'s stage removes ``u``'s work
  and out-traffic from its own stage and adds ``work(u) - size_out(u) / B <= 0`` to
  ``v``'s (its in-traffic for ``u`` is gone).
* **chain**: ``v``'s only producer is ``u`` and ``u``'s only consumer is ``v``, and
  ``work(v) + size_out(v) / B <= size_out(u) / B`` (``size_out(v)`` counted only if ``v``
  has consumers). Moving ``v`` back into ``u``'s stage changes that stage by at most
  ``work(v) + size_out(v) / B - size_out(u) / B <= 0`` and ``v``'s old stage by at most
  ``size_out(v) / B - size_out(u) / B <= 0``; stages that read ``v`` still read it once.
  Views, reshapes and other free ops of the same or a smaller output qualify.
* **sink**: ``v`` has no consumers, no work and one producer ``u``: moving it into
  ``u``'s stage adds nothing there and only removes traffic from ``v``'s stage.

Each move keeps every edge going to the same or a later stage, so the stage graph stays
acyclic; applied repeatedly, they turn any optimal partition into one that respects all
merges. In the merged graph the pair is one node with the summed work and parameters,
the union of their producers and consumers and the output of the pair's surviving
tensor (the other is consumed only inside the pair), so a partition of the merged
graph costs exactly what its expansion costs. Hence the merged graph's optimum equals
the original's, and any lower bound on it is one on the original (up to the order of
floating-point sums, which :func:`contract` callers absorb by nudging bounds down).

With a memory limit nothing is merged: moving a node changes the stages' peak
activation bytes, which the rules do not account for.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline.model import PipelineProblem

#: A rule's inequality must hold with this relative margin unless both sides are exactly
#: equal, so that a pair merged on rounding noise never makes the merged optimum exceed the
#: original one.
MARGIN = 1e-9


@dataclass(frozen=True, eq=False)
class Contraction:
    """A merged graph and the map back.

    Attributes:
        problem: the merged problem (``problem.n <= original.n``), memory ``None``.
        group: int64[original n], the merged node of each original node.
        keep: int64[problem.n], the original node each merged node was kept as (the one
            that never moved in the rules' moves).
    """

    problem: PipelineProblem
    group: NDArray[np.int64]
    keep: NDArray[np.int64]

    @property
    def merged(self) -> int:
        """Number of original nodes merged away."""
        return len(self.group) - self.problem.n

    def expand(self, blocks: NDArray[np.int64]) -> NDArray[np.int64]:
        """Stage labels of the original nodes from those of the merged nodes (same cost)."""
        return np.asarray(blocks, dtype=np.int64)[self.group]

    def project(self, blocks: NDArray[np.int64]) -> NDArray[np.int64]:
        """Stage labels of the merged nodes from any partition of the original graph: each
        merged node takes its kept node's stage. That is where the rules' moves, replayed in
        order, put every member, and none of them raised a stage's cost: the projection
        costs at most what ``blocks`` costs."""
        return np.asarray(blocks, dtype=np.int64)[self.keep]


def _le(a: float, b: float) -> bool:
    """``a <= b`` with :data:`MARGIN` to spare, or exactly equal."""
    return a == b or a <= b - MARGIN * max(abs(a), abs(b))


def contract(problem: PipelineProblem) -> Contraction:
    """Merge pairs by the module's rules until none applies (identity with a memory limit)."""
    n = problem.n
    if problem.memory is not None or n == 0:
        return _identity(problem)
    bw = float(problem.bandwidth)
    work = problem.work.astype(np.float64).tolist()
    param = problem.size_param.astype(np.int64).tolist()
    out = problem.size_out.astype(np.int64).tolist()
    succ = [set(problem.succ[problem.succ_ptr[u]:problem.succ_ptr[u + 1]].tolist()) for u in range(n)]
    pred = [set(problem.pred[problem.pred_ptr[v]:problem.pred_ptr[v + 1]].tolist()) for v in range(n)]
    alive = [True] * n
    parent = list(range(n))

    def merge(keep: int, gone: int, out_of_pair: int) -> None:
        """Fold ``gone`` into ``keep`` (joined by an edge either way); the pair outputs ``out_of_pair``."""
        succ[keep].discard(gone)
        pred[keep].discard(gone)
        succ[gone].discard(keep)
        pred[gone].discard(keep)
        for p in pred[gone]:
            succ[p].discard(gone)
            succ[p].add(keep)
            pred[keep].add(p)
        for s in succ[gone]:
            pred[s].discard(gone)
            pred[s].add(keep)
            succ[keep].add(s)
        succ[gone], pred[gone] = set(), set()
        work[keep] += work[gone]
        param[keep] += param[gone]
        out[keep] = out_of_pair
        alive[gone] = False
        parent[gone] = keep

    def try_merge(x: int) -> list[int]:
        """Apply one rule at node ``x`` if any does; returns the nodes whose rules may now apply."""
        if not alive[x]:
            return []
        # source: x has no producers and one consumer
        if not pred[x] and len(succ[x]) == 1 and _le(work[x], out[x] / bw):
            (w,) = succ[x]
            merge(w, x, out[w])
            return [w, *pred[w], *succ[w]]
        if len(pred[x]) == 1:
            (u,) = pred[x]
            # chain: u -> x is u's only edge out and x's only edge in
            if len(succ[u]) == 1:
                extra = out[x] / bw if succ[x] else 0.0
                if _le(work[x] + extra, out[u] / bw):
                    merge(u, x, out[x])
                    return [u, *pred[u], *succ[u]]
            # sink: x has no consumers and no work
            if not succ[x] and work[x] == 0.0:
                merge(u, x, out[u])
                return [u, *pred[u], *succ[u]]
        return []

    todo = list(range(n))
    while todo:
        x = todo.pop()
        todo.extend(try_merge(x))
    root = list(range(n))
    for v in range(n):
        r = v
        while parent[r] != r:
            r = parent[r]
        root[v] = r
    keep = [v for v in range(n) if alive[v]]
    if len(keep) == n:
        return _identity(problem)
    index = {v: i for i, v in enumerate(keep)}
    group = np.array([index[root[v]] for v in range(n)], dtype=np.int64)
    edges = np.array([(index[u], index[s]) for u in keep for s in succ[u]], dtype=np.int64).reshape(-1, 2)
    names = None if problem.names is None else tuple(problem.names[v] for v in keep)
    merged = PipelineProblem(name=problem.name, work=np.array([work[v] for v in keep]),
                             size_param=np.array([param[v] for v in keep], dtype=np.int64),
                             size_out=np.array([out[v] for v in keep], dtype=np.int64),
                             edges=edges, bandwidth=problem.bandwidth, memory=None, names=names,
                             meta=dict(problem.meta))
    return Contraction(merged, group, np.array(keep, dtype=np.int64))


def _identity(problem: PipelineProblem) -> Contraction:
    ids = np.arange(problem.n, dtype=np.int64)
    return Contraction(problem, ids, ids)

