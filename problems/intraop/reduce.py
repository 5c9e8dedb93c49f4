"""Exact elimination of degree <= 2 nodes of the relaxed problem.

For fixed penalty weights the relaxed problem is the pairwise network
``min sum_v theta_v(s_v) + sum_{uv} f_uv(s_u, s_v)`` of
:mod:`problems.intraop.network`. A node ``v`` of degree 1 (neighbour ``u``) is
eliminated by adding ``min_b f_uv(., b) + theta_v(b)`` to ``theta_u``; one of
degree 2 (neighbours ``u``, ``w``) by the new table
``g(a, c) = min_b f_uv(a, b) + theta_v(b) + f_vw(b, c)``, merged into an
existing ``u``-``w`` table if there is one; degree 0 needs nothing. This is
repeated until no node of degree <= 2 is left (the *core*). The optimum of the
core equals the optimum of the whole network, and :func:`reconstruct` extends
a core assignment to all nodes in reverse elimination order (each eliminated
node takes its best strategy given its neighbours), which is optimal for it.

Which nodes are eliminated depends only on the graph, so the elimination is
planned once (:func:`plan_reduction`) and replayed with numbers for every new
set of weights (:func:`run_plan`). A degree-2 elimination may be skipped to
bound fill-in (``max_fill``); those nodes stay in the core.

With ``contract``, a node ``v`` of any degree joined to a neighbour ``u`` by a
*bijection* table (exactly one entry below FORBIDDEN in every row and column, so
``s_v = pi(s_u)`` in every solution that avoids forbidden choices: the contest's
crosscut edges between duplicated ops, and many plain resharding-free edges) is
merged into ``u``: ``theta_u(a) += f_uv(a, pi(a)) + theta_v(pi(a))`` and each other
table ``f_vx`` becomes the ``u``-``x`` table ``f_vx(pi(a), c)`` (added to an existing
one). No table grows (``k_u = k_v``). The optimum is unchanged whenever the
network has a solution below FORBIDDEN (those all satisfy ``s_v = pi(s_u)``).
On instance A this takes the core from 7,072 nodes to a few hundred.

Also with ``contract``, a node with a single strategy is eliminated whatever its degree: each
of its tables becomes a unary term of the neighbour (``theta_x(a) += f_xv(a, 0)``), exact for
any network. Such nodes (a third of instances C and M) otherwise stay in the core wherever
their degree exceeds 2, joining neighbours that have nothing to decide between them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gapstop.problems.intraop._kernels import pair_cost
from gapstop.problems.intraop.model import FORBIDDEN
from gapstop.problems.intraop.network import PairNetwork

ELIM0, ELIM1, ELIM2 = 0, 1, 2
#: ``contract``: merge ``v`` into ``u`` (unary part), and move one of ``v``'s other tables to ``u``
MERGE, MOVE = 3, 4
#: ``contract``: fold a single-strategy node's table into its neighbour's unary (the node then gets ELIM0)
FOLD = 5
#: the float replay needs no ELIM0 minima (:func:`replay_ops`)
_NO_MINS = np.empty(0, dtype=np.float64)


@dataclass(frozen=True, eq=False)
class ReductionPlan:
    """A replayable elimination order and the core it leaves.

    Tables ``0 .. P-1`` are the network's (same offsets in the working array);
    later ones are created by degree-2 eliminations. Table ids are fixed, so
    the core adjacency refers to them directly.

    Attributes:
        op_kind: int8[ops], ELIM0/1/2, MERGE, MOVE. ``op_v`` the eliminated node, ``op_u``/``op_w``
            its neighbours (-1 if none), ``op_t1``/``op_t2`` the tables to them, ``op_t3``
            an existing u-w table merged into the result (-1 if none), ``op_out`` the new table.
            MERGE (``v`` into ``u`` along the bijection ``op_t1``) is followed by one MOVE per
            other neighbour ``op_w`` of ``v`` (its table ``op_t2`` re-indexed onto ``u``).
            FOLD adds the table ``op_t1`` of a single-strategy ``v`` to ``op_u``'s unary; one per
            neighbour, then an ELIM0 for ``v``.
        tab_x, tab_y, tab_off: int32/int32/int64[tables], all tables; offsets into the working array.
        work_size: length of the working array (network tables followed by new ones).
        core: int64[c], sorted nodes left after elimination.
        adj_ptr, adj_nbr, adj_tab: core adjacency (CSR over all n nodes; non-core nodes have none).
    """

    op_kind: NDArray[np.int8]
    op_v: NDArray[np.int64]
    op_u: NDArray[np.int64]
    op_w: NDArray[np.int64]
    op_t1: NDArray[np.int64]
    op_t2: NDArray[np.int64]
    op_t3: NDArray[np.int64]
    op_out: NDArray[np.int64]
    tab_x: NDArray[np.int32]
    tab_y: NDArray[np.int32]
    tab_off: NDArray[np.int64]
    work_size: int
    core: NDArray[np.int64]
    adj_ptr: NDArray[np.int64]
    adj_nbr: NDArray[np.int32]
    adj_tab: NDArray[np.int32]

    @property
    def num_ops(self) -> int:
        return len(self.op_kind)


def plan_reduction(net: PairNetwork, *, max_fill: int | None = 4096, max_work: int | None = 1 << 22,
                   contract: bool = False, fold: bool | None = None) -> ReductionPlan:
    """Plan the elimination of degree <= 2 nodes until none is left.

    Args:
        net: the merged network.
        max_fill: a degree-2 node is kept in the core when its new table would have more
            than ``max(max_fill, k_u k_v, k_v k_w)`` entries; None: no limit.
        max_work: ... or when computing it takes more than ``max_work`` steps (``k_u k_v k_w``); None: no limit.
        contract: also merge nodes joined by a bijection table of the network, and eliminate
            single-strategy nodes of any degree (module docstring).
        fold: eliminate single-strategy nodes of any degree (default: as ``contract``).
    """
    fold = contract if fold is None else fold
    n_tabs = len(net.tab_x)
    bij = (_bijections(net.tabs, net.tab_off, net.tab_x.astype(np.int64), net.tab_y.astype(np.int64), net.k,
                       float(FORBIDDEN)).tolist() if contract else [False] * n_tabs)
    n = net.n
    k = net.k.tolist()
    adj: list[dict[int, int]] = [dict() for _ in range(n)]
    tx, ty = net.tab_x.tolist(), net.tab_y.tolist()
    for t, (x, y) in enumerate(zip(tx, ty)):
        adj[x][y] = t
        adj[y][x] = t
    offs = net.tab_off.tolist()
    size = len(net.tabs)
    ops: list[tuple[int, int, int, int, int, int, int, int]] = []
    alive = [True] * n

    # bijection tables still in the graph at each node (so that eligibility is O(1))
    nbij = [0] * n
    for t in range(n_tabs):
        if bij[t]:
            nbij[tx[t]] += 1
            nbij[ty[t]] += 1

    def drop(t: int) -> None:
        if t >= 0 and t < n_tabs and bij[t]:
            nbij[tx[t]] -= 1
            nbij[ty[t]] -= 1

    def bijection_nbr(x: int) -> tuple[int, int] | None:
        if nbij[x]:
            for y, t in adj[x].items():
                if t < n_tabs and bij[t]:
                    return y, t
        return None

    def eligible(x: int) -> bool:
        return len(adj[x]) <= 2 or nbij[x] > 0 or (fold and k[x] == 1)

    queue = deque(v for v in range(n) if eligible(v))
    queued = [eligible(v) for v in range(n)]

    def push(x: int) -> None:
        if alive[x] and not queued[x] and eligible(x):
            queued[x] = True
            queue.append(x)

    while queue:
        v = queue.popleft()
        queued[v] = False
        if not alive[v] or not eligible(v):
            continue
        nbrs = list(adj[v].items())
        merge = bijection_nbr(v)
        if fold and k[v] == 1 and len(nbrs) > 1:
            for x, t1 in nbrs:
                ops.append((FOLD, v, x, -1, t1, -1, -1, -1))
                del adj[x][v]
                drop(t1)
                push(x)
            ops.append((ELIM0, v, -1, -1, -1, -1, -1, -1))
        elif merge is not None and len(nbrs) > 1:
            u, t1 = merge
            ops.append((MERGE, v, u, -1, t1, -1, -1, -1))
            del adj[u][v]
            drop(t1)
            for x, t2 in nbrs:
                if x == u:
                    continue
                t3 = adj[u].get(x, -1)
                drop(t2)
                drop(t3)
                out = len(tx)
                tx.append(u)
                ty.append(x)
                offs.append(size)
                size += k[u] * k[x]
                ops.append((MOVE, v, u, x, t1, t2, t3, out))
                del adj[x][v]
                adj[u][x] = out
                adj[x][u] = out
                push(x)
            push(u)
        elif len(nbrs) == 0:
            ops.append((ELIM0, v, -1, -1, -1, -1, -1, -1))
        elif len(nbrs) == 1:
            (u, t1), = nbrs
            ops.append((ELIM1, v, u, -1, t1, -1, -1, -1))
            del adj[u][v]
            drop(t1)
            push(u)
        else:
            (u, t1), (w, t2) = nbrs
            ku, kv, kw = k[u], k[v], k[w]
            if ((max_fill is not None and ku * kw > max(max_fill, ku * kv, kv * kw))
                    or (max_work is not None and ku * kv * kw > max_work)):
                continue  # stays in the core (re-queued if a neighbour goes away)
            t3 = adj[u].get(w, -1)
            for t in (t1, t2, t3):
                drop(t)
            out = len(tx)
            tx.append(u)
            ty.append(w)
            offs.append(size)
            size += ku * kw
            ops.append((ELIM2, v, u, w, t1, t2, t3, out))
            del adj[u][v]
            del adj[w][v]
            adj[u][w] = out
            adj[w][u] = out
            push(u)
            push(w)
        alive[v] = False
        adj[v].clear()
    core = np.array([v for v in range(n) if alive[v]], dtype=np.int64)
    adj_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum([len(a) for a in adj], out=adj_ptr[1:])
    nbr = [x for a in adj for x in sorted(a)]
    tab = [a[x] for a in adj for x in sorted(a)]
    cols = np.array(ops, dtype=np.int64).reshape(-1, 8)
    return ReductionPlan(
        op_kind=cols[:, 0].astype(np.int8), op_v=cols[:, 1], op_u=cols[:, 2], op_w=cols[:, 3],
        op_t1=cols[:, 4], op_t2=cols[:, 5], op_t3=cols[:, 6], op_out=cols[:, 7],
        tab_x=np.array(tx, dtype=np.int32), tab_y=np.array(ty, dtype=np.int32),
        tab_off=np.array(offs, dtype=np.int64), work_size=size, core=core, adj_ptr=adj_ptr,
        adj_nbr=np.array(nbr, dtype=np.int32), adj_tab=np.array(tab, dtype=np.int32))


def new_work(net: PairNetwork, plan: ReductionPlan) -> NDArray[np.float64]:
    """A working table array for one search: the network's tables, then room for new ones."""
    work = np.empty(plan.work_size, dtype=np.float64)
    work[:len(net.tabs)] = net.tabs
    return work


