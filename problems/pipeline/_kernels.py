"""Numba kernels for MTPP: Kahn's algorithm with priorities, exact block costs, SliceGraph.

Pure functions on arrays (no Python objects), compiled with ``nogil=True`` so
several threads can decode at once, and ``cache=True`` so the compilation is
paid once per machine.

Cost of a block S executed in schedule order (the order restricted to S),
in the problem's time unit::

    f(S) = work(S) + (in_bytes(S) + out_bytes(S)) / B
           + max(param(S) + peak(S) - M, 0) / B          (the last term only if M is set)

* ``in_bytes``: sum of ``size_out(u)`` over distinct producers u outside S with a consumer in S;
* ``out_bytes``: sum of ``size_out(u)`` over u in S with a consumer outside S;
* ``peak``: the maximum over the steps of S's schedule of the live activation bytes, where
  every input tensor is live for the whole block, the tensor of u in S is live from u's
  step through its last consumer in S, or through the end of the block if u has a
  consumer outside S or no consumer at all (a model output).

Byte quantities are int64 and summed exactly; ``work`` is summed in schedule order.
The evaluator and SliceGraph evaluate this same expression in the same order, so
their results agree to the last bit.

Compiled code is cached in ``__pycache__`` (numba ``cache=True``), keyed by this file's name
and stamp, not by its import path: a change of import path needs a change of this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

INF = np.inf


@njit(cache=True, nogil=True)
def _heap_better(ka, na, kb, nb):  # larger priority first; ties: smaller node index
    return ka > kb or (ka == kb and na < nb)


@njit(cache=True, nogil=True)
def kahn_order(priority, succ_ptr, succ, pred_ptr):
    """Topological order by Kahn's algorithm with a max-heap on ``priority``.

    Ties are broken by the smaller node index, so the order is a deterministic
    function of ``priority``. Returns int32[n].
    """
    n = priority.shape[0]
    indeg = np.empty(n, np.int64)
    for v in range(n):
        indeg[v] = pred_ptr[v + 1] - pred_ptr[v]
    hk = np.empty(n, np.float64)
    hn = np.empty(n, np.int32)
    size = 0
    order = np.empty(n, np.int32)
    for v in range(n):
        if indeg[v] == 0:
            # sift up
            i = size
            size += 1
            kv = priority[v]
            while i > 0:
                p = (i - 1) >> 1
                if _heap_better(kv, v, hk[p], hn[p]):
                    hk[i] = hk[p]
                    hn[i] = hn[p]
                    i = p
                else:
                    break
            hk[i] = kv
            hn[i] = v
    t = 0
    while size > 0:
        u = hn[0]
        order[t] = u
        t += 1
        size -= 1
        if size > 0:
            lk = hk[size]
            ln = hn[size]
            i = 0
            while True:
                c = 2 * i + 1
                if c >= size:
                    break
                if c + 1 < size and _heap_better(hk[c + 1], hn[c + 1], hk[c], hn[c]):
                    c += 1
                if _heap_better(hk[c], hn[c], lk, ln):
                    hk[i] = hk[c]
                    hn[i] = hn[c]
                    i = c
                else:
                    break
            hk[i] = lk
            hn[i] = ln
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            v = succ[e]
            indeg[v] -= 1
            if indeg[v] == 0:
                i = size
                size += 1
                kv = priority[v]
                while i > 0:
                    p = (i - 1) >> 1
                    if _heap_better(kv, v, hk[p], hn[p]):
                        hk[i] = hk[p]
                        hn[i] = hn[p]
                        i = p
                    else:
                        break
                hk[i] = kv
                hn[i] = v
    return order


@njit(cache=True, nogil=True)
def levels(order, succ_ptr, succ, pred_ptr, pred):
    """Earliest (ASAP: longest path from a source) and latest (ALAP: deepest level minus the
    longest path to a sink) level of each node, from a topological ``order``. Returns two int64[n]."""
    n = order.shape[0]
    asap = np.zeros(n, np.int64)
    for t in range(n):
        v = order[t]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            if asap[pred[e]] + 1 > asap[v]:
                asap[v] = asap[pred[e]] + 1
    height = np.zeros(n, np.int64)
    depth = 0
    for t in range(n - 1, -1, -1):
        u = order[t]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            if height[succ[e]] + 1 > height[u]:
                height[u] = height[succ[e]] + 1
        if height[u] > depth:
            depth = height[u]
    alap = np.empty(n, np.int64)
    for v in range(n):
        alap[v] = depth - height[v]
    return asap, alap


@njit(cache=True, nogil=True)
def _cost(work_s, in_b, out_b, param_s, peak, bandwidth, memory):
    c = work_s + (in_b + out_b) / bandwidth
    if memory >= 0:
        over = param_s + peak - memory
        if over > 0:
            c = c + over / bandwidth
    return c


@njit(cache=True, nogil=True)
def block_costs(order, blocks, nblocks, work, size_param, size_out, succ_ptr, succ,
                pred_ptr, pred, bandwidth, memory):
    """Exact cost of every block of a partition, each block run in ``order``.

    Args:
        order: int32[n], a topological order of all nodes (the schedule).
        blocks: int[n], block label of each node, in ``[0, nblocks)``.
    Returns:
        (cost float64[nb], work float64[nb], in_bytes int64[nb], out_bytes int64[nb],
        param int64[nb], peak int64[nb]).
    """
    n = order.shape[0]
    pos = np.empty(n, np.int64)
    for t in range(n):
        pos[order[t]] = t
    wk = np.zeros(nblocks, np.float64)
    inb = np.zeros(nblocks, np.int64)
    outb = np.zeros(nblocks, np.int64)
    prm = np.zeros(nblocks, np.int64)
    cur = np.zeros(nblocks, np.int64)
    pk = np.zeros(nblocks, np.int64)
    stamp = np.full(nblocks, -1, np.int64)
    lastin = np.full(n, -1, np.int64)      # position of the last consumer in the same block
    crosses = np.zeros(n, np.bool_)        # has a consumer in another block
    for u in range(n):
        b = blocks[u]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            w = succ[e]
            bw = blocks[w]
            if bw == b:
                if pos[w] > lastin[u]:
                    lastin[u] = pos[w]
            else:
                crosses[u] = True
                if stamp[bw] != u:
                    stamp[bw] = u
                    inb[bw] += size_out[u]
        if crosses[u]:
            outb[b] += size_out[u]
    for t in range(n):
        v = order[t]
        b = blocks[v]
        wk[b] += work[v]
        prm[b] += size_param[v]
        cur[b] += size_out[v]
        if cur[b] > pk[b]:
            pk[b] = cur[b]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred[e]
            if blocks[u] == b and lastin[u] == t and not crosses[u]:
                cur[b] -= size_out[u]
    cost = np.empty(nblocks, np.float64)
    for b in range(nblocks):
        pk[b] += inb[b]
        cost[b] = _cost(wk[b], inb[b], outb[b], prm[b], pk[b], bandwidth, memory)
    return cost, wk, inb, outb, prm, pk


@njit(cache=True, nogil=True)
def _max_consumer_pos(pos, succ_ptr, succ):
    """Position of each node's last consumer in the order given by ``pos`` (-1 for sinks)."""
    n = pos.shape[0]
    maxcons = np.full(n, -1, np.int64)
    for u in range(n):
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            p = pos[succ[e]]
            if p > maxcons[u]:
                maxcons[u] = p
    return maxcons


