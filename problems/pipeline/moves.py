"""Local search on a partition with node and boundary moves between adjacent stages.

SliceGraph only cuts one topological order into contiguous blocks; some partitions
are out of reach of a given order (Archer et al. 2024, Lemma B.2). This search moves
nodes between stages directly:

* the stages are labelled ``0..k-1`` so that every edge goes from a stage to the same or
  a later one (a topological numbering of the stage graph; empty stages allowed);
* a move takes a node ``v`` of stage ``s`` to stage ``s + 1`` together with its
  descendants inside ``s`` (a single-node move when ``v`` has no consumer in ``s``, a
  boundary move otherwise), or to stage ``s - 1`` together with its ancestors inside ``s``.
  Such a move keeps the numbering topological, so the stage graph stays acyclic;
* only the two touched stages are re-costed, exactly (work, distinct in/out tensors and
  the overflow of the peak memory under the schedule restricted to the stage; see
  :mod:`problems.pipeline._kernels`), in the same order of summation as the evaluator,
  so the costs kept agree with :func:`problems.pipeline.evaluate.evaluate` to the bit;
* a move is taken when it lowers the key (bottleneck cost, number of stages at the
  bottleneck, sum of squared stage costs) lexicographically, which leaves plateaus where
  several stages share the bottleneck. First improvement over the nodes of the
  bottleneck stages, scanned in a seeded random order: deterministic given the seed.

The schedule is a fixed topological order of all nodes; each stage runs its nodes in
that order. The returned order lists the stages one after another, each in that order
(same restriction, hence the same costs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gapstop.problems.pipeline._kernels import _cost
from gapstop.problems.pipeline.model import PipelineProblem


@njit(cache=True, nogil=True)
def stage_cost(s, order, pos, blocks, work, size_param, size_out, succ_ptr, succ, pred_ptr, pred,
               bandwidth, memory, stamp, token, lastin, crosses):
    """Exact cost of stage ``s`` (nodes with ``blocks == s``) run in ``order``.

    One sweep of ``order``: the same sums, in the same order, as ``_kernels.block_costs``.
    ``stamp`` (int64[n]) must hold no value equal to ``token``; ``lastin`` and ``crosses``
    are scratch arrays of length n. An empty stage costs 0.
    """
    n = order.shape[0]
    wk = 0.0
    prm = 0
    inb = 0
    outb = 0
    cur = 0
    pk = 0
    for t in range(n):
        v = order[t]
        if blocks[v] != s:
            continue
        li = -1
        cr = False
        for e in range(succ_ptr[v], succ_ptr[v + 1]):
            w = succ[e]
            if blocks[w] == s:
                if pos[w] > li:
                    li = pos[w]
            else:
                cr = True
        lastin[v] = li
        crosses[v] = cr
        if cr:
            outb += size_out[v]
        wk += work[v]
        prm += size_param[v]
        cur += size_out[v]
        if cur > pk:
            pk = cur
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred[e]
            if blocks[u] == s:
                if lastin[u] == t and not crosses[u]:
                    cur -= size_out[u]
            elif stamp[u] != token:
                stamp[u] = token
                inb += size_out[u]
    return _cost(wk, inb, outb, prm, pk + inb, bandwidth, memory)


@njit(cache=True, nogil=True)
def _key(costs):
    mx = 0.0
    for c in costs:
        if c > mx:
            mx = c
    cnt = 0
    sq = 0.0
    for c in costs:
        if c == mx:
            cnt += 1
        sq += c * c
    return mx, cnt, sq


@njit(cache=True, nogil=True)
def _less(a0, a1, a2, b0, b1, b2):
    if a0 != b0:
        return a0 < b0
    if a1 != b1:
        return a1 < b1
    return a2 < b2


@njit(cache=True, nogil=True)
def _closure(v, s, forward, blocks, succ_ptr, succ, pred_ptr, pred, mark, buf):
    """Descendants (forward) or ancestors of ``v`` inside stage ``s``, ``v`` included, into ``buf``."""
    buf[0] = v
    mark[v] = True
    size = 1
    head = 0
    while head < size:
        u = buf[head]
        head += 1
        if forward:
            lo, hi = succ_ptr[u], succ_ptr[u + 1]
        else:
            lo, hi = pred_ptr[u], pred_ptr[u + 1]
        for e in range(lo, hi):
            w = succ[e] if forward else pred[e]
            if blocks[w] == s and not mark[w]:
                mark[w] = True
                buf[size] = w
                size += 1
    for i in range(size):
        mark[buf[i]] = False
    return size


@njit(cache=True, nogil=True)
def improve_moves(order, blocks_in, k, scan, work, size_param, size_out, succ_ptr, succ, pred_ptr, pred,
                  bandwidth, memory, max_moves, max_closure):
    """First-improvement local search with adjacent-stage node/boundary moves.

    Args:
        order: int32[n], topological order of all nodes (the schedule).
        blocks_in: int64[n], stage per node in ``[0, k)``; every edge (u, v) must have
            ``blocks[u] <= blocks[v]``.
        scan: int64[n], a permutation of the nodes: the order candidates are tried in.
        max_moves: stop after this many accepted moves.
        max_closure: largest node set one move may carry.
    Returns:
        (blocks int64[n], costs float64[k], moves): the stage labels stay topological;
        ``costs`` are the exact stage costs (0 for an empty stage).
    """
    n = order.shape[0]
    blocks = blocks_in.copy()
    pos = np.empty(n, np.int64)
    for t in range(n):
        pos[order[t]] = t
    stamp = np.full(n, -1, np.int64)
    lastin = np.empty(n, np.int64)
    crosses = np.zeros(n, np.bool_)
    mark = np.zeros(n, np.bool_)
    buf = np.empty(n, np.int64)
    token = 0
    costs = np.zeros(k, np.float64)
    for s in range(k):
        token += 1
        costs[s] = stage_cost(s, order, pos, blocks, work, size_param, size_out, succ_ptr, succ,
                              pred_ptr, pred, bandwidth, memory, stamp, token, lastin, crosses)
    moves = 0
    while moves < max_moves:
        k0, k1, k2 = _key(costs)
        moved = False
        for i in range(n):
            v = scan[i]
            s = blocks[v]
            if costs[s] != k0:
                continue
            for d in range(2):
                t = s + 1 if d == 0 else s - 1
                if t < 0 or t >= k:
                    continue
                size = _closure(v, s, d == 0, blocks, succ_ptr, succ, pred_ptr, pred, mark, buf)
                if size > max_closure:
                    continue
                for j in range(size):
                    blocks[buf[j]] = t
                token += 1
                cs = stage_cost(s, order, pos, blocks, work, size_param, size_out, succ_ptr, succ,
                                pred_ptr, pred, bandwidth, memory, stamp, token, lastin, crosses)
                token += 1
                ct = stage_cost(t, order, pos, blocks, work, size_param, size_out, succ_ptr, succ,
                                pred_ptr, pred, bandwidth, memory, stamp, token, lastin, crosses)
                old_s = costs[s]
                old_t = costs[t]
                costs[s] = cs
                costs[t] = ct
                n0, n1, n2 = _key(costs)
                if _less(n0, n1, n2, k0, k1, k2):
                    moved = True
                    break
                costs[s] = old_s
                costs[t] = old_t
                for j in range(size):
                    blocks[buf[j]] = s
            if moved:
                break
        if not moved:
            break
        moves += 1
    return blocks, costs, moves


@dataclass(frozen=True)
class MoveResult:
    """Outcome of :func:`local_search`.

    Attributes:
        blocks: int64[n], stage per node, renumbered 0..p-1 over the non-empty stages
            (every edge goes to the same or a later stage).
        order: int32[n], schedule with the stages contiguous, each in the input order.
        stage_costs: float64[p], exact cost of each non-empty stage.
        value: the bottleneck, ``stage_costs.max()``.
        moves: accepted moves.
    """

    blocks: NDArray[np.int64]
    order: NDArray[np.int32]
    stage_costs: NDArray[np.float64]
    value: float
    moves: int


def _stage_args(problem: PipelineProblem) -> tuple[Any, ...]:
    p = problem
    return (p.work, p.size_param, p.size_out, p.succ_ptr, p.succ, p.pred_ptr, p.pred, p.bandwidth,
            p.memory_or_minus1)


def local_search(problem: PipelineProblem, blocks: Any, order: Any, k: int, rng: np.random.Generator, *,
                 max_moves: int | None = None, max_closure: int | None = None) -> MoveResult:
    """Improve a partition into at most ``k`` stages by adjacent-stage moves.

    Args:
        blocks: stage per node, labels in a topological numbering of the stage graph
            (as :func:`problems.pipeline.evaluate.evaluate` returns them); at most k labels.
        order: a topological order of all nodes, the schedule (not validated here).
        rng: decides the scan order of the candidates.
        max_moves: cap on accepted moves (default ``4 n``).
        max_closure: cap on the nodes one boundary move carries (default n).
    Returns:
        A :class:`MoveResult` whose key (bottleneck, stages at it, sum of squares) is never
        above the start's.
    Raises:
        ValueError: labels outside ``[0, k)`` or an edge going to an earlier stage.
    """
    n = problem.n
    b = np.ascontiguousarray(blocks, dtype=np.int64)
    o = np.ascontiguousarray(order, dtype=np.int32)
    if b.shape != (n,) or (n and (b.min() < 0 or b.max() >= k)):
        raise ValueError(f"blocks: expected {n} labels in [0, {k})")
    if problem.m and (b[problem.edges[:, 0]] > b[problem.edges[:, 1]]).any():
        raise ValueError("blocks: an edge goes to an earlier stage")
    scan = rng.permutation(n).astype(np.int64)
    nb, costs, moves = improve_moves(o, b, int(k), scan, *_stage_args(problem),
                                     4 * n if max_moves is None else int(max_moves),
                                     n if max_closure is None else int(max_closure))
    used = np.unique(nb)
    relabel = np.searchsorted(used, nb).astype(np.int64)
    pos = np.empty(n, np.int64)
    pos[o] = np.arange(n)
    new_order = np.lexsort((pos, relabel)).astype(np.int32)
    sc = costs[used]
    return MoveResult(relabel, new_order, sc, float(sc.max()) if len(sc) else 0.0, int(moves))
