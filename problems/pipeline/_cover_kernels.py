"""Numba kernels of the block-cover bound's heuristic pricing (:mod:`problems.pipeline.block_cover`).

A set is grown node by node from a seed, always convex and within the cap, taking the
addable neighbour of the largest dual value ``y`` each time; a local search then adds, drops
or swaps single nodes while that raises ``y(S)`` (:func:`improve`). The sets only feed the
restricted LP: a certificate never depends on them (its ``z`` comes from CP-SAT).
"""

from __future__ import annotations

import numpy as np
from numba import njit
from numpy.typing import NDArray


@njit(cache=True, nogil=True)
def closure(n: int, succ_ptr: NDArray[np.int64], succ: NDArray[np.int64], topo: NDArray[np.int64]
            ) -> NDArray[np.bool_]:
    """``r[u, w]``: w is reachable from u by a path of at least one edge. bool[n, n]."""
    r = np.zeros((n, n), dtype=np.bool_)
    for i in range(n - 1, -1, -1):
        u = topo[i]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            w = succ[e]
            r[u, w] = True
            for x in range(n):
                if r[w, x]:
                    r[u, x] = True
    return r


@njit(cache=True, nogil=True)
def set_cost(inset: NDArray[np.bool_], work: NDArray[np.int64], out: NDArray[np.int64],
             succ_ptr: NDArray[np.int64], succ: NDArray[np.int64]) -> np.int64:
    """Scaled ``work(S) + cut(S) / B`` (each crossing tensor once), as the pricing model counts it."""
    n = inset.shape[0]
    c = np.int64(0)
    for u in range(n):
        if inset[u]:
            c += work[u]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            if inset[succ[e]] != inset[u]:
                c += out[u]
                break
    return c


@njit(cache=True, nogil=True)
def grow(seeds: NDArray[np.int64], y: NDArray[np.float64], cap: np.int64, r: NDArray[np.bool_],
         work: NDArray[np.int64], out: NDArray[np.int64], succ_ptr: NDArray[np.int64],
         succ: NDArray[np.int64], pred_ptr: NDArray[np.int64], pred: NDArray[np.int64]
         ) -> NDArray[np.bool_]:
    """One grown set per seed (bool[len(seeds), n]); a seed whose singleton exceeds ``cap``
    gives an empty row. Each step adds the neighbour (predecessor or successor of a member)
    of largest ``y`` that keeps the set convex and within ``cap``; it ends when none does.
    A candidate's cost is the set's plus its change (:func:`_toggle`, O(its degree)), and the
    hull marks grow with each node added; neither is counted again over the graph."""
    n = y.shape[0]
    res = np.zeros((seeds.shape[0], n), dtype=np.bool_)
    anc = np.zeros(n, dtype=np.bool_)
    desc = np.zeros(n, dtype=np.bool_)
    inside = np.zeros(n, dtype=np.int64)   # consumers of each tensor in the set
    for i in range(seeds.shape[0]):
        inset = np.zeros(n, dtype=np.bool_)
        inside[:] = 0
        cost = _toggle(seeds[i], inset, inside, work, out, succ_ptr, pred_ptr, pred)
        if cost > cap:
            continue
        _hull_marks(inset, r, anc, desc)
        while True:
            best, best_y = -1, 0.0
            for u in range(n):
                if not inset[u]:
                    continue
                for side in range(2):
                    lo = succ_ptr[u] if side == 0 else pred_ptr[u]
                    hi = succ_ptr[u + 1] if side == 0 else pred_ptr[u + 1]
                    for e in range(lo, hi):
                        v = succ[e] if side == 0 else pred[e]
                        if inset[v] or y[v] <= best_y:
                            continue
                        d = _toggle(v, inset, inside, work, out, succ_ptr, pred_ptr, pred)
                        _toggle(v, inset, inside, work, out, succ_ptr, pred_ptr, pred)
                        if cost + d <= cap and _convex_with(v, inset, r, anc, desc):
                            best, best_y = v, y[v]
            if best < 0:
                break
            cost += _toggle(best, inset, inside, work, out, succ_ptr, pred_ptr, pred)
            _mark(best, r, anc, desc)   # the marks of S + best: S's and best's own
        res[i] = inset
    return res


