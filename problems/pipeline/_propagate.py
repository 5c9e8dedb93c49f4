"""Numba kernel of the MCM constraint solver: one decision per node, propagation, backtracking.

The state is a chip interval ``[lo(v), hi(v)]`` per node. Labels are always monotone
along edges (``chip(u) <= chip(v)``): with ``ring`` that is constraint 1; without it, it
is the DAG numbering every acyclic partition has, so nothing is lost.

Propagation after every decision (all sound: no value of any valid completion is removed):

* bounds along edges: ``lo`` flows to consumers, ``hi`` to producers. With bounds
  consistency alone every interval value extends to a monotone labelling;
* ``ring`` (no skipped chip): the intervals must hold a system of distinct
  representatives for the chips 0..K (Glover's greedy on the C x C interval counts,
  O(C^2)), where K = C-1 under the strict reading (``RING_ALL``: every chip used) and
  K = max lo(v) under equation 3's prefix reading (``RING_PREFIX``: every completion uses
  a chip >= K, so chips 0..K are all used). Together with bounds consistency this is
  *exact* for constraints 1 and 2: representatives on two nodes ``a`` -> ... -> ``b`` in
  the wrong order can be swapped within their intervals (``lo(a) <= lo(b)``,
  ``hi(a) <= hi(b)``), and a monotone set of representatives extends to all nodes (under
  the prefix reading, within the intervals clipped to ``[lo, min(hi, K)]``, which stay
  bounds consistent and hold the same representatives), so a partial assignment passes iff
  it extends;
* ``no_triangle`` (with ``tri_prop``, :func:`_triangle_prune`): the chip edges of the
  assigned nodes are certain, and so is a chip path ``a -> ... -> b`` wherever a graph path
  runs from a node on chip a to a node on chip b through undecided nodes only (labels are
  monotone along it). If a certain direct edge ``a -> b`` has a certain path of two or more
  edges, no completion is valid (a dead end, found before the nodes in between are
  decided). Then every undecided node next to a decided one gets its bounds tightened: a
  value x is removed if deciding the node on x would, with the facts it implies (direct
  edges to its decided neighbours' chips, paths from the chips that reach it and to the
  chips it reaches), close such a triangle. Only facts implied by the assignment are used,
  so no value of a valid completion is removed; values inside the interval are checked
  when chosen. This runs after the decisions that add a chip edge (it costs O(n + m)).
  Without ``tri_prop`` the triangle is only forward-checked on the chip graph
  of the assigned nodes (violations through undecided nodes surface late, and
  chronological backtracking undoes decisions one by one);
* memory: ``param(chip) + max size_out(chip) <= M`` (a necessary condition; the exact
  peak needs the schedule and is checked afterwards).

Status codes: 0 found, 1 infeasible (the search space is exhausted: no valid assignment
exists), 2 budget exhausted (undecided).

Compiled code is cached in ``__pycache__`` (numba ``cache=True``), keyed by this file's name
and stamp, not by its import path: a change of import path needs a change of this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gapstop.problems.pipeline._kernels import kahn_order

FOUND, INFEASIBLE, BUDGET = 0, 1, 2
#: the ``ring`` argument of :func:`constrained_dfs`: no ring; ring order and the used chips a
#: prefix 0..m (equation 3); ring order and every chip used
RING_NONE, RING_PREFIX, RING_ALL = 0, 1, 2


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
def _representatives(box, avail, c, ring):
    """Every chip that must be used gets a distinct node whose interval holds it (intervals as
    counts ``box[lo, hi]``): chips 0..c-1 with ``RING_ALL``, 0..max lo with ``RING_PREFIX``."""
    need = c
    if ring != RING_ALL:
        need = 0
        for lo in range(c - 1, -1, -1):
            for h in range(lo, c):
                if box[lo, h] > 0:
                    need = lo + 1
                    break
            if need:
                break
    avail[:] = 0
    for ch in range(need):
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
def _bit_index(low):
    """Index of the single set bit of ``low`` (a power of two below 2^63; exact in float)."""
    return np.int64(np.log2(np.float64(low)) + 0.5)


@njit(cache=True, nogil=True)
def _push(x, up, ptr, adj, queue, qt, inq, lo, hi, box, t_node, t_lo, t_hi, tp):
    """Tighten ``x``'s neighbours ``adj[ptr[x]:ptr[x+1]]``: with ``up`` (successors) raise their
    ``lo`` to ``lo(x)``, else (predecessors) lower their ``hi`` to ``hi(x)``; queue each changed
    one. Returns (ok, qt, tp); ok is False when a neighbour's interval empties (it stops there)."""
    n = lo.shape[0]
    for e in range(ptr[x], ptr[x + 1]):
        w = adj[e]
        nlo = lo[x] if up and lo[x] > lo[w] else lo[w]
        nhi = hi[x] if not up and hi[x] < hi[w] else hi[w]
        if nlo == lo[w] and nhi == hi[w]:
            continue
        if nlo > nhi:
            return False, qt, tp
        tp = _set(w, nlo, nhi, lo, hi, box, t_node, t_lo, t_hi, tp)
        if not inq[w]:
            inq[w] = True
            queue[qt % (n + 1)] = w
            qt += 1
    return True, qt, tp


