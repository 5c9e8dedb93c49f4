"""Simulated annealing over stage labels, for graphs without a memory limit.

The state is a stage label ``y(v)`` in ``0..k-1`` per node with ``y(u) <= y(v)`` on every
edge: a topological numbering of the stage graph, so every state is an acyclic partition
into at most k stages (empty stages allowed). A move relabels one node ``v`` to another
label in ``[max y(producers of v), min y(consumers of v)]``; a sequence of them carries
whole boundary regions from one stage to another, and the labels may pass through stage
orders that SliceGraph on one topological order never sees (Archer et al. 2024, Lemma B.2).

Costs are kept incrementally. Without a memory limit a stage's cost is
``work + (in bytes + out bytes) / B`` and does not depend on its schedule. With
``cnt[u, s]`` the number of consumers of ``u`` in stage ``s``, ``u``'s tensor is among
stage ``s``'s inputs iff ``s != y(u)`` and ``cnt[u, s] > 0``, and among ``y(u)``'s outputs
iff some consumer lies elsewhere; a move of ``v`` changes those only for ``v`` and its
producers, so it costs O(deg v) plus O(k) for the energy.

Energy: the ``p``-norm of the stage costs, a smooth stand-in for the bottleneck that also
pays for lowering stages just under it, where the bottleneck alone is a plateau. The
Metropolis rule is applied to it with a temperature that falls geometrically from
``T_START`` to ``T_END`` times the mean energy change of a move at the restart's start
(:func:`move_scale`; a scale in the energy's own units, so the same constants fit six-node
graphs and two-hundred-node ones); each restart starts from the best labels found (iterated
annealing), and restarts cycle through :data:`POWERS`.

The kernel's running sums are floating point, so its costs may differ from the evaluator's
in the last bits: callers re-score what it returns with
:func:`problems.pipeline.evaluate.evaluate` (the :class:`Annealer` does).
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gapstop.problems.pipeline.evaluate import Evaluation, evaluate
from gapstop.problems.pipeline.model import PipelineProblem

#: Temperatures at a restart's start and end, in units of the mean energy change of a move there;
#: not tuned beyond a first comparison with a start of 3.0 (docs/decisions/0005-annealing-over-stage-labels.md).
T_START = 1.0
T_END = 0.01
#: Random moves sampled for that mean.
SCALE_SAMPLES = 5000
#: Moves per restart, per node.
MOVES_PER_NODE = 10_000
#: The energy's norm, cycled over restarts: alone, a fixed p = 5 was at most 1.1 % better at k = 16
#: and the cycle is what the whole-run comparisons used (docs/decisions/0005-annealing-over-stage-labels.md).
POWERS: tuple[float, ...] = (4.0, 6.0, 10.0, 16.0)


@njit(cache=True, nogil=True)
def _state(y, k, work, size_out, succ_ptr, succ, bandwidth):
    """The bookkeeping of labels ``y``: (cnt int64[n, k], out-degree int64[n], work float64[k],
    in + out bytes int64[k], costs float64[k])."""
    n = y.shape[0]
    cnt = np.zeros((n, k), np.int64)
    outdeg = np.zeros(n, np.int64)
    for u in range(n):
        outdeg[u] = succ_ptr[u + 1] - succ_ptr[u]
        for e in range(succ_ptr[u], succ_ptr[u + 1]):
            cnt[u, y[succ[e]]] += 1
    W = np.zeros(k)
    IO = np.zeros(k, np.int64)
    for u in range(n):
        W[y[u]] += work[u]
        if outdeg[u] - cnt[u, y[u]] > 0:
            IO[y[u]] += size_out[u]
        for r in range(k):
            if r != y[u] and cnt[u, r] > 0:
                IO[r] += size_out[u]
    c = np.empty(k)
    for s in range(k):
        c[s] = W[s] + IO[s] / bandwidth
    return cnt, outdeg, W, IO, c


@njit(cache=True, nogil=True)
def _label_range(v, y, k, succ_ptr, succ, pred_ptr, pred):
    """The labels ``v`` may take: [max over its producers, min over its consumers]."""
    lo = 0
    hi = k - 1
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        if y[pred[e]] > lo:
            lo = y[pred[e]]
    for e in range(succ_ptr[v], succ_ptr[v + 1]):
        if y[succ[e]] < hi:
            hi = y[succ[e]]
    return lo, hi


@njit(cache=True, nogil=True)
def _relabel(v, s, t, y, cnt, outdeg, work, size, pred_ptr, pred, W, IO):
    """Move node ``v`` from stage ``s`` to ``t``, updating ``cnt``, ``W`` (work) and ``IO``
    (in + out bytes) of every stage it touches."""
    # v's own tensor: an input of every other stage holding a consumer, an output of v's
    # stage if any consumer lies elsewhere
    if outdeg[v] - cnt[v, s] > 0:
        IO[s] -= size[v]
    if cnt[v, t] > 0:
        IO[t] -= size[v]
    if cnt[v, s] > 0:
        IO[s] += size[v]
    if outdeg[v] - cnt[v, t] > 0:
        IO[t] += size[v]
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        u = pred[e]
        pu = y[u]
        crossed = outdeg[u] - cnt[u, pu] > 0
        cnt[u, s] -= 1
        if s != pu and cnt[u, s] == 0:
            IO[s] -= size[u]
        cnt[u, t] += 1
        if t != pu and cnt[u, t] == 1:
            IO[t] += size[u]
        crosses = outdeg[u] - cnt[u, pu] > 0
        if crossed and not crosses:
            IO[pu] -= size[u]
        elif crosses and not crossed:
            IO[pu] += size[u]
    W[s] -= work[v]
    W[t] += work[v]
    y[v] = t


@njit(cache=True, nogil=True)
def _recost(v, s, t, y, pred_ptr, pred, W, IO, bandwidth, c):
    for e in range(pred_ptr[v], pred_ptr[v + 1]):
        r = y[pred[e]]
        c[r] = W[r] + IO[r] / bandwidth
    c[s] = W[s] + IO[s] / bandwidth
    c[t] = W[t] + IO[t] / bandwidth


@njit(cache=True, nogil=True)
def _norm(c, p, ref):
    acc = 0.0
    for s in range(c.shape[0]):
        acc += (c[s] / ref) ** p
    return ref * acc ** (1.0 / p)


@njit(cache=True, nogil=True)
def anneal(y, k, work, size_out, succ_ptr, succ, pred_ptr, pred, bandwidth, moves, temp_from, temp_to,
           p, seed):
    """Run ``moves`` annealing moves from labels ``y`` (modified in place: the final state).

    Args:
        y: int64[n], labels in ``[0, k)`` with ``y[u] <= y[v]`` on every edge.
        moves: number of moves tried (a node whose label cannot change counts as one).
        temp_from, temp_to: temperature at the first and the last move, in cost units; it
            falls geometrically between them.
        p: the energy's norm; seed: the kernel's random stream.
    Returns:
        (best bottleneck seen, int64[n] labels that had it, float64[k] the final state's stage
        costs as kept incrementally); the start counts as seen.
    """
    np.random.seed(seed)
    n = y.shape[0]
    cnt, outdeg, W, IO, c = _state(y, k, work, size_out, succ_ptr, succ, bandwidth)
    best = c.max()
    best_y = y.copy()
    ref = best if best > 0 else 1.0
    energy = _norm(c, p, ref)
    temp = temp_from
    cool = (temp_to / temp_from) ** (1.0 / max(moves - 1, 1)) if temp_from > 0 and temp_to > 0 else 1.0
    for _ in range(moves):
        v = np.random.randint(n)
        s = y[v]
        lo, hi = _label_range(v, y, k, succ_ptr, succ, pred_ptr, pred)
        if lo < hi:
            t = lo + np.random.randint(hi - lo)
            if t >= s:
                t += 1
            _relabel(v, s, t, y, cnt, outdeg, work, size_out, pred_ptr, pred, W, IO)
            _recost(v, s, t, y, pred_ptr, pred, W, IO, bandwidth, c)
            e2 = _norm(c, p, ref)
            d = e2 - energy
            if d <= 0.0 or (temp > 0.0 and np.random.random() < math.exp(-d / temp)):
                energy = e2
                top = c.max()
                if top < best:
                    best = top
                    best_y[:] = y
            else:
                _relabel(v, t, s, y, cnt, outdeg, work, size_out, pred_ptr, pred, W, IO)
                _recost(v, t, s, y, pred_ptr, pred, W, IO, bandwidth, c)
        temp *= cool
    return best, best_y, c


@njit(cache=True, nogil=True)
def move_scale(y, k, work, size_out, succ_ptr, succ, pred_ptr, pred, bandwidth, samples, p, seed):
    """Mean absolute energy change of ``samples`` random moves from ``y`` (left as it was), in
    cost units; 0 if no node can move. The temperature unit of a restart: near a local optimum
    almost every move moved, and from a poor start (one stage holding everything) where every
    move falls it still gives a scale."""
    np.random.seed(seed)
    n = y.shape[0]
    cnt, outdeg, W, IO, c = _state(y, k, work, size_out, succ_ptr, succ, bandwidth)
    ref = c.max() if c.max() > 0 else 1.0
    energy = _norm(c, p, ref)
    total = 0.0
    moved = 0
    for _ in range(samples):
        v = np.random.randint(n)
        s = y[v]
        lo, hi = _label_range(v, y, k, succ_ptr, succ, pred_ptr, pred)
        if lo == hi:
            continue
        t = lo + np.random.randint(hi - lo)
        if t >= s:
            t += 1
        _relabel(v, s, t, y, cnt, outdeg, work, size_out, pred_ptr, pred, W, IO)
        _recost(v, s, t, y, pred_ptr, pred, W, IO, bandwidth, c)
        total += abs(_norm(c, p, ref) - energy)
        moved += 1
        _relabel(v, t, s, y, cnt, outdeg, work, size_out, pred_ptr, pred, W, IO)
        _recost(v, t, s, y, pred_ptr, pred, W, IO, bandwidth, c)
    return total / moved if moved else 0.0


class Annealer:
    """Iterated annealing from a partition, run in time slices.

    Only for problems without a memory limit (a stage's cost must not depend on its
    schedule): the constructor raises ``ValueError`` otherwise. Deterministic given the
    generator and the number of moves each :meth:`run` makes (not its wall time).
    """

    def __init__(self, problem: PipelineProblem, k: int, rng: np.random.Generator) -> None:
        if problem.memory is not None:
            raise ValueError("annealing needs a problem without a memory limit")
        self.problem = problem
        self.k = int(k)
        self.rng = rng
        self.best: Evaluation | None = None
        self._y: NDArray[np.int64] | None = None  # the current state
        self._moves_per_restart = max(1000, MOVES_PER_NODE * problem.n)
        self._done = 0            # moves made of the current restart
        self._restarts = 0
        self._since_gain = 0      # whole restarts since :attr:`best` last went down (or a reset)
        self._rate = 2e6          # moves per second, measured as it runs
        self._scale = 0.0         # the current restart's temperature unit
        p = problem
        self._args = (self.k, p.work, p.size_out, p.succ_ptr, p.succ, p.pred_ptr, p.pred, p.bandwidth)

    def compile(self) -> None:
        """Compile (or load from numba's cache) the kernels :meth:`run` calls, with this
        problem's argument types; changes no state."""
        y = np.zeros(self.problem.n, np.int64)
        anneal(y, *self._args, 1, 1.0, 1.0, POWERS[0], 0)
        move_scale(y, *self._args, 1, POWERS[0], 0)

    def reset(self, blocks: Any) -> None:
        """Start from the partition ``blocks`` (labels in a topological numbering of the stage
        graph, at most k of them, as :func:`problems.pipeline.evaluate.evaluate` returns them)."""
        ev = evaluate(self.problem, blocks, k=self.k)
        self.best = ev
        self._since_gain = 0
        self._restart()

    def _restart(self) -> None:
        assert self.best is not None
        self._y = self.best.blocks.astype(np.int64).copy()
        self._done = 0
        p = POWERS[self._restarts % len(POWERS)]
        self._scale = move_scale(self._y.copy(), *self._args, SCALE_SAMPLES, p,
                                  int(self.rng.integers(2 ** 31 - 1)))

    def run(self, seconds: float, should_stop: Callable[[], bool] = lambda: False) -> bool:
        """Anneal for about ``seconds`` (at least one slice). Returns True if :attr:`best` went down;
        :attr:`best` is always exactly evaluated."""
        if self._y is None or self.best is None:
            raise RuntimeError("Annealer.run before reset")
        t_end = time.monotonic() + seconds
        before = self.best.objective
        while True:
            left = self._moves_per_restart - self._done
            chunk = int(min(left, max(1000, self._rate * min(0.1, max(0.0, t_end - time.monotonic())))))
            t0 = T_START * self._scale * (T_END / T_START) ** (self._done / self._moves_per_restart)
            t1 = T_START * self._scale * (T_END / T_START) ** ((self._done + chunk) / self._moves_per_restart)
            p = POWERS[self._restarts % len(POWERS)]
            seed = int(self.rng.integers(2 ** 31 - 1))
            started = time.monotonic()
            value, labels, _ = anneal(self._y, *self._args, chunk, t0, t1, p, seed)
            spent = time.monotonic() - started
            if spent > 0:
                self._rate = 0.5 * self._rate + 0.5 * chunk / spent
            if value < self.best.objective:
                ev = evaluate(self.problem, labels, k=self.k)
                if ev.objective < self.best.objective:
                    self.best = ev
                    self._since_gain = 0
            self._done += chunk
            if self._done >= self._moves_per_restart:  # the next restart starts from the best
                self._restarts += 1
                self._since_gain += 1
                self._restart()
            if time.monotonic() >= t_end or should_stop():
                break
        return self.best.objective < before

    @property
    def restarts_without_gain(self) -> int:
        """Whole restarts since :attr:`best` last went down or was reset."""
        return self._since_gain

    def state(self) -> dict[str, Any]:
        """Counters for logs and tests."""
        return {"restarts": self._restarts, "moves_per_restart": self._moves_per_restart,
                "restarts_without_gain": self._since_gain}

