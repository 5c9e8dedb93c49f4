"""Numba kernels for certified lower bounds: exact integer tables, float message passing.

Conventions (the same layout as :mod:`problems.intraop._kernels`): per-strategy
vectors are flat and indexed ``ptr[v] + s``; pair table ``t`` is row-major
``k[tab_x[t]] x k[tab_y[t]]`` at ``offset tab_off[t]``; adjacency entry ``e`` of
node ``v`` names a neighbour ``adj_nbr[e]`` and the table ``adj_tab[e]``.

Integer tables hold every cost exactly, with two reserved magnitudes:

* ``EXCL`` marks an *excluded* choice (forbidden in the file, or proven
  impossible): it is never part of any assignment that counts.
* finite values are kept ``<= CAP``; a larger finite sum is lowered to ``CAP``.
  Lowering a cost can only lower a minimum, so every bound computed from the
  capped tables stays valid. With ``CAP = 2^61 - 1`` and ``EXCL = 2^62 - 1`` the sum
  of two entries never overflows int64 and ``finite + finite < EXCL <= finite + EXCL``.
  Every single admissible cost (``< 10^18``) is below CAP.
* EXCL is a marker, never a value: every finite *term* a kernel returns stays below it.
  For the reparametrised terms of :func:`dual_terms` this holds because integer
  messages are bounded by :data:`MSG_ROOM` ``// (max degree + 2)`` (see there). Sums of
  several terms are Python ints and may exceed EXCL: callers flag "no admissible
  choice" separately (``None``), never by comparing a sum with EXCL.

Message passing (the search's TRW-S pass, :func:`problems.intraop._kernels.trws_pass`)
runs in float64 with excluded entries as ``+inf``; an infinite belief never reaches a
message. Only :func:`dual_terms` produces certified numbers, and it computes them in
exact integer arithmetic from integer messages.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from gapstop.problems.intraop._kernels import pair_cost
from gapstop.problems.intraop.reduce import reconstruct_ops, replay_ops

CAP = (1 << 61) - 1
EXCL = (1 << 62) - 1
#: Room between the largest finite entry and the marker: integer messages of a node of
#: degree ``d`` bounded by ``MSG_ROOM // (d + 2)`` keep every finite term of
#: :func:`dual_terms` strictly between ``-MSG_ROOM`` and ``EXCL`` (a node term is at most
#: ``CAP + d * bound``, a table term at most ``CAP + 2 * bound``).
MSG_ROOM = EXCL - CAP - 1
_JIT = dict(nogil=True, cache=True)


@njit(**_JIT)
def sat_add(a, b):  # pragma: no cover - jitted
    """``a + b`` for integer table entries: EXCL if either is, else capped at CAP."""
    s = a + b
    if s >= EXCL:
        return EXCL
    if s > CAP:
        return CAP
    return s


@njit(**_JIT)
def merge_edges_int(edge_u, edge_v, edge_ptr, edge_cost, pair, tab_off, tab_x, k, ptr, forbidden,
                    unary, tabs):  # pragma: no cover - jitted
    """Sum the file's edges into the integer pair tables (``pair[e] < 0``: self-loop diagonal into ``unary``).

    A cost ``>= forbidden`` makes the entry EXCL. ``unary`` and ``tabs`` must start at 0 / node costs.
    """
    for e in range(len(edge_u)):
        u, v = edge_u[e], edge_v[e]
        ku, kv = k[u], k[v]
        base = edge_ptr[e]
        p = pair[e]
        for su in range(ku):
            for sv in range(kv):
                c = edge_cost[base + su * kv + sv]
                if c >= forbidden:
                    c = EXCL
                if p < 0:
                    if su == sv:
                        unary[ptr[u] + su] = sat_add(unary[ptr[u] + su], c)
                elif tab_x[p] == u:
                    i = tab_off[p] + su * kv + sv
                    tabs[i] = sat_add(tabs[i], c)
                else:
                    i = tab_off[p] + sv * ku + su
                    tabs[i] = sat_add(tabs[i], c)


def replay_int(kind, op_v, op_u, op_w, op_t1, op_t2, op_t3, op_out, tab_x, tab_off, k, ptr,
               theta, work, tmp, elim0_min) -> None:
    """Exact degree <= 2 elimination on integer tables (see :mod:`problems.intraop.reduce`).

    ``theta`` (unary) and ``work`` (tables) are updated in place. Each ELIM0 node's
    final minimum is written to ``elim0_min[i]`` (EXCL if all its choices are excluded);
    the optimum of the whole network is the optimum of the core plus their sum. The
    search's replay with saturated int64 sums (:func:`~problems.intraop.reduce.replay_ops`).
    """
    replay_ops(kind, op_v, op_u, op_w, op_t1, op_t2, op_t3, op_out, tab_x, tab_off, k, ptr, theta, work, tmp,
               elim0_min, CAP, EXCL)


def reconstruct_int(kind, op_v, op_u, op_w, op_t1, op_t2, tab_x, tab_off, k, ptr, theta, work, sol) -> None:
    """Extend a core labelling to the eliminated nodes (reverse order, best response each), after
    :func:`replay_int`: :func:`~problems.intraop.reduce.reconstruct_ops` with saturated int64 sums."""
    reconstruct_ops(kind, op_v, op_u, op_w, op_t1, op_t2, tab_x, tab_off, k, ptr, theta, work, sol, CAP, EXCL)


@njit(**_JIT)
def to_float(src, dst):  # pragma: no cover - jitted
    """Integer entries to float64, EXCL to +inf."""
    for i in range(len(src)):
        dst[i] = np.inf if src[i] >= EXCL else float(src[i])


@njit(**_JIT)
def round_messages(msg, bound, out):  # pragma: no cover - jitted
    """Integer messages: nearest integer clipped to ``[-bound, bound]`` (+inf to ``bound``, NaN to 0)."""
    for i in range(len(msg)):
        x = msg[i]
        if x != x:
            out[i] = 0
        elif x >= bound:
            out[i] = bound
        elif x <= -bound:
            out[i] = -bound
        else:
            out[i] = np.int64(np.floor(x + 0.5))


@njit(**_JIT)
def table_term_min(theta, ptr, k, tabs, tab_off, tab_x, t, v, j, msg, oi, oj):  # pragma: no cover - jitted
    """``(min, a, b)`` of ``f(a, b) - msg[oi + a] - msg[oj + b]`` over table ``t`` between ``v`` and ``j``.

    Only entries with both labels and the pair admissible count; ``(EXCL, -1, -1)`` if none does.
    """
    best = EXCL
    ba = -1
    bb = -1
    for a in range(k[v]):
        if theta[ptr[v] + a] >= EXCL:
            continue
        for b in range(k[j]):
            if theta[ptr[j] + b] >= EXCL:
                continue
            f = pair_cost(tabs, tab_off, tab_x, k, t, v, a, j, b)
            if f >= EXCL:
                continue
            h = f - msg[oi + a] - msg[oj + b]
            if h < best:
                best = h
                ba = a
                bb = b
    return best, ba, bb


@njit(**_JIT)
def dual_terms(core, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, msg, msg_off, rev,
               node_min, edge_min):  # pragma: no cover - jitted
    """The reparametrisation lower bound of the core for integer messages, term by term.

    With ``bar_v(x) = theta_v(x) + sum_e msg_e(x)`` and, for the table between
    ``v`` and ``j`` (entry ``e`` of ``v``), ``bar_vj(x, y) = f(x, y) - msg_e(x) -
    msg_rev(e)(y)``, every assignment's cost is ``sum_v bar_v + sum_vj bar_vj``,
    so ``sum_v min bar_v + sum_vj min bar_vj`` is a lower bound whatever the
    messages. Minima run over non-excluded entries only (pairs also need both
    labels non-excluded). ``node_min[i]`` is the term of ``core[i]``;
    ``edge_min[e]`` the term of the table seen from entry ``e`` of its smaller
    endpoint (others 0). A term with no admissible entry is EXCL (no assignment).
    Requires finite ``theta``/``tabs`` entries in ``[0, CAP]`` (EXCL for excluded) and
    ``|msg| <= MSG_ROOM // (max degree + 2)``: then every finite term is below EXCL
    (so EXCL means "no admissible entry" only) and nothing overflows int64.
    """
    for ci in range(len(core)):
        v = core[ci]
        best = EXCL
        for a in range(k[v]):
            if theta[ptr[v] + a] >= EXCL:
                continue
            h = theta[ptr[v] + a]
            for e in range(adj_ptr[v], adj_ptr[v + 1]):
                h += msg[msg_off[e] + a]
            if h < best:
                best = h
        node_min[ci] = best
        for e in range(adj_ptr[v], adj_ptr[v + 1]):
            j = adj_nbr[e]
            if j < v:
                continue
            edge_min[e] = table_term_min(theta, ptr, k, tabs, tab_off, tab_x, adj_tab[e], v, j, msg, msg_off[e],
                                         msg_off[rev[e]])[0]


@njit(**_JIT)
def arc_consistency(nodes, alive, ptr, k, adj_ptr, adj_nbr, adj_tab, vals, tab_off, tab_x, base,
                    tol):  # pragma: no cover - jitted
    """Clear the ``alive`` labels of ``nodes`` left without an admissible partner, to a fixpoint.

    Label ``a`` of ``v`` stays alive while every table ``t`` at ``v`` (``adj_*``) has an
    alive partner label ``b`` whose entry ``h`` (read from ``vals`` in ``pair_cost``'s
    layout) is admissible: ``h < EXCL`` and ``h - base[t] <= tol``. Sound for any such
    predicate: a cleared label takes part in no assignment of alive labels whose every
    entry is admissible. ``alive`` is flat like ``theta``. Returns the number cleared.
    """
    removed = 0
    changed = True
    while changed:
        changed = False
        for v in nodes:
            for a in range(k[v]):
                if not alive[ptr[v] + a]:
                    continue
                for e in range(adj_ptr[v], adj_ptr[v + 1]):
                    j = adj_nbr[e]
                    t = adj_tab[e]
                    ok = False
                    for b in range(k[j]):
                        if alive[ptr[j] + b]:
                            h = pair_cost(vals, tab_off, tab_x, k, t, v, a, j, b)
                            if h < EXCL and h - base[t] <= tol:
                                ok = True
                                break
                    if not ok:
                        alive[ptr[v] + a] = False
                        removed += 1
                        changed = True
                        break
    return removed


@njit(**_JIT)
def penalty_unary(base, usage, ptr, weight, theta):  # pragma: no cover - jitted
    """``theta = base + floor(weight[v] * usage)`` in integers (EXCL kept; products above CAP capped).

    ``weight`` must already be rounded down enough that the float product never
    exceeds the exact one (the caller's job); flooring then keeps the penalty a
    lower estimate, so the Lagrangian bound stays valid.
    """
    for v in range(len(weight)):
        w = weight[v]
        for j in range(ptr[v], ptr[v + 1]):
            if base[j] >= EXCL:
                theta[j] = EXCL
                continue
            x = w * float(usage[j])
            p = CAP if x >= CAP else np.int64(np.floor(x))
            theta[j] = sat_add(base[j], p)


@njit(**_JIT)
def spread_beliefs(core, theta, ptr, k, adj_ptr, msg, msg_off, out):  # pragma: no cover - jitted
    """Messages ``out`` that move each core node's belief evenly onto its tables.

    For admissible labels, ``out_e(a) = msg_e(a) - bel_v(a) / deg(v)`` with
    ``bel_v = theta_v + sum_e msg_e``, so every node term of the reparametrisation
    becomes 0 and the bound is the sum of the table minima (each table then sees
    its share of both endpoints, as in the tree-reweighted bound with one tree per
    table). Only the choice of messages changes; :func:`dual_terms` certifies any.
    """
    for v in core:
        d = adj_ptr[v + 1] - adj_ptr[v]
        for a in range(k[v]):
            bel = theta[ptr[v] + a]
            for e in range(adj_ptr[v], adj_ptr[v + 1]):
                bel += msg[msg_off[e] + a]
            for e in range(adj_ptr[v], adj_ptr[v + 1]):
                if bel == np.inf:
                    out[msg_off[e] + a] = 0.0
                else:
                    out[msg_off[e] + a] = msg[msg_off[e] + a] - bel / d


@njit(**_JIT)
def pair_index(tab_off, tab_x, k, t, v, a, nbr, b):  # pragma: no cover - jitted
    """Position in the table array of the entry :func:`~problems.intraop._kernels.pair_cost` reads."""
    if tab_x[t] == v:
        return tab_off[t] + a * k[nbr] + b
    return tab_off[t] + b * k[v] + a


@njit(**_JIT)
def core_marginals(core, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, msg, msg_off, rev,
                   p_node, p_tab):  # pragma: no cover - jitted
    """Add the minimisers of the :func:`dual_terms` bound of the core to label and table weights.

    For messages from :func:`spread_beliefs` every node term of the bound is
    constant in ``theta`` and each table term holds ``1/deg`` of both endpoints'
    unary costs, so the derivative of the bound with respect to ``theta_v(a)`` is
    ``sum over v's tables whose minimiser puts v at a`` of ``1/deg(v)``; that
    weight goes to ``p_node[ptr[v] + a]`` and weight 1 to the minimising entry of
    each table in ``p_tab`` (the elimination replay needs it). A core node without
    tables puts weight 1 on its cheapest label. Steering only: nothing certified.
    """
    for v in core:
        d = adj_ptr[v + 1] - adj_ptr[v]
        if d == 0:
            best = EXCL
            bs = -1
            for a in range(k[v]):
                if theta[ptr[v] + a] < best:
                    best = theta[ptr[v] + a]
                    bs = a
            if bs >= 0:
                p_node[ptr[v] + bs] += 1.0
            continue
        for e in range(adj_ptr[v], adj_ptr[v + 1]):
            j = adj_nbr[e]
            if j < v:
                continue
            t = adj_tab[e]
            _, ba, bb = table_term_min(theta, ptr, k, tabs, tab_off, tab_x, t, v, j, msg, msg_off[e], msg_off[rev[e]])
            if ba < 0:
                continue
            dj = adj_ptr[j + 1] - adj_ptr[j]
            p_node[ptr[v] + ba] += 1.0 / d
            p_node[ptr[j] + bb] += 1.0 / dj
            p_tab[pair_index(tab_off, tab_x, k, t, v, ba, j, bb)] += 1.0


@njit(**_JIT)
def eliminated_argmin(work, tab_off, tab_x, k, theta, tv, v, u, a, t1, w, c, t2):  # pragma: no cover - jitted
    """The label ``b`` of eliminated node ``v`` minimising ``f1(a, b) + theta_v(b) [+ f2(b, c)]`` (-1 if all EXCL).

    ``f1`` is table ``t1`` to ``u`` at ``a``; the ``f2`` term (table ``t2`` to ``w`` at ``c``)
    only when ``t2 >= 0``. Sums as in :func:`replay_int`.
    """
    best = EXCL
    bs = -1
    for b in range(k[v]):
        x = sat_add(pair_cost(work, tab_off, tab_x, k, t1, u, a, v, b), theta[tv + b])
        if t2 >= 0:
            x = sat_add(x, pair_cost(work, tab_off, tab_x, k, t2, v, b, w, c))
        if x < best:
            best = x
            bs = b
    return bs


@njit(**_JIT)
def eliminated_marginals(kind, op_v, op_u, op_w, op_t1, op_t2, op_t3, op_out, tab_x, tab_off, k, ptr, theta, work,
                         p_node, p_tab):  # pragma: no cover - jitted
    """Carry the core weights of :func:`core_marginals` back through the elimination (reverse order).

    ``theta``/``work`` must be the tables left by :func:`replay_int`. An ELIM1 node
    ``v`` of neighbour ``u`` contributes ``min_b f(a, b) + theta_v(b)`` to
    ``theta_u(a)``, so the weight of ``u`` at ``a`` moves to ``v``'s minimiser for
    ``a``; an ELIM2 node takes the weight of each entry of its output table (and
    of the merged table ``t3``) the same way; an ELIM0 node puts weight 1 on its
    cheapest label. Afterwards every node's weights sum to (about) 1 and
    ``sum_v,a p_node * d theta`` is the change of the bound for a small change
    ``d theta`` of the original unary costs. Steering only: nothing certified.
    """
    for i in range(len(kind) - 1, -1, -1):
        v = op_v[i]
        tv = ptr[v]
        kv = k[v]
        if kind[i] == 0:
            best = EXCL
            bs = -1
            for b in range(kv):
                if theta[tv + b] < best:
                    best = theta[tv + b]
                    bs = b
            if bs >= 0:
                p_node[tv + bs] += 1.0
        elif kind[i] == 1:
            u = op_u[i]
            t1 = op_t1[i]
            for a in range(k[u]):
                wgt = p_node[ptr[u] + a]
                if wgt <= 0.0:
                    continue
                bs = eliminated_argmin(work, tab_off, tab_x, k, theta, tv, v, u, a, t1, -1, 0, -1)
                if bs >= 0:
                    p_node[tv + bs] += wgt
                    p_tab[pair_index(tab_off, tab_x, k, t1, u, a, v, bs)] += wgt
        else:
            u, w = op_u[i], op_w[i]
            kw = k[w]
            out = tab_off[op_out[i]]
            t1, t2, t3 = op_t1[i], op_t2[i], op_t3[i]
            for a in range(k[u]):
                for c in range(kw):
                    wgt = p_tab[out + a * kw + c]
                    if wgt <= 0.0:
                        continue
                    if t3 >= 0:
                        p_tab[pair_index(tab_off, tab_x, k, t3, u, a, w, c)] += wgt
                    bs = eliminated_argmin(work, tab_off, tab_x, k, theta, tv, v, u, a, t1, w, c, t2)
                    if bs >= 0:
                        p_node[tv + bs] += wgt
                        p_tab[pair_index(tab_off, tab_x, k, t1, u, a, v, bs)] += wgt
                        p_tab[pair_index(tab_off, tab_x, k, t2, v, bs, w, c)] += wgt