@njit(cache=True, nogil=True)
def best_intervals(orders: NDArray[np.int64], y: NDArray[np.float64], cap: np.int64, work: NDArray[np.int64],
                   out: NDArray[np.int64], succ_ptr: NDArray[np.int64], succ: NDArray[np.int64],
                   pred_ptr: NDArray[np.int64], pred: NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """For each topological order (row of ``orders``) and start position i, the interval
    ``order[i:j]`` of largest ``y`` whose scaled cost is within ``cap``. An interval of a
    topological order is convex (a path between two of its nodes runs through positions between
    them), and every convex set is an interval of some order. Returns (ends int64[r, n], j = i when
    no nonempty interval fits; values float64[r, n]). The cost is updated per added node from
    counts of each tensor's consumers inside: O(n * edges) per order."""
    r, n = orders.shape
    ends = np.zeros((r, n), dtype=np.int64)
    vals = np.zeros((r, n), dtype=np.float64)
    inset = np.zeros(n, dtype=np.bool_)
    inside = np.zeros(n, dtype=np.int64)        # consumers of each tensor inside the interval
    for o in range(r):
        for i in range(n):
            cost = np.int64(0)
            wsum = np.int64(0)
            yv = 0.0
            for j in range(i, n):
                v = orders[o, j]
                wsum += work[v]
                if wsum > cap:
                    break
                # only v's own tensor and its producers' can change whether they cross
                ndeg = succ_ptr[v + 1] - succ_ptr[v]
                if ndeg > 0:
                    before = inside[v] > 0                  # v outside: crosses iff a consumer is in
                    after = inside[v] < ndeg                # v inside: crosses iff a consumer is out
                    if before and not after:
                        cost -= out[v]
                    elif after and not before:
                        cost += out[v]
                inset[v] = True
                cost += work[v]
                for e in range(pred_ptr[v], pred_ptr[v + 1]):
                    p = pred[e]
                    pdeg = succ_ptr[p + 1] - succ_ptr[p]
                    before = (inset[p] and inside[p] < pdeg) or ((not inset[p]) and inside[p] > 0)
                    inside[p] += 1
                    after = (inset[p] and inside[p] < pdeg) or ((not inset[p]) and inside[p] > 0)
                    if before and not after:
                        cost -= out[p]
                    elif after and not before:
                        cost += out[p]
                yv += y[v]
                if cost <= cap and yv > vals[o, i]:
                    vals[o, i] = yv
                    ends[o, i] = j + 1
            # undo the interval's marks
            for j in range(i, n):
                v = orders[o, j]
                if not inset[v]:
                    break
                inset[v] = False
                for e in range(pred_ptr[v], pred_ptr[v + 1]):
                    inside[pred[e]] -= 1
            if ends[o, i] == 0:
                ends[o, i] = i
    return ends, vals


@njit(cache=True, nogil=True)
def _crossing(p: int, inset: NDArray[np.bool_], inside: NDArray[np.int64], succ_ptr: NDArray[np.int64]) -> bool:
    """Whether ``p``'s tensor crosses the boundary of S, from ``inside[p]`` (its consumers in S)."""
    deg = succ_ptr[p + 1] - succ_ptr[p]
    if deg == 0:
        return False
    if inset[p]:
        return inside[p] < deg
    return inside[p] > 0


@njit(cache=True, nogil=True)
def _toggle(v: int, inset: NDArray[np.bool_], inside: NDArray[np.int64], work: NDArray[np.int64],
            out: NDArray[np.int64], succ_ptr: NDArray[np.int64], pred_ptr: NDArray[np.int64],
            pred: NDArray[np.int64]) -> np.int64:
    """Add ``v`` to S or remove it (whichever it is not), keeping ``inside`` right; returns the
    change of S's scaled cost. Only ``v``'s own tensor and its producers' can change crossing."""
    delta = np.int64(0)
    if _crossing(v, inset, inside, succ_ptr):
        delta -= out[v]
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        if _crossing(pred[e], inset, inside, succ_ptr):
            delta -= out[pred[e]]
    step = 1
    if inset[v]:
        inset[v] = False
        delta -= work[v]
        step = -1
    else:
        inset[v] = True
        delta += work[v]
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        inside[pred[e]] += step
    if _crossing(v, inset, inside, succ_ptr):
        delta += out[v]
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        if _crossing(pred[e], inset, inside, succ_ptr):
            delta += out[pred[e]]
    return delta


@njit(cache=True, nogil=True)
def _mark(x: int, r: NDArray[np.bool_], anc: NDArray[np.bool_], desc: NDArray[np.bool_]) -> None:
    """Add member ``x``'s own marks: ``anc[w]`` where w reaches x, ``desc[w]`` where x reaches w."""
    for w in range(r.shape[0]):
        if r[w, x]:
            anc[w] = True
        if r[x, w]:
            desc[w] = True


@njit(cache=True, nogil=True)
def _hull_marks(inset: NDArray[np.bool_], r: NDArray[np.bool_], anc: NDArray[np.bool_], desc: NDArray[np.bool_]) -> None:
    """``anc[w]``: w reaches a member of S; ``desc[w]``: a member reaches w."""
    anc[:] = False
    desc[:] = False
    for x in range(inset.shape[0]):
        if inset[x]:
            _mark(x, r, anc, desc)


@njit(cache=True, nogil=True)
def _convex_with(v: int, inset: NDArray[np.bool_], r: NDArray[np.bool_], anc: NDArray[np.bool_],
                 desc: NDArray[np.bool_]) -> bool:
    """Whether ``S + v`` is convex for a convex S with marks ``anc``, ``desc`` (:func:`_hull_marks`):
    no node outside lies on a path from v to S or from S to v."""
    n = inset.shape[0]
    for w in range(n):
        if inset[w] or w == v:
            continue
        if (r[v, w] and anc[w]) or (r[w, v] and desc[w]):
            return False
    return True


@njit(cache=True, nogil=True)
def _best_addition(inset: NDArray[np.bool_], inside: NDArray[np.int64], y: NDArray[np.float64], base: float,
                   room: np.int64, best_gain: float, r: NDArray[np.bool_], anc: NDArray[np.bool_],
                   desc: NDArray[np.bool_], work: NDArray[np.int64], out: NDArray[np.int64],
                   succ_ptr: NDArray[np.int64], pred_ptr: NDArray[np.int64], pred: NDArray[np.int64]
                   ) -> tuple[float, int, int]:
    """The node v outside S of largest ``y[v] - base`` above ``best_gain`` whose addition keeps S
    convex (marks ``anc``, ``desc`` of S: :func:`_hull_marks`) and raises its cost by at most
    ``room``: (its gain or ``best_gain``, v or -1, node visits of the convexity tests). S and
    ``inside`` are left as they were."""
    n = inset.shape[0]
    best_v = -1
    visits = 0
    for v in range(n):
        if inset[v] or y[v] - base <= best_gain:
            continue
        visits += n
        if not _convex_with(v, inset, r, anc, desc):
            continue
        d = _toggle(v, inset, inside, work, out, succ_ptr, pred_ptr, pred)
        _toggle(v, inset, inside, work, out, succ_ptr, pred_ptr, pred)
        if d <= room:
            best_gain, best_v = y[v] - base, v
    return best_gain, best_v, visits


@njit(cache=True, nogil=True)
def improve(starts: NDArray[np.bool_], y: NDArray[np.float64], cap: np.int64, r: NDArray[np.bool_],
            work: NDArray[np.int64], out: NDArray[np.int64], succ_ptr: NDArray[np.int64],
            succ: NDArray[np.int64], pred_ptr: NDArray[np.int64], pred: NDArray[np.int64],
            max_moves: int, max_work: int) -> NDArray[np.bool_]:
    """Local search for admissible sets of larger ``y(S)`` from each row of ``starts`` (convex
    sets within ``cap``; a row that is not is returned as it is). Each move is the best by ``y``
    of: add a node, drop a node, or drop one and add another, every intermediate and final set
    convex and within ``cap``; at most ``max_moves`` moves per start. The whole call stops after
    about ``max_work`` node visits of its convexity tests (a move costs O(|S| n^2) of them: on
    graphs of thousands of nodes one start could take seconds), leaving every row admissible.
    bool[m, n]."""
    m, n = starts.shape
    res = starts.copy()
    inside = np.zeros(n, dtype=np.int64)
    anc = np.zeros(n, dtype=np.bool_)
    desc = np.zeros(n, dtype=np.bool_)
    work_done = 0
    for i in range(m):
        inset = res[i]
        if not inset.any():
            continue
        if work_done > max_work:
            break
        cost = set_cost(inset, work, out, succ_ptr, succ)
        if cost > cap:
            continue
        inside[:] = 0
        for u in range(n):
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                if inset[succ[e]]:
                    inside[u] += 1
        size = 0
        for u in range(n):
            size += inset[u]
        for _ in range(max_moves):
            if work_done > max_work:
                break
            work_done += (2 * size + 1) * n   # the hull marks of S and of each S - u
            best_gain, best_u, best_v = 1e-9, -1, -1
            # additions, then drops (of nodes of negative y) and swaps
            _hull_marks(inset, r, anc, desc)
            best_gain, best_v, visits = _best_addition(inset, inside, y, 0.0, cap - cost, best_gain, r, anc, desc,
                                                       work, out, succ_ptr, pred_ptr, pred)
            work_done += visits
            for u in range(n):
                if not inset[u]:
                    continue
                if work_done > max_work:
                    break   # the best move among those tried is still admissible
                # S - u stays convex unless u lies between two members
                if anc[u] and desc[u]:
                    continue
                du = _toggle(u, inset, inside, work, out, succ_ptr, pred_ptr, pred)
                if -y[u] > best_gain and cost + du <= cap and inset.any():
                    best_gain, best_u, best_v = -y[u], u, -1
                _hull_marks(inset, r, anc, desc)
                # (u itself is not a swap: its gain, 0, is never above best_gain)
                gain, v, visits = _best_addition(inset, inside, y, y[u], cap - cost - du, best_gain, r, anc, desc,
                                                 work, out, succ_ptr, pred_ptr, pred)
                work_done += visits
                if v >= 0:
                    best_gain, best_u, best_v = gain, u, v
                _toggle(u, inset, inside, work, out, succ_ptr, pred_ptr, pred)
                _hull_marks(inset, r, anc, desc)
            if best_u < 0 and best_v < 0:
                break
            if best_u >= 0:
                cost += _toggle(best_u, inset, inside, work, out, succ_ptr, pred_ptr, pred)
                size -= 1
            if best_v >= 0:
                cost += _toggle(best_v, inset, inside, work, out, succ_ptr, pred_ptr, pred)
                size += 1
    return res
