"""Numba kernel of the MCM constraint solver: one decision per node, propagation, backtracking.

The state is a chip interval ``[lo(v), hi(v)]`` per node. Labels are always monotone
along edges (``chip(u) <= chip(v)``): with ``ring`` that is constraint 1; without it, it
is the DAG numbering every acyclic partition has, so nothing is lost.

Propagation after every decision (all sound: no value of any valid completion is removed):

* bounds along edges: ``lo`` flows to consumers, ``hi`` to producers. With bounds
  consistency alone every interval value extends to a monotone labelling;
* ``ring`` (no empty chip): the intervals must hold a system of distinct representatives
  for the chips 0..C-1 (Glover's greedy on the C x C interval counts, O(C^2)). Together
  with bounds consistency this is *exact* for constraints 1 and 2: representatives on
  two nodes ``a`` -> ... -> ``b`` in the wrong order can be swapped within their
  intervals (``lo(a) <= lo(b)``, ``hi(a) <= hi(b)``), and a monotone set of
  representatives extends to all nodes, so a partial assignment passes iff it extends;
* ``no_triangle``: a new chip edge is checked against the chip graph of the assigned
  nodes (a forward check: violations through unassigned nodes surface when they are
  decided, and chronological backtracking undoes the decision at fault);
* memory: ``param(chip) + max size_out(chip) <= M`` (a necessary condition; the exact
  peak needs the schedule and is checked afterwards).

Status codes: 0 found, 1 infeasible (the search space is exhausted: no valid assignment
exists), 2 budget exhausted (undecided).
"""

from __future__ import annotations

import numpy as np
from numba import njit

FOUND, INFEASIBLE, BUDGET = 0, 1, 2


@njit(cache=True, nogil=True)
def _set(v, nlo, nhi, lo, hi, box, t_node, t_lo, t_hi, tp):
    t_node[tp] = v
    t_lo[tp] = lo[v]
    t_hi[tp] = hi[v]
    box[lo[v], hi[v]] -= 1
    lo[v] = nlo
    hi[v] = nhi
    box[nlo, nhi] += 1
    return tp + 1


@njit(cache=True, nogil=True)
def _representatives(box, avail, c):
    """Every chip 0..c-1 gets a distinct node whose interval holds it (intervals as counts)."""
    avail[:] = 0
    for ch in range(c):
        for h in range(ch, c):
            avail[h] += box[ch, h]
        found = False
        for h in range(ch, c):
            if avail[h] > 0:
                avail[h] -= 1
                found = True
                break
        if not found:
            return False
    return True


@njit(cache=True, nogil=True)
def _triangle(ccnt, c, reach):
    """True if some direct chip edge a -> b also has a path of >= 2 chip edges (edges go up)."""
    for x in range(c - 1, -1, -1):
        r = np.int64(0)
        for d in range(x + 1, c):
            if ccnt[x, d] > 0:
                r |= (np.int64(1) << d) | reach[d]
        reach[x] = r
    for x in range(c):
        direct = np.int64(0)
        longer = np.int64(0)
        for d in range(x + 1, c):
            if ccnt[x, d] > 0:
                direct |= np.int64(1) << d
                longer |= reach[d]
        if direct & longer:
            return True
    return False