@njit(cache=True, nogil=True)
def _segment_cost(order, pos, l, r, maxcons, work, size_param, size_out, pred_ptr, pred,
                  bandwidth, memory, stamp):
    """Cost of the block made of positions ``l..r`` of ``order`` (inclusive)."""
    work_s = 0.0
    param_s = 0
    in_b = 0
    out_b = 0
    sink_b = 0
    runmax = 0
    # slice_order repeats this loop's body inlined (see there why): change both together
    for t in range(l, r + 1):
        v = order[t]
        a = size_out[v] + out_b + sink_b
        if a > runmax:
            runmax = a
        work_s += work[v]
        param_s += size_param[v]
        for e in range(pred_ptr[v], pred_ptr[v + 1]):
            u = pred[e]
            if pos[u] >= l:
                if maxcons[u] == t:
                    out_b -= size_out[u]
            elif stamp[u] != l:
                stamp[u] = l
                in_b += size_out[u]
        if maxcons[v] > t:
            out_b += size_out[v]
        elif maxcons[v] < 0:
            sink_b += size_out[v]
    # positions after r: tensors of [l, r] consumed beyond r were kept in out_b already
    return _cost(work_s, in_b, out_b, param_s, in_b + runmax, bandwidth, memory)


@njit(cache=True, nogil=True)
def _equal_work_split(order, pos, maxcons, k, work, size_param, size_out, pred_ptr, pred, bandwidth,
                      memory, stamp):
    """The split of ``order`` into at most k blocks of about equal work, and its bottleneck.
    Leaves ``stamp`` at -1."""
    n = order.shape[0]
    total = 0.0
    for t in range(n):
        total += work[order[t]]
    ustarts = np.empty(k, np.int64)
    acc = 0.0
    ustarts[0] = 0
    nu = 1
    for t in range(n):
        if nu < k and t > 0 and acc >= total * nu / k:
            ustarts[nu] = t
            nu += 1
        acc += work[order[t]]
    u0 = 0.0
    for i in range(nu):
        lo = ustarts[i]
        hi = ustarts[i + 1] - 1 if i + 1 < nu else n - 1
        c = _segment_cost(order, pos, lo, hi, maxcons, work, size_param, size_out,
                          pred_ptr, pred, bandwidth, memory, stamp)
        if c > u0:
            u0 = c
    for u in range(n):
        stamp[u] = -1
    return u0, ustarts[:nu].copy()


