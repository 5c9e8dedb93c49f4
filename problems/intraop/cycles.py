"""Tightening the pairwise (local-polytope) bound with frustrated short cycles.

After TRW-S, :meth:`CoreDual.certificate` bounds the core by ``sum_v min bar_v +
sum_e min bar_e`` (the reparametrised node and table terms). Where the tables'
near-minimal entries cannot be chosen consistently around a cycle, the
relaxation is loose: every labelling pays a positive residual somewhere on
that cycle. This module finds such cycles and collects that residual:

1. *Tight entries*: table entries within ``tol`` of their table's minimum;
   arc consistency on them leaves each core node a domain.
2. *Frustrated cycles* (length 3 to ``max_len``, numba depth-first search): the
   tight entries admit no consistent labelling around the cycle. Tables whose
   tight relation is complete cannot take part and are skipped.
3. *Cycle clusters* (MPLP-style block updates, Sontag et al. 2008): each cycle
   ``c`` takes shares ``delta_ce`` of its tables' residuals, ``bar_e = (bar_e -
   sum_c delta_ce) + sum_c delta_ce``, chosen from the cycle's min-marginals.

For *any* integer shares, every admissible assignment costs ``sum_v bar_v +
sum_e (bar_e - sum_c delta_ce) + sum_c sum_(e in c) delta_ce``, so ``sum_v min
bar_v + sum_e min (bar_e - sum_c delta_ce) + sum_c min_(x_c) sum_e delta_ce``
is a lower bound. :func:`tighten` computes exactly that, in integers (cycle
minima by exact dynamic programming over admissible entries); the float
updates only choose the shares.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gapstop.engine import cancel
from gapstop.problems.intraop import _bound_kernels as BK
from gapstop.problems.intraop.network import table_adjacency

EXCL = BK.EXCL
#: Residuals at or above this are frozen (never shared), which keeps every integer sum far from overflow.
RCAP = 1 << 50
_JIT = dict(nogil=True, cache=True)


@dataclass(frozen=True)
class TightenResult:
    """Outcome of :func:`tighten`.

    Attributes:
        value: the certified core bound (Python int), never below the certificate it started from.
        gain: ``value`` minus that certificate (>= 0).
        cycles: frustrated cycles used.
        sweeps: block-update sweeps run.
    """

    value: int
    gain: int
    cycles: int
    sweeps: int


@njit(**_JIT)
def _residual_tables(core, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, msg, msg_off, rev,
                     e_v, e_j, b_off, bar, bar_min):  # pragma: no cover - jitted
    """``bar`` (rows: the smaller endpoint) of every core table, EXCL where not admissible, and its minimum."""
    n = 0
    for ci in range(len(core)):
        v = core[ci]
        for e in range(adj_ptr[v], adj_ptr[v + 1]):
            j = adj_nbr[e]
            if j < v:
                continue
            e_v[n] = v
            e_j[n] = j
            o = b_off[n]
            oi = msg_off[e]
            oj = msg_off[rev[e]]
            t = adj_tab[e]
            best = EXCL
            for a in range(k[v]):
                for b in range(k[j]):
                    f = tabs[tab_off[t] + a * k[j] + b] if tab_x[t] == v else tabs[tab_off[t] + b * k[v] + a]
                    if theta[ptr[v] + a] >= EXCL or theta[ptr[j] + b] >= EXCL or f >= EXCL:
                        bar[o + a * k[j] + b] = EXCL
                    else:
                        h = f - msg[oi + a] - msg[oj + b]
                        bar[o + a * k[j] + b] = h
                        if h < best:
                            best = h
            bar_min[n] = best
            n += 1
    return n


@njit(**_JIT)
def _search(s_lo, s_hi, g_ptr, g_nbr, g_off, rel_tab, dom, max_len, dmax, out, n_out):  # pragma: no cover
    """Frustrated cycles whose smallest node is in ``[s_lo, s_hi)`` of the compact search graph.

    ``rel_tab[g_off[e]:]`` is the tight relation of search edge ``e`` (``dom[x] x
    dom[y]``, row-major from its node ``x``). A cycle ``s, v1, ..., vL-1`` is
    reported once (``v1 < vL-1``) when no label of ``s`` maps back to itself.
    Returns the new count in ``out`` (rows padded with -1).
    """
    F = len(dom)
    path = np.zeros(max_len, np.int64)
    pos = np.zeros(max_len, np.int64)
    rel = np.zeros((max_len, dmax, dmax), np.bool_)
    on = np.zeros(F, np.bool_)
    for s in range(s_lo, s_hi):
        ds = dom[s]
        for a in range(ds):
            for b in range(ds):
                rel[0, a, b] = a == b
        path[0] = s
        pos[0] = g_ptr[s]
        depth = 0
        on[s] = True
        while depth >= 0:
            cur = path[depth]
            if pos[depth] >= g_ptr[cur + 1]:
                on[cur] = False
                depth -= 1
                continue
            e = pos[depth]
            pos[depth] += 1
            u = g_nbr[e]
            if u <= s or on[u]:
                continue
            dc, du, o = dom[cur], dom[u], g_off[e]
            full = True
            for a in range(ds):
                for c in range(du):
                    hit = False
                    for b in range(dc):
                        if rel[depth, a, b] and rel_tab[o + b * du + c]:
                            hit = True
                            break
                    rel[depth + 1, a, c] = hit
                    if not hit:
                        full = False
            if full:
                continue  # every label of s reaches every label of u: no completion can be frustrated
            if depth >= 1 and path[1] < u:
                for e2 in range(g_ptr[u], g_ptr[u + 1]):
                    if g_nbr[e2] != s:
                        continue
                    o2 = g_off[e2]
                    ok = False
                    for a in range(ds):
                        for c in range(du):
                            if rel[depth + 1, a, c] and rel_tab[o2 + c * ds + a]:
                                ok = True
                                break
                        if ok:
                            break
                    if not ok and n_out < len(out):
                        for i in range(max_len):
                            out[n_out, i] = path[i] if i <= depth else -1
                        out[n_out, depth + 1] = u
                        n_out += 1
                    break
            if depth + 2 < max_len:
                depth += 1
                path[depth] = u
                pos[depth] = g_ptr[u]
                on[u] = True
    return n_out


@njit(**_JIT)
def _mplp_sweeps(cyc, clen, cedge, k, e_v, e_j, b_off, frozen, left, delta, d_off, sweeps,
                 fwd, bwd, marg):  # pragma: no cover - jitted
    """Block updates of every cycle's shares (float); ``left`` = residual minus all shares."""
    for _ in range(sweeps):
        for c in range(len(clen)):
            L = clen[c]
            # b_i = left + own share, entries in the table's own layout
            for i in range(L):
                n = cedge[c, i]
                o, od = b_off[n], d_off[c, i]
                for q in range(k[e_v[n]] * k[e_j[n]]):
                    left[o + q] += delta[od + q]
            for i in range(L):
                n = cedge[c, i]
                for q in range(k[e_v[n]] * k[e_j[n]]):
                    marg[d_off[c, i] + q] = np.inf
            x0 = cyc[c, 0]
            for a0 in range(k[x0]):
                # forward: fwd[i, x_i] = min cost of edges 0..i-1 with x_0 = a0
                for a in range(k[x0]):
                    fwd[0, a] = 0.0 if a == a0 else np.inf
                for i in range(L - 1):
                    x, y, n = cyc[c, i], cyc[c, i + 1], cedge[c, i]
                    for b in range(k[y]):
                        m = np.inf
                        for a in range(k[x]):
                            if fwd[i, a] == np.inf:
                                continue
                            h = fwd[i, a] + left[BK.pair_index(b_off, e_v, k, n, x, a, y, b)]
                            if h < m:
                                m = h
                        fwd[i + 1, b] = m
                # backward: bwd[i, x_i] = min cost of edges i..L-1 closing at a0
                xl, nl = cyc[c, L - 1], cedge[c, L - 1]
                for a in range(k[xl]):
                    bwd[L - 1, a] = left[BK.pair_index(b_off, e_v, k, nl, xl, a, x0, a0)]
                for i in range(L - 2, 0, -1):
                    x, y, n = cyc[c, i], cyc[c, i + 1], cedge[c, i]
                    for a in range(k[x]):
                        m = np.inf
                        for b in range(k[y]):
                            h = left[BK.pair_index(b_off, e_v, k, n, x, a, y, b)] + bwd[i + 1, b]
                            if h < m:
                                m = h
                        bwd[i, a] = m
                for i in range(L):
                    x, y, n = cyc[c, i], cyc[c, (i + 1) % L], cedge[c, i]
                    for a in range(k[x]):
                        if fwd[i, a] == np.inf:
                            continue
                        for b in range(k[y]):
                            if i == L - 1 and b != a0:
                                continue
                            p = BK.pair_index(b_off, e_v, k, n, x, a, y, b)
                            h = fwd[i, a] + left[p] + (bwd[i + 1, b] if i < L - 1 else 0.0)
                            q = p - b_off[n] + d_off[c, i]
                            if h < marg[q]:
                                marg[q] = h
            for i in range(L):
                n = cedge[c, i]
                o, od = b_off[n], d_off[c, i]
                for q in range(k[e_v[n]] * k[e_j[n]]):
                    if frozen[o + q] or marg[od + q] == np.inf:
                        delta[od + q] = 0.0
                        continue
                    d = left[o + q] - marg[od + q] / L
                    d = max(-1e15, min(1e15, d))
                    delta[od + q] = d
                    left[o + q] -= d


