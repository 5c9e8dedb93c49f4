"""Searches that stay inside the MCM constraints: every candidate goes through the
constraint solver (:class:`problems.pipeline.constraints.ConstraintSolver`).

* :class:`RandomSearch`: a uniform distribution and SAMPLE (Xie et al. 2022, §5.1);
* :class:`AnnealingSearch`: simulated annealing on the per-node distributions, as the
  paper describes it: each iteration draws fresh random distributions for a random set
  of nodes, SAMPLE turns them into a valid partition, and the Metropolis rule on its
  cost decides whether the new distributions are kept;
* :class:`BrkgaFixSearch`: the unconstrained BRKGA with Kahn + SliceGraph decoding; a
  contiguous slicing of a topological order already meets the ring order and uses a
  prefix of the chips (equation 3), and FIX (in that order) repairs empty chips (under
  ``all_chips``), triangles and memory.

Each is an island with ``step(budget_s, on_improvement, should_stop) -> evaluations``
(see :mod:`engine.workers`); improvements are reported as
:class:`~problems.pipeline.decoder.Split` objects whose ``blocks`` are the chips.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.brkga import BRKGA
from gapstop.engine.driver import run_ask_tell
from gapstop.engine.search import KeyBatch
from gapstop.problems.pipeline.constraints import Constraints, ConstraintSolver, Outcome
from gapstop.problems.pipeline.decoder import SliceDecoder, Split
from gapstop.problems.pipeline.evaluate import canonical_order
from gapstop.problems.pipeline.model import PipelineProblem


class _Island:
    """Best-so-far bookkeeping and the time-boxed ``step`` loop shared by the searches."""

    def __init__(self, problem: PipelineProblem, constraints: Constraints, rng: np.random.Generator) -> None:
        self.problem = problem
        self.solver = ConstraintSolver(problem, constraints)
        self.rng = rng
        self.best_cost = math.inf
        self.best_chips: NDArray[np.int64] | None = None
        self.evals = 0
        self._improved = False
        self._deadline = math.inf  # the running step's end (monotonic clock)
        self._stop: Callable[[], bool] = lambda: False

    def _offer(self, out: Outcome) -> float:
        """Cost of a solver outcome (inf unless valid); remembers a new best."""
        self.evals += 1
        if not out.valid or out.objective is None or out.chips is None:
            return math.inf
        if out.objective < self.best_cost:
            self.best_cost, self.best_chips = out.objective, out.chips.copy()
            self._improved = True
        return out.objective

    def _iterate(self) -> None:
        raise NotImplementedError

    def best(self) -> tuple[float, Split | None]:
        if self.best_chips is None:
            return math.inf, None
        order = canonical_order(self.problem, self.best_chips)
        return self.best_cost, Split(self.best_cost, self.best_chips.copy(), order, True)

    def step(self, budget_s: float, on_improvement: Callable[[float, Split], None] | None = None,
             should_stop: Callable[[], bool] = lambda: False) -> int:
        """Search for about ``budget_s`` seconds (at least one iteration); returns candidates made."""
        t_end = time.monotonic() + budget_s
        self._deadline, self._stop = t_end, should_stop
        start = self.evals
        while not should_stop():
            self._improved = False
            self._iterate()
            if self._improved and on_improvement is not None:
                value, split = self.best()
                if split is not None:
                    on_improvement(value, split)
            if time.monotonic() >= t_end:
                break
        return self.evals - start


class RandomSearch(_Island):
    """Uniform distribution + SAMPLE, a random topological order each time."""

    def _iterate(self) -> None:
        self._offer(self.solver.sample(None, None, self.rng))


class AnnealingSearch(_Island):
    """Simulated annealing over per-node distributions (see the module docstring).

    Args:
        move_share: share of the nodes that get a fresh random distribution per iteration.
        t0_share: initial temperature as a share of the first valid cost.
        cooling: temperature factor per iteration.
    """

    def __init__(self, problem: PipelineProblem, constraints: Constraints, rng: np.random.Generator, *,
                 move_share: float = 0.05, t0_share: float = 0.05, cooling: float = 0.999) -> None:
        super().__init__(problem, constraints, rng)
        c = constraints.chips
        self.probs = np.full((problem.n, c), 1.0 / c)
        self.current = math.inf
        self.temperature: float | None = None
        self.move = max(1, int(round(move_share * problem.n)))
        self.t0_share, self.cooling = t0_share, cooling

    def _iterate(self) -> None:
        cand = self.probs.copy()
        nodes = self.rng.choice(self.problem.n, size=self.move, replace=False)
        cand[nodes] = self.rng.dirichlet(np.ones(cand.shape[1]), size=len(nodes))
        cost = self._offer(self.solver.sample(cand, None, self.rng))
        if not math.isfinite(cost):
            return
        if self.temperature is None:
            self.temperature = self.t0_share * cost
        accept = cost <= self.current or (
            self.temperature > 0 and self.rng.random() < math.exp(-(cost - self.current) / self.temperature))
        if accept:
            self.probs, self.current = cand, cost
        self.temperature *= self.cooling


#: share of a BRKGA + FIX island's time its CP-SAT repairs may take (:meth:`BrkgaFixSearch.repair`)
CLOSEST_SHARE = 0.3


class BrkgaFixSearch(_Island):
    """BRKGA on node priorities; Kahn + SliceGraph decode, then FIX along the same order.

    Args:
        population: BRKGA population.
        seeds: optional key vectors for the first generation, or a callable returning them
            (evaluated when the island is built).
    """

    def __init__(self, problem: PipelineProblem, constraints: Constraints, rng: np.random.Generator, *,
                 population: int = 100, seeds: NDArray[np.float64] | Callable[[], NDArray[np.float64]] | None = None,
                 closest_share: float = CLOSEST_SHARE) -> None:
        super().__init__(problem, constraints, rng)
        self.decoder = SliceDecoder(problem, constraints.chips)
        self.ga = BRKGA(problem.n, rng, population=population, seeds=seeds() if callable(seeds) else seeds)
        self.kept = 0  # proposed chips FIX kept, summed over candidates
        self.closest_share = closest_share
        self._t0 = time.monotonic()
        self._closest_s = 0.0  # seconds spent in CP-SAT repairs

    def repair(self, keys: NDArray[np.float64]) -> list[Outcome]:
        """One key vector -> its SliceGraph split (stages 0..p-1 along the order, a prefix of
        the ring; made into exactly C stages with ``all_chips``) ->
        FIX in the split's order; and, when FIX had to move chips and the split is promising
        (its unconstrained cost is below the best valid one), CP-SAT's closest valid partition
        too, within :attr:`closest_share` of the island's time."""
        split = self.decoder.decode(keys)
        blocks = split.blocks
        if self.solver.constraints.all_chips:
            blocks = exactly(split.order, blocks, self.solver.constraints.chips)
        out = self.solver.fix(blocks, split.order, self.rng)
        self.kept += out.kept
        outs = [out]
        if self.closest_share > 0 and out.via == "propagation" and out.kept < self.problem.n and \
                split.value < self.best_cost and \
                self._closest_s <= self.closest_share * (time.monotonic() - self._t0):
            t = time.monotonic()
            outs.append(self.solver.closest(blocks, self.rng))
            self._closest_s += time.monotonic() - t
        return outs

    def _score(self, batch: KeyBatch) -> NDArray[np.float64]:
        costs = np.full(len(batch.keys), math.inf)
        for i, keys in enumerate(batch.keys):
            # a generation can take minutes where every FIX ends in CP-SAT: stop inside it when the
            # step's time is up (the rest count as unevaluated: worst, never elites)
            if i > 0 and (time.monotonic() >= self._deadline or self._stop()):
                break
            costs[i] = min(self._offer(o) for o in self.repair(keys))
        return costs

    def _iterate(self) -> None:
        run_ask_tell(self.ga, self._score, lambda: False, max_evals=1)

    def migrants(self, n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        return self.ga.elites(n)

    def accept_migrants(self, keys: NDArray[np.float64], costs: NDArray[np.float64]) -> None:
        self.ga.inject(keys, costs)


def exactly(order: NDArray[np.int32], blocks: NDArray[np.int64], c: int) -> NDArray[np.int64]:
    """A contiguous split of ``order`` into at most c stages, made into exactly c non-empty
    ones (n >= c) by halving the stage with the most nodes until there are c. Still a
    contiguous split of a topological order: edges go to the same or a later stage."""
    pos_blocks = blocks[order]
    starts = [0] + [i for i in range(1, len(order)) if pos_blocks[i] != pos_blocks[i - 1]]
    bounds = starts + [len(order)]
    while len(bounds) - 1 < c:
        sizes = np.diff(bounds)
        j = int(np.argmax(sizes))
        if sizes[j] < 2:
            break
        bounds.insert(j + 1, bounds[j] + int(sizes[j]) // 2)
    out = np.empty(len(order), dtype=np.int64)
    for b in range(len(bounds) - 1):
        out[order[bounds[b]:bounds[b + 1]]] = b
    return out


def make_constrained_search(problem: PipelineProblem, constraints: Constraints, rng: np.random.Generator,
                            index: int, *, population: int = 100,
                            seeds: Callable[[], NDArray[np.float64]] | None = None) -> Any:
    """Island ``index``: BRKGA + FIX, simulated annealing, random search, in turn."""
    kind = index % 3
    if kind == 0:
        return BrkgaFixSearch(problem, constraints, rng, population=population, seeds=seeds)
    if kind == 1:
        return AnnealingSearch(problem, constraints, rng)
    return RandomSearch(problem, constraints, rng)