@njit(cache=True, nogil=True)
def _greedy_split(order, pos, maxcons, k, T, mem_cap, work, size_param, size_out, pred_ptr, pred,
                  bandwidth, memory, stamp, sid, starts):
    """Greedy split of ``order``: each block runs to the last position where its cost is <= T
    (and, if ``mem_cap`` >= 0, its ``param + peak`` <= mem_cap), a sweep that stops once the
    cost's monotone part passes T. O(n + m) plus the sweeps' overshoot.

    ``stamp`` marks counted input tensors with sweep ids from ``sid`` up (never reset);
    ``starts`` (int64[k]) receives the block starts. Returns ``(p, value, sid)``: p blocks
    (p = k + 1: no such split into at most k blocks), their bottleneck, the next free sweep id.
    """
    n = order.shape[0]
    l = 0
    p = 0
    value = 0.0
    while l < n:
        if p == k:
            return k + 1, INF, sid
        work_s = 0.0
        param_s = 0
        in_b = 0
        out_b = 0
        sink_b = 0
        runmax = 0
        best_r = -1
        best_c = INF
        for r in range(l, n):
            v = order[r]
            a = size_out[v] + out_b + sink_b
            if a > runmax:
                runmax = a
            work_s += work[v]
            param_s += size_param[v]
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred[e]
                if pos[u] >= l:
                    if maxcons[u] == r:
                        out_b -= size_out[u]
                elif stamp[u] != sid:
                    stamp[u] = sid
                    in_b += size_out[u]
            if maxcons[v] > r:
                out_b += size_out[v]
            elif maxcons[v] < 0:
                sink_b += size_out[v]
            if mem_cap >= 0 and param_s + in_b + runmax > mem_cap:
                break
            if _cost(work_s, 0, 0, param_s, in_b + runmax, bandwidth, memory) > T:
                break
            c = _cost(work_s, in_b, out_b, param_s, in_b + runmax, bandwidth, memory)
            if c <= T:
                best_r = r
                best_c = c
        sid += 1
        if best_r < 0:
            return k + 1, INF, sid
        starts[p] = l
        p += 1
        if best_c > value:
            value = best_c
        l = best_r + 1
    return p, value, sid


