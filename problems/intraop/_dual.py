"""Certified lower bounds on ``min sum_v theta_v(s_v) + sum_uv f_uv(s_u, s_v)`` (no usage limit).

The pairwise network is held in exact integers (see :mod:`problems.intraop._bound_kernels`
for the ``EXCL``/``CAP`` conventions). A bound is computed in three exact steps:

1. the degree <= 2 elimination of :func:`problems.intraop.reduce.plan_reduction`
   is replayed on integers (the optimum of the whole network is the optimum of the
   core plus the minima of the ELIM0 nodes, for any unary costs);
2. the core is solved exactly by min-degree variable elimination when its largest
   intermediate table stays small, otherwise
3. TRW-S messages are computed in floating point, rounded to integers, and the
   reparametrisation bound of :func:`~problems.intraop._bound_kernels.dual_terms` is
   evaluated exactly. Rounding only changes *which* dual point is certified, never
   the validity of the value, so no floating-point safety margin is needed.

Totals are summed as Python ints.
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gapstop.engine import cancel
from gapstop.problems.intraop import _bound_kernels as BK, _kernels as K
from gapstop.problems.intraop._factors import eliminate, network_factors
from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem
from gapstop.problems.intraop.network import PairNetwork, build_network
from gapstop.problems.intraop.reduce import ReductionPlan, plan_reduction

EXCL, CAP = BK.EXCL, BK.CAP
#: Variable elimination of the core is tried when no intermediate table exceeds this many entries.
EXACT_TABLE_LIMIT = 1 << 21
#: ... and when the core has at most this many nodes (the greedy ordering is quadratic).
MAX_EXACT_CORE = 1500
INFEASIBLE = math.inf


@dataclass(frozen=True, eq=False)
class BoundPrep:
    """Read-only integer network of one problem, shared by every bound method.

    Attributes:
        problem: the instance.
        net: the merged float network (used for its structure only: ``k``, ``ptr``, tables).
        plan: the elimination plan (structure only, replayed on integers).
        unary: int64[K], node costs plus self-loop diagonals; EXCL for forbidden ones.
        work: int64[plan.work_size], merged pair tables then room for the created ones.
        usage: int64[K], node usages.
    """

    problem: IntraopProblem
    net: PairNetwork
    plan: ReductionPlan
    unary: NDArray[np.int64]
    work: NDArray[np.int64]

    @property
    def num_tables(self) -> int:
        return self.net.num_tables


_PREP: "weakref.WeakKeyDictionary[IntraopProblem, BoundPrep]" = weakref.WeakKeyDictionary()


def prepare_bounds(problem: IntraopProblem) -> BoundPrep:
    """Build (once per problem object, cached weakly) the exact integer network and elimination plan."""
    prep = _PREP.get(problem)
    if prep is not None:
        return prep
    net = build_network(problem)
    plan = plan_reduction(net)
    n = problem.n
    eu = problem.edge_u.astype(np.int64)
    ev = problem.edge_v.astype(np.int64)
    loop = eu == ev
    key = np.minimum(eu, ev) * n + np.maximum(eu, ev)
    keys, pair_of_edge = np.unique(key[~loop], return_inverse=True)  # same order as build_network
    if not (np.array_equal(keys // n, net.tab_x) and np.array_equal(keys % n, net.tab_y)):
        raise AssertionError("pair tables disagree with build_network; please file a bug")
    pair = np.full(problem.m, -1, dtype=np.int64)
    pair[~loop] = pair_of_edge
    unary = np.where(problem.node_cost >= FORBIDDEN, EXCL, problem.node_cost).astype(np.int64)
    work = np.zeros(plan.work_size, dtype=np.int64)
    BK.merge_edges_int(problem.edge_u, problem.edge_v, problem.edge_ptr, problem.edge_cost, pair,
                       net.tab_off, net.tab_x, net.k, net.ptr, FORBIDDEN, unary, work)
    for a in (unary, work):
        a.flags.writeable = False
    prep = BoundPrep(problem, net, plan, unary, work)
    _PREP[problem] = prep
    return prep


def elimination_order(core: NDArray[np.int64], plan: ReductionPlan, k: NDArray[np.int64],
                      table_limit: int) -> list[int] | None:
    """A greedy min-fill-size elimination order of the core graph, or None if some table would exceed ``table_limit``."""
    if len(core) > MAX_EXACT_CORE:
        return None
    adj = {v: {int(x) for x in plan.adj_nbr[plan.adj_ptr[v]:plan.adj_ptr[v + 1]]} for v in core.tolist()}
    ks = {v: int(k[v]) for v in adj}
    order = []
    while adj:
        v = min(adj, key=lambda x: math.prod(ks[y] for y in adj[x]) * ks[x])
        if math.prod(ks[y] for y in adj[v]) * ks[v] > table_limit:
            return None
        nb = adj.pop(v)
        for x in nb:
            adj[x] |= nb
            adj[x].discard(x)
            adj[x].discard(v)
        order.append(v)
    return order


def exact_core_min(order: list[int], theta: NDArray[np.int64], work: NDArray[np.int64],
                   plan: ReductionPlan, net: PairNetwork) -> int | None:
    """Exact minimum of the core network by variable elimination in ``order`` (all core nodes).

    Returns:
        The minimum (a Python int, of any size: a sum of capped tables), None if every
        assignment uses an excluded entry.
    """
    fe = eliminate(network_factors(order, theta, work, plan, net.k, net.ptr), net.k, order=order)
    return None if fe.excluded else fe.value


class CoreDual:
    """Bounds of the unconstrained network for changing unary costs, warm-starting TRW-S messages.

    Not thread-safe: one per computation. Call :meth:`bound` with a new ``theta``.
    """

    def __init__(self, prep: BoundPrep, *, exact_table_limit: int = EXACT_TABLE_LIMIT) -> None:
        self.prep = prep
        net, plan = prep.net, prep.plan
        n = net.n
        core = plan.core
        self.core = core
        self.exact_table_limit = exact_table_limit
        # the order depends only on the graph: planned once
        self._order = elimination_order(core, plan, net.k, exact_table_limit) if len(core) else None
        from gapstop.problems.intraop.relaxed import trws_schedule
        ts = trws_schedule(net.k, plan)
        deg, entry_node = ts.deg, ts.entry_node
        self.msg_off, self.rev, self.gamma = ts.msg_off, ts.rev, ts.gamma
        self.fwd, self.bwd, self.rank_f, self.rank_b = ts.fwd, ts.bwd, ts.rank_f, ts.rank_b
        self.msg = np.zeros(ts.msg_size, dtype=np.float64)
        self.msg_int = np.zeros(len(self.msg), dtype=np.int64)
        self._spread = np.zeros(len(self.msg), dtype=np.float64)
        max_deg = int(deg.max()) if len(deg) else 0
        # keeps every finite term of the certificate below the EXCL marker (see BK.MSG_ROOM)
        self.msg_bound = BK.MSG_ROOM // (max_deg + 2)
        self.theta = np.empty(len(prep.unary), dtype=np.int64)
        self.work = prep.work.copy()
        self.theta_f = np.empty(len(prep.unary), dtype=np.float64)
        self.work_f = np.empty(len(self.work), dtype=np.float64)
        self.elim0 = np.zeros(plan.num_ops, dtype=np.int64)
        self._tmp = np.zeros(int(net.k.max()) if n else 1, dtype=np.int64)
        self._hat = np.zeros(int(net.k.max()) if n else 1, dtype=np.float64)
        self.sol = np.zeros(n, dtype=np.int64)
        self._node_min = np.zeros(len(core), dtype=np.int64)
        self._edge_min = np.zeros(len(plan.adj_nbr), dtype=np.int64)
        self._edge_mask = np.zeros(len(plan.adj_nbr), dtype=bool)
        if len(plan.adj_nbr):
            self._edge_mask = plan.adj_nbr > entry_node
        self.last_exact = False  # whether the last bound() solved the core exactly
        self.last_base = 0  # the ELIM0 minima summed by the last bound()
        self._arc_cache: tuple[NDArray[np.bool_], NDArray[np.bool_], NDArray[np.int64]] | None = None
        self._has_certificate = False
        self._p_node = np.zeros(len(prep.unary), dtype=np.float64)
        self._p_tab = np.zeros(0, dtype=np.float64)  # allocated on first use: as long as the tables

    @property
    def solves_core_exactly(self) -> bool:
        """Whether :meth:`bound` eliminates the core exactly (planned once: it depends on the graph only)."""
        return self._order is not None

    @property
    def node_terms(self) -> NDArray[np.int64]:
        """int64[len(core)], read-only: ``min_x bar_v(x)`` of each core node in the last :meth:`certificate`."""
        view = self._node_min.view()
        view.flags.writeable = False
        return view

    @property
    def counted_entries(self) -> NDArray[np.bool_]:
        """bool[len(adj_nbr)], read-only: the adjacency entries whose table the certificate counts (one per table)."""
        view = self._edge_mask.view()
        view.flags.writeable = False
        return view

    def _replay(self, theta: NDArray[np.int64]) -> int | None:
        """Eliminate; returns the summed ELIM0 minima, or None when some ELIM0 node has no admissible label."""
        net, plan = self.prep.net, self.prep.plan
        self.theta[:] = theta
        self.work[:len(self.prep.work)] = self.prep.work
        BK.replay_int(plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2, plan.op_t3,
                      plan.op_out, plan.tab_x, plan.tab_off, net.k, net.ptr, self.theta, self.work, self._tmp,
                      self.elim0)
        mins = self.elim0[plan.op_kind == 0]
        if np.any(mins >= EXCL):
            return None
        return sum(mins.tolist())

    def _arc_consistency(self) -> None:
        """Arc consistency on the core of the replayed ``theta``/``work``, reusing the last result.

        Which labels it excludes depends only on which entries of ``theta`` and ``work``
        are excluded, and that pattern rarely changes between calls (a Lagrangian changes
        the finite costs only); when it is the same, the same labels are excluded again
        without the fixpoint (most of the cost of a call on large cores).
        """
        net, plan = self.prep.net, self.prep.plan
        pre_theta, pre_work = self.theta >= EXCL, self.work >= EXCL
        cached = self._arc_cache
        if cached is not None and np.array_equal(pre_theta, cached[0]) and np.array_equal(pre_work, cached[1]):
            self.theta[cached[2]] = EXCL
            return
        alive = ~pre_theta
        BK.arc_consistency(self.core, alive, net.ptr, net.k, plan.adj_ptr, plan.adj_nbr, plan.adj_tab, self.work,
                           plan.tab_off, plan.tab_x, np.zeros(len(plan.tab_x), np.int64), np.inf)
        self.theta[~alive] = EXCL
        self._arc_cache = (pre_theta, pre_work, np.nonzero((self.theta >= EXCL) & ~pre_theta)[0])

    def certificate(self) -> int | None:
        """Exact dual value of the core for the current (rounded) messages (a Python int of any
        size); None if provably empty (some term has no admissible entry)."""
        net, plan = self.prep.net, self.prep.plan
        BK.spread_beliefs(self.core, self.theta_f, net.ptr, net.k, plan.adj_ptr, self.msg, self.msg_off, self._spread)
        BK.round_messages(self._spread, self.msg_bound, self.msg_int)
        self._edge_min[:] = 0
        BK.dual_terms(self.core, self.theta, net.ptr, net.k, plan.adj_ptr, plan.adj_nbr, plan.adj_tab, self.work,
                      plan.tab_off, plan.tab_x, self.msg_int, self.msg_off, self.rev, self._node_min, self._edge_min)
        self._has_certificate = True
        e = self._edge_min[self._edge_mask]
        if np.any(self._node_min >= EXCL) or np.any(e >= EXCL):
            return None
        return sum(self._node_min.tolist()) + sum(e.tolist())

    def expected_usage(self, usage: NDArray[np.int64]) -> NDArray[np.float64] | None:
        """Per-node usage averaged over the minimisers of the last certificate (a supergradient direction).

        The last :meth:`bound` value is ``min`` over labelling-like objects that
        mix labels fractionally; this returns, for each node, the usage of that
        mix: float64[n] whose derivative meaning is ``d bound / d w_v`` for unary
        costs ``theta + w_v * usage``. Steers the multipliers of the Lagrangian
        only. None when the last call certified no dual point (exact core,
        infeasible, or no pass ran).
        """
        if not self._has_certificate:
            return None
        net, plan = self.prep.net, self.prep.plan
        if len(self._p_tab) != len(self.work):
            self._p_tab = np.zeros(len(self.work), dtype=np.float64)
        self._p_node[:] = 0.0
        self._p_tab[:] = 0.0
        BK.core_marginals(self.core, self.theta, net.ptr, net.k, plan.adj_ptr, plan.adj_nbr, plan.adj_tab, self.work,
                          plan.tab_off, plan.tab_x, self.msg_int, self.msg_off, self.rev, self._p_node, self._p_tab)
        BK.eliminated_marginals(plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2, plan.op_t3,
                                plan.op_out, plan.tab_x, plan.tab_off, net.k, net.ptr, self.theta, self.work,
                                self._p_node, self._p_tab)
        if net.n == 0:
            return np.zeros(0)
        return np.add.reduceat(self._p_node * usage, net.ptr[:-1])

    def bound(self, theta: NDArray[np.int64], *, iterations: int = 10, deadline: float = math.inf,
              patience: int = 3, label: bool = False, certify_every: int = 1) -> tuple[float | int, bool]:
        """A certified lower bound on ``min theta + pair tables`` for the integer unary ``theta``.

        Args:
            theta: int64[K], unary costs (EXCL for excluded labels), all entries in ``[0, EXCL]``.
            iterations: TRW-S forward+backward passes at most (warm-started from the last call).
            deadline: ``time.perf_counter()`` value after which no new pass starts (nor once the
                run has decided to stop: :mod:`engine.cancel`; the first certificate always is made).
            patience: stop after this many certificates without a better one.
            certify_every: compute the certificate (the exact dual value) after every this many
                passes, and after the last one.
            label: also leave a complete labelling (TRW-S greedy labels extended to all nodes) in ``sol``.

        Returns:
            ``(value, exact)``: a Python int (``math.inf`` if no admissible assignment exists)
            and whether it is the exact optimum.
        """
        net, plan = self.prep.net, self.prep.plan
        self._has_certificate = False
        base = self._replay(theta)
        self.last_exact = False
        if base is None:
            return INFEASIBLE, True
        self.last_base = base
        core = self.core
        best: int | None = None
        exact = empty = False
        if len(core) == 0:
            best, exact = 0, True
        else:
            self._arc_consistency()
            if self._order is not None:
                best, exact = exact_core_min(self._order, self.theta, self.work, plan, net), True
                empty = best is None
            if not exact or label:
                BK.to_float(self.theta, self.theta_f)
                BK.to_float(self.work, self.work_f)
                stale = 0
                for it in range(iterations):
                    if cancel.expired(deadline) and (best is not None or empty):
                        break
                    for order, rank in ((self.fwd, self.rank_f), (self.bwd, self.rank_b)):
                        K.trws_pass(order, rank, self.gamma, self.theta_f, net.ptr, net.k, plan.adj_ptr,
                                    plan.adj_nbr, plan.adj_tab, self.work_f, plan.tab_off, plan.tab_x, self.msg,
                                    self.msg_off, self.rev, self.sol, self._hat)
                    if exact:
                        break
                    # TRW-S never lowers its bound, so certifying (a third of a pass) after every
                    # pass buys little; the last pass, and the one before the deadline, always are
                    if (it + 1) % certify_every and it + 1 < iterations and not cancel.expired(deadline):
                        continue
                    c = self.certificate()
                    if c is None:  # a proof that no admissible assignment exists
                        empty = True
                        break
                    if best is None or c > best:
                        best, stale = c, 0
                    else:
                        stale += 1
                        if stale >= patience:
                            break
        if label:
            BK.reconstruct_int(plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2, plan.tab_x,
                               plan.tab_off, net.k, net.ptr, self.theta, self.work, self.sol)
        if empty:
            return INFEASIBLE, True
        assert best is not None
        self.last_exact = exact
        # all entries are >= 0, so below CAP no partial sum of the optimum was capped
        return base + best, exact and base + best < CAP