@njit(nogil=True, cache=True)
def _add(a, b, cap, excl):  # pragma: no cover - jitted
    """``a + b``, ``excl`` once it reaches ``excl``, else at most ``cap``; with ``cap = excl = +inf``
    exactly ``a + b`` (the float tables of the search)."""
    s = a + b
    if s >= excl:
        return excl
    if s > cap:
        return cap
    return s


@njit(nogil=True, cache=True)
def replay_ops(kind, op_v, op_u, op_w, op_t1, op_t2, op_t3, op_out, tab_x, tab_off, k, ptr, theta, work, tmp,
               elim0_min, cap, excl):  # pragma: no cover - jitted
    """Replay the ops of a plan on ``theta`` (unary) and ``work`` (tables), both updated in place.

    One kernel for both number types; every sum goes through :func:`_add`. Float tables (the
    search): ``cap = excl = +inf``, plain float sums. Integer tables (the bounds,
    :mod:`problems.intraop._bound_kernels`): ``cap = CAP``, ``excl = EXCL``, exact saturated
    int64 sums (every local stays int64: no rounding above 2^53). ``tmp`` has the tables'
    dtype and at least ``max k`` entries. Each ELIM0 node's minimum is written to
    ``elim0_min[i]`` (``excl`` if all its choices are), when ``elim0_min`` has room for it.
    """
    for i in range(len(kind)):
        v = op_v[i]
        kv = k[v]
        tv = ptr[v]
        if kind[i] == 0:
            if i < len(elim0_min):
                best = excl
                for b in range(kv):
                    if theta[tv + b] < best:
                        best = theta[tv + b]
                elim0_min[i] = best
        elif kind[i] == 1:
            u = op_u[i]
            ku = k[u]
            t = op_t1[i]
            if tab_x[t] == u:  # row a of u holds the costs over v's strategies
                for a in range(ku):
                    row = tab_off[t] + a * kv
                    best = excl
                    for b in range(kv):
                        c = _add(work[row + b], theta[tv + b], cap, excl)
                        best = c if c < best else best
                    theta[ptr[u] + a] = _add(theta[ptr[u] + a], best, cap, excl)
            else:  # row b of v holds the costs over u's strategies: all of u's minima at once
                for a in range(ku):
                    tmp[a] = excl
                for b in range(kv):
                    row = tab_off[t] + b * ku
                    tb = theta[tv + b]
                    for a in range(ku):
                        c = _add(work[row + a], tb, cap, excl)
                        tmp[a] = c if c < tmp[a] else tmp[a]
                for a in range(ku):
                    theta[ptr[u] + a] = _add(theta[ptr[u] + a], tmp[a], cap, excl)
        elif kind[i] == 2:
            u, w = op_u[i], op_w[i]
            kw = k[w]
            out = tab_off[op_out[i]]
            t2 = op_t2[i]
            t3 = op_t3[i]
            v_rows = tab_x[t2] == v
            for a in range(k[u]):
                for b in range(kv):
                    tmp[b] = _add(pair_cost(work, tab_off, tab_x, k, op_t1[i], u, a, v, b), theta[tv + b], cap, excl)
                o = out + a * kw
                if v_rows:  # row b of table t2 holds the costs over w's strategies
                    for c in range(kw):
                        work[o + c] = excl
                    for b in range(kv):
                        row = tab_off[t2] + b * kw
                        tb = tmp[b]
                        for c in range(kw):
                            x = _add(tb, work[row + c], cap, excl)
                            work[o + c] = x if x < work[o + c] else work[o + c]
                else:
                    for c in range(kw):
                        row = tab_off[t2] + c * kv
                        best = excl
                        for b in range(kv):
                            x = _add(tmp[b], work[row + b], cap, excl)
                            best = x if x < best else best
                        work[o + c] = best
                if t3 >= 0:
                    for c in range(kw):
                        work[o + c] = _add(work[o + c], pair_cost(work, tab_off, tab_x, k, t3, u, a, w, c), cap, excl)
        elif kind[i] == 3:
            u = op_u[i]
            for a in range(k[u]):
                b = _image(work, tab_off, tab_x, k, op_t1[i], u, a, v, excl)
                x = _add(pair_cost(work, tab_off, tab_x, k, op_t1[i], u, a, v, b), theta[tv + b], cap, excl)
                theta[ptr[u] + a] = _add(theta[ptr[u] + a], x, cap, excl)
        elif kind[i] == 4:
            u, w = op_u[i], op_w[i]
            kw = k[w]
            out = tab_off[op_out[i]]
            t3 = op_t3[i]
            for a in range(k[u]):
                b = _image(work, tab_off, tab_x, k, op_t1[i], u, a, v, excl)
                for c in range(kw):
                    x = pair_cost(work, tab_off, tab_x, k, op_t2[i], v, b, w, c)
                    if t3 >= 0:
                        x = _add(x, pair_cost(work, tab_off, tab_x, k, t3, u, a, w, c), cap, excl)
                    work[out + a * kw + c] = x
        elif kind[i] == 5:
            u = op_u[i]
            for a in range(k[u]):
                theta[ptr[u] + a] = _add(theta[ptr[u] + a], pair_cost(work, tab_off, tab_x, k, op_t1[i], u, a, v, 0),
                                         cap, excl)