@njit(cache=True, nogil=True)
def bisect_split(order, k, mem_cap, probes, work, size_param, size_out, succ_ptr, succ, pred_ptr, pred,
                 bandwidth, memory):
    """A good split of ``order`` into at most k contiguous blocks in linear time per probe: the
    best of the equal-work split and of greedy splits (:func:`_greedy_split`) whose cost cap T
    is bisected between ``work / k`` and the best split found (at most ``probes`` probes, to a
    relative width of 1e-6). Not optimal in general (the greedy is exact only for costs
    monotone in the block's ends), but never worse than the equal-work split.

    ``mem_cap`` >= 0: every block must also keep ``param + peak`` <= mem_cap (a hard memory
    limit); the equal-work split then counts only if it does.

    Returns ``(value, starts)``: the bottleneck and the first positions of the p <= k blocks;
    ``value`` is inf if no split into at most k blocks meets ``mem_cap``.
    """
    n = order.shape[0]
    pos = np.empty(n, np.int64)
    for t in range(n):
        pos[order[t]] = t
    maxcons = _max_consumer_pos(pos, succ_ptr, succ)
    stamp = np.full(n, -1, np.int64)
    u0, ustarts = _equal_work_split(order, pos, maxcons, k, work, size_param, size_out, pred_ptr, pred,
                                    bandwidth, memory, stamp)
    best = INF
    best_starts = ustarts
    if mem_cap < 0:
        best = u0
    scratch = np.empty(k, np.int64)
    sid = 0
    hi = best
    if mem_cap >= 0:  # the fewest blocks the cap allows, at any cost
        p, v, sid = _greedy_split(order, pos, maxcons, k, INF, mem_cap, work, size_param, size_out,
                                  pred_ptr, pred, bandwidth, memory, stamp, sid, scratch)
        if p > k:
            return INF, best_starts
        best = v
        best_starts = scratch[:p].copy()
        hi = v
    total = 0.0
    for t in range(n):
        total += work[t]
    lo = total / k
    for _ in range(probes):
        if not hi - lo > 1e-6 * hi:
            break
        mid = 0.5 * (lo + hi)
        p, v, sid = _greedy_split(order, pos, maxcons, k, mid, mem_cap, work, size_param, size_out,
                                  pred_ptr, pred, bandwidth, memory, stamp, sid, scratch)
        if p <= k:
            if v < best:
                best = v
                best_starts = scratch[:p].copy()
            hi = v if v < mid else mid
        else:
            lo = mid
    return best, best_starts


#: bisection probes for SliceGraph's bound T (:func:`slice_order`): its bands need T near the
#: optimum, not at it (the DP is exact whatever T); each probe is a linear sweep, which on small
#: dense graphs costs as much as the DP it prunes
SLICE_PROBES = 12
#: ... and only where blocks average this many nodes: on smaller ones (REGAL-style graphs at
#: k = 16) the probes' sweeps cost more than the DP they prune (60 vs 40 us a decode on regal_000)
PROBES_MIN_NODES_PER_BLOCK = 32


@njit(cache=True, nogil=True)
def _band(w, k, T, total, tol):
    """Block counts i for which a split of bottleneck < T can cover a prefix of work ``w`` with at
    most i blocks and the rest with at most k - i: every block's cost is at least its work, so
    ``w < i T`` and ``total - w < (k - i) T``. ``tol`` widens both sides against rounding."""
    if T == INF or T <= 0.0:   # T <= 0: no split is below it, and the sweeps end at once
        return 0, k
    ilo = int(np.ceil((w - tol) / T))
    ihi = k - int(np.ceil((total - w - tol) / T))
    if ilo < 0:
        ilo = 0
    if ihi > k:
        ihi = k
    return ilo, ihi