@njit(**_JIT)
def _cycle_min_int(cyc, clen, cedge, k, e_v, b_off, bar, dint, d_off, c, fwd):  # pragma: no cover - jitted
    """Exact ``min_(x_c) sum_i dint`` over labellings whose cycle entries are all admissible (EXCL if none)."""
    L = clen[c]
    x0 = cyc[c, 0]
    best = EXCL
    for a0 in range(k[x0]):
        for a in range(k[x0]):
            fwd[0, a] = 0 if a == a0 else EXCL
        for i in range(L):
            x, y, n = cyc[c, i], cyc[c, (i + 1) % L], cedge[c, i]
            for b in range(k[y]):
                if i == L - 1 and b != a0:
                    continue
                m = EXCL
                for a in range(k[x]):
                    if fwd[i, a] >= EXCL:
                        continue
                    p = BK.pair_index(b_off, e_v, k, n, x, a, y, b)
                    if bar[p] >= EXCL:
                        continue
                    h = fwd[i, a] + dint[p - b_off[n] + d_off[c, i]]
                    if h < m:
                        m = h
                fwd[i + 1, b] = m
        if fwd[L, a0] < best:
            best = fwd[L, a0]
    return best


def tighten(dual, *, deadline: float, max_len: int = 6, tol: float | None = None, search_share: float = 0.5,
            max_cycles: int = 20000, max_sweeps: int = 10**9, patience: int = 4,
            on_improvement=None) -> TightenResult | None:
    """Tighten the last certificate of ``dual`` (a :class:`~problems.intraop._dual.CoreDual`) with cycle clusters.

    Call after :meth:`CoreDual.bound` (and its :meth:`~CoreDual.certificate`) on the
    unary costs of interest; the messages are not changed.

    Args:
        deadline: ``time.perf_counter()`` value to finish by (cycle search gets
            ``search_share`` of the time left, block updates the rest).
        max_len: longest cycle searched (3..8).
        max_sweeps: block-update sweeps at most.
        patience: stop after this many certificates (taken after 1, 2, 4, then every 16
            sweeps) without a better value.
        tol: tightness tolerance, in cost units (default ``1e-6 * |certificate|``, at least 1).
        on_improvement: called with each better certified core value (Python int).

    Returns:
        ``None`` when the core is empty, exact, or provably without admissible
        assignments; else the certified value (never below the certificate).
    """
    net, plan = dual.prep.net, dual.prep.plan
    core = dual.core
    if len(core) == 0 or dual.last_exact:
        return None
    cert = dual.certificate()
    if cert is None:
        return None
    k, ptr = net.k, net.ptr
    th = dual.theta
    mask = dual.counted_entries
    n_e = int(np.count_nonzero(mask))
    e_v = np.zeros(n_e, np.int64)
    e_j = np.zeros(n_e, np.int64)
    sizes = k[np.repeat(np.arange(net.n), np.diff(plan.adj_ptr))[mask]] * k[plan.adj_nbr[mask]]
    b_off = np.zeros(n_e + 1, np.int64)
    np.cumsum(sizes, out=b_off[1:])
    bar = np.zeros(int(b_off[-1]), np.int64)
    bar_min = np.zeros(n_e, np.int64)
    got = _residual_tables(core, th, ptr, k, plan.adj_ptr, plan.adj_nbr, plan.adj_tab, dual.work, plan.tab_off,
                           plan.tab_x, dual.msg_int, dual.msg_off, dual.rev, e_v, e_j, b_off, bar, bar_min)
    assert got == n_e
    node_sum = sum(dual.node_terms.tolist())
    if np.any(bar_min >= EXCL):
        return None
    # the decomposition starts from exactly the certificate's terms
    assert node_sum + sum(bar_min.tolist()) == cert
    if tol is None:
        tol = max(1.0, 1e-6 * abs(cert))
    tol_max = max(tol, 1e-4 * abs(cert))
    pair = {(int(e_v[n]), int(e_j[n])): n for n in range(n_e)}
    resid = np.where(bar >= EXCL, np.inf, (bar - np.repeat(bar_min, np.diff(b_off))).astype(np.float64))
    frozen = ~(resid < RCAP)
    kmax = int(k.max())
    fwd = np.zeros((max_len + 1, kmax), np.float64)
    bwd = np.zeros((max_len + 1, kmax), np.float64)
    fwd_i = np.zeros((max_len + 1, kmax), np.int64)
    cycles: list[list[int]] = []
    known: set[tuple[int, ...]] = set()
    delta = np.zeros(0, np.float64)
    best_value, sweeps = cert, 0
    # rounds: search the tables left after the shares so far, add the new cycles, update all
    c_ptr, c_nbr, c_tab = table_adjacency(e_v, e_j, len(k))
    c_nodes = np.flatnonzero(np.diff(c_ptr))  # the nodes on a core table
    cur, cur_min = bar, bar_min
    while not cancel.expired(deadline) and sweeps < max_sweeps:
        alive = th < EXCL
        BK.arc_consistency(c_nodes, alive, ptr, k, c_ptr, c_nbr, c_tab, cur, b_off, e_v, cur_min, float(tol))
        dom_size = np.add.reduceat(alive.astype(np.int64), ptr[:-1])
        t_search = time.perf_counter() + max(0.0, deadline - time.perf_counter()) * search_share
        found = _find_cycles(core, e_v, e_j, b_off, k, ptr, cur, cur_min, tol, alive, dom_size, max_len,
                             max_cycles, t_search)
        fresh = [c for c in found if _cycle_key(c) not in known]
        if not fresh:
            # messages short of convergence leave few tight entries: a looser tolerance finds cycles
            if tol < tol_max:
                tol *= 10.0
                continue
            break
        known.update(_cycle_key(c) for c in fresh)
        cycles += fresh
        cyc, clen, cedge, d_off, size = _cycle_arrays(cycles, pair, b_off, max_len)
        delta = np.concatenate([delta, np.zeros(size - len(delta))])
        left = resid - _summed_shares(delta, clen, cedge, b_off, d_off)  # residual minus every share so far
        marg = np.zeros(size, np.float64)
        on_cycle = np.unique(np.concatenate([cedge[c, :clen[c]] for c in range(len(clen))]))
        batch, stale = 1, 0
        while sweeps < max_sweeps:
            batch = min(batch, max_sweeps - sweeps)
            t_batch = time.perf_counter()
            _mplp_sweeps(cyc, clen, cedge, k, e_v, e_j, b_off, frozen, left, delta, d_off, batch, fwd, bwd,
                         marg)
            sweeps += batch
            value = _certify(cyc, clen, cedge, k, e_v, b_off, bar, bar_min, _rounded(delta), d_off, on_cycle,
                             node_sum, fwd_i)
            if value is not None and value > best_value:
                best_value, stale = value, 0
                if on_improvement is not None:
                    on_improvement(value)
            else:
                stale += 1
            if cancel.expired(deadline) or stale >= patience:
                break
            # at most 16 sweeps between certificates, and no batch that would run past the deadline
            per_sweep = (time.perf_counter() - t_batch) / batch
            fit = int((deadline - time.perf_counter()) / max(per_sweep, 1e-9))
            batch = max(1, min(2 * batch, 16, fit))
        cur, cur_min = _leftover(clen, cedge, b_off, bar, _rounded(delta), d_off)
    return TightenResult(best_value, best_value - cert, len(cycles), sweeps)


