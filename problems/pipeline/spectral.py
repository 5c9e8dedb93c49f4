"""A spectral lower bound for MTPP: the communication a k-way split cannot avoid.

The MIP relaxations of :mod:`problems.pipeline.bounds` start at ``W / k``: their LP
relaxation spreads every node evenly over the blocks, which makes every cut cost
vanish. On graphs whose communication is comparable to their work (the REGAL-style
graphs) that leaves the bound 20-40 % below the best partitions. This bound
accounts for the communication instead, through eigenvalues.

The argument. Let ``P_1..P_k`` be any partition (empty blocks allowed, DAG order
ignored: a relaxation) with bottleneck ``T``. Summing the block costs,

    k T >= sum_i f(P_i) >= W + C,      C = total (in + out) bytes / B,

and ``C`` is at least the cut weight of a graph ``G`` on the nodes
(:func:`expansion`) whose cut never exceeds the bytes actually sent. With
``L`` the Laplacian of ``G``, any diagonal ``D`` and ``x_i`` the indicator of
``P_i``: ``cut = (sum_i x_i' (L + D) x_i - tr D) / 2``. Writing
``x_i = Omega^(-1/2) y_i sqrt(w_i)`` with ``Omega = diag(work)`` and
``w_i = work(P_i) <= T``, the ``y_i`` are orthonormal, and by Ky Fan's inequality
(with Abel summation over the ``w_i`` sorted in decreasing order)

    sum_i x_i' (L + D) x_i >= sum_i w_i lambda_i(M),   M = Omega^(-1/2) (L + D) Omega^(-1/2),

eigenvalues in increasing order. The right side is at least ``G_T``, the minimum
of ``sum_i w_i lambda_i`` over ``0 <= w_i <= T``, ``sum_i w_i = W`` (fill the
smallest eigenvalues first). So every partition with bottleneck ``T`` satisfies
``k T >= W + max(0, (G_T - tr D) / 2)``; ``G_T`` does not increase with ``T``,
so the least ``T`` that satisfies it is a lower bound on OPT, for every ``D``.
``D`` is then improved by subgradient ascent (``sum_i w_i lambda_i`` with
decreasing weights is concave in ``D``); every iterate gives a valid bound.

Nodes of zero work get ``eta = 1e-6 W / n`` added to their weight (and every block
is allowed ``n eta`` more), so ``Omega`` is invertible and the argument unchanged.
Memory overflow is ignored (it only adds cost). Eigenvalues are lowered by a
margin far above LAPACK's backward error before use, and the result is nudged
down a few ulps, so floating point never makes the bound exceed the argument.
"""

from __future__ import annotations

import functools
import math
import time
from typing import Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline.closed_form import nudge_down
from gapstop.problems.pipeline.model import PipelineProblem

#: The ascent stops after this many seconds without a rise (and at least MIN_STALE iterations):
#: 40 iterations of patience took 30 s of both cores on lstm_lm_unrolled (1,736 nodes), whose
#: bound never rose after its first iterate, while on the REGAL-style graphs the whole ascent
#: takes 0.2-3 s and its rises come milliseconds apart (docs/decisions/0008-spectral-bound-limits.md).
PATIENCE_S = 2.0
MIN_STALE = 2

#: Largest graph (nodes) the bound runs on; above it :func:`problems.pipeline.bounds.spectral_bound`
#: reports it as skipped. One eigendecomposition, which cannot be interrupted (so a run's stop
#: waits for it), grows as n^3: with one BLAS thread it took 0.8-2.4 s at 1,736 nodes
#: (lstm_lm_unrolled), 4.6 s at 2,048, 12-35 s at 4,096 and 262 s at 8,192
#: (docs/decisions/0008-spectral-bound-limits.md). Its n x n float64 matrices (five of them) take 160 MiB at the limit.
SPECTRAL_MAX_N = 2048

#: Weight of a tensor's producer-consumer edges, as a fraction of the largest valid one, for
#: tensors with several consumers (the best of 0.5 / 0.75 / 1 on the REGAL graphs,
#: docs/decisions/0008-spectral-bound-limits.md).
THETA = 0.75


