"""The block-cover bound: the blocks of a partition are at most k disjoint convex sets covering the nodes.

The argument. Fix a bottleneck ``T`` and call a node set *admissible* when it is convex
and ``work(S) + cut(S) / B <= T`` (``cut`` as in :mod:`problems.pipeline.heaviest_block`:
each tensor crossing S's boundary counted once). The blocks of an acyclic partition
with bottleneck ``T`` are admissible and partition the nodes, so the partitioning LP

    min sum_S x_S   s.t.   sum_{S ni v} x_S = 1 (every node v),   x >= 0,

over admissible sets has an optimum of at most k. Its dual certifies the opposite: for any
``y`` (of either sign), the k blocks of a partition (some perhaps empty: the empty set is
admissible, of cost 0) have weights summing to ``y(V)``, so one holds ``y(P) >= y(V) / k``;
if no admissible S does, no partition into k blocks reaches ``T``: ``OPT > T``. An LP value
above k gives such a ``y`` (its duals, ``y(V)`` = the value, ``y(S) <= 1`` on every column).
That test is the heaviest-block model with ``pi = y`` and the cap ``T``
(:mod:`problems.pipeline.heaviest_block`), and CP-SAT proving it infeasible is the
certificate. This is the configuration LP of bin packing with the blocks' own boundaries in
their costs; it dominates the heaviest-block bound (whose weightings are particular ``y``),
and where blocks are small (k = 16) it lies well above the spectral bound: its only
relaxations are the fractional partition and the stage order. Unlike bin packing, the
covering form (``>= 1``, ``y >= 0``) is weaker here: a subset of an admissible set need not
be admissible (convexity, and a removed node's tensors may then cross its boundary), so
overlapping blocks cover more cheaply than disjoint ones; the partitioning LP's value is
never below the covering one's (docs/decisions/0011-block-cover-bound.md).

Cycle cuts. The LP knows nothing of the stage order: at caps below the optimum it is often
held at k by one partition into convex blocks whose block graph has a cycle (on small
REGAL-style graphs, every case where the cover stayed 1-3 % under the optimum;
docs/decisions/0011-block-cover-bound.md).
Such a partition is cut off: for the blocks ``c`` of a shortest cycle through each of its
blocks, ``sum_{S in c} x_S <= |c| - 1``, which every acyclic partition satisfies (one holding
all of c has that cycle). With cut duals ``mu >= 0`` the certificate becomes: every acyclic
partition's blocks have *own values* ``y(S) - sum_{c ni S} mu_c`` summing to at least
``y(V) - sum_c mu_c (|c| - 1)``, so one block reaches a k-th of that; if no admissible set
outside the cuts' columns reaches it (CP-SAT, those columns excluded by no-good clauses) and
no cut column within the cap does (checked directly), ``OPT > T``.

How ``y`` is found: column generation. A restricted LP over the admissible sets found so
far (GLOP) gives duals ``y``. Sets with ``y(S) > 1`` enter it as new columns, found first
among intervals of topological orders (every interval is convex) and by greedy growth, then
by a local search (add, drop or swap one node) from those sets and the LP's own columns
(:mod:`problems.pipeline._cover_kernels`), and only when those find none by CP-SAT's
cheapest admissible set holding ``y(V) / k`` (which exceeds 1 while the LP's value exceeds
k): none refutes ``T``; one proven cheapest is a valid bound ``H(y)`` of its own. The
pricing uses smoothed duals (:data:`SMOOTHING`: a mix of the duals priced last and the LP's,
the stabilised column generation of Wentges and Neame) while they find sets the LP wants, and
the LP's own when they do not; the refutation holds for whatever ``y`` it was proven for. The
restricted LP's value is at least the full LP's, so once it is at most k no ``y`` can refute
``T``, and the attempt ends. :func:`block_cover_bound` climbs ``T`` from the best bound
known, keeping the columns (an admissible set stays admissible under a larger ``T``).

Rounding: costs are scaled and rounded down as in :mod:`problems.pipeline._mip` and ``T``
becomes ``cap = floor(s T)`` units, so every true block of cost at most ``T`` satisfies the
scaled cap. ``y`` is used as integers (any integer weighting is valid), and a
refuted cap shows that some block of every partition has at least ``cap + 1`` scaled units:
the value reported is that over ``s``, nudged down. Memory overflow is ignored (it only adds
cost). The sets found only shape ``y``; no certificate depends on them.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.records import Bound
from gapstop.problems.pipeline import _mip
from gapstop.problems.pipeline.closed_form import check_k, simple_bound
from gapstop.problems.pipeline.heaviest_block import build_model, integer_weights
from gapstop.problems.pipeline.model import PipelineProblem

cp_model = _mip.cp_model

#: The first cap lies this far above the best bound known (relative); it doubles after a
#: refutation and halves after a cap that was not refuted.
STEP = 0.01
#: Largest step (relative).
MAX_STEP = 0.04
#: After the first refutation a cap gets at most TRY_FACTOR times the last refutation's time
#: (and at least MIN_TRY_S seconds).
TRY_FACTOR = 3.0
MIN_TRY_S = 10.0
#: The climb ends when its step would fall below this (relative).
MIN_STEP = 0.0025
#: Longest single pricing solve, in CP-SAT's deterministic time (about 2.1 s of wall time per unit
#: alone on 2 cores); one stopped early still gives columns and a bound. A wall-clock limit would
#: give a solve next to a run's search half the work it gets alone, and a cap it refutes alone
#: would then stall the climb (docs/decisions/0011-block-cover-bound.md).
PRICING_MAX_DET = 3.0
#: Greedy pricing grows one set from each of this many nodes of largest dual value.
SEEDS = 24
#: Heuristic pricing scans every interval of this many fixed random topological orders, and of
#: as many drawn each round with priorities biased by the duals.
ORDERS = 16
#: At most this many interval columns enter the LP per round (the best by ``y``).
PER_ROUND = 40
#: Moves per start of the local-search pricing (0: none). Before it, the exact pricing found the
#: columns greedy growth missed (which held about 0.95 of the share); alone on one core, a first
#: cap 1 % above the heaviest-block bound at k = 16 fell after 20.0 s instead of 40.0 s on
#: regal_001 and 15.9 s instead of 21.5 s on regal_007 (docs/decisions/0011-block-cover-bound.md).
LS_MOVES = 50
#: The local search's work per round, in node visits of its convexity tests (0.1-0.3 s). On
#: the REGAL-style graphs at k = 16 a round stays under it; on lstm_lm_unrolled (1,736 nodes)
#: one round without a limit took 20-60 s, and the thread's stop is only checked between rounds.
LS_MAX_WORK = 50_000_000
#: Reduced-cost tolerance: a set enters the LP when ``y(S) > 1 + TOL``.
TOL = 1e-7
#: After a refutation, the refuting ``y``'s own ``H(y)`` is minimised for at most this long
#: (CP-SAT's deterministic time, as :data:`PRICING_MAX_DET`; 0: not at all).
JUMP_DET = 1.5
#: CP-SAT parameters of the exact pricing solves, tried in turn (None: the MIPs' own, linearization
#: level 2). Level 2's extra cuts prove the infeasibility that certifies a cap: on regal_000 at
#: k = 16 (1 % above the heaviest-block bound) in 1.5 s, where level 0 proved nothing in 30 s. On
#: the densest graphs (regal_009: 11 edges per node) its LP is too slow to find a column or a proof
#: within :data:`PRICING_MAX_DET`, where level 1's lighter one does both
#: (docs/decisions/0011-block-cover-bound.md). A solve
#: that gives neither moves the attempt to the next set; the set that last worked stays current for
#: the Cover's later solves.
PRICING_PARAMS: tuple[dict[str, Any] | None, ...] = (None, {"linearization_level": 1})
#: Dual smoothing: after the first round, sets are priced at ``SMOOTHING`` x the duals priced last
#: plus the rest x the LP's (0: the LP's alone). The LP's duals are a vertex that jumps between
#: rounds; the smoothed ones tail off less. Alone on one core, a first cap 1 % above the
#: heaviest-block bound at k = 16 fell after 73.7 s instead of 195.6 s (regal_001) and after 23.9 s
#: where without smoothing the attempt stalled at 75 s (regal_007) (docs/decisions/0011-block-cover-bound.md).
SMOOTHING = 0.5


def block_costs(problem: PipelineProblem, sets: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Scaled cost in units (``floor`` rounding of :func:`problems.pipeline._mip.scale`) of
    each row of ``sets`` (bool[m, n]): ``work(S) + cut(S) / B``. int64[m]."""
    sc = _mip.scale(problem)
    return _set_costs(problem, sets, np.asarray(sc.work_lo, dtype=np.int64), np.asarray(sc.out_lo, dtype=np.int64))