def _cycle_key(nodes: list[int]) -> tuple[int, ...]:
    """The same key for a cycle whatever its start and direction."""
    L = len(nodes)
    i = nodes.index(min(nodes))
    fwd = tuple(nodes[(i + j) % L] for j in range(L))
    bwd = tuple(nodes[(i - j) % L] for j in range(L))
    return min(fwd, bwd)


def _cycle_arrays(cycles: list[list[int]], pair: dict[tuple[int, int], int], b_off: NDArray[np.int64],
                  max_len: int) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], NDArray[np.int64], int]:
    """Nodes, lengths, core table per step and share offsets of ``cycles`` (shares laid out in list order)."""
    C = len(cycles)
    cyc = np.full((C, max_len), -1, np.int64)
    clen = np.zeros(C, np.int64)
    cedge = np.zeros((C, max_len), np.int64)
    d_off = np.zeros((C, max_len), np.int64)
    o = 0
    for c, nodes in enumerate(cycles):
        L = len(nodes)
        clen[c] = L
        cyc[c, :L] = nodes
        for i in range(L):
            x, y = nodes[i], nodes[(i + 1) % L]
            n = pair[(min(x, y), max(x, y))]
            cedge[c, i] = n
            d_off[c, i] = o
            o += int(b_off[n + 1] - b_off[n])
    return cyc, clen, cedge, d_off, o