@njit(cache=True, nogil=True)
def constrained_dfs(seq, first, weights, greedy, seed, c, ring, no_triangle, mem_limit,
                    succ_ptr, succ, pred_ptr, pred, param, size_out, max_fails):
    """Decide the nodes of ``seq`` in order, propagating and backtracking.

    Args:
        seq: int64[L], the decision order (a permutation of all nodes unless ``greedy``).
        first: int64[n], a value to try first per node (-1: none).
        weights: float64[n, c] sampling weights restricted to the domain, or shape (0, c)
            for uniform; values with zero total weight fall back to uniform.
        greedy: FIX's first pass: try only ``first[u]``; if it fails, leave u undecided
            (no backtracking).
        seed: seeds numba's generator (per thread).
        c: chips (<= 62); ring, no_triangle: constraints; mem_limit: bytes (-1: none).
        max_fails: backtracks (returns to an earlier decision, each undoing it) allowed
            before giving up (status 2); a value rejected by propagation is not one.
    Returns:
        (status, chips int64[n] (-1 undecided), backtracks).
    """
    n = succ_ptr.shape[0] - 1
    steps = seq.shape[0]
    np.random.seed(seed)
    lo = np.zeros(n, np.int64)
    hi = np.full(n, c - 1, np.int64)
    chips = np.full(n, -1, np.int64)
    box = np.zeros((c, c), np.int64)
    box[0, c - 1] = n
    cap = 2 * n * c + 2 * n + 8
    t_node = np.empty(cap, np.int64)
    t_lo = np.empty(cap, np.int64)
    t_hi = np.empty(cap, np.int64)
    tp = 0
    ccnt = np.zeros((c, c), np.int64)
    e_tr = np.empty(succ.shape[0] + 8, np.int64)
    ep = 0
    psum = np.zeros(c, np.int64)
    mout = np.zeros(c, np.int64)
    lv_tp = np.zeros(steps + 1, np.int64)
    lv_ep = np.zeros(steps + 1, np.int64)
    lv_val = np.zeros(steps + 1, np.int64)
    lv_mout = np.zeros(steps + 1, np.int64)
    tried = np.zeros(steps + 1, np.int64)
    queue = np.empty(n + 1, np.int64)
    inq = np.zeros(n, np.bool_)
    avail = np.zeros(c, np.int64)
    reach = np.zeros(c, np.int64)
    cand = np.empty(c, np.int64)
    use_w = weights.shape[0] == n
    if ring and not _representatives(box, avail, c):
        return INFEASIBLE, chips, 0
    fails = 0
    level = 0
    while level < steps:
        u = seq[level]
        # ------------------------------------------------------------- choose a value
        k = 0
        for x in range(lo[u], hi[u] + 1):
            if not (tried[level] >> x) & 1:
                cand[k] = x
                k += 1
        val = -1
        f = first[u]
        if f >= 0 and f >= lo[u] and f <= hi[u] and not (tried[level] >> f) & 1:
            val = f
        elif greedy:
            val = -1
        elif k > 0:
            total = 0.0
            if use_w:
                for i in range(k):
                    total += max(weights[u, cand[i]], 0.0)
            if total > 0.0:
                r = np.random.random() * total
                val = cand[k - 1]
                for i in range(k):
                    w = max(weights[u, cand[i]], 0.0)
                    if r < w:
                        val = cand[i]
                        break
                    r -= w
                if max(weights[u, val], 0.0) == 0.0:  # rounding fell off the end onto a zero weight
                    for i in range(k - 1, -1, -1):
                        if weights[u, cand[i]] > 0.0:
                            val = cand[i]
                            break
            else:
                val = cand[np.random.randint(0, k)]
        if val < 0:
            if greedy:
                level += 1
                if level < steps:
                    tried[level] = 0
                continue
            tried[level] = 0
            level -= 1
            if level < 0:
                return INFEASIBLE, chips, fails
            # undo the previous decision and exclude its value there
            tp, ep = _undo(seq[level], lv_val[level], lv_tp[level], lv_ep[level], lv_mout[level], lo, hi, box,
                           t_node, t_lo, t_hi, tp, ccnt, e_tr, ep, chips, psum, mout, param, c)
            tried[level] |= np.int64(1) << lv_val[level]
            fails += 1
            if fails > max_fails:
                return BUDGET, chips, fails
            continue
        # ------------------------------------------------------------- assign and propagate
        lv_tp[level] = tp
        lv_ep[level] = ep
        lv_val[level] = val
        lv_mout[level] = mout[val]
        ok = True
        tp = _set(u, val, val, lo, hi, box, t_node, t_lo, t_hi, tp)
        qh = 0
        qt = 0
        queue[qt] = u
        qt += 1
        inq[u] = True
        while qh < qt and ok:
            x = queue[qh % (n + 1)]
            qh += 1
            inq[x] = False
            for e in range(succ_ptr[x], succ_ptr[x + 1]):
                w = succ[e]
                if lo[w] < lo[x]:
                    if lo[x] > hi[w]:
                        ok = False
                        break
                    tp = _set(w, lo[x], hi[w], lo, hi, box, t_node, t_lo, t_hi, tp)
                    if not inq[w]:
                        inq[w] = True
                        queue[qt % (n + 1)] = w
                        qt += 1
            if not ok:
                break
            for e in range(pred_ptr[x], pred_ptr[x + 1]):
                p = pred[e]
                if hi[p] > hi[x]:
                    if hi[x] < lo[p]:
                        ok = False
                        break
                    tp = _set(p, lo[p], hi[x], lo, hi, box, t_node, t_lo, t_hi, tp)
                    if not inq[p]:
                        inq[p] = True
                        queue[qt % (n + 1)] = p
                        qt += 1
        while qh < qt:  # a failed propagation leaves nodes queued
            inq[queue[qh % (n + 1)]] = False
            qh += 1
        if ok:
            chips[u] = val
            psum[val] += param[u]
            if size_out[u] > mout[val]:
                mout[val] = size_out[u]
            new_edge = False
            for e in range(pred_ptr[u], pred_ptr[u + 1]):
                p = pred[e]
                if chips[p] >= 0 and chips[p] != val:
                    ccnt[chips[p], val] += 1
                    new_edge = new_edge or ccnt[chips[p], val] == 1
                    e_tr[ep] = chips[p] * c + val
                    ep += 1
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                w = succ[e]
                if chips[w] >= 0 and chips[w] != val:
                    ccnt[val, chips[w]] += 1
                    new_edge = new_edge or ccnt[val, chips[w]] == 1
                    e_tr[ep] = val * c + chips[w]
                    ep += 1
            if mem_limit >= 0 and psum[val] + mout[val] > mem_limit:
                ok = False
            elif no_triangle and new_edge and _triangle(ccnt, c, reach):
                ok = False
            elif ring and not _representatives(box, avail, c):
                ok = False
        if ok:
            level += 1
            if level < steps:
                tried[level] = 0
            continue
        tp, ep = _undo(u, val, lv_tp[level], lv_ep[level], lv_mout[level], lo, hi, box,
                       t_node, t_lo, t_hi, tp, ccnt, e_tr, ep, chips, psum, mout, param, c)
        if greedy:
            level += 1
            if level < steps:
                tried[level] = 0
            continue
        tried[level] |= np.int64(1) << val  # a rejected value; the node tries another one
    return FOUND, chips, fails


@njit(cache=True, nogil=True)
def _undo(u, val, tp0, ep0, mout_old, lo, hi, box, t_node, t_lo, t_hi, tp, ccnt, e_tr, ep, chips,
          psum, mout, param, c):
    while tp > tp0:
        tp -= 1
        v = t_node[tp]
        box[lo[v], hi[v]] -= 1
        lo[v] = t_lo[tp]
        hi[v] = t_hi[tp]
        box[lo[v], hi[v]] += 1
    while ep > ep0:
        ep -= 1
        ccnt[e_tr[ep] // c, e_tr[ep] % c] -= 1
    if chips[u] >= 0:
        chips[u] = -1
        psum[val] -= param[u]
        mout[val] = mout_old
    return tp, ep