@njit(cache=True, nogil=True)
def _bounds(queue, qt, inq, lo, hi, box, t_node, t_lo, t_hi, tp, succ_ptr, succ, pred_ptr, pred):
    """Bounds consistency along edges from the ``qt`` queued nodes; returns (ok, tp)."""
    n = lo.shape[0]
    qh = 0
    ok = True
    while qh < qt and ok:
        x = queue[qh % (n + 1)]
        qh += 1
        inq[x] = False
        ok, qt, tp = _push(x, True, succ_ptr, succ, queue, qt, inq, lo, hi, box, t_node, t_lo, t_hi, tp)
        if ok:
            ok, qt, tp = _push(x, False, pred_ptr, pred, queue, qt, inq, lo, hi, box, t_node, t_lo, t_hi, tp)
    while qh < qt:  # a failed propagation leaves nodes queued
        inq[queue[qh % (n + 1)]] = False
        qh += 1
    return ok, tp


@njit(cache=True, nogil=True)
def _value_closes_triangle(x, amask, bmask, dp, ds, dsucc, reach, anc, two):
    """Would deciding an undecided node on chip ``x`` close a triangle?

    ``amask``/``bmask``: chips of the decided nodes that reach the node / that it reaches
    through undecided nodes; ``dp``/``ds``: chips of its decided direct predecessors /
    successors. ``dsucc``, ``reach``, ``anc``, ``two`` (per chip: direct successors, chips
    reachable, chips reaching it, chips reachable by >= 2 edges) describe the certain chip
    graph, which has no triangle. The node on x adds edges ``dp -> x -> ds`` and paths
    ``amask -> x -> bmask``; every new path runs through x, so only chips reaching x (``ax``)
    and x itself can gain a triangle (see the module docstring).
    """
    bx = np.int64(1) << x
    into = amask & ~bx
    outof = bmask & ~bx
    ax = into | anc[x]
    m = into
    while m:
        low = m & -m
        ax |= anc[_bit_index(low)]
        m ^= low
    dx = reach[x] | outof  # everything x reaches afterwards (closed under reach)
    m = outof
    while m:
        low = m & -m
        dx |= reach[_bit_index(low)]
        m ^= low
    pd = dp & ~bx
    m = ax
    while m:
        low = m & -m
        p = _bit_index(low)
        m ^= low
        direct = dsucc[p]
        if pd & low:
            direct |= bx
        longer = two[p] | dx
        if reach[p] & ax:  # p reaches a chip that reaches x: p -> ... -> x has >= 2 edges
            longer |= bx
        if direct & longer:
            return True
    two_x = np.int64(0)
    m = dx
    while m:
        low = m & -m
        two_x |= reach[_bit_index(low)]
        m ^= low
    return ((dsucc[x] | (ds & ~bx)) & two_x) != 0


