"""Numba kernels for the relaxed (penalised) problem: pure functions on arrays.

Conventions shared by every kernel:

* ``k[v]`` strategies of node ``v``; per-strategy vectors (unary costs, usages,
  penalised unaries ``theta``) are flat and indexed ``ptr[v] + s``.
* Pair table ``t`` relates ``tab_x[t]`` (rows) and ``tab_y[t]`` (columns) and
  lives row-major at ``tabs[tab_off[t]:]``; :func:`pair_cost` reads it from
  either endpoint's point of view.
* A node's neighbours are ``adj_nbr[adj_ptr[v]:adj_ptr[v+1]]`` with their tables in ``adj_tab``.

All kernels are ``nogil`` so searches can run in threads.

Compiled code is cached in ``__pycache__`` (numba ``cache=True``), keyed by this file's name
and stamp, not by its import path: a change of import path needs a change of this file.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_JIT = dict(nogil=True, cache=True)


@njit(**_JIT)
def pair_cost(tabs, tab_off, tab_x, k, t, v, a, nbr, b):  # pragma: no cover - jitted
    """Cost of table ``t`` when node ``v`` takes ``a`` and its neighbour ``nbr`` takes ``b``."""
    if tab_x[t] == v:
        return tabs[tab_off[t] + a * k[nbr] + b]
    return tabs[tab_off[t] + b * k[v] + a]


@njit(**_JIT)
def min_plus(tabs, off, i_is_row, ki, kj, vec, out):  # pragma: no cover - jitted
    """``out[b] = min_a vec[a] + f(a, b)`` for the table at ``off``; ``out`` must not overlap ``vec``.

    ``f(a, b)`` is entry ``(a, b)`` when ``i_is_row`` (table ``ki x kj``) else entry ``(b, a)``
    (table ``kj x ki``); the loops follow the memory order in both cases. With ``+inf`` for
    excluded entries, a term with an infinite ``vec[a]`` or ``f`` is ``+inf`` or NaN (``inf -
    inf``), which loses every comparison: the minimum is over the finite terms, ``+inf`` if
    there are none (an explicit test for infinity is 9 % slower in the search's TRW-S; see
    docs/decisions/0023-folded-kernels.md).
    The minima are selects, not branches (a mispredicted branch per entry cost more than the
    entry's arithmetic), and the transposed case keeps four rows' minima apart so that they do
    not wait on each other; each minimum still takes its terms in order, so results are the
    same bits as a plain loop's (TRW-S on instance M's core: 0.57 x the time, ``benchmarks/kernel_ab.py``).
    """
    if i_is_row:
        for b in range(kj):
            out[b] = np.inf
        for a in range(ki):
            va = vec[a]
            row = off + a * kj
            for b in range(kj):
                c = va + tabs[row + b]
                out[b] = c if c < out[b] else out[b]
    else:
        b = 0
        while b + 4 <= kj:
            r0 = off + b * ki
            r1 = r0 + ki
            r2 = r1 + ki
            r3 = r2 + ki
            m0 = m1 = m2 = m3 = np.inf
            for a in range(ki):
                va = vec[a]
                c0 = va + tabs[r0 + a]
                c1 = va + tabs[r1 + a]
                c2 = va + tabs[r2 + a]
                c3 = va + tabs[r3 + a]
                m0 = c0 if c0 < m0 else m0
                m1 = c1 if c1 < m1 else m1
                m2 = c2 if c2 < m2 else m2
                m3 = c3 if c3 < m3 else m3
            out[b] = m0
            out[b + 1] = m1
            out[b + 2] = m2
            out[b + 3] = m3
            b += 4
        while b < kj:
            row = off + b * ki
            m = np.inf
            for a in range(ki):
                c = vec[a] + tabs[row + a]
                m = c if c < m else m
            out[b] = m
            b += 1


@njit(**_JIT)
def merge_edge_tables(edge_u, edge_v, edge_ptr, edge_cost, pair, tab_off, tab_x, k, ptr,
                      unary, tabs):  # pragma: no cover - jitted
    """Add every file edge into its pair table (transposed if needed); self-loop diagonals into ``unary``."""
    for e in range(len(edge_u)):
        u, v = edge_u[e], edge_v[e]
        ku, kv = k[u], k[v]
        base = edge_ptr[e]
        p = pair[e]
        if p < 0:
            for s in range(ku):
                unary[ptr[u] + s] += float(edge_cost[base + s * kv + s])
        elif tab_x[p] == u:
            off = tab_off[p]
            for i in range(ku * kv):
                tabs[off + i] += float(edge_cost[base + i])
        else:
            off = tab_off[p]
            for su in range(ku):
                for sv in range(kv):
                    tabs[off + sv * ku + su] += float(edge_cost[base + su * kv + sv])


@njit(**_JIT)
def penalised_unary(unary, usage, ptr, weight, theta):  # pragma: no cover - jitted
    """``theta[ptr[v] + s] = unary + weight[v] * usage`` for every node and strategy."""
    for v in range(len(weight)):
        w = weight[v]
        for j in range(ptr[v], ptr[v + 1]):
            theta[j] = unary[j] + w * usage[j]


@njit(**_JIT)
def local_costs(v, sol, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, out, skip=-1):  # pragma: no cover
    """``out[s]`` = theta_v(s) + sum over neighbours but ``skip`` of the pair cost with their current
    strategies. (Leave a neighbour out here rather than subtract its table afterwards: a table
    entry of 10^18 (forbidden) added and taken off again loses every smaller cost's low bits.)"""
    kv = k[v]
    for s in range(kv):
        out[s] = theta[ptr[v] + s]
    for i in range(adj_ptr[v], adj_ptr[v + 1]):
        nb = adj_nbr[i]
        if nb == skip:
            continue
        t = adj_tab[i]
        b = sol[nb]
        if tab_x[t] == v:
            base = tab_off[t] + b
            step = k[nb]
            for s in range(kv):
                out[s] += tabs[base + s * step]
        else:
            base = tab_off[t] + b * kv
            for s in range(kv):
                out[s] += tabs[base + s]


@njit(**_JIT)
def energy(nodes, sol, theta, ptr, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, k):  # pragma: no cover
    """Objective of ``sol`` restricted to ``nodes`` and the tables among them (each counted once)."""
    total = 0.0
    for v in nodes:
        total += theta[ptr[v] + sol[v]]
        for i in range(adj_ptr[v], adj_ptr[v + 1]):
            nb = adj_nbr[i]
            if nb > v:
                total += pair_cost(tabs, tab_off, tab_x, k, adj_tab[i], v, sol[v], nb, sol[nb])
    return total


@njit(**_JIT)
def _find(parent, x):  # pragma: no cover - jitted
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@njit(**_JIT)
def forest_sweep(perm, sol, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x,
                 in_s, uf, mark, order, par, h, scratch):  # pragma: no cover - jitted
    """One block-coordinate step: optimise exactly over an induced forest, all other nodes fixed.

    The forest is grown greedily in the order ``perm`` (a node joins if its
    neighbours already in the forest lie in pairwise different trees), then
    solved by dynamic programming (min-sum over trees). The objective never
    increases. Work arrays: ``in_s``, ``uf``, ``mark``, ``par`` int64[n],
    ``order`` int64[len(perm)], ``h`` float64[K], ``scratch`` float64[max k].

    Returns:
        The number of nodes whose strategy changed.
    """
    stamp = 0
    for v in perm:
        in_s[v] = 0
        uf[v] = v
        mark[v] = -1
    for v in perm:
        stamp += 1
        ok = True
        for i in range(adj_ptr[v], adj_ptr[v + 1]):
            nb = adj_nbr[i]
            if in_s[nb]:
                r = _find(uf, nb)
                if mark[r] == stamp:
                    ok = False
                    break
                mark[r] = stamp
        if not ok:
            continue
        in_s[v] = 1
        for i in range(adj_ptr[v], adj_ptr[v + 1]):
            nb = adj_nbr[i]
            if in_s[nb] and nb != v:
                uf[_find(uf, nb)] = v
        uf[v] = v
    # h = conditional unary for forest nodes (neighbours outside the forest fixed)
    cnt = 0
    for v in perm:
        if not in_s[v]:
            continue
        kv = k[v]
        for s in range(kv):
            h[ptr[v] + s] = theta[ptr[v] + s]
        for i in range(adj_ptr[v], adj_ptr[v + 1]):
            nb = adj_nbr[i]
            if in_s[nb]:
                continue
            t = adj_tab[i]
            for s in range(kv):
                h[ptr[v] + s] += pair_cost(tabs, tab_off, tab_x, k, t, v, s, nb, sol[nb])
        par[v] = -2  # not yet visited
    # BFS order per tree
    for root in perm:
        if not in_s[root] or par[root] != -2:
            continue
        par[root] = -1
        head = cnt
        order[cnt] = root
        cnt += 1
        while head < cnt:
            v = order[head]
            head += 1
            for i in range(adj_ptr[v], adj_ptr[v + 1]):
                nb = adj_nbr[i]
                if in_s[nb] and par[nb] == -2:
                    par[nb] = v
                    order[cnt] = nb
                    cnt += 1
    # upward pass: fold each node into its parent
    for j in range(cnt - 1, -1, -1):
        v = order[j]
        p = par[v]
        if p < 0:
            continue
        t = -1
        for i in range(adj_ptr[v], adj_ptr[v + 1]):
            if adj_nbr[i] == p:
                t = adj_tab[i]
                break
        kv, kp = k[v], k[p]
        # message v -> p: min over v's strategies of table + h_v, added to h_p
        min_plus(tabs, tab_off[t], tab_x[t] == v, kv, kp, h[ptr[v]:ptr[v] + kv], scratch)
        for a in range(kp):
            h[ptr[p] + a] += scratch[a]
    # downward pass: choose strategies; keep the current one on ties
    changed = 0
    for j in range(cnt):
        v = order[j]
        p = par[v]
        kv = k[v]
        for s in range(kv):
            scratch[s] = h[ptr[v] + s]
        if p >= 0:
            t = -1
            for i in range(adj_ptr[v], adj_ptr[v + 1]):
                if adj_nbr[i] == p:
                    t = adj_tab[i]
                    break
            for s in range(kv):
                scratch[s] += pair_cost(tabs, tab_off, tab_x, k, t, v, s, p, sol[p])
        best_s = sol[v]
        best = scratch[best_s]
        for s in range(kv):
            if scratch[s] < best:
                best = scratch[s]
                best_s = s
        if best_s != sol[v]:
            changed += 1
            sol[v] = best_s
    return changed


@njit(**_JIT)
def icm_sweep(perm, sol, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, scratch):  # pragma: no cover
    """Iterated conditional modes: set each node in ``perm`` to its best strategy given its neighbours."""
    changed = 0
    for v in perm:
        local_costs(v, sol, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, scratch)
        best_s = sol[v]
        best = scratch[best_s]
        for s in range(k[v]):
            if scratch[s] < best:
                best = scratch[s]
                best_s = s
        if best_s != sol[v]:
            sol[v] = best_s
            changed += 1
    return changed


@njit(**_JIT)
def exhaustive(nodes, sol, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x):  # pragma: no cover
    """Exact minimum over all joint strategies of ``nodes`` (others fixed); writes it into ``sol``.

    Only for tiny cores: the work is ``prod k`` times the core size.
    """
    c = len(nodes)
    cur = np.zeros(c, dtype=np.int64)
    for i in range(c):
        sol[nodes[i]] = 0
    best = np.inf
    best_sol = np.zeros(c, dtype=np.int64)
    while True:
        e = 0.0
        for i in range(c):
            v = nodes[i]
            e += theta[ptr[v] + sol[v]]
            for j in range(adj_ptr[v], adj_ptr[v + 1]):
                nb = adj_nbr[j]
                if nb > v or not _contains(nodes, nb):
                    e += pair_cost(tabs, tab_off, tab_x, k, adj_tab[j], v, sol[v], nb, sol[nb])
        if e < best:
            best = e
            for i in range(c):
                best_sol[i] = cur[i]
        i = 0
        while i < c:
            cur[i] += 1
            if cur[i] < k[nodes[i]]:
                sol[nodes[i]] = cur[i]
                break
            cur[i] = 0
            sol[nodes[i]] = 0
            i += 1
        if i == c:
            break
    for i in range(c):
        sol[nodes[i]] = best_sol[i]
    return best


@njit(**_JIT)
def _contains(sorted_nodes, x):  # pragma: no cover - jitted
    i = np.searchsorted(sorted_nodes, x)
    return i < len(sorted_nodes) and sorted_nodes[i] == x


@njit(**_JIT)
def reverse_entries(adj_ptr, adj_nbr, rev):  # pragma: no cover - jitted
    """``rev[e]`` = the adjacency entry of the same table seen from the other endpoint."""
    n = len(adj_ptr) - 1
    for v in range(n):
        for e in range(adj_ptr[v], adj_ptr[v + 1]):
            nb = adj_nbr[e]
            lo, hi = adj_ptr[nb], adj_ptr[nb + 1]
            while lo < hi:  # neighbour lists are sorted
                mid = (lo + hi) // 2
                if adj_nbr[mid] < v:
                    lo = mid + 1
                else:
                    hi = mid
            rev[e] = lo


@njit(**_JIT)
def trws_pass(order, rank, gamma, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x,
              msg, msg_off, rev, sol, hat):  # pragma: no cover - jitted
    """One sweep of sequential tree-reweighted message passing (TRW-S, min-sum) in ``order``.

    ``msg[msg_off[e]:][:k_v]`` holds the message into node ``v`` along its adjacency
    entry ``e``; ``rank[v]`` is ``v``'s position in ``order``; ``gamma[v]`` is
    ``1 / max(#earlier, #later neighbours)``. Each node is also labelled greedily
    (earlier neighbours by their new labels, later ones through their messages),
    so ``sol`` holds a complete assignment of the ordered nodes afterwards.

    Tables and unaries may hold ``+inf`` for excluded labels (the certified bounds of
    :mod:`problems.intraop._dual`): an infinite belief never enters a message
    (:func:`min_over_rows`), an all-infinite message is left as it is (not normalised),
    and a node whose every label is infinite keeps its previous ``sol``. On finite tables
    (the search) none of this arises.
    """
    vec = np.empty(len(hat))  # g * belief - the reverse message, per label of the node
    out = np.empty(len(hat))  # the new message before its normalisation
    for idx in range(len(order)):
        i = order[idx]
        ki = k[i]
        pi = ptr[i]
        for a in range(ki):
            hat[a] = theta[pi + a]
        for e in range(adj_ptr[i], adj_ptr[i + 1]):
            j = adj_nbr[e]
            if rank[j] < idx:
                t = adj_tab[e]
                if tab_x[t] == i:
                    base = tab_off[t] + sol[j]
                    for a in range(ki):
                        hat[a] += tabs[base + a * k[j]]
                else:
                    base = tab_off[t] + sol[j] * ki
                    for a in range(ki):
                        hat[a] += tabs[base + a]
            else:
                o = msg_off[e]
                for a in range(ki):
                    hat[a] += msg[o + a]
        best = np.inf
        bs = sol[i]
        for a in range(ki):
            if hat[a] < best:
                best = hat[a]
                bs = a
        sol[i] = bs
        for a in range(ki):
            hat[a] = theta[pi + a]
        for e in range(adj_ptr[i], adj_ptr[i + 1]):
            o = msg_off[e]
            for a in range(ki):
                hat[a] += msg[o + a]
        g = gamma[i]
        for e in range(adj_ptr[i], adj_ptr[i + 1]):
            j = adj_nbr[e]
            if rank[j] <= idx:
                continue
            kj = k[j]
            t = adj_tab[e]
            oi = msg_off[e]
            oj = msg_off[rev[e]]
            for a in range(ki):
                vec[a] = g * hat[a] - msg[oi + a]
            min_plus(tabs, tab_off[t], tab_x[t] == i, ki, kj, vec, out)
            mn = np.inf
            for b in range(kj):
                mn = out[b] if out[b] < mn else mn
            if mn < np.inf:
                for b in range(kj):
                    msg[oj + b] = out[b] - mn
            else:
                for b in range(kj):
                    msg[oj + b] = out[b]