@functools.lru_cache(maxsize=None)
def clique_weight(d: int, theta: float = THETA) -> float:
    """Largest consumer-consumer edge weight, per byte, that keeps the expansion valid.

    A tensor of ``s`` bytes with ``d`` consumers becomes ``d`` producer-consumer edges of
    weight ``2 theta s / d`` and ``d (d-1) / 2`` consumer-consumer edges of weight
    ``beta s``. If the consumers fall into the producer's block (``g0`` of them) and
    ``p >= 1`` other blocks, the tensor costs ``(1 + p) s`` bytes of traffic; the
    edges cut weigh ``2 theta (d - g0) / d + beta * pairs`` per byte, largest for the
    most even split of the other consumers. ``beta`` is the largest value that
    keeps the cut within the traffic for every ``(g0, p)``; ``0 < theta <= 1``.
    """
    if not 0.0 < theta <= 1.0:
        raise ValueError("theta must be in (0, 1]")
    alpha = 2.0 * theta / d
    beta = math.inf
    # every (g0, p) pair, one g0 at a time in numpy: d is up to n - 1, and at d = 4,095 a Python
    # double loop took 4.5-23 s against 0.2-0.7 s (docs/decisions/0008-spectral-bound-limits.md);
    # the arithmetic is the same, term by term, in float64
    for g0 in range(d):
        rest = d - g0
        p = np.arange(1, rest + 1, dtype=np.int64)
        q, extra = np.divmod(rest, p)
        squares = extra * (q + 1) ** 2 + (p - extra) * q * q + g0 * g0
        pairs = (d * d - squares) // 2
        ok = pairs > 0
        if ok.any():
            beta = min(beta, float((((1 + p[ok]) - alpha * rest) / pairs[ok]).min()))
    return 0.0 if beta == math.inf else max(0.0, beta * (1.0 - 1e-12))


def expansion(problem: PipelineProblem, theta: float = THETA) -> NDArray[np.float64]:
    """Dense symmetric weights ``A`` (n x n, zero diagonal) whose cut never exceeds the
    traffic of a partition: for every partition, sum of ``A[u, v]`` over pairs split
    apart, counted once, <= total (in + out) bytes / B."""
    n = problem.n
    a = np.zeros((n, n), np.float64)
    for u in range(n):
        cons = problem.succ[problem.succ_ptr[u]:problem.succ_ptr[u + 1]]
        d = len(cons)
        if d == 0:
            continue
        s = float(problem.size_out[u]) / problem.bandwidth
        if s <= 0:
            continue
        th = 1.0 if d == 1 else theta   # one consumer: no clique edges to make room for
        a[u, cons] += 2.0 * th * s / d
        a[cons, u] += 2.0 * th * s / d
        if d > 1:
            b = clique_weight(d, theta) * s
            if b > 0:
                block = np.ix_(cons, cons)
                a[block] += b
                a[cons, cons] -= b
    return a


def least_t(lam: NDArray[np.float64], tr_d: float, work_total: float, omega_total: float, slack: float,
            k: int) -> float:
    """Largest ``T`` (to ~1e-15 relative) at which ``k T < W + max(0, (G_T - tr D) / 2)``:
    every partition's bottleneck exceeds it. ``lam``: the k smallest eigenvalues,
    increasing, already lowered by their error margin."""
    lams = [float(v) for v in lam[:k]]

    def holds(t: float) -> bool:
        cap = t + slack
        if cap * k < omega_total:
            return False
        # _profile(cap, omega_total, k) @ lam, in scalars: this runs ~50 times per eigendecomposition,
        # and numpy's per-call overhead made it most of the ascent's time on small graphs
        g, rest = 0.0, omega_total
        for v in lams:
            if rest <= 0.0:
                break
            g += min(rest, cap) * v
            rest -= cap
        return k * t >= work_total + max(0.0, 0.5 * (g - tr_d))

    lo, hi = 0.0, max(work_total, omega_total) + 1.0
    if holds(lo):
        return 0.0
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if mid <= lo or mid >= hi:
            break
        if holds(mid):
            hi = mid
        else:
            lo = mid
    return lo