@njit(nogil=True, cache=True)
def _image(work, tab_off, tab_x, k, t, u, a, v, excl):  # pragma: no cover
    """``pi(a)``: ``v``'s cheapest strategy in row ``a`` of ``u``'s bijection table ``t`` (first on ties);
    ``excl``: the tables' largest value (+inf or EXCL)."""
    best = excl
    best_b = 0
    for b in range(k[v]):
        c = pair_cost(work, tab_off, tab_x, k, t, u, a, v, b)
        if c < best:
            best = c
            best_b = b
    return best_b


@njit(nogil=True, cache=True)
def _bijections(tabs, tab_off, tab_x, tab_y, k, forbidden):  # pragma: no cover
    """bool[P]: table ``t`` is square (k >= 2) with exactly one entry below ``forbidden`` per row and column."""
    out = np.zeros(len(tab_x), dtype=np.bool_)
    for t in range(len(tab_x)):
        kk = k[tab_x[t]]
        if kk < 2 or k[tab_y[t]] != kk:
            continue
        cols = np.zeros(kk, dtype=np.int64)
        ok = True
        for a in range(kk):
            row = 0
            for b in range(kk):
                if tabs[tab_off[t] + a * kk + b] < forbidden:
                    row += 1
                    cols[b] += 1
            if row != 1:
                ok = False
                break
        if ok:
            for b in range(kk):
                if cols[b] != 1:
                    ok = False
        out[t] = ok
    return out


