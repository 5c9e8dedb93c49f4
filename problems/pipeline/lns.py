"""CP-SAT large-neighbourhood search around a pipeline partition.

A neighbourhood is a window of ``w`` stages that is convex in the quotient graph (no path
between two of its stages passes through a stage outside it): the nodes of those stages may
move to any stage of the window, every other node stays where it is. A convex set of stages
is contiguous in some topological order of the quotient graph (its outside ancestors, and
every stage labelled below it, first; then the window; then the rest), so the stages are
relabelled in that order and the window becomes ``w`` adjacent labels ``a .. a+w-1``.
Windows of adjacent labels of the current numbering (labels in DAG order of the quotient
graph, 0..k-1, empty stages included) are the identity case; the others are stages around a
costly one, connected by tensors, that another numbering of the same partition makes
adjacent (at k = 16 a partition has dozens of such windows beside the adjacent ones, and they
let the LNS lower objectives where adjacent labels alone stall: docs/decisions/0006-lns-windows.md).

The sub-problem is the exact MIP (:func:`problems.pipeline._mip.build_partition_model`,
Archer et al. 2024, Fig. 3) with only the window's stages costed and every other node fixed,
built over the free nodes alone (``label_range``: the fixed nodes' ``y`` are constants; at
k = 16 on the REGAL-style graphs that makes 1.4-2.5x as many sub-solves per second as the
full model with fixed domains, docs/decisions/0006-lns-windows.md), hinted with the current
partition and solved by CP-SAT for a short time. The stages outside the window keep their node sets, and (with the window's
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
    #: the window's stages, in the labels of the partition it was solved from
    stages: tuple[int, ...] = ()


def stage_costs(ev: Evaluation, k: int) -> NDArray[np.float64]:
    """Cost of each of the k stages of ``ev`` (its labels are already in DAG order; empty: 0)."""
    out = np.zeros(k)
    out[: len(ev.block_costs)] = ev.block_costs
    return out


class StageLNS:
    """Large-neighbourhood search over windows of stages (convex in the quotient graph), for one
    instance and k.

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
        # windows (stages, band) solved from ``current`` without a gain
        self._tried: set[tuple[tuple[int, ...], int]] = set()
        # every window of ``current`` in the order tried, and its quotient graph (each built at
        # first use after a change)
        self._shapes: list[tuple[int, ...]] | None = None
        self._graph: tuple[NDArray[np.bool_], list[list[int]]] | None = None
        #: most nodes a sub-problem frees (the band around the window's inner boundaries):
        #: adapted so that sub-solves are mostly proven within their time
        self.max_free = min(problem.n, START_FREE)
        self.solves = 0

    def reset(self, blocks: NDArray[np.int64] | list[int], order: NDArray[np.int32] | list[int] | None = None) -> None:
        """Start from the partition ``blocks`` (any labels of an acyclic partition into <= k stages)."""
        self._set_current(evaluate(self.problem, blocks, order, k=self.k))

    def _set_current(self, ev: Evaluation) -> None:
        """Make ``ev`` the partition the windows are taken from; nothing tried from it yet."""
        self.current = ev
        self._tried.clear()
        self._shapes = None
        self._graph = None

    def windows(self) -> list[tuple[int, ...]]:
        """Windows (their stages, ascending labels of :attr:`current`) not yet tried from
        :attr:`current` with the current band (:attr:`max_free`), best candidates first:
        narrowest first (cheap), then around the costliest stages first, for each stage those
        of adjacent labels first. When none is left the band widens, up to all nodes."""
        assert self.current is not None
        while True:
            out = self._windows()
            if out or self.max_free >= self.problem.n:
                return out
            self.max_free = min(self.problem.n, math.ceil(1.5 * self.max_free))

    def _band(self, stages: tuple[int, ...]) -> int:
        """The tried-key band of a window: -1 when it frees all its nodes."""
        assert self.current is not None
        inside = int(np.isin(self.current.blocks, stages).sum())
        return -1 if inside <= self.max_free else self.max_free

    def _windows(self) -> list[tuple[int, ...]]:
        if self._shapes is None:
            self._shapes = self._all_windows()
        return [ws for ws in self._shapes if (ws, self._band(ws)) not in self._tried]

    def _all_windows(self) -> list[tuple[int, ...]]:
        """Every window of :attr:`current` in :meth:`windows`' order, whatever was tried: for each
        width and each stage by falling cost (ties at random), the windows of adjacent labels
        holding it (in random order), then the other convex ones holding it whose stages are
        connected by tensors (in random order; nodes move between stages that share one)."""
        assert self.current is not None
        cur, k = self.current, self.k
        costs = stage_costs(cur, k)
        ranked = [int(t) for t in np.lexsort((self.rng.random(k), -costs))]
        used = len(cur.block_costs)
        reach, near = self._quotient()
        # the stages each stage reaches, and those reaching it, as bit masks
        down = [sum(1 << int(b) for b in np.flatnonzero(reach[t])) for t in range(used)]
        up = [sum(1 << int(a) for a in np.flatnonzero(reach[:, t])) for t in range(used)]
        out: list[tuple[int, ...]] = []
        seen: set[tuple[int, ...]] = set()

        def convex(ws: tuple[int, ...]) -> bool:
            inside = after = before = 0
            for t in ws:
                inside |= 1 << t
                after |= down[t]    # reached from the window
                before |= up[t]     # reaching it
            return not (after & before & ~inside)

        for w in range(2, self.max_width + 1):
            # connected sets of w used stages, grown from each one by quotient neighbours
            grown: dict[int, list[tuple[int, ...]]] = {}
            for t in range(used):
                level = {(t,)}
                for _ in range(w - 1):
                    level = {tuple(sorted(ws + (u,))) for ws in level for v in ws for u in near[v] if u not in ws}
                grown[t] = sorted(level)
            for t in ranked:
                # a window must hold a node (the empty stages are the last ones)
                starts = [a for a in range(t - w + 1, t + 1) if 0 <= a and a + w <= k and a < used]
                self.rng.shuffle(starts)
                mine = [tuple(range(a, a + w)) for a in starts]
                if t < used:
                    others = [ws for ws in grown[t] if ws[-1] - ws[0] != w - 1 and convex(ws)]
                    self.rng.shuffle(others)
                    mine += others
                for ws in mine:
                    if ws not in seen:
                        seen.add(ws)
                        out.append(ws)
        return out

    def _quotient(self) -> tuple[NDArray[np.bool_], list[list[int]]]:
        """The quotient graph of :attr:`current`'s used stages (computed once per partition):
        (``reach[a, b]``: a path of at least one edge from a to b; each stage's neighbours,
        either way)."""
        assert self.current is not None
        if self._graph is not None:
            return self._graph
        used = len(self.current.block_costs)
        labels = self.current.blocks
        e = self.problem.edges
        a, b = labels[e[:, 0]], labels[e[:, 1]]
        cross = a != b
        reach = np.zeros((used, used), dtype=bool)
        reach[a[cross], b[cross]] = True
        near = [sorted(set(b[cross & (a == t)].tolist()) | set(a[cross & (b == t)].tolist())) for t in range(used)]
        for m in range(used):   # transitive closure (Warshall)
            reach |= reach[:, m:m + 1] & reach[m:m + 1, :]
        reach.flags.writeable = False
        self._graph = (reach, near)
        return self._graph

    def _layout(self, stages: tuple[int, ...]) -> tuple[NDArray[np.int64], int]:
        """(``new[label]``, ``a``): a renumbering of the stages in DAG order of the quotient graph in
        which ``stages`` (convex) are the adjacent labels ``a .. a+len(stages)-1``; the identity
        for stages of adjacent labels. First every stage labelled below the window's first or
        reaching one of its stages, then the window, then the rest, each in label order: no edge
        goes back (a stage reached from the window and reaching it would be inside it)."""
        assert self.current is not None
        k = self.k
        first = stages[0]
        if stages[-1] - first == len(stages) - 1:
            return np.arange(k, dtype=np.int64), first
        reach, _ = self._quotient()
        inside = np.zeros(k, dtype=bool)
        inside[list(stages)] = True
        before = np.zeros(k, dtype=bool)
        before[:len(reach)] = reach[:, list(stages)].any(axis=1)
        before[:first] = True
        before &= ~inside
        seq = np.concatenate([np.flatnonzero(before), np.flatnonzero(inside), np.flatnonzero(~before & ~inside)])
        new = np.empty(k, dtype=np.int64)
        new[seq] = np.arange(k)
        return new, int(new[first])

    def free_nodes(self, a: int, w: int, labels: NDArray[np.int64] | None = None,
                   order: NDArray[np.int32] | None = None) -> NDArray[np.bool_]:
        """The nodes window (a, w) frees: all of its nodes, or the :attr:`max_free` of them
        nearest (in the schedule) to a boundary between two of its stages. ``labels`` and
        ``order`` (stages contiguous, in label order): the partition numbered so that the window
        is ``a .. a+w-1`` (default: :attr:`current`'s)."""
        assert self.current is not None
        if labels is None or order is None:
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
        """Solve the window of the adjacent stages ``start .. start+width-1`` from :attr:`current`
        (:meth:`solve_stages`)."""
        return self.solve_stages(tuple(range(start, start + width)), time_s, should_stop)

    def solve_stages(self, stages: tuple[int, ...], time_s: float = SOLVE_S,
                     should_stop: Callable[[], bool] | None = None) -> Move:
        """Solve the window of ``stages`` (convex in the quotient graph, ascending labels of
        :attr:`current`) from :attr:`current`; keep its result if better."""
        assert self.current is not None
        cur = self.current
        k, w = self.k, len(stages)
        new, a = self._layout(stages)
        labels = new[cur.blocks]
        costs = np.empty(k)
        costs[new] = stage_costs(cur, k)
        pos = np.empty(self.problem.n, dtype=np.int64)
        pos[cur.order] = np.arange(self.problem.n)
        # the current schedule stage by stage in the new numbering (the schedule itself when the
        # numbering is the identity): still topological, as the numbering is a DAG order and the
        # old schedule is topological
        order = np.lexsort((pos, labels)).astype(np.int32)
        band = self._band(stages)
        free = self.free_nodes(a, w, labels, order)
        # a free node may take any stage of the window, every other node stays where it is;
        # only the free nodes' y inside the window are variables
        ranges = [(a, a + w - 1) if free[v] else (int(labels[v]), int(labels[v])) for v in range(self.problem.n)]
        pm = _mip.build_partition_model(self.problem, self.sc, k, costed=list(range(a + 1, a + w + 1)),
                                        label_range=ranges)
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
            got = np.asarray(_mip.labels_from(pm, solver.value), dtype=np.int64)
            # the schedule: the current one, stage by stage (topological: the stages are in DAG
            # order, the old schedule is topological), so that the stages outside the window
            # keep their schedules, hence their costs, also with a memory limit
            ev = evaluate(self.problem, got, np.lexsort((pos, got)).astype(np.int32), k=k)
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
            self._set_current(improved)
        else:
            # proven locally optimal, or not solved in time: either way not again from here
            self._tried.add((stages, band))
        return Move(stages[0], w, status, improved, stages)

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
            ws = cands[0]
            left = t_end - time.monotonic()
            # a wider window is a larger model: it gets proportionally more time
            moves.append(self.solve_stages(ws, max(0.05, min(solve_s * (len(ws) - 1), left)), should_stop))
            if time.monotonic() >= t_end:
                break
        return moves

    @property
    def exhausted(self) -> bool:
        """Every window has been tried from :attr:`current` without a gain."""
        return self.current is not None and not self.windows()
