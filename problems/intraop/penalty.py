"""The adaptive penalty search (contest winner's Algorithm 1) as a step-wise object.

The usage limit is moved into the objective as a per-node penalty
``w_v * m_v(s_v)``. Each iteration solves the relaxed problem (warm-started
from the previous assignment, after its greedy polish when it was feasible), then

* feasible: polish with greedy swaps, keep it if it is the best so far, and
  lower every weight (``w *= down``) to promote cheaper strategies;
* over the limit: try a greedy repair (kept if it yields a better feasible
  solution), and raise the weights of the nodes live at some violated step
  (``w_v *= up``).

Until the first feasible solution the weights are raised globally by 10x per
iteration, as the paper's log-scale initialisation. Small random factors keep
parallel searches apart. A :class:`PenaltySearch` knows nothing about threads
or Ray: drivers call :meth:`PenaltySearch.step` with a time budget and read
:meth:`PenaltySearch.best`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.engine import cancel
from gapstop.problems.intraop import repair as greedy
from gapstop.problems.intraop.evaluate import evaluate, usage_profile
from gapstop.problems.intraop.relaxed import Prepared, RelaxedSolver

#: Iterations without a new best before a search restarts from its best point, perturbed.
#: Instance A ends either near 1.0002 x the best known cost or near 1.003 (a worse basin a
#: search does not leave); restarting after 30 reaches the better one far more often than never
#: restarting or restarting after 15 (docs/decisions/0020-intraop-penalty-restart.md).
RESTART_AFTER = 30
#: A restart's relaxed solve starts TRW-S from zero messages and runs this many iterations (a fixed
#: count keeps a seed's result reproducible): 0.2 s on instance C's core, 1.4 s on M's, 2.2 s on
#: S's, against about 1, 2.4 and 4.8 s for the 30 iterations before a restart.
RESTART_TRWS = 128
#: Cap on the accelerated lowering of the weights after feasible relaxed solutions in a row.
MAX_STREAK = 8


@dataclass(frozen=True)
class Found:
    """A feasible solution produced by a search.

    Attributes:
        cost: exact cost (Python int) from the evaluator.
        solution: int64[n] strategy indices (read-only copy).
        iteration: search iteration that produced it.
        weight_scale: geometric mean of the live nodes' weights at that time.
    """

    cost: int
    solution: NDArray[np.int64] = field(repr=False)
    iteration: int
    weight_scale: float


class PenaltySearch:
    """One adaptive-penalty search; call :meth:`step` repeatedly.

    Args:
        prep: the prepared instance (shared, read-only).
        weight: initial weights: a scalar (uniform) or float64[n].
        seed: seeds this search's generator (weights jitter, forest orders).
        up: factor for the weights of nodes live at a violated step.
        down: factor for all weights after a feasible relaxed solution.
        jitter: relative size of the random perturbation of every update.
        min_weight: floor for raised weights.
        max_streak: after ``j`` feasible relaxed solutions in a row the weights are lowered by
            ``down ** min(j, max_streak)``, so that a search started far above the scale where the
            limit binds gets there in a few iterations instead of a hundred (1: always ``down``).
        restart_after: after this many iterations without a new best, go back to the
            best solution and the weights that produced it, strongly perturbed (0: never).
            Default :data:`RESTART_AFTER`.
        restart_trws: TRW-S iterations of a restart's solve, from zero messages (0: warm
            messages and the usual iterations). Default :data:`RESTART_TRWS`.
        warm_from_polished: start the next relaxed solve from the greedily polished
            solution instead of the raw relaxed one.
        solve_options: keyword arguments for :meth:`RelaxedSolver.solve` (sweep and TRW-S effort).
    """

    def __init__(self, prep: Prepared, weight: float | NDArray[np.float64], seed: int, *,
                 up: float = 1.6, down: float = 0.93, jitter: float = 0.05, min_weight: float = 1e-3,
                 max_streak: int = MAX_STREAK, restart_after: int | None = None,
                 restart_trws: int = RESTART_TRWS, warm_from_polished: bool = True, solve_options: dict[str, Any] | None = None) -> None:
        self.prep = prep
        self.rng = np.random.default_rng(seed)
        n = prep.problem.n
        w = np.full(n, float(weight)) if np.isscalar(weight) else np.array(weight, dtype=np.float64)
        self.up, self.down, self.jitter, self.min_weight = up, down, jitter, min_weight
        self.max_streak = max(1, max_streak)
        self._streak = 0
        self.solve_options = dict(solve_options or {})
        self.restart_after = RESTART_AFTER if restart_after is None else restart_after
        self.warm_from_polished = warm_from_polished
        self.restart_trws = restart_trws
        self._best_weight: NDArray[np.float64] | None = None
        self._last_gain = 0
        self.live = prep.live
        self.weight = w * self._noise(n) * self.live
        self.solver = RelaxedSolver(prep)
        self.tracker = greedy.UsageTracker(prep)
        self.current: NDArray[np.int64] | None = None
        self.iterations = 0
        self.feasible_relaxed = 0
        self._best: Found | None = None

    def _noise(self, size: int) -> NDArray[np.float64]:
        return np.exp(self.rng.normal(0.0, self.jitter, size=size)) if self.jitter > 0 else np.ones(size)

    def best(self) -> Found | None:
        """The best feasible solution found so far, or None."""
        return self._best

    def _offer(self, sol: NDArray[np.int64]) -> Found | None:
        greedy.improve(self.tracker, sol)
        ev = evaluate(self.prep.problem, sol)
        if not ev.feasible or ev.cost is None:
            return None
        if self._best is None or ev.cost < self._best.cost:
            s = sol.copy()
            s.flags.writeable = False
            live_w = self.weight[self.live]
            scale = float(np.exp(np.mean(np.log(np.maximum(live_w, 1e-300))))) if len(live_w) else 0.0
            self._best = Found(ev.cost, s, self.iterations, scale)
            self._best_weight = self.weight.copy()
            self._last_gain = self.iterations
            return self._best
        return None

    def iterate(self) -> Found | None:
        """One relaxed solve and weight update; returns a new best solution if it found one."""
        problem = self.prep.problem
        opts = self.solve_options
        if (self.restart_after and self._best is not None
                and self.iterations - self._last_gain >= self.restart_after):
            self._last_gain = self.iterations
            assert self._best_weight is not None
            self.weight = self._best_weight * np.exp(self.rng.normal(0.0, 0.3, size=problem.n))
            self.current = self._best.solution.copy()
            if self.restart_trws:
                opts = {**opts, "reset_messages": True, "trws_iterations": self.restart_trws}
        sol = self.solver.solve(self.weight, self.rng, self.current, **opts)
        self.current = sol
        self.iterations += 1
        limit = problem.usage_limit
        prof = usage_profile(problem, sol)
        over = prof > limit if limit is not None else np.zeros(len(prof), dtype=bool)
        if not over.any():
            self.feasible_relaxed += 1
            polished = sol.copy()
            found = self._offer(polished)
            if self.warm_from_polished:
                self.current = polished
            self._streak += 1
            self.weight *= self.down ** min(self._streak, self.max_streak) * self._noise(problem.n)
            return found
        self._streak = 0
        found = None
        cand = sol.copy()
        if greedy.repair(self.tracker, cand):
            found = self._offer(cand)
        if self._best is None and self.feasible_relaxed == 0:
            self.weight = np.maximum(self.weight, self.min_weight) * 10.0 * self.live
        else:
            cum = np.concatenate([[0], np.cumsum(over)])
            hit = cum[problem.end] > cum[problem.start]
            factor = self.up * self._noise(int(hit.sum()))
            self.weight[hit] = np.maximum(self.weight[hit], self.min_weight) * factor
        return found

    def step(self, budget_s: float) -> list[Found]:
        """Iterate for about ``budget_s`` seconds (at least once); returns the improvements in order."""
        deadline = time.perf_counter() + budget_s
        out: list[Found] = []
        while True:
            f = self.iterate()
            if f is not None:
                out.append(f)
            if cancel.expired(deadline):
                return out


def run_until(search: PenaltySearch, deadline: float, report: Callable[[Found], None],
              should_stop: Callable[[], bool] = lambda: False, slice_s: float = 1.0) -> None:
    """Step ``search`` until ``deadline`` (``time.perf_counter()`` seconds) or ``should_stop()``
    (asked every ``slice_s`` seconds at most), passing each of its new bests to ``report``."""
    while not cancel.expired(deadline) and not should_stop():
        for f in search.step(min(slice_s, deadline - time.perf_counter())):
            report(f)