def spectral_bound_value(problem: PipelineProblem, k: int, time_limit_s: float = 5.0, *,
                         max_iters: int = 2000, patience: int = 40, patience_s: float = PATIENCE_S,
                         theta: float = THETA,
                         should_stop: Callable[[], bool] | None = None,
                         on_improve: Callable[[float], None] | None = None) -> tuple[float, dict[str, float]]:
    """The bound of the module docstring, improved for up to ``time_limit_s`` seconds.

    Stops early once ``patience`` iterations in a row raised it by less than 1e-5
    (relative): the subgradient steps shrink, so little more is to be had. On large
    graphs, where one eigendecomposition takes most of a second, it stops sooner: once
    :data:`MIN_STALE` such iterations took ``patience_s`` seconds since the last rise.
    Returns ``(value, detail)``; ``value`` is a valid lower bound on OPT (time units) at
    every iteration, and ``on_improve(value)`` is called whenever it rises.
    """
    t0 = time.perf_counter()
    n = problem.n
    work = np.asarray(problem.work, np.float64)
    work_total = float(work.sum())
    if n == 0 or k < 1:
        return 0.0, {"iterations": 0}
    eta = 0.0 if work.min() > 0 else 1e-6 * max(work_total, 1.0) / n
    omega = work + eta
    omega_total = float(omega.sum())
    slack = eta * n
    a = expansion(problem, theta)
    lap = np.diag(a.sum(axis=1)) - a
    inv = 1.0 / np.sqrt(omega)
    scale = inv[:, None] * inv[None, :]
    step0 = max(float(np.mean(np.diag(lap))), 1e-12)
    kk = min(k, n)
    d = np.zeros(n, np.float64)
    ascend = bool(lap.any())   # no communication at all: D = 0 is already optimal
    best, it, stale = 0.0, 0, 0
    risen_at = t0
    while it < max_iters and stale < patience:
        if stale >= MIN_STALE and time.perf_counter() - risen_at >= patience_s:
            break
        m = (lap + np.diag(d)) * scale
        if not np.all(np.isfinite(m)):
            break   # magnitudes beyond float range: keep the last valid value
        try:
            lam, q = np.linalg.eigh(m)
        except np.linalg.LinAlgError:
            break
        margin = 1e-12 * n * float(np.linalg.norm(m))
        low = np.concatenate((lam[:kk] - margin, np.full(k - kk, lam[-1] - margin)))
        t = least_t(low, float(d.sum()), work_total, omega_total, slack, k)
        it += 1
        if t > best * (1.0 + 1e-5):
            stale, risen_at = 0, time.perf_counter()
        else:
            stale += 1
        if t > best:
            best = t
            if on_improve is not None:
                on_improve(nudge_down(best, n))
        if not ascend or time.perf_counter() - t0 >= time_limit_s or (should_stop is not None and should_stop()):
            break
        # subgradient of sum_i w_i lambda_i(M_D) - tr D at the profile of the best T so far
        w = _profile(best + slack, omega_total, kk)
        with np.errstate(over="ignore", invalid="ignore"):
            g = (q[:, :kk] ** 2 * w[None, :]).sum(axis=1) / omega - 1.0
        gmax = float(np.abs(g).max())
        if not gmax > 1e-12:   # also stops on nan (a zero-weight direction at float limits)
            break
        d += step0 * g / gmax / (1.0 + it / 20.0)
    value = nudge_down(best, n)
    return value, {"iterations": it, "theta": theta, "wall_s": time.perf_counter() - t0}


def _profile(cap: float, total: float, k: int) -> NDArray[np.float64]:
    """The block works that minimise ``sum_i w_i lambda_i`` for increasing eigenvalues:
    ``cap`` on the first blocks, the remainder of ``total`` next, then zeros."""
    return np.clip(total - cap * np.arange(k), 0.0, cap)