@njit(cache=True, nogil=True)
def _undecided_masks(topo, forward, chips, ptr, adj, mask, direct):
    """Per undecided node: ``mask`` = chips of the decided nodes linked to it by a path of
    undecided nodes, ``direct`` = chips of its decided neighbours. ``adj`` holds the
    predecessors (``forward``: visit in topological order) or the successors (reverse)."""
    n = chips.shape[0]
    for i in range(n):
        v = topo[i] if forward else topo[n - 1 - i]
        if chips[v] >= 0:
            continue
        a = np.int64(0)
        d = np.int64(0)
        for e in range(ptr[v], ptr[v + 1]):
            w = adj[e]
            if chips[w] >= 0:
                d |= np.int64(1) << chips[w]
            else:
                a |= mask[w]
        mask[v] = a | d
        direct[v] = d


@njit(cache=True, nogil=True)
def _triangle_prune(chips, lo, hi, box, t_node, t_lo, t_hi, tp, ccnt, c, topo, amask, bmask, dp, ds,
                    dsucc, reach, anc, two, queue, inq, succ_ptr, succ, pred_ptr, pred):
    """Triangle propagation after a decision (see the module docstring); returns (ok, tp)."""
    n = chips.shape[0]
    _undecided_masks(topo, True, chips, pred_ptr, pred, amask, dp)
    _undecided_masks(topo, False, chips, succ_ptr, succ, bmask, ds)
    # the certain chip graph: direct edges, plus paths through undecided nodes
    for a in range(c):
        r = np.int64(0)
        for b in range(a + 1, c):
            if ccnt[a, b] > 0:
                r |= np.int64(1) << b
        dsucc[a] = r
        reach[a] = r
    for v in range(n):
        if chips[v] < 0 and amask[v] != 0 and bmask[v] != 0:
            m = amask[v]
            while m:
                low = m & -m
                a = _bit_index(low)
                m ^= low
                reach[a] |= bmask[v] & ~low
    for x in range(c - 1, -1, -1):  # chip ids are a topological order of the chip graph
        m = reach[x]
        r = m
        while m:
            low = m & -m
            r |= reach[_bit_index(low)]
            m ^= low
        reach[x] = r
    anc[:] = 0
    for x in range(c):
        m = reach[x]
        while m:
            low = m & -m
            anc[_bit_index(low)] |= np.int64(1) << x
            m ^= low
    for a in range(c):
        m = reach[a]
        t = np.int64(0)
        while m:
            low = m & -m
            t |= reach[_bit_index(low)]
            m ^= low
        two[a] = t
        if dsucc[a] & t:
            return False, tp
    changed = True
    while changed:  # bounds moved by the edge propagation expose new ends to test
        changed = False
        qt = 0
        for v in range(n):
            if chips[v] >= 0 or (dp[v] | ds[v]) == 0:
                continue
            l = lo[v]
            h = hi[v]
            while l <= h and _value_closes_triangle(h, amask[v], bmask[v], dp[v], ds[v], dsucc, reach, anc, two):
                h -= 1
            while l <= h and _value_closes_triangle(l, amask[v], bmask[v], dp[v], ds[v], dsucc, reach, anc, two):
                l += 1
            if l > h:
                for i in range(qt):
                    inq[queue[i]] = False
                return False, tp
            if l != lo[v] or h != hi[v]:
                tp = _set(v, l, h, lo, hi, box, t_node, t_lo, t_hi, tp)
                if not inq[v]:
                    inq[v] = True
                    queue[qt % (n + 1)] = v
                    qt += 1
        if qt:
            changed = True
            ok, tp = _bounds(queue, qt, inq, lo, hi, box, t_node, t_lo, t_hi, tp, succ_ptr, succ, pred_ptr, pred)
            if not ok:
                return False, tp
    return True, tp