def run_plan(plan: ReductionPlan, net: PairNetwork, theta: NDArray[np.float64], work: NDArray[np.float64]) -> None:
    """Replay the eliminations for the unary costs ``theta`` (updated in place, float64[K]).

    Afterwards ``theta`` restricted to the core plus the core tables in ``work``
    form a network whose optimum is the optimum of the whole relaxed problem.
    """
    tmp = np.empty(int(net.k.max()), dtype=np.float64)
    replay_ops(plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2, plan.op_t3, plan.op_out,
               plan.tab_x, plan.tab_off, net.k, net.ptr, theta, work, tmp, _NO_MINS, np.inf, np.inf)


@njit(nogil=True, cache=True)
def reconstruct_ops(kind, op_v, op_u, op_w, op_t1, op_t2, tab_x, tab_off, k, ptr, theta, work, sol, cap,
                    excl):  # pragma: no cover - jitted
    """Extend a core labelling in ``sol`` to the eliminated nodes (reverse order, best response each,
    first on ties) after :func:`replay_ops` with the same ``cap`` and ``excl``."""
    for i in range(len(kind) - 1, -1, -1):
        v = op_v[i]
        if kind[i] == 4 or kind[i] == 5:
            continue
        if kind[i] == 3:
            sol[v] = _image(work, tab_off, tab_x, k, op_t1[i], op_u[i], sol[op_u[i]], v, excl)
            continue
        tv = ptr[v]
        best = excl
        best_s = 0
        for b in range(k[v]):
            c = theta[tv + b]
            if kind[i] >= 1:
                c = _add(c, pair_cost(work, tab_off, tab_x, k, op_t1[i], v, b, op_u[i], sol[op_u[i]]), cap, excl)
            if kind[i] == 2:
                c = _add(c, pair_cost(work, tab_off, tab_x, k, op_t2[i], v, b, op_w[i], sol[op_w[i]]), cap, excl)
            if c < best:
                best = c
                best_s = b
        sol[v] = best_s