@njit(cache=True, nogil=True)
def slice_order(order, k, work, size_param, size_out, succ_ptr, succ, pred_ptr, pred,
                bandwidth, memory, cutoff):
    """SliceGraph: optimal split of a topological order into at most k contiguous blocks.

    Dynamic program over prefixes, ``dp[j][r]`` = best bottleneck of positions ``0..r-1``
    in at most j blocks. Segment costs are produced incrementally (one left end at a
    time, the right end sweeping forward), so memory is O(nk), not O(n^2). Pruning
    keeps it exact: T is the value of the better of the equal-work split and the bisected
    greedy split (:func:`bisect_split`), or ``cutoff`` if smaller; a right-end sweep stops
    once ``work + overflow`` of the segment, both monotone in the right end, reaches T;
    and a state "prefix ``0..l-1`` in at most i blocks" is kept only if ``work(prefix) < i T``
    and ``work(rest) < (k - i) T`` (:func:`_band`), which every split of bottleneck < T
    satisfies. With T within a share e of ``work / k``, the kept left ends are about
    ``k e n`` (bands of ``e n`` positions around the balanced cuts) instead of n: on deep
    graphs, where e is small, this makes a decode near-linear instead of quadratic.

    Returns:
        (value, starts, exact): ``starts`` int64[p] are the first positions of the
        p <= k blocks; ``value`` is their bottleneck cost. ``exact`` is True when
        ``value`` is the optimum over all splits of ``order``; it is False only if the
        optimum is >= ``cutoff``, in which case the returned split is merely feasible.
    """
    n = order.shape[0]
    probes = SLICE_PROBES if n >= PROBES_MIN_NODES_PER_BLOCK * k else 0
    u0, ustarts = bisect_split(order, k, -1, probes, work, size_param, size_out, succ_ptr, succ, pred_ptr,
                               pred, bandwidth, memory)
    pos = np.empty(n, np.int64)
    for t in range(n):
        pos[order[t]] = t
    maxcons = _max_consumer_pos(pos, succ_ptr, succ)
    stamp = np.full(n, -1, np.int64)
    T = u0 if u0 < cutoff else cutoff
    wp = np.empty(n + 1, np.float64)
    wp[0] = 0.0
    for t in range(n):
        wp[t + 1] = wp[t] + work[order[t]]
    total = wp[n]
    tol = 1e-9 * (total + (T if T < INF else 0.0)) + 1e-300
    blo = np.empty(n + 1, np.int64)   # the band of block counts at each prefix
    bhi = np.empty(n + 1, np.int64)
    for t in range(n + 1):
        blo[t], bhi[t] = _band(wp[t], k, T, total, tol)

    dp = np.full((k + 1, n + 1), INF)
    par = np.full((k + 1, n + 1), -2, np.int64)
    for j in range(k + 1):
        dp[j, 0] = 0.0
    for l in range(n):
        for j in range(1, k + 1):
            if dp[j - 1, l] < dp[j, l]:
                dp[j, l] = dp[j - 1, l]
                par[j, l] = -1
        ilo = blo[l]
        ihi = bhi[l]
        if ihi > k - 1:
            ihi = k - 1
        live = False
        for i in range(ilo, ihi + 1):
            if dp[i, l] < T:
                live = True
                break
        if not live:
            continue
        work_s = 0.0
        param_s = 0
        in_b = 0
        out_b = 0
        sink_b = 0
        runmax = 0
        for r in range(l, n):
            # Same block-extension step as _segment_cost, inlined by hand: a shared
            # njit helper is 11 % slower here (inline="always") or 50-70 % (plain call); see
            # docs/decisions/0023-folded-kernels.md.
            v = order[r]
            a = size_out[v] + out_b + sink_b
            if a > runmax:
                runmax = a
            work_s += work[v]
            param_s += size_param[v]
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred[e]
                if pos[u] >= l:
                    if maxcons[u] == r:
                        out_b -= size_out[u]
                elif stamp[u] != l:
                    stamp[u] = l
                    in_b += size_out[u]
            if maxcons[v] > r:
                out_b += size_out[v]
            elif maxcons[v] < 0:
                sink_b += size_out[v]
            # work, in_b, runmax and param only grow with r: a monotone lower bound
            lb = _cost(work_s, 0, 0, param_s, in_b + runmax, bandwidth, memory)
            if lb >= T:
                break
            c = _cost(work_s, in_b, out_b, param_s, in_b + runmax, bandwidth, memory)
            if c >= T:
                continue
            jlo = blo[r + 1]
            if jlo < ilo + 1:
                jlo = ilo + 1
            jhi = bhi[r + 1]
            if jhi > ihi + 1:
                jhi = ihi + 1
            for j in range(jlo, jhi + 1):
                a_j = dp[j - 1, l]
                cand = a_j if a_j > c else c
                if cand < dp[j, r + 1]:
                    dp[j, r + 1] = cand
                    par[j, r + 1] = l
    for j in range(1, k + 1):
        if dp[j - 1, n] < dp[j, n]:
            dp[j, n] = dp[j - 1, n]
            par[j, n] = -1
    best = dp[k, n]
    if best < T:
        starts_rev = np.empty(k, np.int64)
        p = 0
        r = n
        j = k
        while r > 0:
            pl = par[j, r]
            if pl == -1:
                j -= 1
                continue
            starts_rev[p] = pl
            p += 1
            r = pl
            j -= 1
        starts = np.empty(p, np.int64)
        for i in range(p):
            starts[i] = starts_rev[p - 1 - i]
        return best, starts, True
    return u0, ustarts, u0 < cutoff


