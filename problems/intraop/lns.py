"""Large-neighbourhood moves: free a set of nodes, solve the rest exactly with CP-SAT.

Given a feasible assignment, :func:`solve_neighbourhood` keeps every node outside
a neighbourhood ``N`` fixed and finds the cheapest joint strategies of ``N``
with the usage limit kept *hard*:

* the cost of a table between a node of ``N`` and a fixed node becomes a unary
  cost of the free node (the fixed one's strategy is known);
* a table between two free nodes is encoded on the local polytope: one Boolean
  per strategy pair whose row and column sums equal the two nodes' strategy
  Booleans (tighter than the usual ``y >= x_a + x_b - 1`` and just as small);
* the live sets of ``N`` change only at its nodes' interval ends, so one
  knapsack row per such segment, against the limit minus the fixed nodes'
  largest usage inside the segment, covers every time step.

The current strategies are given as a hint, so the solver starts from a
feasible solution. Costs are integers (exact), forbidden choices are removed
from the model. :class:`NeighbourhoodSearch` picks neighbourhoods (connected
regions grown by breadth-first search from a random node) and keeps a move only
when the exact evaluator confirms a strictly cheaper feasible solution.
The intra-op Lagrangian job (:mod:`problems.intraop.jobs`) runs it on the run's incumbent.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
from numba import njit
from numpy.typing import NDArray
from ortools.sat.python import cp_model

from gapstop.engine import cancel
from gapstop.problems.intraop._kernels import _find
from gapstop.problems.intraop.evaluate import evaluate, usage_profile
from gapstop.problems.intraop.model import FORBIDDEN, interval_sum
from gapstop.problems.intraop.relaxed import Prepared


@njit(nogil=True, cache=True)
def _components(n, rows, cols):  # pragma: no cover - jitted
    """Connected-component label (a root index) of each of ``n`` nodes, by union-find."""
    parent = np.arange(n)
    for e in range(rows.shape[0]):
        a, b = _find(parent, rows[e]), _find(parent, cols[e])
        if a != b:
            parent[max(a, b)] = min(a, b)
    for v in range(n):
        parent[v] = _find(parent, v)
    return parent


@njit(nogil=True, cache=True)
def _boundary_unary(nodes, free, sol, unary, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x,
                    out, inner):  # pragma: no cover - jitted
    """Unary costs of the free ``nodes`` with their fixed neighbours folded in; internal tables.

    ``out[ptr[v] + s]`` receives ``unary_v(s) + sum_{fixed nb} f_{v,nb}(s, sol[nb])`` for each
    free ``v``; ``inner`` receives the ids of the tables between two free nodes (each once,
    listed by its smaller endpoint). Returns how many tables were written to ``inner``.
    """
    m = 0
    for v in nodes:
        kv = k[v]
        for s in range(kv):
            out[ptr[v] + s] = unary[ptr[v] + s]
        for i in range(adj_ptr[v], adj_ptr[v + 1]):
            nb = adj_nbr[i]
            t = adj_tab[i]
            if free[nb]:
                if nb > v:
                    inner[m] = t
                    m += 1
                continue
            b = sol[nb]
            if tab_x[t] == v:
                base = tab_off[t] + b
                step = k[nb]
                for s in range(kv):
                    out[ptr[v] + s] += tabs[base + s * step]
            else:
                base = tab_off[t] + b * kv
                for s in range(kv):
                    out[ptr[v] + s] += tabs[base + s]
    return m


@njit(nogil=True, cache=True)
def _bfs_region(seed, size, rng_keys, adj_ptr, adj_nbr, k, mark, stamp, out):  # pragma: no cover - jitted
    """Grow a connected region of at most ``size`` nodes with ``k > 1`` from ``seed``.

    Frontier nodes are taken in breadth-first order; nodes with a single strategy are
    walked through (they connect regions) but not returned. ``mark`` is an int64[n]
    work array compared against ``stamp``. Returns the number of nodes written to ``out``.
    """
    queue = np.empty(len(k), dtype=np.int64)
    head = 0
    tail = 0
    queue[tail] = seed
    tail += 1
    mark[seed] = stamp
    cnt = 0
    while head < tail and cnt < size:
        v = queue[head]
        head += 1
        if k[v] > 1:
            out[cnt] = v
            cnt += 1
        lo, hi = adj_ptr[v], adj_ptr[v + 1]
        # random rotation of the neighbour list so regions of equal seeds differ
        n_adj = hi - lo
        if n_adj == 0:
            continue
        r = rng_keys[v] % n_adj
        for j in range(n_adj):
            nb = adj_nbr[lo + (j + r) % n_adj]
            if mark[nb] != stamp:
                mark[nb] = stamp
                queue[tail] = nb
                tail += 1
    return cnt


def class_components(prep: Prepared, min_size: int = 2) -> list[NDArray[np.int64]]:
    """Connected components of the subgraph of nodes with the same number of strategies (more than one).

    Ops of one kind (the same strategy count) that feed each other form the layers and
    chains whose shardings must change together: on instance A the cheaper of its two
    typical end states differs from the other in 143 connected nodes spread over the
    whole schedule, 130 of them in one such component (of 2,620 nodes) and none of the
    regions or windows of the same size held them all. Components are sorted by node
    id; those with fewer than ``min_size`` nodes are left out. Largest first.
    """
    net = prep.net
    k = net.k
    deg = np.diff(net.adj_ptr)
    rows = np.repeat(np.arange(net.n, dtype=np.int64), deg)
    cols = net.adj_nbr.astype(np.int64)
    keep = (k[rows] == k[cols]) & (k[rows] > 1)
    root = _components(net.n, rows[keep], cols[keep])
    multi = np.nonzero(k > 1)[0]
    order = multi[np.argsort(root[multi], kind="stable")]
    cuts = np.nonzero(np.diff(root[order]))[0] + 1
    comps = [c for c in np.split(order, cuts) if len(c) >= min_size]
    comps.sort(key=len, reverse=True)
    return comps


@dataclass(frozen=True)
class MoveResult:
    """Outcome of one neighbourhood solve.

    Attributes:
        improved: True when the returned solution is strictly cheaper (exact evaluator) and feasible.
        cost: exact cost of the returned solution.
        status: CP-SAT status name ("OPTIMAL", "FEASIBLE", ...; "TRIVIAL" for an empty neighbourhood).
        nodes: size of the neighbourhood.
        wall_s: time spent, model building included.
    """

    improved: bool
    cost: int
    status: str
    nodes: int
    wall_s: float


def solve_neighbourhood(prep: Prepared, sol: NDArray[np.int64], nodes: NDArray[np.int64], *,
                        time_limit_s: float = 5.0, workers: int = 1, seed: int = 0,
                        cost: int | None = None) -> tuple[NDArray[np.int64], MoveResult]:
    """Re-optimise ``nodes`` exactly (within the time limit), all other nodes fixed.

    Args:
        prep: the prepared instance.
        sol: int64[n], a feasible assignment (not modified).
        nodes: the neighbourhood; duplicates are ignored.
        time_limit_s: CP-SAT wall-clock limit.
        workers: CP-SAT search workers.
        seed: CP-SAT random seed.
        cost: exact cost of ``sol`` if already known.

    Returns:
        ``(solution, result)``: a new array that is ``sol`` with the neighbourhood's best
        strategies found when that is strictly cheaper and feasible by the exact evaluator,
        else a copy of ``sol``. With enough time the neighbourhood is solved to optimality,
        so with ``nodes`` = all nodes the result is a global optimum.
    """
    t0 = time.perf_counter()
    p, net = prep.problem, prep.net
    sol = np.asarray(sol, dtype=np.int64)
    if cost is None:
        ev = evaluate(p, sol)
        if not ev.feasible or ev.cost is None:
            raise ValueError(f"neighbourhood search needs a feasible start: {ev.reason}")
        cost = ev.cost
    nodes = np.unique(np.asarray(nodes, dtype=np.int64))
    nodes = nodes[net.k[nodes] > 1]
    if len(nodes) == 0:
        return sol.copy(), MoveResult(False, cost, "TRIVIAL", 0, time.perf_counter() - t0)
    free = np.zeros(p.n, dtype=np.bool_)
    free[nodes] = True
    un = np.empty(len(net.unary), dtype=np.float64)
    inner = np.empty(int(np.diff(net.adj_ptr)[nodes].sum()), dtype=np.int64)
    m = _boundary_unary(nodes, free, sol, net.unary, net.ptr, net.k, net.adj_ptr, net.adj_nbr, net.adj_tab,
                        net.tabs, net.tab_off, net.tab_x, un, inner)
    inner = inner[:m]

    model = cp_model.CpModel()
    x: dict[int, list] = {}
    obj_vars: list = []
    obj_coefs: list[int] = []
    ptr, k = net.ptr, net.k
    for v in nodes.tolist():
        lits = []
        base = int(ptr[v])
        for s in range(int(k[v])):
            lit = model.new_bool_var("")
            c = un[base + s]
            if c >= FORBIDDEN:
                model.add(lit == 0)
            elif c != 0:
                obj_vars.append(lit)
                obj_coefs.append(int(c))
            lits.append(lit)
        model.add_exactly_one(lits)
        for s, lit in enumerate(lits):
            model.add_hint(lit, s == int(sol[v]))
        x[v] = lits
    for t in inner.tolist():
        a_node, b_node = int(net.tab_x[t]), int(net.tab_y[t])
        ka, kb = int(k[a_node]), int(k[b_node])
        off = int(net.tab_off[t])
        tab = net.tabs[off:off + ka * kb].reshape(ka, kb)
        if not tab.any():
            continue  # a zero table (same sharding on both ends is free) needs no variables
        xa, xb = x[a_node], x[b_node]
        ha, hb = int(sol[a_node]), int(sol[b_node])
        # local polytope: row a of y sums to x_a, column b to x_b; a forbidden pair simply has
        # no y, which forbids it (the one y of row a must lie in column b)
        rows: list[list] = [[] for _ in range(ka)]
        cols: list[list] = [[] for _ in range(kb)]
        for a, b in zip(*np.nonzero(tab < FORBIDDEN)):
            a, b = int(a), int(b)
            y = model.new_bool_var("")
            rows[a].append(y)
            cols[b].append(y)
            c = tab[a, b]
            if c != 0:
                obj_vars.append(y)
                obj_coefs.append(int(c))
            if a == ha and b == hb:
                model.add_hint(y, True)
        for a in range(ka):
            model.add(cp_model.LinearExpr.sum(rows[a]) == xa[a])
        for b in range(kb):
            model.add(cp_model.LinearExpr.sum(cols[b]) == xb[b])
    _add_usage_rows(model, prep, sol, nodes, x)
    model.minimize(cp_model.LinearExpr.weighted_sum(obj_vars, obj_coefs))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, float(time_limit_s))
    solver.parameters.num_workers = max(1, int(workers))
    solver.parameters.random_seed = int(seed)
    # Ctrl-C is the caller's: CP-SAT's own SIGINT handler aborts the process when the solve runs
    # in a thread (std::bad_function_call), losing the run's best result
    solver.parameters.catch_sigint_signal = False
    with cancel.cpsat_stop_watch(solver):
        status = solver.solve(model)
    name = solver.status_name(status)
    out = sol.copy()
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        for v, lits in x.items():
            for s, lit in enumerate(lits):
                if solver.boolean_value(lit):
                    out[v] = s
                    break
        ev = evaluate(p, out)
        if ev.feasible and ev.cost is not None and ev.cost < cost:
            return out, MoveResult(True, ev.cost, name, len(nodes), time.perf_counter() - t0)
    return sol.copy(), MoveResult(False, cost, name, len(nodes), time.perf_counter() - t0)


def _add_usage_rows(model: cp_model.CpModel, prep: Prepared, sol: NDArray[np.int64], nodes: NDArray[np.int64],
                    x: dict[int, list]) -> None:
    """One knapsack row per segment of time over which the live free nodes do not change.

    A segment's row is left out when even the free nodes' largest usages fit (it cannot
    be violated), and when the segment before it has the same live set and at most
    the same room (it is implied).
    """
    p, net = prep.problem, prep.net
    limit = p.usage_limit
    if limit is None:
        return
    live = p.end[nodes] > p.start[nodes]
    nodes = nodes[live]
    if len(nodes) == 0:
        return
    st, en = p.start[nodes], p.end[nodes]
    prof = usage_profile(p, sol)
    lo_use = np.minimum.reduceat(net.usage, net.ptr[:-1])[nodes]
    hi_use = np.maximum.reduceat(net.usage, net.ptr[:-1])[nodes]
    cur = net.usage[net.ptr[nodes] + sol[nodes]]
    # usage of the fixed nodes alone: remove the free nodes' current usage
    fixed = prof - interval_sum(cur, st, en, p.horizon)
    cuts = np.unique(np.concatenate([st, en]))
    seg_fixed = np.maximum.reduceat(fixed[:cuts[-1]], cuts[:-1])  # the last segment ends at cuts[-1]
    # per segment: least usage and largest possible extra usage of the live free nodes
    i_st, i_en = np.searchsorted(cuts, st), np.searchsorted(cuts, en)
    room = limit - seg_fixed - interval_sum(lo_use, i_st, i_en, len(cuts) - 1)
    spread = interval_sum(hi_use - lo_use, i_st, i_en, len(cuts) - 1)
    binding = spread > room
    if not binding.any():
        return
    # Rows over consecutive segments share most of their nodes, so instead of listing every
    # live node in every row (quadratic), S_j = S_{j-1} + entering - leaving nodes' extra usage
    # is chained from the first to the last segment that could be violated.
    first, last = int(np.argmax(binding)), len(binding) - 1 - int(np.argmax(binding[::-1]))
    terms_of: list[tuple[list, list[int]]] = []
    for i, v in enumerate(nodes.tolist()):
        base = int(net.ptr[v])
        lits, coefs = [], []
        for s, lit in enumerate(x[v]):
            c = int(net.usage[base + s]) - int(lo_use[i])
            if c:
                lits.append(lit)
                coefs.append(c)
        terms_of.append((lits, coefs))
    enter = [[] for _ in range(len(cuts))]
    leave = [[] for _ in range(len(cuts))]
    for i, (a, b) in enumerate(zip(i_st.tolist(), i_en.tolist())):
        enter[a].append(i)
        leave[b].append(i)
    live_first = np.nonzero((i_st <= first) & (i_en > first))[0].tolist()
    prev = None
    for j in range(first, last + 1):
        ub = int(room[j]) if binding[j] else int(spread[j])
        s_j = model.new_int_var(0, max(0, ub), "")
        lits, coefs = [], []
        if prev is None:
            for i in live_first:
                lits += terms_of[i][0]
                coefs += terms_of[i][1]
        else:
            lits.append(prev)
            coefs.append(1)
            for i in enter[j]:
                lits += terms_of[i][0]
                coefs += terms_of[i][1]
            for i in leave[j]:
                lits += terms_of[i][0]
                coefs += [-c for c in terms_of[i][1]]
        model.add(cp_model.LinearExpr.weighted_sum(lits, coefs) == s_j)
        prev = s_j


class NeighbourhoodSearch:
    """Repeated neighbourhood moves on one solution; call :meth:`step` with a time budget.

    Moves cycle through four kinds of neighbourhood (:attr:`KINDS`): id windows, connected
    regions, nodes live at one time step, and components of same-kind ops
    (:func:`class_components`). The size adapts: it grows by
    :attr:`GROW` after a move CP-SAT solved to optimality, and shrinks by
    :attr:`SHRINK` after one it could not finish, so moves stay about as large as the
    per-move time limit allows.

    Args:
        prep: the prepared instance.
        solution: a feasible assignment to start from (copied).
        seed: seeds the neighbourhood choice and CP-SAT.
        size: initial number of free nodes (with more than one strategy) per neighbourhood.
        move_time_s: CP-SAT time limit per move.
        workers: CP-SAT search workers per move.
        max_size: the size never grows beyond this.
        max_vars: a neighbourhood is cut to its longest prefix whose model has at most this many
            Booleans (:meth:`fit`).
    """

    KINDS = ("window", "region", "live_at", "component")
    #: Booleans per move at most. Building the model is Python and grows with them, and CP-SAT
    #: loads it before its time limit counts: on instance C a 1,531-node window made 612,079 and
    #: took 5.1 s with a 0.05 s limit (4.1 s building, 1.0 s in the solver); 100,000 take about
    #: 0.7 s to build there.
    MAX_VARS = 100_000
    #: Components smaller than this are not worth a CP-SAT model of their own.
    MIN_COMPONENT = 20
    GROW, SHRINK = 1.25, 0.6

    def __init__(self, prep: Prepared, solution: NDArray[np.int64], seed: int, *, size: int = 500,
                 move_time_s: float = 5.0, workers: int = 1, max_size: int = 6000,
                 max_vars: int | None = None) -> None:
        self.prep = prep
        self.max_vars = self.MAX_VARS if max_vars is None else max_vars
        self.rng = np.random.default_rng(seed)
        self.sol = np.array(solution, dtype=np.int64)
        ev = evaluate(prep.problem, self.sol)
        if not ev.feasible or ev.cost is None:
            raise ValueError(f"neighbourhood search needs a feasible start: {ev.reason}")
        self.cost: int = ev.cost
        self.size = size
        self.max_size = max_size
        self.move_time_s = move_time_s
        self.workers = workers
        self._mark = np.zeros(prep.problem.n, dtype=np.int64)
        self._stamp = 0
        self._cand = np.nonzero(prep.net.k > 1)[0]
        self._components: list[NDArray[np.int64]] | None = None
        self.moves = 0
        self.improvements = 0
        self._walls: list[float] = []

    @property
    def recent_move_s(self) -> float:
        """The longest of the last 8 moves, model building included (seconds; 0 before any)."""
        return max(self._walls, default=0.0)

    def offer(self, solution: NDArray[np.int64], cost: int) -> None:
        """Continue from ``solution`` (exact ``cost``) if it is cheaper than the current one."""
        if cost < self.cost:
            self.sol, self.cost = np.array(solution, dtype=np.int64), cost

    def step(self, budget_s: float) -> list[tuple[int, NDArray[np.int64]]]:
        """Moves for about ``budget_s`` seconds (at least one); returns each improvement as (cost, solution)."""
        deadline = time.perf_counter() + budget_s
        out: list[tuple[int, NDArray[np.int64]]] = []
        while True:
            left = deadline - time.perf_counter()
            kind = self.KINDS[self.moves % len(self.KINDS)]
            nodes = getattr(self, kind)()
            res = self.move(nodes, time_limit_s=max(0.05, min(self.move_time_s, left)))
            if res.improved:
                out.append((self.cost, self.sol.copy()))
            if res.status == "OPTIMAL":
                self.size = min(self.max_size, int(self.size * self.GROW) + 1)
            elif res.status != "TRIVIAL":
                self.size = max(20, int(self.size * self.SHRINK))
            if cancel.expired(deadline):
                return out

    def region(self, seed_node: int | None = None) -> NDArray[np.int64]:
        """A connected region of up to ``size`` multi-strategy nodes around a random node."""
        net = self.prep.net
        v = int(self.rng.choice(self._cand)) if seed_node is None else seed_node
        self._stamp += 1
        out = np.empty(self.size, dtype=np.int64)
        keys = self.rng.integers(0, 1 << 30, size=net.n)
        cnt = _bfs_region(v, self.size, keys, net.adj_ptr, net.adj_nbr, net.k, self._mark, self._stamp, out)
        return out[:cnt]

    def window(self, first: int | None = None) -> NDArray[np.int64]:
        """``size`` consecutive multi-strategy nodes by id, from a random (or the given) position.

        Node ids follow the schedule (the contest files list nodes in program order), so an id
        window is a time window and, mostly, a connected stretch of the graph: the regions
        where whole runs of nodes must switch sharding together to reach a cheaper state.
        """
        cand = self._cand
        if first is None:
            first = int(self.rng.integers(0, max(1, len(cand) - self.size + 1)))
        return cand[first:first + self.size]

    def live_at(self, step: int | None = None) -> NDArray[np.int64]:
        """Up to ``size`` multi-strategy nodes live at one (random or given) time step.

        These share memory with each other, so a move can trade usage between distant parts
        of the graph that no connected region or id window holds together.
        """
        p = self.prep.problem
        t = int(self.rng.integers(0, max(1, p.horizon))) if step is None else step
        live = self._cand[(p.start[self._cand] <= t) & (p.end[self._cand] > t)]
        if len(live) > self.size:
            live = self.rng.choice(live, self.size, replace=False)
        return np.sort(live)

    def components(self) -> list[NDArray[np.int64]]:
        """The instance's :func:`class_components` (computed once)."""
        if self._components is None:
            self._components = class_components(self.prep, self.MIN_COMPONENT)
        return self._components

    def component(self) -> NDArray[np.int64]:
        """A random component; one larger than ``max_size`` is cut
        to ``max_size`` consecutive nodes (by id) of it. A region when there are none."""
        comps = self.components()
        if not comps:
            return self.region()
        c = comps[int(self.rng.integers(len(comps)))]
        if len(c) > self.max_size:
            first = int(self.rng.integers(0, len(c) - self.max_size + 1))
            c = c[first:first + self.max_size]
        return c

    def fit(self, nodes: NDArray[np.int64]) -> NDArray[np.int64]:
        """The longest prefix of ``nodes`` (distinct, multi-strategy) whose model has at most
        :attr:`max_vars` Booleans: one per strategy of each node, one per entry of each table
        between two of them (an upper bound: forbidden entries get none)."""
        net = self.prep.net
        nodes = np.asarray(nodes, dtype=np.int64)
        pos = np.full(net.n, -1, dtype=np.int64)
        pos[nodes] = np.arange(len(nodes))
        px, py = pos[net.tab_x], pos[net.tab_y]
        inner = (px >= 0) & (py >= 0)
        # a table joins the model with the later of its two nodes
        at = np.maximum(px[inner], py[inner])
        sizes = net.k[net.tab_x[inner]].astype(np.int64) * net.k[net.tab_y[inner]]
        per = net.k[nodes].astype(np.int64) + np.bincount(at, weights=sizes, minlength=len(nodes)).astype(np.int64)
        return nodes[:int(np.searchsorted(np.cumsum(per), self.max_vars, side="right"))]

    def move(self, nodes: NDArray[np.int64] | None = None, time_limit_s: float | None = None) -> MoveResult:
        """Solve one neighbourhood (a random region by default) cut by :meth:`fit`; keep the
        result if cheaper."""
        nodes = self.region() if nodes is None else nodes
        cut = self.fit(nodes)
        if len(cut) < len(nodes):  # the next ones start about as large as the model allows
            self.size = max(20, min(self.size, len(cut)))
        nodes = cut
        sol, res = solve_neighbourhood(self.prep, self.sol, nodes,
                                       time_limit_s=self.move_time_s if time_limit_s is None else time_limit_s,
                                       workers=self.workers, seed=int(self.rng.integers(1 << 30)),
                                       cost=self.cost)
        self.moves += 1
        self._walls = (self._walls + [res.wall_s])[-8:]
        if res.improved:
            self.sol, self.cost = sol, res.cost
            self.improvements += 1
        return res