def _rounded(delta: NDArray[np.float64]) -> NDArray[np.int64]:
    """The integer shares that are certified: the float shares rounded (and kept far from overflow)."""
    return np.rint(np.clip(delta, -1e15, 1e15)).astype(np.int64)


def _summed_shares(shares: NDArray, clen, cedge, b_off, d_off) -> NDArray:
    """Per table entry (``bar`` layout), the sum of the shares every cycle takes of it."""
    total = np.zeros(int(b_off[-1]), shares.dtype)
    for c in range(len(clen)):
        for i in range(clen[c]):
            n = cedge[c, i]
            lo, hi = b_off[n], b_off[n + 1]
            total[lo:hi] += shares[d_off[c, i]:d_off[c, i] + (hi - lo)]
    return total


def _leftover(clen, cedge, b_off, bar, dint, d_off) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Integer tables minus the shares ``dint`` (EXCL kept), and their minima: where the next round searches."""
    ok = bar < EXCL
    cur = np.where(ok, bar - _summed_shares(dint, clen, cedge, b_off, d_off), EXCL)
    mins = np.minimum.reduceat(cur, b_off[:-1]) if len(b_off) > 1 else np.zeros(0, np.int64)
    return cur, mins


def _certify(cyc, clen, cedge, k, e_v, b_off, bar, bar_min, dint, d_off, on_cycle, node_sum, fwd_i) -> int | None:
    """The exact integer bound for the integer shares ``dint``, or None if some term is empty."""
    # shares never touch excluded or frozen entries (their float shares are 0)
    total_share = _summed_shares(dint, clen, cedge, b_off, d_off)
    edge_terms = bar_min.copy()
    for n in on_cycle.tolist():
        lo, hi = b_off[n], b_off[n + 1]
        seg = bar[lo:hi]
        ok = seg < EXCL
        edge_terms[n] = int((seg[ok] - total_share[lo:hi][ok]).min())
    value = node_sum + sum(edge_terms.tolist())
    for c in range(len(clen)):
        m = _cycle_min_int(cyc, clen, cedge, k, e_v, b_off, bar, dint, d_off, c, fwd_i)
        if m >= EXCL:
            return None
        value += int(m)
    return value


def _find_cycles(core, e_v, e_j, b_off, k, ptr, bar, bar_min, tol, alive, dom_size, max_len, max_cycles,
                 deadline) -> list[list[int]]:
    """Frustrated cycles (core node lists) of the tight entries, searched until ``deadline``."""
    free = np.sort(core[dom_size[core] > 1])  # (nodes off the core have no tables here)
    fid = np.full(len(dom_size), -1, np.int64)
    fid[free] = np.arange(len(free))
    idx = [np.nonzero(alive[ptr[v]:ptr[v] + k[v]])[0] for v in free.tolist()]
    adj: list[list[tuple[int, NDArray[np.bool_]]]] = [[] for _ in free]
    for n in range(len(e_v)):
        v, j = int(e_v[n]), int(e_j[n])
        if fid[v] < 0 or fid[j] < 0:
            continue
        tab = bar[b_off[n]:b_off[n + 1]].reshape(k[v], k[j])
        tight = (tab < EXCL) & (tab - bar_min[n] <= tol)
        m = tight[np.ix_(idx[fid[v]], idx[fid[j]])]
        if m.all():
            continue  # a complete relation is never part of a frustrated cycle
        adj[fid[v]].append((int(fid[j]), m))
        adj[fid[j]].append((int(fid[v]), m.T))
    # relabel by falling degree: a cycle is searched from its smallest label, so the hubs'
    # expensive searches come first and no later search goes through a hub again
    # (A's full search at its best multipliers: 4.6 s instead of 39 s, the same cycles)
    deg = np.array([len(a) for a in adj], np.int64)
    perm = np.argsort(-deg, kind="stable")
    rank = np.empty(len(perm), np.int64)
    rank[perm] = np.arange(len(perm))
    g_ptr = np.zeros(len(free) + 1, np.int64)
    g_ptr[1:] = np.cumsum(deg[perm])
    g_nbr = np.zeros(int(g_ptr[-1]), np.int64)
    g_off = np.zeros(int(g_ptr[-1]), np.int64)
    chunks, o, p = [], 0, 0
    for old_id in perm.tolist():
        for u, m in sorted(((int(rank[u]), m) for u, m in adj[old_id]), key=lambda t: t[0]):
            g_nbr[p] = u
            g_off[p] = o
            chunks.append(np.ascontiguousarray(m).ravel())
            o += m.size
            p += 1
    free = free[perm]
    idx = [idx[i] for i in perm.tolist()]
    rel_tab = np.concatenate(chunks) if chunks else np.zeros(0, np.bool_)
    dom = np.array([len(x) for x in idx], np.int64)
    if len(dom) == 0:
        return []
    out = np.full((max_cycles, max_len), -1, np.int64)
    n_out, s, step = 0, 0, 1
    dmax = int(dom.max())
    # the first start nodes are the hubs (slow): chunks start at one node and grow while they
    # stay short, so the deadline is checked often where a single start can take seconds
    while s < len(dom) and n_out < max_cycles:
        now = time.perf_counter()
        if now >= deadline or cancel.stop_requested():
            break
        n_out = _search(s, min(len(dom), s + step), g_ptr, g_nbr, g_off, rel_tab, dom, max_len, dmax, out, n_out)
        s += step
        if time.perf_counter() - now < 0.02:
            step *= 2
    return [[int(free[i]) for i in row if i >= 0] for row in out[:n_out]]