@njit(cache=True, nogil=True)
def constrained_dfs(seq, first, weights, greedy, seed, c, ring, no_triangle, mem_limit,
                    succ_ptr, succ, pred_ptr, pred, param, size_out, max_fails, tri_prop=True,
                    domains=None, nearest=False):
    """Decide the nodes of ``seq`` in order, propagating and backtracking.

    Args:
        seq: int64[L], the decision order (a permutation of all nodes unless ``greedy``).
        first: int64[n], a value to try first per node (-1: none).
        weights: float64[n, c] sampling weights restricted to the domain, or shape (0, c)
            for uniform; values with zero total weight fall back to uniform.
        greedy: FIX's first pass: try only ``first[u]``; if it fails, leave u undecided
            (no backtracking).
        seed: seeds numba's generator (per thread).
        c: chips (<= 62); ring: :data:`RING_NONE`, :data:`RING_PREFIX` or :data:`RING_ALL`;
            no_triangle: constraint 3; mem_limit: bytes (-1: none).
        tri_prop: propagate the triangle constraint (False: forward-check it only).
        domains: optional int64[2, n] that receives the final ``lo`` and ``hi`` of every
            node when the search ends with status 0 (for tests: ``seq`` may then be a
            prefix, and the domains are those of the undecided nodes after propagation).
        nearest: FIX's repair: a node whose ``first`` value is out of its domain (or
            failed) takes the untried value nearest to it (ties at random) instead of a
            sampled one; a node without a ``first`` value is sampled as usual.
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
    prop = no_triangle and tri_prop
    # any topological order serves the path masks (:func:`_undecided_masks`)
    topo = kahn_order(np.zeros(n), succ_ptr, succ, pred_ptr) if prop else np.empty(0, np.int32)
    amask = np.zeros(n, np.int64)
    bmask = np.zeros(n, np.int64)
    dp = np.zeros(n, np.int64)
    ds = np.zeros(n, np.int64)
    dsucc = np.zeros(c, np.int64)
    anc = np.zeros(c, np.int64)
    two = np.zeros(c, np.int64)
    if ring and not _representatives(box, avail, c, ring):
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
        elif k > 0 and nearest and f >= 0:
            # the repaired chip stays as close to the proposal as the domain allows
            best_d = c + 1
            ties = 0
            for i in range(k):
                d = abs(cand[i] - f)
                if d < best_d:
                    best_d = d
                    ties = 0
                if d == best_d:
                    cand[ties] = cand[i]
                    ties += 1
            val = cand[np.random.randint(0, ties)]
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
        tp = _set(u, val, val, lo, hi, box, t_node, t_lo, t_hi, tp)
        queue[0] = u
        inq[u] = True
        ok, tp = _bounds(queue, 1, inq, lo, hi, box, t_node, t_lo, t_hi, tp, succ_ptr, succ, pred_ptr, pred)
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
            elif no_triangle and not prop and new_edge and _triangle(ccnt, c, reach):
                ok = False
            # propagate only when a chip edge appears: skipping it otherwise only prunes less
            # (facts through undecided nodes wait for the next new edge; the chip graph, checked
            # at every new edge, stays triangle-free), and each run costs O(n + m)
            if ok and prop and new_edge:
                ok, tp = _triangle_prune(chips, lo, hi, box, t_node, t_lo, t_hi, tp, ccnt, c, topo, amask, bmask,
                                         dp, ds, dsucc, reach, anc, two, queue, inq, succ_ptr, succ, pred_ptr,
                                         pred)
            if ok and ring and not _representatives(box, avail, c, ring):
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
    if domains is not None:
        domains[0, :] = lo
        domains[1, :] = hi
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
