"""Certified lower bounds for the intra-operator sharding problem.

``lower_bound(problem, method, time_limit_s)`` returns an :class:`engine.records.Bound`
whose value is an integer ``<=`` the cost of every feasible solution (one free of
forbidden choices, i.e. costs ``>= 10^18``, and within the usage limit), or
``math.inf`` when the method proved that none exists. Methods, cheapest first:

* ``trivial``: every node at its cheapest admissible strategy plus every merged
  edge table at its cheapest admissible pair.
* ``unconstrained``: the optimum without the usage limit, exact when the core
  left by degree <= 2 elimination is small (variable elimination), otherwise the
  TRW-S dual bound of that core (see :mod:`problems.intraop._dual`).
* ``lagrangian``: ``max over lambda >= 0`` of ``min_s C(s) + sum_t lambda_t (usage_t(s) - M)``
  by projected subgradient steps, each inner minimum bounded as in ``unconstrained``.
  The steps follow the usage of the greedy labelling (default) or, with
  ``direction="dual"``, the exact supergradient of the certified dual bound.
  Strategies that cannot fit at some step of their interval, even with every
  other live node at its least usage, are excluded first. Unless the core is
  solved exactly, the last quarter of the time tightens the best multipliers'
  inner bound with frustrated cycles (:mod:`problems.intraop.cycles`).
* ``exact``: CP-SAT on the whole model; its proven bound (never its incumbent).
* ``elimination``: FindOptStrategy (:mod:`problems.intraop.elimination`): the
  unconstrained optimum (strategies that can never fit excluded) by vertex
  elimination when its tables fit ``table_limit``
  (status ``optimal`` when that strategy also fits the usage limit), else the
  mini-bucket lower bound (``bound-only``).

All certified arithmetic is exact integer arithmetic; floating point only steers
the search for multipliers and messages (the Lagrangian's float penalties are
rounded so that they never exceed the exact ones).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any, Callable, Mapping

import numpy as np
from numpy.typing import NDArray

from gapstop.engine import cancel
from gapstop.engine.records import Bound
from gapstop.problems.intraop import _bound_kernels as BK
from gapstop.problems.intraop._bound_cpsat import binding_steps, solve_cpsat
from gapstop.problems.intraop._dual import EXACT_TABLE_LIMIT, EXCL, CoreDual, prepare_bounds
from gapstop.problems.intraop.evaluate import usage_profile
from gapstop.problems.intraop.model import IntraopProblem, interval_sum

__all__ = ["METHODS", "MultiplierSearch", "lower_bound", "memory_pruned_unary", "multiplier_weights"]

METHODS = ("trivial", "unconstrained", "lagrangian", "exact", "elimination")
_EPS = 2.0**-52


def _bound(method: str, value: float | int, status: str, t0: float, solver: str,
           detail: dict[str, Any]) -> Bound:
    return Bound(method, value, status, round(time.perf_counter() - t0, 4), solver, detail)


def _trivial(problem: IntraopProblem, time_limit_s: float, t0: float) -> Bound:
    prep = prepare_bounds(problem)
    net = prep.net
    unary = prep.unary
    admissible = unary < EXCL
    node_min = np.minimum.reduceat(unary, net.ptr[:-1])
    if np.any(node_min >= EXCL):
        return _bound("trivial", math.inf, "infeasible", t0, "closed-form", {"reason": "a node has no admissible strategy"})
    total = sum(node_min.tolist())
    # tables: only pairs whose two strategies are admissible count
    for t in range(net.num_tables):
        u, v = int(net.tab_x[t]), int(net.tab_y[t])
        ku, kv = int(net.k[u]), int(net.k[v])
        off = int(net.tab_off[t])
        tab = prep.work[off:off + ku * kv].reshape(ku, kv)
        mask = admissible[net.ptr[u]:net.ptr[u] + ku, None] & admissible[net.ptr[v]:net.ptr[v] + kv][None, :]
        vals = tab[mask & (tab < EXCL)]
        if len(vals) == 0:
            return _bound("trivial", math.inf, "infeasible", t0, "closed-form",
                          {"reason": f"nodes {u} and {v} have no admissible pair"})
        total += int(vals.min())
    return _bound("trivial", total, "closed-form", t0, "closed-form", {"tables": net.num_tables})


def _sparse_max(a: NDArray[np.int64]) -> list[NDArray[np.int64]]:
    levels = [a]
    j = 1
    while 2 * j <= len(a):
        prev = levels[-1]
        levels.append(np.maximum(prev[:-j], prev[j:]))
        j *= 2
    return levels


def _range_max(levels: list[NDArray[np.int64]], lo: NDArray[np.int64], hi: NDArray[np.int64]) -> NDArray[np.int64]:
    """max of ``a[lo:hi]`` for each pair (``hi > lo``)."""
    length = hi - lo
    lev = np.floor(np.log2(np.maximum(length, 1))).astype(np.int64)
    out = np.zeros(len(lo), dtype=np.int64)
    for L in np.unique(lev).tolist():
        sel = lev == L
        tab = levels[L]
        out[sel] = np.maximum(tab[lo[sel]], tab[hi[sel] - (1 << L)])
    return out


def memory_pruned_unary(problem: IntraopProblem) -> tuple[NDArray[np.int64], int]:
    """The integer unary costs with strategies that can never fit excluded (EXCL).

    A strategy ``s`` of node ``v`` is excluded when, at some step of ``v``'s interval,
    its usage plus the least admissible usage of every other live node exceeds the
    limit. Every feasible solution avoids such strategies, so bounds computed
    with them excluded stay valid.

    Returns:
        ``(unary, excluded)``: int64[K] and the number of strategies newly excluded.
    """
    prep = prepare_bounds(problem)
    unary = prep.unary.copy()
    M = problem.usage_limit
    if M is None or problem.horizon == 0:
        return unary, 0
    ptr = problem.node_ptr
    use = problem.node_usage
    big = np.iinfo(np.int64).max
    low = np.minimum.reduceat(np.where(unary < EXCL, use, big), ptr[:-1])
    if np.any(low == big):
        return unary, 0  # some node has nothing admissible: reported as infeasible elsewhere
    prof = interval_sum(low, problem.start, problem.end, problem.horizon)
    live = np.nonzero(problem.end > problem.start)[0]
    peak = np.zeros(problem.n, dtype=np.int64)
    peak[live] = _range_max(_sparse_max(prof), problem.start[live], problem.end[live])
    k = problem.num_strategies
    node_of = np.repeat(np.arange(problem.n), k)
    livek = np.repeat(problem.end > problem.start, k)
    bad = livek & (unary < EXCL) & (peak[node_of] - low[node_of] + use > M)
    unary[bad] = EXCL
    return unary, int(bad.sum())


def _unconstrained(problem: IntraopProblem, time_limit_s: float, t0: float, **kw: Any) -> Bound:
    prep = prepare_bounds(problem)
    dual = CoreDual(prep, exact_table_limit=kw.get("exact_table_limit", EXACT_TABLE_LIMIT))
    value, exact = dual.bound(prep.unary, iterations=kw.get("iterations", 10**9), deadline=t0 + time_limit_s,
                              patience=kw.get("patience", 5))
    status = "infeasible" if value == math.inf else ("relaxation-optimal" if exact else "bound-only")
    return _bound("unconstrained", value, status, t0, "ve" if exact else "trw-s",
                  {"core_nodes": len(prep.plan.core), "exact": exact})


def _steps_weights(steps: NDArray[np.int64], lam: NDArray[np.float64], lo: NDArray[np.int64],
                   hi: NDArray[np.int64]) -> tuple[NDArray[np.float64], Fraction]:
    """Per-node weights never above ``sum lambda`` over the node's steps, and an upper bound on ``sum lambda``.

    Prefix sums of non-negative floats have absolute error at most ``(len+2) eps sum``;
    twice that (and a relative ``1e-12``) is taken off every weight so the float
    penalty ``w * m`` can never exceed the exact one.
    """
    cum = np.zeros(len(lam) + 1)
    np.cumsum(lam, out=cum[1:])
    total = float(cum[-1])
    slack = 4.0 * (len(lam) + 2) * _EPS * total
    w = np.maximum(0.0, (cum[hi] - cum[lo]) - slack) * (1.0 - 1e-12)
    w[hi <= lo] = 0.0
    upper = Fraction(total) * (1 + Fraction(4 * (len(lam) + 2)) * Fraction(_EPS))
    return w, upper


def _initial_lambda(steps: NDArray[np.int64], init: Mapping[int, float] | NDArray[np.float64] | None) -> NDArray[np.float64]:
    """Map given multipliers (by time step) onto the binding starts: each goes to the latest start at or before it.

    Moving a multiplier from step ``t`` to such a start ``b`` never lowers the bound:
    every node live at ``t`` is live at ``b`` too.
    """
    lam = np.zeros(len(steps))
    if init is None or len(steps) == 0:
        return lam
    items = init.items() if isinstance(init, Mapping) else enumerate(np.asarray(init, dtype=np.float64).tolist())
    for t, val in items:
        i = int(np.searchsorted(steps, int(t), side="right")) - 1
        if i >= 0 and val > 0 and math.isfinite(val):
            lam[i] += float(val)
    return lam


def _step_direction(problem: IntraopProblem, dual: CoreDual, steps: NDArray[np.int64],
                    direction: str) -> NDArray[np.float64]:
    """Usage minus the limit at ``steps`` for the multiplier step, after a ``dual.bound(..., label=True)`` call.

    ``labelling``: the usage of the greedy labelling (a supergradient of the
    Lagrangian with an exact inner minimum, which the dual bound only approaches).
    ``dual``: the usage averaged over the minimisers of the certified dual bound
    itself (:meth:`CoreDual.expected_usage`, an exact supergradient of that bound
    for the current messages); falls back to the labelling without a dual point.
    """
    M = problem.usage_limit
    assert M is not None
    per_node = dual.expected_usage(problem.node_usage) if direction == "dual" else None
    if per_node is None:
        return (usage_profile(problem, dual.sol)[steps] - M).astype(np.float64)
    return interval_sum(per_node, problem.start, problem.end, problem.horizon)[steps] - float(M)


#: The first multiplier step runs TRW-S from zero messages until this many certificates in a row
#: bring no rise (as the ``unconstrained`` bound does), not ``inner_iterations`` passes: steps
#: taken from unsettled messages never caught up. On G's graph with 30 % more edges
#: (``benchmarks/intraop_contest.py``'s G-resample0.3) the search ended at 60.7e6 from a
#: 3-pass start and 65.2e6 from a settled one, and the unconstrained bound alone is 64.0e6.
SETTLE_PATIENCE = 5
#: ... for at most this share of the Lagrangian's time (its search for multipliers)
SETTLE_SHARE = 0.1


class MultiplierSearch:
    """Projected subgradient search for the usage limit's Lagrangian multipliers, resumable.

    Each step bounds ``min_s C(s) + sum_t lambda_t (usage_t(s) - M)`` for the current
    multipliers with warm-started TRW-S (see :class:`~problems.intraop._dual.CoreDual`);
    every such value is a valid lower bound of the constrained optimum. Steps follow the
    usage of the greedy labelling (``direction="labelling"``) or the exact supergradient of
    the certified dual bound (``"dual"``), Polyak-sized towards ``upper_bound`` (a feasible
    cost, or a function returning the current one or None). Call :meth:`run` as often as
    wanted: state (multipliers, messages, step size) carries over.

    Attributes:
        active: False when there is nothing to search (no usage limit, or no step where it can bind).
        best: the best certified value so far (``-inf`` before the first step), a Python int.
        best_lam: float64[len(steps)], the multipliers that gave it.
        status: None while searching; "infeasible" (no admissible assignment) or "optimal"
            (multipliers optimal for an exactly solved inner problem) once finished.
        iterations: steps taken.
    """

    def __init__(self, problem: IntraopProblem, *,
                 initial_multipliers: Mapping[int, float] | NDArray[np.float64] | None = None,
                 upper_bound: float | Callable[[], float | None] | None = None, inner_iterations: int = 3,
                 patience: int = 8, exact_table_limit: int = EXACT_TABLE_LIMIT, direction: str = "labelling",
                 on_improvement: Callable[[int], None] | None = None, settle_s: float = 0.0) -> None:
        if direction not in ("labelling", "dual"):
            raise ValueError(f"unknown direction {direction!r}; choose 'labelling' or 'dual'")
        self.problem = problem
        self.prep = prepare_bounds(problem)
        self.unary, self.pruned = memory_pruned_unary(problem)
        self.dual = CoreDual(self.prep, exact_table_limit=exact_table_limit)
        self.steps = binding_steps(self.prep, self.unary)
        self.active = problem.usage_limit is not None and len(self.steps) > 0
        self.upper_bound, self.direction, self.settle_s = upper_bound, direction, settle_s
        self.inner_iterations, self.patience = inner_iterations, patience
        self.on_improvement = on_improvement
        self.lo = np.searchsorted(self.steps, problem.start)
        self.hi = np.searchsorted(self.steps, problem.end)
        self.lam = _initial_lambda(self.steps, initial_multipliers)
        self.theta = np.empty_like(self.unary)
        self.best: float | int = -math.inf
        self.best_lam = self.lam.copy()
        self.scale, self.stale, self.iterations = 1.0, 0, 0
        self.exact_inner = False
        self.status: str | None = None

    def run(self, deadline: float, max_iterations: int = 10**9) -> None:
        """Take steps until ``deadline`` (``time.perf_counter()``; the very first step always runs),
        ``max_iterations`` steps in all, or :attr:`status` is set."""
        problem, dual, steps = self.problem, self.dual, self.steps
        M = problem.usage_limit
        if not self.active or self.status is not None:
            return
        assert M is not None
        while self.iterations < max_iterations and (self.iterations == 0 or not cancel.expired(deadline)):
            self.iterations += 1
            w, lam_sum = _steps_weights(steps, self.lam, self.lo, self.hi)
            BK.penalty_unary(self.unary, problem.node_usage, problem.node_ptr, w, self.theta)
            if self.iterations == 1 and self.settle_s > 0:  # settle the messages at the starting multipliers
                inner, self.exact_inner = dual.bound(self.theta, iterations=10**9, label=True, patience=SETTLE_PATIENCE,
                                                     deadline=min(deadline, time.perf_counter() + self.settle_s))
            else:
                inner, self.exact_inner = dual.bound(self.theta, iterations=self.inner_iterations, deadline=deadline,
                                                     label=True, certify_every=self.inner_iterations)
            if inner == math.inf:
                self.status = "infeasible"
                return
            value = int(inner) - math.ceil(M * lam_sum)
            if value > self.best:
                self.best, self.best_lam, self.stale = value, self.lam.copy(), 0
                if self.on_improvement is not None:
                    self.on_improvement(value)
            else:
                self.stale += 1
                if self.stale >= self.patience:
                    self.scale, self.stale = max(self.scale / 2, 1e-4), 0
                    self.lam = self.best_lam.copy()  # restart from the best point with shorter steps
                    continue
            g = _step_direction(problem, dual, steps, self.direction)
            g[(self.lam <= 0) & (g < 0)] = 0.0  # projection: these steps cannot go lower
            norm = float(g @ g)
            if norm == 0.0:
                if self.exact_inner:
                    self.status = "optimal"  # lambda is optimal for an exactly solved inner problem
                    return
                continue
            ub = self.upper_bound() if callable(self.upper_bound) else self.upper_bound
            target = ub if ub is not None and ub > self.best else None
            if target is None:
                target = float(self.best) + max(abs(float(self.best)) * 0.02, 1.0)
            step = self.scale * (float(target) - float(value)) / norm
            self.lam = np.maximum(0.0, self.lam + max(step, 0.0) * g)

    def weights(self) -> NDArray[np.float64] | None:
        """float64[n]: each node's usage price under the best multipliers (the sum of them over its
        interval, cost units per usage unit); None before the first step or when not :attr:`active`."""
        if not self.active or self.best == -math.inf:
            return None
        return _steps_weights(self.steps, self.best_lam, self.lo, self.hi)[0]


def _lagrangian(problem: IntraopProblem, time_limit_s: float, t0: float, *,
                initial_multipliers: Mapping[int, float] | NDArray[np.float64] | None = None,
                upper_bound: float | Callable[[], float | None] | None = None, inner_iterations: int = 3,
                patience: int = 8, max_iterations: int = 10**9, on_improvement: Callable[[int], None] | None = None,
                exact_table_limit: int = EXACT_TABLE_LIMIT, direction: str = "labelling",
                cycle_share: float = 0.25, price_reserve: float = 0.0, settle_share: float = SETTLE_SHARE,
                on_prices: Callable[[NDArray[np.float64]], None] | None = None) -> Bound:
    if not 0.0 <= cycle_share < 1.0:
        raise ValueError(f"cycle_share must be in [0, 1), got {cycle_share}")
    if not 0.0 <= price_reserve < 1.0:
        raise ValueError(f"price_reserve must be in [0, 1), got {price_reserve}")
    end = t0 + time_limit_s
    ms = MultiplierSearch(problem, initial_multipliers=initial_multipliers, upper_bound=upper_bound,
                          inner_iterations=inner_iterations, patience=patience, exact_table_limit=exact_table_limit,
                          direction=direction, on_improvement=on_improvement,
                          settle_s=settle_share * (1.0 - price_reserve) * time_limit_s)
    dual = ms.dual
    detail: dict[str, Any] = {"pruned_strategies": ms.pruned, "binding_steps": len(ms.steps)}
    if not ms.active:
        value, exact = dual.bound(ms.unary, iterations=10**9, deadline=end, patience=5)
        detail.update(iterations=0, exact_inner=exact)
        status = "infeasible" if value == math.inf else ("optimal" if exact else "bound-only")
        return _bound("lagrangian", value, status, t0, "ve" if exact else "trw-s", detail)
    # the caller's priced search gets its reserve only where there are prices to search from
    end -= price_reserve * time_limit_s
    time_limit_s -= price_reserve * time_limit_s
    # the last share of the time tightens the best multipliers' bound with cycles (not needed
    # when the core is solved exactly)
    will_tighten = cycle_share > 0 and not dual.solves_core_exactly
    deadline = end - cycle_share * time_limit_s if will_tighten else end
    tightened = not will_tighten
    while True:
        ms.run(deadline, max_iterations)
        if ms.status == "infeasible":
            detail.update(iterations=ms.iterations, reason="no admissible assignment")
            return _bound("lagrangian", math.inf, "infeasible", t0, "trw-s", detail)
        if tightened or ms.status is not None or cancel.expired(end) or ms.best == -math.inf:
            break
        ms.best = _tighten_at(problem, dual, ms.steps, ms.best_lam, ms.lo, ms.hi, ms.unary, ms.theta, int(ms.best),
                              end, detail, on_improvement)
        tightened = True
        # a tightening that ends early (no cycle found, or converged) leaves its time to the multipliers
        deadline = end
        ms.lam = ms.best_lam.copy()
    best_lam, steps = ms.best_lam, ms.steps
    prices = ms.weights()
    if on_prices is not None and prices is not None:
        on_prices(prices)
    nz = np.nonzero(best_lam > 0)[0]
    detail.update(iterations=ms.iterations, exact_inner=ms.exact_inner, positive_multipliers=len(nz),
                  multipliers={str(int(steps[i])): float(best_lam[i]) for i in nz[np.argsort(-best_lam[nz])][:500]})
    return _bound("lagrangian", ms.best, "bound-only", t0, "trw-s", detail)


def _tighten_at(problem: IntraopProblem, dual: CoreDual, steps: NDArray[np.int64], lam: NDArray[np.float64],
                lo: NDArray[np.int64], hi: NDArray[np.int64], unary: NDArray[np.int64], theta: NDArray[np.int64],
                best: int, end: float, detail: dict[str, Any],
                on_improvement: Callable[[int], None] | None) -> int:
    """The Lagrangian bound at multipliers ``lam`` with the core's certificate tightened by cycles (>= ``best``)."""
    from gapstop.problems.intraop.cycles import tighten
    M = problem.usage_limit
    assert M is not None
    w, lam_sum = _steps_weights(steps, lam, lo, hi)
    BK.penalty_unary(unary, problem.node_usage, problem.node_ptr, w, theta)
    offset = math.ceil(M * lam_sum)
    # messages are warm from the last multipliers; passes settle them at these. The cycle
    # search needs near-converged messages more than the certificate does (its value stops
    # rising sooner): stopping at a stalled certificate left A at 60 s with a third of the cycles
    left = end - time.perf_counter()
    inner, _ = dual.bound(theta, iterations=10**9, deadline=time.perf_counter() + 0.2 * left, patience=10**9,
                          certify_every=10)
    if inner == math.inf:
        return best
    base = dual.last_base

    def report(core_value: int) -> None:
        if on_improvement is not None and base + core_value - offset > best:
            on_improvement(base + core_value - offset)

    res = tighten(dual, deadline=end, on_improvement=report)
    value = int(inner) - offset if res is None else base + res.value - offset
    detail.update(cycles=0 if res is None else res.cycles, cycle_gain=0 if res is None else res.gain,
                  cycle_sweeps=0 if res is None else res.sweeps)
    return max(best, value)