@njit(cache=True, nogil=True)
def decode_batch(keys, k, work, size_param, size_out, succ_ptr, succ, pred_ptr, pred,
                 bandwidth, memory, cutoff):
    """Decode each row of ``keys`` (node priorities) with Kahn + SliceGraph; returns values."""
    out = np.empty(keys.shape[0], np.float64)
    for i in range(keys.shape[0]):
        order = kahn_order(keys[i], succ_ptr, succ, pred_ptr)
        val, _, _ = slice_order(order, k, work, size_param, size_out, succ_ptr, succ,
                                pred_ptr, pred, bandwidth, memory, cutoff)
        out[i] = val
    return out


@njit(cache=True, nogil=True)
def mla_batch(keys, weighted, size_out, succ_ptr, succ, pred_ptr, bandwidth):
    """Linear-arrangement cost of the Kahn order of each key row.

    ``h(pi) = sum over edges (u, v) of w(u, v) * |pos(u) - pos(v)|`` with ``w = 1``
    (mla) or ``w = size_out(u) / B`` (mla-weighted), Archer et al. 2024, App. C.1.
    """
    n = keys.shape[1]
    out = np.empty(keys.shape[0], np.float64)
    pos = np.empty(n, np.int64)
    for i in range(keys.shape[0]):
        order = kahn_order(keys[i], succ_ptr, succ, pred_ptr)
        for t in range(n):
            pos[order[t]] = t
        h = 0.0
        for u in range(n):
            w = size_out[u] / bandwidth if weighted else 1.0
            for e in range(succ_ptr[u], succ_ptr[u + 1]):
                h += w * (pos[succ[e]] - pos[u])
        out[i] = h
    return out


@njit(cache=True, nogil=True)
def _trial_costs(trial, pos, a, b, lo1, hi1, lo2, hi2, work, size_param, size_out, succ_ptr, succ,
                 pred_ptr, pred, bandwidth, memory, stamp):
    """Costs of the two blocks ``[lo1, hi1]`` and ``[lo2, hi2]`` of ``trial``, an order that
    differs from the one ``pos`` describes only at positions ``a..b``."""
    tpos = pos.copy()
    for t in range(a, b + 1):
        tpos[trial[t]] = t
    tmax = _max_consumer_pos(tpos, succ_ptr, succ)
    stamp[:] = -1
    c1 = _segment_cost(trial, tpos, lo1, hi1, tmax, work, size_param, size_out, pred_ptr, pred,
                       bandwidth, memory, stamp)
    stamp[:] = -1
    c2 = _segment_cost(trial, tpos, lo2, hi2, tmax, work, size_param, size_out, pred_ptr, pred,
                       bandwidth, memory, stamp)
    return c1, c2