def _set_costs(problem: PipelineProblem, sets: NDArray[np.bool_], work: NDArray[np.int64],
               out: NDArray[np.int64]) -> NDArray[np.int64]:
    """:func:`block_costs` with the scaled work and output sizes given (int64[n] each)."""
    from gapstop.problems.pipeline._cover_kernels import set_cost   # numba: only this bound needs it

    return np.array([set_cost(row, work, out, problem.succ_ptr, problem.succ)
                     for row in np.asarray(sets, dtype=bool)], dtype=np.int64).reshape(-1)


class _Collect(cp_model.CpSolverSolutionCallback):
    """Every set the pricing solve passes through (each is admissible)."""

    def __init__(self, x: list[Any]) -> None:
        super().__init__()
        self.x = x
        self.sets: list[NDArray[np.bool_]] = []

    def on_solution_callback(self) -> None:
        self.sets.append(np.array([self.boolean_value(v) for v in self.x], dtype=bool))


class Cover:
    """Column generation for one problem and k, kept across caps (its columns carry over).

    ``columns`` (bool[m, n]) and ``costs`` (units) hold every admissible set found so far.
    """

    def __init__(self, problem: PipelineProblem, k: int) -> None:
        self.problem, self.k = problem, k
        self.sc = _mip.scale(problem)
        n = problem.n
        self.columns = np.eye(n, dtype=bool)
        self.costs = block_costs(problem, self.columns)
        from gapstop.problems.pipeline import _cover_kernels as kern   # numba: only this bound needs it
        from gapstop.problems.pipeline._kernels import kahn_order

        self._kern = kern
        topo = kahn_order(np.zeros(n, dtype=np.float64), problem.succ_ptr, problem.succ, problem.pred_ptr)
        self._reach = kern.closure(n, problem.succ_ptr, problem.succ, np.asarray(topo, dtype=np.int64))
        self._work = np.asarray(self.sc.work_lo, dtype=np.int64)
        self._out = np.asarray(self.sc.out_lo, dtype=np.int64)
        self._kahn = kahn_order
        self._rng = np.random.default_rng(0)
        self._orders = np.array([kahn_order(self._rng.random(n), problem.succ_ptr, problem.succ, problem.pred_ptr)
                                 for _ in range(ORDERS)], dtype=np.int64).reshape(ORDERS, n)
        self._seen = {c.tobytes() for c in self.columns}
        self._lp: Any = None            # the restricted LP (GLOP), built on first use
        self._rows: list[Any] = []
        self._xs: list[Any] = []        # its variable of each column, in order
        self._lp_cap: int | None = None
        self.cuts: list[tuple[int, ...]] = []   # cycle cuts: column indices, sum of their x <= len - 1
        self._cut_rows: list[Any] = []
        self._mu = np.zeros(0, dtype=np.float64)   # the cuts' duals (>= 0), from the last LP
        self._params = 0   # index into PRICING_PARAMS of the last exact pricing that found a column or a proof

    def intervals(self, y: NDArray[np.float64], cap: int, above: float = 1.0 + TOL) -> list[NDArray[np.bool_]]:
        """The sets of largest ``y`` among intervals of topological orders within ``cap``: per
        start of each of :data:`ORDERS` fixed random orders and as many drawn with ``y``-biased
        priorities, the best interval; the :data:`PER_ROUND` best of those with ``y`` above ``above``
        (by default those the LP wants)."""
        p, n = self.problem, self.problem.n
        fresh = np.array([self._kahn(y * self._rng.random(n), p.succ_ptr, p.succ, p.pred_ptr)
                          for _ in range(ORDERS)], dtype=np.int64).reshape(ORDERS, n)
        orders = np.vstack([self._orders, fresh])
        ends, vals = self._kern.best_intervals(orders, y, np.int64(cap), self._work, self._out, p.succ_ptr,
                                               p.succ, p.pred_ptr, p.pred)
        flat = np.argsort(-vals, axis=None, kind="stable")
        out: list[NDArray[np.bool_]] = []
        for f in flat:
            o, i = divmod(int(f), n)
            if vals[o, i] <= above or len(out) >= PER_ROUND:
                break
            row = np.zeros(n, dtype=bool)
            row[orders[o, i:ends[o, i]]] = True
            out.append(row)
        return out

    def grown(self, y: NDArray[np.float64], cap: int) -> list[NDArray[np.bool_]]:
        """Admissible sets grown greedily from the :data:`SEEDS` nodes of largest ``y``."""
        p = self.problem
        seeds = np.argsort(-y, kind="stable")[:SEEDS].astype(np.int64)
        rows = self._kern.grow(seeds, y, np.int64(cap), self._reach, self._work, self._out, p.succ_ptr, p.succ,
                               p.pred_ptr, p.pred)
        return [row for row in rows if row.any()]

    def improved(self, y: NDArray[np.float64], cap: int, starts: list[NDArray[np.bool_]]) -> list[NDArray[np.bool_]]:
        """Admissible sets of larger ``y`` by local search (:func:`_cover_kernels.improve`, at most
        :data:`LS_MOVES` moves each) from ``starts`` (admissible sets) and the columns within ``cap``
        of the last LP's solution."""
        p = self.problem
        starts = list(starts)
        if self._xs:
            x = np.array([v.solution_value() for v in self._xs], dtype=np.float64)
            starts += [self.columns[j] for j in np.flatnonzero(x > 1e-9)[:PER_ROUND] if self.costs[j] <= cap]
        if not starts:
            return []
        rows = self._kern.improve(np.array(starts, dtype=bool), y, np.int64(cap), self._reach, self._work,
                                  self._out, p.succ_ptr, p.succ, p.pred_ptr, p.pred, LS_MOVES, LS_MAX_WORK)
        return [row for row in rows if row.any()]

    def _add(self, sets: list[NDArray[np.bool_]]) -> int:
        if not sets:
            return 0
        new = np.unique(np.array(sets, dtype=bool), axis=0)
        new = np.array([s for s in new if s.any() and s.tobytes() not in self._seen], dtype=bool)
        if len(new) == 0:
            return 0
        self._seen.update(s.tobytes() for s in new)
        self.columns = np.vstack([self.columns, new])
        self.costs = np.concatenate([self.costs, _set_costs(self.problem, new, self._work, self._out)])
        return len(new)

    def _duals(self, cap: int) -> tuple[float, NDArray[np.float64]]:
        """The restricted partitioning LP over the columns within ``cap``, every node also
        coverable by an artificial column of cost k + 1 (so it is always feasible): (value,
        duals y, of either sign).

        One GLOP model lives as long as the Cover: each call adds the columns found since the
        last one, and a column above the cap stays in it with upper bound 0 (building the model
        afresh each round took 70 % of a k = 4 attempt's time, in Python calls)."""
        from ortools.linear_solver import pywraplp  # 0.1 s to import; only this bound needs it

        n = self.problem.n
        if self._lp is None:
            self._lp = pywraplp.Solver.CreateSolver("GLOP")
            self._rows = [self._lp.Constraint(1.0, 1.0) for _ in range(n)]
            obj = self._lp.Objective()
            for v in range(n):
                a = self._lp.NumVar(0.0, self._lp.infinity(), "")
                self._rows[v].SetCoefficient(a, 1.0)
                obj.SetCoefficient(a, float(self.k + 1))
            obj.SetMinimization()
        lp, obj, inf = self._lp, self._lp.Objective(), self._lp.infinity()
        for j in range(len(self._xs), len(self.columns)):
            xv = lp.NumVar(0.0, inf if self.costs[j] <= cap else 0.0, "")
            for v in np.flatnonzero(self.columns[j]):
                self._rows[int(v)].SetCoefficient(xv, 1.0)
            obj.SetCoefficient(xv, 1.0)
            self._xs.append(xv)
        if self._lp_cap is not None and self._lp_cap != cap:
            lo, hi = min(self._lp_cap, cap), max(self._lp_cap, cap)
            changed = np.flatnonzero((self.costs[:len(self._xs)] > lo) & (self.costs[:len(self._xs)] <= hi))
            for j in changed:
                self._xs[int(j)].SetUb(inf if self.costs[j] <= cap else 0.0)
        self._lp_cap = cap
        for cut in self.cuts[len(self._cut_rows):]:
            row = lp.Constraint(-inf, float(len(cut) - 1))
            for j in cut:
                row.SetCoefficient(self._xs[j], 1.0)
            self._cut_rows.append(row)
        lp.Solve()
        y = np.array([c.dual_value() for c in self._rows], dtype=np.float64)
        # a <= row of a minimisation has a dual <= 0; its negation, clipped, is a valid mu >= 0
        self._mu = np.maximum(0.0, -np.array([c.dual_value() for c in self._cut_rows], dtype=np.float64))
        return float(obj.Value()), y

    def integral_columns(self) -> NDArray[np.int64] | None:
        """The columns of the last LP's solution if it is one partition (every used column at 1),
        else None."""
        x = np.array([v.solution_value() for v in self._xs], dtype=np.float64)
        used = np.flatnonzero(x > 1e-9)
        return used if len(used) and np.all(np.abs(x[used] - 1.0) <= 1e-9) else None

    def cycle_cuts(self) -> int:
        """After an LP of value at most k: if its solution is one partition (integral) whose
        block graph has a cycle, cut off every shortest cycle through each of its blocks
        (``sum of x over the cycle's blocks <= its length - 1``: no acyclic partition holds all
        of them). Returns the number of new cuts (0: the solution is fractional or acyclic)."""
        used = self.integral_columns()
        if used is None:
            return 0
        p = self.problem
        block = np.full(p.n, -1, dtype=np.int64)
        for b, j in enumerate(used):
            block[self.columns[j]] = b
        if (block < 0).any():
            return 0
        m = len(used)
        succ: list[set[int]] = [set() for _ in range(m)]
        for u in range(p.n):
            for w in p.succ[p.succ_ptr[u]:p.succ_ptr[u + 1]]:
                if block[u] != block[w]:
                    succ[int(block[u])].add(int(block[w]))
        known = {frozenset(c) for c in self.cuts}
        added = 0
        for b in range(m):
            # breadth-first from b's successors back to b: a shortest cycle through b
            parent = {w: b for w in succ[b]}
            frontier = list(succ[b])
            while frontier and b not in frontier:
                nxt = []
                for u in frontier:
                    for w in succ[u]:
                        if w not in parent:
                            parent[w] = u
                            nxt.append(w)
                frontier = nxt
            if b not in parent:
                continue
            cycle, u = [b], parent[b]
            while u != b:
                cycle.append(u)
                u = parent[u]
            cut = tuple(sorted(int(used[c]) for c in cycle))
            if frozenset(cut) not in known:
                known.add(frozenset(cut))
                self.cuts.append(cut)
                added += 1
        return added

    def refute(self, cap: int, time_limit_s: float, *, num_workers: int = 1, random_seed: int = 0,
               should_stop: Callable[[], bool] | None = None) -> tuple[float, dict[str, Any]]:
        """Try to prove that no acyclic partition into at most k blocks has every block's scaled
        cost within ``cap`` units: (valid lower bound on OPT, detail). The bound is above ``cap / s``
        when the cap is refuted (``why == "refuted"``); otherwise it is the best ``H(y)``
        proven on the way (``-inf`` if none). Detail: ``lp`` (the last restricted LP's value),
        ``rounds`` (LP solves), ``greedy`` (rounds priced without CP-SAT: intervals, greedy
        growth or local search), ``searched`` (of those, the rounds priced by the local search),
        ``cuts`` (cycle cuts added in this attempt; they stay for the next), ``why``
        (``refuted``, ``lp <= k``, ``converged``, ``stalled`` (no new column in an exact
        pricing solve's time under each of :data:`PRICING_PARAMS`), ``time`` or ``stop``),
        ``params`` (the index of the exact pricing's parameters that last found a column or a
        proof, where the next attempt starts), ``seconds``.
        """
        t0 = time.perf_counter()
        stop = should_stop or (lambda: False)
        n, k = self.problem.n, self.k
        rounds, lp_value, why, greedy, bound, cuts = 0, math.inf, "time", 0, -math.inf, 0
        searched = 0
        priced: NDArray[np.float64] | None = None   # the duals priced last
        priced_mu = np.zeros(0, dtype=np.float64)    # and the cuts' duals with them
        trial = self._params   # the exact pricing's parameters now
        while True:
            left = time_limit_s - (time.perf_counter() - t0)
            if left <= 0.05:
                break
            if stop():
                why = "stop"
                break
            lp_value, y = self._duals(cap)
            mu = self._mu
            rounds += 1
            if lp_value <= k + TOL:
                # a partition with a cyclic block graph is cut off and the LP solved again; else the
                # full LP (with these cuts) is at most k: no dual of it refutes the cap
                new_cuts = self.cycle_cuts()
                if new_cuts:
                    cuts += new_cuts
                    priced = None
                    continue
                why = "lp <= k"
                break
            if SMOOTHING > 0 and priced is not None and len(priced_mu) == len(mu):
                ys = SMOOTHING * priced + (1.0 - SMOOTHING) * y
                mus = SMOOTHING * priced_mu + (1.0 - SMOOTHING) * mu
                # columns only where the LP wants them (y(S) > 1); the smoothed duals choose which
                found = self.intervals(ys, cap) + self.grown(ys, cap)
                if self._add([s for s in found if float(y[s].sum()) > 1.0 + TOL]):
                    priced, priced_mu = ys, mus
                    greedy += 1
                    continue
            else:
                ys, mus = priced, priced_mu = y, mu
            # cheap columns first: the exact pricing (below) is needed for a certificate only once
            # the heuristics find nothing the LP wants
            ivals = self.intervals(y, cap, above=-math.inf)
            if self._add([s for s in ivals if float(y[s].sum()) > 1.0 + TOL]):
                greedy += 1
                continue
            grown = self.grown(y, cap)
            if self._add([g for g in grown if float(y[g].sum()) > 1.0 + TOL]):
                greedy += 1
                continue
            if LS_MOVES > 0 and self._add([s for s in self.improved(y, cap, ivals + grown)
                                           if float(y[s].sum()) > 1.0 + TOL]):
                greedy += 1
                searched += 1
                continue
            # exact pricing in the heaviest-block form: the cheapest admissible set holding a k-th
            # of y. None within the cap refutes it (y(S) < y(V) / k on every admissible set);
            # one found is a column the LP wants (y(S) >= y(V) / k > 1), and its cost, once
            # proven least, is a bound on its own (H(y)). CP-SAT proves this minimum far faster
            # than it bounds max y(S) (2-5 s per call, unproven, at 74-99 nodes, k = 16).
            # any weighting certifies (module docstring): the exact pricing takes the smoothed one
            yi, share, held = self._certificate_weights(ys, mus)
            pm = self._pricing_model(yi, share)
            pm.model.add(pm.objective <= cap)
            x = [pm.model.get_bool_var_from_proto_index(v) for v in range(n)]
            cb = _Collect(x)
            status, value, _, _ = _mip.solve(pm, n, time_limit_s=left, num_workers=num_workers,
                                             random_seed=random_seed, callback=cb, should_stop=stop,
                                             cp_params=PRICING_PARAMS[trial], work_limit=PRICING_MAX_DET)
            refuted = _mip.to_value(pm, cap + 1, n)
            # smoothing the LP's own duals with themselves gives them back, equal but a new array
            lp_own = np.array_equal(ys, y) and np.array_equal(mus, mu)
            # the cut columns, left out of the model: the least cost of those that hold the share
            held_cost = min((int(self.costs[j]) for j in held), default=None)
            if status == "infeasible" and (held_cost is None or held_cost > cap):
                bound, why = max(bound, refuted), "refuted"
                self._params = trial
                left = time_limit_s - (time.perf_counter() - t0)
                if JUMP_DET > 0 and left > 0.5 and not stop():
                    # the same y often holds well above the cap: H(y) itself, minimised with the
                    # refuted range cut off, is a bound of its own (the proven one, optimal or not)
                    pm = self._pricing_model(yi, share)
                    pm.model.add(pm.objective >= cap + 1)
                    _, jumped, _, _ = _mip.solve(pm, n, time_limit_s=left, num_workers=num_workers,
                                                 random_seed=random_seed, should_stop=stop,
                                                 cp_params=PRICING_PARAMS[trial], work_limit=JUMP_DET)
                    if held_cost is not None:
                        jumped = min(jumped, _mip.to_value(pm, held_cost, n))
                    bound = max(bound, jumped)
                break
            if status == "infeasible":
                # the rounded weights leave a cut column within the cap holding the share: no
                # certificate from them; the LP's own duals next, unless these were they
                if not lp_own:
                    priced, priced_mu = y, mu
                    continue
                why = "stalled"
                break
            if status != "optimal":
                value = min(value, refuted)   # valid whether or not H(y) is within the cap
            if held_cost is not None:
                value = min(value, _mip.to_value(pm, held_cost, n))
            bound = max(bound, value)
            if self._add([s for s in cb.sets if float(y[s].sum()) > 1.0 + TOL]) == 0:
                if not lp_own:
                    # the smoothed duals gave no set the LP wants (mis-priced, or none found within
                    # the solve's limit): the LP's own next, once
                    priced, priced_mu = y, mu
                    continue
                nxt = (trial + 1) % len(PRICING_PARAMS)
                if status != "optimal" and nxt != self._params:
                    # neither a column nor a proof within the solve's limit: the next parameters,
                    # until they come round to the set that last worked
                    trial = nxt
                    continue
                why = "converged" if status == "optimal" else "stalled"
                break
            self._params = trial
        return bound, {"lp": lp_value, "rounds": rounds, "greedy": greedy, "why": why, "cuts": cuts,
                       "params": self._params, "searched": searched, "seconds": time.perf_counter() - t0}

    def _certificate_weights(self, y: NDArray[np.float64], mu: NDArray[np.float64]
                             ) -> tuple[NDArray[np.int64], int, list[int]]:
        """Integer weights for a refutation with the cycle cuts (module docstring): (``yi``,
        ``share``, the cut columns whose own value ``yi(S) - sum of mu over their cuts`` reaches
        ``share``). ``y`` and ``mu`` are scaled together and rounded down; ``share`` is
        ``ceil((yi(V) - sum_c mu_c (|c| - 1)) / k)``. Every acyclic partition into at most k
        blocks has a block that is a non-cut column with ``yi(S) >= share`` or one of the returned
        cut columns, whatever the rounding: the sum of the blocks' own values is at least
        ``yi(V) - sum_c mu_c (|c| - 1)``, as a partition holds at most ``|c| - 1`` of a cut's sets."""
        # (with mu = 0, or no cuts, this is integer_weights(y) and ceil(yi(V) / k))
        both = integer_weights(np.concatenate([y, mu]), signed=True)
        yi, mui = both[:len(y)], np.maximum(both[len(y):], 0)
        total = int(yi.sum()) - sum(int(m) * (len(c) - 1) for m, c in zip(mui, self.cuts))
        share = -(-total // self.k)
        own = {j: int(yi[self.columns[j]].sum()) for c in self.cuts for j in c}
        for m, c in zip(mui, self.cuts):
            for j in c:
                own[j] -= int(m)
        return yi, share, sorted(j for j, v in own.items() if v >= share)

    def _pricing_model(self, yi: NDArray[np.int64], share: int) -> Any:
        """The heaviest-block model with ``yi(S) >= share`` and every cut column excluded."""
        pm = build_model(self.problem, self.k, yi, share)
        x = [pm.model.get_bool_var_from_proto_index(v) for v in range(self.problem.n)]
        for j in sorted({j for c in self.cuts for j in c}):
            col = self.columns[j]
            # S differs from column j in some node
            pm.model.add_bool_or([x[v].Not() if col[v] else x[v] for v in range(self.problem.n)])
        return pm


def block_cover_bound(problem: PipelineProblem, k: int, time_limit_s: float = 30.0, *, floor: float = -math.inf,
                      num_workers: int = 1, random_seed: int = 0,
                      should_stop: Callable[[], bool] | None = None,
                      on_improve: Callable[[float], None] | None = None, **_: Any) -> Bound:
    """Climb caps ``T`` from the best bound known and refute each by :meth:`Cover.refute`.

    The first cap lies :data:`STEP` above ``max(floor, closed-form bound)`` (``floor``: a
    valid bound from elsewhere, the spectral one in a run). A refuted cap becomes the new
    start and the step doubles; a cap not refuted bounds the climb from above and the
    step halves (the next cap at most half way to it). The first cap gets all the time left,
    later ones half of it and at most :data:`TRY_FACTOR` times the last refutation's time (at
    least :data:`MIN_TRY_S`).
    Ends at the first cap not refuted if none was before it, when the step falls below
    :data:`MIN_STEP`, at the time limit, or when
    ``should_stop()`` says so. ``on_improve(value)`` reports every rise. Other keyword
    arguments are ignored. The value is the best refuted cap or proven H(y), or the closed-form bound if higher.
    ``detail``: ``k``, ``caps`` (list of [T, refuted, detail of the attempt]), ``columns``.
    """
    t0 = time.perf_counter()
    check_k(problem, k)
    stop = should_stop or (lambda: False)
    if problem.n == 0:
        return Bound("block-cover", 0.0, "optimal", 0.0, "cp-sat+glop", {"k": k, "caps": [], "columns": 0})
    cover = Cover(problem, k)
    sc = cover.sc
    lo_value = max(floor, simple_bound(problem, k).value)
    lo = sc.floor_of(Fraction(lo_value)) if math.isfinite(lo_value) and lo_value > 0 else 0
    best = -math.inf
    step, ceiling = STEP, math.inf
    last_ok: float | None = None
    caps: list[list[Any]] = []
    while not stop():
        left = time_limit_s - (time.perf_counter() - t0)
        gain = int(min(step * lo, (ceiling - lo) / 2))
        if left <= 0.05 or lo <= 0 or gain < MIN_STEP * lo:
            break
        cap = lo + gain
        # the first cap gets all the time left: where it is not refuted the climb ends there anyway,
        # and beside a run's search the first caps of regal_001 and regal_007 at k = 16 (refuted
        # alone in 5-20 s) ran out of half the thread's time and the thread then stood idle
        allowance = left / 2 if gain > 2 * MIN_STEP * lo and caps else left
        if last_ok is not None:
            # the columns are in place after the first refutation: later ones take seconds, and
            # a cap far from refuted would otherwise spend half the time left tailing off
            allowance = min(allowance, max(MIN_TRY_S, TRY_FACTOR * last_ok))
        value, info = cover.refute(cap, allowance, num_workers=num_workers, random_seed=random_seed,
                                   should_stop=stop)
        ok = info["why"] == "refuted"
        caps.append([float(Fraction(cap) / sc.s), ok, info])
        if value > best:
            best = value
            if on_improve is not None:
                on_improve(value)
        if ok:
            lo = max(cap, sc.floor_of(Fraction(best)))   # best: at least the cap's, perhaps H(y) above it
            step = min(2 * step, MAX_STEP)
            last_ok = info["seconds"]
        else:
            if last_ok is None:
                # nothing refuted from the start: the climb would hold its thread, beside the run's
                # search, to the end of the run for a few tenths of a percent at best (a lower cap
                # refuted later), and its thread's core is worth more to the search there
                # (docs/decisions/0011-block-cover-bound.md)
                break
            ceiling = min(ceiling, cap)
            step /= 2
            if math.isfinite(best):
                lo = max(lo, sc.floor_of(Fraction(best)))   # a proven H(y) between the caps
    # never below the closed form the climb starts from (k = 1: the whole graph, which no cap
    # under it survives)
    status = "bound-only" if math.isfinite(best) else "timeout"
    best = max(best, simple_bound(problem, k).value)
    return Bound("block-cover", best, status, time.perf_counter() - t0, "cp-sat+glop",
                 {"k": k, "caps": caps, "columns": int(len(cover.columns))})