def multiplier_weights(problem: IntraopProblem, time_limit_s: float, *,
                       upper_bound: float | Callable[[], float | None] | None = None) -> NDArray[np.float64] | None:
    """Per-node usage prices from the best Lagrangian multipliers found in ``time_limit_s`` seconds.

    ``w_v = sum of lambda_t over v's interval`` (cost units per usage unit): the price
    the Lagrangian bound puts on node ``v``'s usage, a starting point for penalty
    searches. The multiplier steps aim at ``upper_bound`` (a known feasible cost, or a
    function returning the current one, e.g. a running search's incumbent) when given.
    Returns float64[n], or None when the instance has no usage limit or no step where it
    can bind.
    """
    end = time.perf_counter() + time_limit_s
    ms = MultiplierSearch(problem, upper_bound=upper_bound)
    ms.run(end)
    return ms.weights()


def _exact(problem: IntraopProblem, time_limit_s: float, t0: float, *, num_workers: int = 2, seed: int = 0,
           params: dict[str, Any] | None = None) -> Bound:
    prep = prepare_bounds(problem)
    unary, pruned = memory_pruned_unary(problem)
    value, status, detail = solve_cpsat(prep, unary, max(0.01, time_limit_s - (time.perf_counter() - t0)),
                                        num_workers=min(num_workers, 2), seed=seed, params=params)
    detail["pruned_strategies"] = pruned
    return _bound("exact", value, status, t0, "cp-sat", detail)


