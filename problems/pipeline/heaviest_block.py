"""The heaviest-block bound: some block holds a k-th of any weighting of the nodes.

The argument. Let ``pi >= 0`` be any weight per node. The blocks of a partition into
at most k blocks cover the nodes, so their weights sum to ``pi(V)`` and some block ``P``
has ``pi(P) >= pi(V) / k``. Every block of an acyclic partition is convex (a path that
leaves a block and comes back would close a cycle of the quotient graph), and its cost
is at least ``work(P) + cut(P) / B`` (the memory overflow only adds), where ``cut(P)``
counts each tensor once if it crosses P's boundary, either way: the bytes P sends plus
the bytes it receives. Hence, for every ``pi``,

    OPT >= H(pi) = min { work(S) + cut(S) / B : S convex, pi(S) >= pi(V) / k },

and a solver's proven lower bound on ``H(pi)`` is a lower bound on OPT.

``pi = work`` is the plain heaviest block (Lemma 3.3 with the block's communication
added). Weighting each node also by the bytes it touches, ``pi = work + mu * touched``,
asks the heavy block to hold a k-th of the communication-heavy nodes as well, whose
boundary is then large: on REGAL-style graphs this is 2-8 % above the spectral bound
at k = 8 and 16 (BENCHMARKS.md). The bound tries a few ``mu`` and keeps the best; every
value it reports is valid on its own.

Rounding (as in :mod:`problems.pipeline._mip`): costs are scaled by a power of two and
rounded down, ``pi`` is an integer vector used exactly, and the right side is
``ceil(pi(V) / k)``, which every true block satisfying ``pi(P) >= pi(V) / k`` meets.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.records import Bound
from gapstop.problems.pipeline import _mip
from gapstop.problems.pipeline.closed_form import check_k, working_set_bytes
from gapstop.problems.pipeline.model import PipelineProblem

cp_model = _mip.cp_model

#: The weights tried, in order: ``pi = work + mu * touched / B``. Measured on the REGAL-style
#: graphs at k = 8 and 16, the best mu lay in 0.1-0.5; above it CP-SAT proves less per second.
MUS: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
#: The ascent over MUS ends after this many values in a row that do not raise the bound.
PATIENCE = 2
#: Longest solve of one weighting (seconds); a solve stopped early still gives a valid bound.
EVAL_CAP_S = 8.0
#: Integer weights are scaled so that the largest is this (exact arithmetic up to n * PI_SCALE).
PI_SCALE = 10 ** 6


def touched_bytes(problem: PipelineProblem) -> NDArray[np.float64]:
    """Per node, the bytes of the tensors it touches divided by B: its own output (if it has a
    consumer) plus the outputs of its producers (the working set without a sink's own output).
    float64[n]."""
    sink = np.diff(problem.succ_ptr) == 0
    t = working_set_bytes(problem) - np.where(sink, problem.size_out, 0)
    return t.astype(np.float64) / float(problem.bandwidth)


def integer_weights(pi: Sequence[float] | NDArray[np.float64]) -> NDArray[np.int64]:
    """``pi`` scaled so its largest entry is :data:`PI_SCALE`, rounded down (any non-negative
    integer vector is a valid weighting)."""
    p = np.asarray(pi, dtype=np.float64)
    if p.size == 0 or not np.all(np.isfinite(p)) or p.min() < 0:
        raise ValueError("weights must be finite and non-negative")
    top = p.max()
    if top <= 0:
        return np.zeros(p.size, dtype=np.int64)
    return np.floor(p * (PI_SCALE / top)).astype(np.int64)


def build_model(problem: PipelineProblem, k: int, pi: NDArray[np.int64]) -> _mip.PartitionModel:
    """The CP-SAT model of ``H(pi)`` (module docstring): one block S, ``x_v`` = v in S.

    Convexity: ``a_v`` (``d_v``) may be 1 when some strict ancestor (descendant) of v is in S
    and must be when one is; ``x_v >= a_v + d_v - 1``. A cut literal per tensor with a
    consumer must be 1 when the producer and any consumer differ.
    """
    n = problem.n
    sc = _mip.scale(problem)
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{v}") for v in range(n)]
    total = int(np.asarray(pi, dtype=np.int64).sum())
    share = -(-total // k)
    model.add(cp_model.LinearExpr.weighted_sum(x, [int(p) for p in pi]) >= share)
    lits: list[Any] = list(x)
    coefs: list[int] = list(sc.work_lo)
    for u in range(n):
        consumers = problem.succ[problem.succ_ptr[u]:problem.succ_ptr[u + 1]]
        if len(consumers) == 0:
            continue
        c = model.new_bool_var(f"c{u}")
        for w in consumers:
            model.add(c >= x[u] - x[int(w)])
            model.add(c >= x[int(w)] - x[u])
        lits.append(c)
        coefs.append(sc.out_lo[u])
    a = [model.new_bool_var(f"a{v}") for v in range(n)]
    d = [model.new_bool_var(f"d{v}") for v in range(n)]
    for v in range(n):
        for u in problem.pred[problem.pred_ptr[v]:problem.pred_ptr[v + 1]]:
            model.add(a[v] >= x[int(u)])
            model.add(a[v] >= a[int(u)])
        for w in problem.succ[problem.succ_ptr[v]:problem.succ_ptr[v + 1]]:
            model.add(d[v] >= x[int(w)])
            model.add(d[v] >= d[int(w)])
        model.add(x[v] >= a[v] + d[v] - 1)
    objective = cp_model.LinearExpr.weighted_sum(lits, coefs)
    model.minimize(objective)
    return _mip.PartitionModel(model=model, nb=1, y=[], c={}, cin={}, block_cost={}, objective=objective,
                               objective_low=0, slack=0, scaled=sc)


def block_value(problem: PipelineProblem, k: int, pi: NDArray[np.int64], time_limit_s: float, *,
                num_workers: int = 1, random_seed: int = 0,
                should_stop: Callable[[], bool] | None = None) -> tuple[float, str]:
    """A valid lower bound on OPT from the weighting ``pi`` (int64[n], non-negative):
    (value, solver status). ``value`` is ``H(pi)`` when the status is ``optimal``."""
    if problem.n == 0:
        return 0.0, "optimal"
    pm = build_model(problem, k, np.asarray(pi, dtype=np.int64))
    status, value, _, _ = _mip.solve(pm, problem.n, time_limit_s=time_limit_s, num_workers=num_workers,
                                     random_seed=random_seed, should_stop=should_stop)
    return value, status


def heaviest_block_bound(problem: PipelineProblem, k: int, time_limit_s: float = 30.0, *,
                         num_workers: int = 1, random_seed: int = 0,
                         should_stop: Callable[[], bool] | None = None,
                         on_improve: Callable[[float], None] | None = None,
                         mus: Sequence[float] = MUS, eval_cap_s: float = EVAL_CAP_S,
                         floor: float = -math.inf, **_: Any) -> Bound:
    """The best ``H(work + mu * touched)`` over ``mus`` found within ``time_limit_s``.

    Tries ``mus`` in order and stops after :data:`PATIENCE` values in a row that do not
    raise the bound, at once after a solve that was not proven optimal and left the bound
    at most ``floor`` (a larger mu is harder to prove: its knapsack row binds more), at the
    time limit, or when ``should_stop()`` says so. ``floor`` is the best bound known from
    elsewhere (the spectral one in a run): below it, the values may still rise with mu.
    ``on_improve(value)`` reports every rise. Other keyword arguments (the MIP methods' options) are ignored.
    ``detail``: ``k``, ``mu`` (the best), ``tried`` (list of [mu, value, status]).
    """
    t0 = time.perf_counter()
    check_k(problem, k)
    stop = should_stop or (lambda: False)
    work = np.asarray(problem.work, dtype=np.float64)
    touched = touched_bytes(problem)
    best, best_mu, since = -math.inf, None, 0
    tried: list[list[Any]] = []
    for mu in mus:
        left = time_limit_s - (time.perf_counter() - t0)
        if left <= 0.05 or stop():
            break
        pi = integer_weights(work + mu * touched)
        value, status = block_value(problem, k, pi, min(left, eval_cap_s), num_workers=num_workers,
                                    random_seed=random_seed, should_stop=stop)
        tried.append([mu, value, status])
        before = best
        if value > best:
            best, best_mu, since = value, mu, 0
            if on_improve is not None and math.isfinite(value):
                on_improve(value)
        else:
            since += 1
        if since >= PATIENCE or (status != "optimal" and value <= max(before, floor)):
            break
    status = "bound-only" if tried else "timeout"
    return Bound("heaviest-block", best, status, time.perf_counter() - t0, "cp-sat",
                 {"k": k, "mu": best_mu, "tried": tried})