def reconstruct(plan: ReductionPlan, net: PairNetwork, theta: NDArray[np.float64],
                work: NDArray[np.float64], sol: NDArray[np.int64]) -> None:
    """Fill the eliminated nodes of ``sol`` (core nodes must be set) after :func:`run_plan`."""
    reconstruct_ops(plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2,
                    plan.tab_x, plan.tab_off, net.k, net.ptr, theta, work, sol, np.inf, np.inf)


@njit(nogil=True, cache=True)
def _dependent_ops(kind, op_v, op_u, op_t1, op_t2, op_t3, op_out, n_tables, varying):  # pragma: no cover
    """bool[ops]: the ops whose result depends on a ``varying`` node's unary costs.

    A node's unary becomes dependent when a dependent op adds to it (ELIM1, MERGE, FOLD),
    a table when a dependent op writes it (ELIM2, MOVE)."""
    node = varying.copy()
    tab = np.zeros(n_tables, dtype=np.bool_)
    dep = np.zeros(len(kind), dtype=np.bool_)
    for i in range(len(kind)):
        kd = kind[i]
        d = False
        if kd == 1 or kd == 3:
            d = node[op_v[i]] or tab[op_t1[i]]
        elif kd == 2:
            d = node[op_v[i]] or tab[op_t1[i]] or tab[op_t2[i]] or (op_t3[i] >= 0 and tab[op_t3[i]])
        elif kd == 4:
            d = tab[op_t1[i]] or tab[op_t2[i]] or (op_t3[i] >= 0 and tab[op_t3[i]])
        elif kd == 5:
            d = tab[op_t1[i]]
        dep[i] = d
        if d:
            if kd == 1 or kd == 3 or kd == 5:
                node[op_u[i]] = True
            elif kd == 2 or kd == 4:
                tab[op_out[i]] = True
    return dep