@njit(cache=True, nogil=True)
def improve_split(order, starts, work, size_param, size_out, succ_ptr, succ, pred_ptr, pred,
                  bandwidth, memory, max_moves):
    """Local search on a split order: move single nodes out of the bottleneck block.

    A node v of the bottleneck block b may move to the start of block b+1 if none of its
    consumers is in b (it is first moved to the end of b), or to the end of block b-1 if
    none of its producers is in b. A move is taken if both blocks it changes end up
    strictly cheaper than b was, so the bottleneck, or the number of blocks at the
    bottleneck, drops; the order stays topological. First improvement, at most
    ``max_moves`` moves.

    Returns:
        (order, starts): new arrays (inputs are not modified); blocks may become empty
        and are then dropped from ``starts``.
    """
    n = order.shape[0]
    o = order.copy()
    st = starts.copy()
    p = st.shape[0]
    pos = np.empty(n, np.int64)
    stamp = np.full(n, -1, np.int64)
    costs = np.empty(p, np.float64)
    moves = 0
    while moves < max_moves:
        for t in range(n):
            pos[o[t]] = t
        maxcons = _max_consumer_pos(pos, succ_ptr, succ)
        for b in range(p):
            hi = st[b + 1] - 1 if b + 1 < p else n - 1
            stamp[:] = -1
            costs[b] = _segment_cost(o, pos, st[b], hi, maxcons, work, size_param, size_out, pred_ptr, pred,
                                     bandwidth, memory, stamp)
        bs = 0
        for b in range(1, p):
            if costs[b] > costs[bs]:
                bs = b
        lo = st[bs]
        hi = st[bs + 1] - 1 if bs + 1 < p else n - 1
        moved = False
        # forward: v joins the start of block bs+1
        if bs + 1 < p:
            nhi = st[bs + 2] - 1 if bs + 2 < p else n - 1
            for q in range(hi, lo - 1, -1):
                v = o[q]
                ok = True
                for e in range(succ_ptr[v], succ_ptr[v + 1]):
                    if pos[succ[e]] <= hi:
                        ok = False
                        break
                if not ok or hi == lo:
                    continue
                trial = o.copy()
                for t in range(q, hi):
                    trial[t] = trial[t + 1]
                trial[hi] = v
                c1, c2 = _trial_costs(trial, pos, q, hi, lo, hi - 1, hi, nhi, work, size_param, size_out,
                                      succ_ptr, succ, pred_ptr, pred, bandwidth, memory, stamp)
                if c1 < costs[bs] and c2 < costs[bs]:
                    o = trial
                    st[bs + 1] = hi
                    moved = True
                    break
        # backward: v joins the end of block bs-1
        if not moved and bs > 0:
            plo = st[bs - 1]
            for q in range(lo, hi + 1):
                v = o[q]
                ok = True
                for e in range(pred_ptr[v], pred_ptr[v + 1]):
                    if pos[pred[e]] >= lo:
                        ok = False
                        break
                if not ok or hi == lo:
                    continue
                trial = o.copy()
                for t in range(q, lo, -1):
                    trial[t] = trial[t - 1]
                trial[lo] = v
                c1, c2 = _trial_costs(trial, pos, lo, q, lo + 1, hi, plo, lo, work, size_param, size_out,
                                      succ_ptr, succ, pred_ptr, pred, bandwidth, memory, stamp)
                if c1 < costs[bs] and c2 < costs[bs]:
                    o = trial
                    st[bs] = lo + 1
                    moved = True
                    break
        if not moved:
            break
        moves += 1
    return o, st


