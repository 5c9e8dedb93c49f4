"""CP-SAT large-neighbourhood search around a pipeline partition.

A neighbourhood is a window of ``w`` adjacent stages ``a .. a+w-1`` (labels in DAG order
of the quotient graph, 0..k-1, empty stages included): the nodes of those stages may move
to any stage of the window, every other node stays where it is. The sub-problem is the
exact MIP (:func:`problems.pipeline._mip.build_partition_model`, Archer et al. 2024,
Fig. 3) with only the window's stages costed and every other node fixed, built over the
free nodes alone (``label_range``: the fixed nodes' ``y`` are constants; at k = 16 on the
REGAL-style graphs that makes 1.4-2.5x as many sub-solves per second as the full model with
fixed domains, BENCHMARKS.md), hinted with the current partition and solved by CP-SAT for
a short time. The stages outside the window keep their node sets, and (with the window's
nodes never in them) their cut tensors and hence their costs: minimising the window's
bottleneck can only lower or keep the partition's bottleneck, so plateau moves (a lower
window bottleneck, the same objective) are kept too; they free room for the next window.

Every partition the sub-problem returns is re-scored by the exact evaluator
(:func:`problems.pipeline.evaluate.evaluate`) and kept only if that score of the window's
bottleneck went down and the objective did not go up: the model's integer costs are
rounded down (:mod:`problems.pipeline._mip`) and, with a memory limit, bound the peak
instead of scheduling it, so its own value is never trusted.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline import _mip
from gapstop.problems.pipeline.evaluate import Evaluation, evaluate
from gapstop.problems.pipeline.model import PipelineProblem

#: seconds of one sub-problem solve (CP-SAT, one thread); most windows of 2-3 stages on the
#: REGAL-style graphs (50-200 nodes) are solved to optimality well within it
SOLVE_S = 1.0
#: nodes a sub-problem frees at first (:attr:`StageLNS.max_free`); at k = 4 a window of two
#: stages of a 150-node REGAL-style graph (75 free nodes) is rarely proven within a second
START_FREE = 40
#: fewest nodes a sub-problem frees when sub-solves time out
MIN_FREE = 8
#: relative decrease of the window's bottleneck below which a move counts as no move
#: (the evaluator's float sums differ in the last bits between summation orders)
MIN_GAIN = 1e-9


#: windows pay where the average stage holds at most this many nodes: a window of two stages
#: is then proven within a second or so. Above it (e.g. k = 4 on a 170-node REGAL-style graph) the
#: full MIP hinted with the incumbent did better in the same time (15 s, 2 threads: 29746 against
#: 30038 from the same 32589 partition on regal_004); at 18 nodes per stage (regal_000, k = 4)
#: the two were even (7296 and 7302)
MAX_NODES_PER_STAGE = 25


def windows_pay(problem: PipelineProblem, k: int) -> bool:
    """Whether stage windows are small enough to be the main search (:data:`MAX_NODES_PER_STAGE`),
    and the graph has no memory limit: with one, building the model's peak-memory rows takes
    Python seconds per window (gpt2: 3.3 s, lstm_lm_unrolled: 32 s for a window of 2 of 16
    stages), and the model only bounds the peak."""
    return problem.memory is None and problem.n <= MAX_NODES_PER_STAGE * k


def lns_share(problem: PipelineProblem, k: int, where_pays: float, elsewhere: float) -> float:
    """An island's LNS time share: ``where_pays`` where windows pay, ``elsewhere`` where they
    are merely large, 0 with a memory limit (see :func:`windows_pay`)."""
    if problem.memory is not None:
        return 0.0
    return where_pays if windows_pay(problem, k) else elsewhere


@dataclass(frozen=True)
class Move:
    """One sub-problem solve: the window, whether CP-SAT proved it, and the result if kept."""

    start: int
    width: int
    status: str
    improved: Evaluation | None


def stage_costs(ev: Evaluation, k: int) -> NDArray[np.float64]:
    """Cost of each of the k stages of ``ev`` (its labels are already in DAG order; empty: 0)."""
    out = np.zeros(k)
    out[: len(ev.block_costs)] = ev.block_costs
    return out


class StageLNS:
    """Large-neighbourhood search over windows of adjacent stages, for one instance and k.

    Args:
        problem, k: the instance (at most k stages).
        rng: chooses windows among equals and the sub-solves' seeds.
        max_width: widest window tried (stages); at most k - 1 (for k > 2).
        num_workers: CP-SAT threads per sub-solve.
    The current partition is :attr:`current` (an exact :class:`Evaluation`, or None before
    :meth:`reset`).
    """

    def __init__(self, problem: PipelineProblem, k: int, rng: np.random.Generator, *, max_width: int = 4,
                 num_workers: int = 1) -> None:
        self.problem, self.k, self.rng = problem, k, rng
        # a window of all k stages is the exact MIP itself, which runs as a bound job
        self.max_width = max(1, min(k - 1 if k > 2 else k, max_width))
        self.num_workers = num_workers
        self.cp_params: dict[str, Any] | None = None
        self.sc = _mip.scale(problem)
        self.current: Evaluation | None = None
        # windows (start, width, band) solved from ``current`` without a gain
        self._tried: set[tuple[int, int, int]] = set()
        #: most nodes a sub-problem frees (the band around the window's inner boundaries):
        #: adapted so that sub-solves are mostly proven within their time
        self.max_free = min(problem.n, START_FREE)
        self.solves = 0

    def reset(self, blocks: NDArray[np.int64] | list[int], order: NDArray[np.int32] | list[int] | None = None) -> None:
        """Start from the partition ``blocks`` (any labels of an acyclic partition into <= k stages)."""
        self.current = evaluate(self.problem, blocks, order, k=self.k)
        self._tried.clear()

    def windows(self) -> list[tuple[int, int]]:
        """Windows ``(start, width)`` not yet tried from :attr:`current` with the current band
        (:attr:`max_free`), best candidates first: narrowest first (cheap), then around the
        costliest stages first. When none is left the band widens, up to all nodes."""
        assert self.current is not None
        while True:
            out = self._windows()
            if out or self.max_free >= self.problem.n:
                return out
            self.max_free = min(self.problem.n, math.ceil(1.5 * self.max_free))

    def _band(self, a: int, w: int) -> int:
        """The tried-key band of window (a, w): -1 when it frees all its nodes."""
        assert self.current is not None
        inside = int(((self.current.blocks >= a) & (self.current.blocks < a + w)).sum())
        return -1 if inside <= self.max_free else self.max_free

    def _windows(self) -> list[tuple[int, int]]:
        assert self.current is not None
        costs = stage_costs(self.current, self.k)
        ranked = np.lexsort((self.rng.random(self.k), -costs))
        used = len(self.current.block_costs)
        out: list[tuple[int, int]] = []
        for w in range(2, self.max_width + 1):
            for t in ranked:
                starts = [a for a in range(int(t) - w + 1, int(t) + 1) if 0 <= a and a + w <= self.k]
                self.rng.shuffle(starts)
                # a window must hold a node (the empty stages are the last ones)
                out += [(a, w) for a in starts
                        if a < used and (a, w, self._band(a, w)) not in self._tried and (a, w) not in out]
        return out

    def free_nodes(self, a: int, w: int) -> NDArray[np.bool_]:
        """The nodes window (a, w) frees: all of its nodes, or the :attr:`max_free` of them
        nearest (in the schedule) to a boundary between two of its stages."""
        assert self.current is not None
        labels, order = self.current.blocks, self.current.order
        inside = (labels >= a) & (labels < a + w)
        if int(inside.sum()) <= self.max_free:
            return inside
        pos = np.empty(self.problem.n, dtype=np.int64)
        pos[order] = np.arange(self.problem.n)
        cuts = [int(pos[labels == b].min()) for b in range(a + 1, a + w) if (labels == b).any()]
        if not cuts:
            return inside
        dist = np.min(np.abs(pos[:, None] - np.array(cuts)[None, :]), axis=1).astype(np.float64)
        dist[~inside] = np.inf
        free = np.zeros(self.problem.n, dtype=bool)
        free[np.argsort(dist, kind="stable")[: self.max_free]] = True
        return free

    def solve_window(self, start: int, width: int, time_s: float = SOLVE_S,
                     should_stop: Callable[[], bool] | None = None) -> Move:
        """Solve the window's sub-problem from :attr:`current`; keep its result if better."""
        assert self.current is not None
        cur = self.current
        labels = cur.blocks
        k, a, w = self.k, start, width
        band = self._band(a, w)
        free = self.free_nodes(a, w)
        # a free node may take any stage of the window, every other node stays where it is;
        # only the free nodes' y inside the window are variables
        ranges = [(a, a + w - 1) if free[v] else (int(labels[v]), int(labels[v])) for v in range(self.problem.n)]
        pm = _mip.build_partition_model(self.problem, self.sc, k, costed=list(range(a + 1, a + w + 1)),
                                        label_range=ranges)
        costs = stage_costs(cur, k)
        # the current window is feasible at its rounded-down integer bottleneck; nothing worse is wanted
        cap = pm.scaled.floor_of(Fraction(float(costs[a:a + w].max())))
        pm.model.add(pm.objective <= cap)
        _mip.add_hint(pm, self.problem, labels.tolist())
        status, _, solver, wall = _mip.solve(pm, self.problem.n, time_limit_s=time_s, num_workers=self.num_workers,
                                          random_seed=int(self.rng.integers(1 << 30)), should_stop=should_stop,
                                             cp_params=self.cp_params)
        self.solves += 1
        improved = None
        if status in ("optimal", "feasible"):
            new = np.asarray(_mip.labels_from(pm, solver.value), dtype=np.int64)
            # the schedule: the current one, stage by stage (topological: the stages are in DAG
            # order, the old schedule is topological), so that the stages outside the window
            # keep their schedules, hence their costs, also with a memory limit
            pos = np.empty(self.problem.n, dtype=np.int64)
            pos[cur.order] = np.arange(self.problem.n)
            order = np.lexsort((pos, new)).astype(np.int32)
            ev = evaluate(self.problem, new, order, k=k)
            # the window's nodes fill exactly the window's non-empty stages (evaluate renumbers
            # the stages when one empties)
            moved = (labels >= a) & (labels < a + w)
            old_w = float(costs[a:a + w].max())
            new_w = float(ev.block_costs[np.unique(ev.blocks[moved])].max())
            if new_w < old_w * (1.0 - MIN_GAIN) and ev.objective <= cur.objective:
                improved = ev
        if status in ("optimal", "infeasible"):
            if wall < 0.25 * time_s and band != -1:
                self.max_free = min(self.problem.n, math.ceil(1.3 * self.max_free))
        else:   # not proven in time: next time free fewer than now
            self.max_free = max(MIN_FREE, int(0.7 * min(self.max_free, int(free.sum()))))
        if improved is not None:
            self.current = improved
            self._tried.clear()
        else:
            # proven locally optimal, or not solved in time: either way not again from here
            self._tried.add((a, w, band))
        return Move(a, w, status, improved)

    def run(self, budget_s: float, should_stop: Callable[[], bool] = lambda: False,
            solve_s: float = SOLVE_S) -> list[Move]:
        """Solve windows for about ``budget_s`` seconds (at least one solve); returns the moves.

        When every window has been tried from :attr:`current` without a gain, it stops
        early (nothing left to try until :meth:`reset`)."""
        assert self.current is not None
        t_end = time.monotonic() + budget_s
        moves: list[Move] = []
        while not should_stop():
            cands = self.windows()
            if not cands:
                break
            a, w = cands[0]
            left = t_end - time.monotonic()
            # a wider window is a larger model: it gets proportionally more time
            moves.append(self.solve_window(a, w, max(0.05, min(solve_s * (w - 1), left)), should_stop))
            if time.monotonic() >= t_end:
                break
        return moves

    @property
    def exhausted(self) -> bool:
        """Every window has been tried from :attr:`current` without a gain."""
        return self.current is not None and not self.windows()