@dataclass(frozen=True, eq=False)
class Replay:
    """:func:`run_plan` split once into the part that depends on the penalty weights and the rest.

    Only nodes whose usage differs between strategies (``varying``) get a penalty: for the others
    ``w_v m_v`` is the same for every strategy, a constant that changes no choice. The ops that no
    varying node reaches give the same numbers for every weight vector, so they run once, here:
    ``base_theta`` is the unary costs plus their contributions and ``base_work`` the working tables
    with their output tables. Each solve then replays only ``ops`` (the dependent ones, in order).
    On contest instances they are under 5 % of the replay's arithmetic.

    Attributes:
        varying: bool[n]; varying_nodes: int64[v], the same as indices.
        base_theta: float64[K]; base_work: float64[plan.work_size] (read-only; copy per search).
        ops: (kind, v, u, w, t1, t2, t3, out) of the dependent ops, as in :class:`ReductionPlan`.
    """

    varying: NDArray[np.bool_]
    varying_nodes: NDArray[np.int64]
    base_theta: NDArray[np.float64]
    base_work: NDArray[np.float64]
    ops: tuple[NDArray[np.int64], ...]

    @property
    def num_ops(self) -> int:
        return len(self.ops[0])


def plan_replay(plan: ReductionPlan, net: PairNetwork, varying: NDArray[np.bool_]) -> Replay:
    """Run the ops of ``plan`` that no ``varying`` node reaches, and keep the others for :func:`run_replay`."""
    cols = (plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2, plan.op_t3,
            plan.op_out)
    dep = _dependent_ops(cols[0], plan.op_v, plan.op_u, plan.op_t1, plan.op_t2, plan.op_t3, plan.op_out,
                         len(plan.tab_x), np.asarray(varying, dtype=np.bool_))
    theta = np.array(net.unary, dtype=np.float64)
    work = new_work(net, plan)
    tmp = np.empty(int(net.k.max()), dtype=np.float64)
    const = ~dep
    replay_ops(*(c[const] for c in cols), plan.tab_x, plan.tab_off, net.k, net.ptr, theta, work, tmp, _NO_MINS,
               np.inf, np.inf)
    for a in (theta, work):
        a.flags.writeable = False
    varying = np.array(varying, dtype=np.bool_)
    return Replay(varying, np.flatnonzero(varying).astype(np.int64), theta, work,
                  tuple(np.ascontiguousarray(c[dep]) for c in cols))


@njit(nogil=True, cache=True)
def _penalise(base, usage, ptr, weight, nodes, theta):  # pragma: no cover - jitted
    theta[:] = base
    for v in nodes:
        w = weight[v]
        for j in range(ptr[v], ptr[v + 1]):
            theta[j] += w * usage[j]


def run_replay(replay: Replay, plan: ReductionPlan, net: PairNetwork, weight: NDArray[np.float64],
               theta: NDArray[np.float64], work: NDArray[np.float64]) -> None:
    """``theta`` (float64[K], overwritten) and ``work`` (a copy of ``replay.base_work``, kept between calls)
    as after :func:`~problems.intraop._kernels.penalised_unary` and :func:`run_plan` for ``weight``, except
    that each node's unary costs may differ by a constant (the same for all its strategies): the same
    relaxed optimum and the same choices."""
    _penalise(replay.base_theta, net.usage, net.ptr, weight, replay.varying_nodes, theta)
    tmp = np.empty(int(net.k.max()), dtype=np.float64)
    replay_ops(*replay.ops, plan.tab_x, plan.tab_off, net.k, net.ptr, theta, work, tmp, _NO_MINS, np.inf, np.inf)