@njit(cache=True, nogil=True)
def cut_segment_costs(order, cuts, work, size_param, size_out, succ_ptr, succ, pred_ptr, pred,
                      bandwidth, memory):
    """Cost of every block that runs from one allowed cut to a later one.

    Args:
        order: int32[n], a topological order (the schedule).
        cuts: int64[m + 1], increasing positions in ``order`` where a block may begin,
            ``cuts[0] == 0`` and ``cuts[m] == n`` (the end).
    Returns:
        float64[m + 1, m + 1]: entry ``[a, b]`` (a < b) is the cost of the block of positions
        ``cuts[a] .. cuts[b] - 1``, computed as :func:`_segment_cost` does; ``inf`` elsewhere.
    """
    n = order.shape[0]
    m = cuts.shape[0] - 1
    pos = np.empty(n, np.int64)
    for t in range(n):
        pos[order[t]] = t
    maxcons = _max_consumer_pos(pos, succ_ptr, succ)
    stamp = np.full(n, -1, np.int64)
    cost = np.full((m + 1, m + 1), INF)
    for a in range(m):
        l = cuts[a]
        work_s = 0.0
        param_s = 0
        in_b = 0
        out_b = 0
        sink_b = 0
        runmax = 0
        b = a + 1
        for r in range(l, n):
            # the block-extension step of _segment_cost: change both together
            v = order[r]
            x = size_out[v] + out_b + sink_b
            if x > runmax:
                runmax = x
            work_s += work[v]
            param_s += size_param[v]
            for e in range(pred_ptr[v], pred_ptr[v + 1]):
                u = pred[e]
                if pos[u] >= l:
                    if maxcons[u] == r:
                        out_b -= size_out[u]
                elif stamp[u] != l:
                    stamp[u] = l
                    in_b += size_out[u]
            if maxcons[v] > r:
                out_b += size_out[v]
            elif maxcons[v] < 0:
                sink_b += size_out[v]
            if r == cuts[b] - 1:
                cost[a, b] = _cost(work_s, in_b, out_b, param_s, in_b + runmax, bandwidth, memory)
                b += 1
    return cost


@njit(cache=True, nogil=True)
def split_at_cuts(cost, cut_bytes, k):
    """The best split into at most k blocks that each run from one allowed cut to a later one.

    First the least bottleneck T (the largest block cost); then, among the splits whose every
    block costs at most T, the least sum of squared block costs (the most even other stages),
    and among those the fewest ``cut_bytes`` summed over the cuts used.

    Args:
        cost: float64[m + 1, m + 1] from :func:`cut_segment_costs`.
        cut_bytes: int64[m + 1], bytes that cross cut a when a block begins there (index 0
            is never a cut between blocks and is not counted).
    Returns:
        (T, starts): ``starts`` int64[p], p <= k, the cut indices where the blocks begin
        (``starts[0] == 0``).
    """
    m = cost.shape[0] - 1
    dp = np.full((k + 1, m + 1), INF)
    dp[0, 0] = 0.0
    for j in range(1, k + 1):
        for b in range(1, m + 1):
            best = INF
            for a in range(b):
                x = dp[j - 1, a]
                if cost[a, b] > x:
                    x = cost[a, b]
                if x < best:
                    best = x
            dp[j, b] = best
    T = INF
    for j in range(1, k + 1):
        if dp[j, m] < T:
            T = dp[j, m]
    sq = np.full((k + 1, m + 1), INF)
    by = np.zeros((k + 1, m + 1), np.int64)
    par = np.full((k + 1, m + 1), -1, np.int64)
    sq[0, 0] = 0.0
    for j in range(1, k + 1):
        for b in range(1, m + 1):
            for a in range(b):
                c = cost[a, b]
                if c > T or sq[j - 1, a] == INF:
                    continue
                s = sq[j - 1, a] + c * c
                y = by[j - 1, a] + (cut_bytes[a] if a > 0 else 0)
                if s < sq[j, b] or (s == sq[j, b] and y < by[j, b]):
                    sq[j, b] = s
                    by[j, b] = y
                    par[j, b] = a
    jb = 1
    for j in range(2, k + 1):
        if sq[j, m] < sq[jb, m] or (sq[j, m] == sq[jb, m] and by[j, m] < by[jb, m]):
            jb = j
    starts = np.empty(jb, np.int64)
    b = m
    for j in range(jb, 0, -1):
        a = par[j, b]
        starts[j - 1] = a
        b = a
    return T, starts