def _elimination(problem: IntraopProblem, time_limit_s: float, t0: float, **kw: Any) -> Bound:
    from gapstop.problems.intraop.elimination import DEFAULT_TABLE_LIMIT, find_opt_strategy
    r = find_opt_strategy(problem, table_limit=kw.get("table_limit", DEFAULT_TABLE_LIMIT), time_limit_s=time_limit_s,
                          prune_memory=kw.get("prune_memory", True), decode=False)
    status = ("infeasible" if r.value == math.inf else "optimal" if r.optimal
              else "relaxation-optimal" if r.exact else "bound-only")
    solver = "bucket elimination" if r.exact else "mini-bucket elimination"
    return _bound("elimination", r.value, status, t0, solver, r.detail())


def lower_bound(problem: IntraopProblem, method: str, time_limit_s: float = 60.0, **kw: Any) -> Bound:
    """Compute a certified lower bound on the optimum of ``problem``.

    Args:
        problem: the instance.
        method: one of :data:`METHODS`.
        time_limit_s: wall-clock budget in seconds (``trivial`` ignores it; the others
            stop at the first check after it and keep the best value certified so far).
        **kw: method options. ``unconstrained``: ``iterations``, ``patience`` (TRW-S passes),
            ``exact_table_limit`` (0 forces the dual bound even on tiny cores; also for ``lagrangian``).
            ``lagrangian``: ``initial_multipliers`` (``{time_step: lambda}`` or an array over
            time steps, a warm start), ``upper_bound`` (a known feasible cost, or a function
            returning the current one or None, used as the Polyak step target),
            ``inner_iterations``, ``patience``, ``max_iterations``, ``on_improvement(value)``,
            ``direction`` (``"labelling"``, the default, or ``"dual"``: which supergradient
            steers the steps, see ``_step_direction``), ``cycle_share`` (default 0.25: this
            share of the time, when the core is not solved exactly, goes to tightening the
            best multipliers' bound with frustrated cycles, see :mod:`problems.intraop.cycles`;
            0 turns it off), ``price_reserve`` (default 0: this share of the time is left
            unused when the usage limit can bind, for the caller's search from the prices;
            the bound then ends that much sooner) and ``on_prices(prices)`` (called once at
            the end, when the limit can bind, with the usage prices of the best multipliers,
            float64[n] as :meth:`MultiplierSearch.weights`). ``exact``: ``num_workers`` (at most 2), ``seed``, ``params``
            (CP-SAT parameter overrides). ``elimination``: ``table_limit`` (entries of the
            largest factor table built exactly), ``prune_memory`` (default True: strategies that
            can never fit are excluded first, as for ``lagrangian``).

    Returns:
        A :class:`~engine.records.Bound`; ``value`` is a Python int, ``math.inf`` when the
        instance was proven to have no feasible solution, or ``-inf`` when nothing was proven.

    Raises:
        ValueError: unknown method.
    """
    t0 = time.perf_counter()
    if method == "trivial":
        return _trivial(problem, time_limit_s, t0)
    if method == "unconstrained":
        return _unconstrained(problem, time_limit_s, t0, **kw)
    if method == "lagrangian":
        return _lagrangian(problem, time_limit_s, t0, **kw)
    if method == "exact":
        return _exact(problem, time_limit_s, t0, **kw)
    if method == "elimination":
        return _elimination(problem, time_limit_s, t0, **kw)
    raise ValueError(f"unknown bound method {method!r}; choose one of {', '.join(METHODS)}")
