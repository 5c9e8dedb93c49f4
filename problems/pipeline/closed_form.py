"""Closed-form lower bounds on the MTPP optimum: exact rational arithmetic, no solver.

Kept apart from the CP-SAT models (:mod:`problems.pipeline._mip`) so that a process
that only needs the ``simple`` bound (the coordinator, at every run's start) does
not import OR-Tools: its ``cp_model`` module takes about 0.11 s of CPU to import even
without pandas (:mod:`engine.cpsat`), time a run's head start would take from the exact MIP.
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.engine.records import Bound
from gapstop.problems.pipeline.model import PipelineProblem

_EPS = 2.0 ** -52


def nudge_down(x: float, n: int) -> float:
    """``x`` lowered by a relative ``4 (n + 8)`` ulps, covering float summation of ``n`` terms."""
    if x == 0.0 or not math.isfinite(x):
        return x
    return x - abs(x) * 4.0 * (n + 8) * _EPS


def working_set_bytes(problem: PipelineProblem) -> NDArray[np.int64]:
    """``ws(v) = size_out(v) + sum of size_out over v's producers``: live at v's step.

    In any block S holding v, v's output and all of its inputs (from inside S or
    from outside, as input tensors) are live while v runs, so ``peak(S) >= ws(v)``.
    """
    ws = np.array(problem.size_out, dtype=np.int64)
    if problem.m:   # edges are unique pairs: each producer once per consumer
        np.add.at(ws, problem.edges[:, 1], problem.size_out[problem.edges[:, 0]])
    return ws


def exact_sum(values: NDArray[np.float64]) -> Fraction:
    """The exact sum of float64 ``values`` (integer arithmetic on their mantissas: what summing
    them as Fractions gives, without a gcd per term)."""
    x = np.asarray(values, dtype=np.float64)
    if len(x) == 0:
        return Fraction(0)
    mant, exp = np.frexp(x)
    ints = (mant * 2.0 ** 53).astype(np.int64)   # exact: x = ints * 2 ** (exp - 53)
    exp = exp.astype(np.int64) - 53
    low = int(exp.min())
    total = 0
    for e in np.unique(exp).tolist():
        total += int(ints[exp == e].astype(object).sum()) << (e - low)
    return Fraction(total) * Fraction(2) ** low


#: per-node candidates re-checked exactly: those whose float estimate is within this share of the
#: largest (the float sums err by a few ulps per term)
_RECHECK = 1e-9


def _exact_max(estimate: NDArray[np.float64], exact: Any) -> Fraction:
    """``max_v exact(v)`` where ``estimate[v]`` is within a relative :data:`_RECHECK` of ``exact(v)``: only
    the nodes the estimate puts near the top are computed exactly."""
    top = float(estimate.max())
    cands = np.flatnonzero(estimate >= top - _RECHECK * abs(top) - 1e-300)
    return max(exact(int(v)) for v in cands)


def lemma33_work(problem: PipelineProblem, k: int) -> Fraction:
    """Lemma 3.3 in exact arithmetic: some block has work >= max(max work, W / k)."""
    if problem.n == 0:
        return Fraction(0)
    return max(Fraction(float(problem.work.max())), exact_sum(problem.work) / k)


def neighbourhood_bound(problem: PipelineProblem) -> Fraction:
    """``max_v`` of a lower bound on the cost of any block holding ``v``, exactly (any k).

    Each distinct producer ``u`` of ``v`` is either in the block (its work counts) or
    outside (its tensor is an input of the block: ``size_out(u) / B``); if ``v`` has a
    consumer, either all its consumers are in the block (their work counts) or ``v``'s
    tensor leaves it (``size_out(v) / B``). These terms are of distinct nodes and
    tensors, and every other term of the block cost is non-negative, so

        f(S) >= work(v) + sum_u min(size_out(u) / B, work(u))
                + min(size_out(v) / B, sum_w work(w))          (w: the consumers of v).

    Lemma 3.3's ``max_v work(v)`` is the special case with no neighbours. Where a heavy
    op's own tensors are large (REGAL-style graphs) this is far above it.
    """
    if problem.n == 0:
        return Fraction(0)
    bw = Fraction(problem.bandwidth)
    pred_ptr, pred = problem.pred_ptr, problem.pred
    succ_ptr, succ = problem.succ_ptr, problem.succ

    def exact(v: int) -> Fraction:
        total = Fraction(float(problem.work[v]))
        for u in {int(x) for x in pred[pred_ptr[v]:pred_ptr[v + 1]]}:  # exact sum: any order
            total += min(Fraction(int(problem.size_out[u])) / bw, Fraction(float(problem.work[u])))
        consumers = {int(x) for x in succ[succ_ptr[v]:succ_ptr[v + 1]]}
        if consumers:
            total += min(Fraction(int(problem.size_out[v])) / bw,
                         sum((Fraction(float(problem.work[w])) for w in consumers), Fraction(0)))
        return total

    # the same sums in floats pick the candidates (edges are unique pairs: distinct producers)
    work = problem.work
    term = np.minimum(problem.size_out / problem.bandwidth, work)
    est = work.copy()
    cons = np.zeros(problem.n)
    if problem.m:
        src, dst = problem.edges[:, 0], problem.edges[:, 1]
        est += np.bincount(dst, weights=term[src], minlength=problem.n)
        cons = np.bincount(src, weights=work[dst], minlength=problem.n)
    has = np.diff(succ_ptr) > 0
    est += np.where(has, np.minimum(problem.size_out / problem.bandwidth, cons), 0.0)
    return _exact_max(est, exact)


def simple_parts(problem: PipelineProblem, k: int) -> dict[str, Fraction]:
    """The closed-form bounds of :func:`problems.pipeline.bounds.simple_bound`, exactly.

    Keys: ``lemma_3_3`` and ``neighbourhood`` always; ``per_node`` and ``averaged`` when the
    memory is limited.
    """
    parts = {"lemma_3_3": lemma33_work(problem, k), "neighbourhood": neighbourhood_bound(problem)}
    if problem.memory is not None and problem.n:
        bw = Fraction(problem.bandwidth)
        mem = int(problem.memory)
        ws = working_set_bytes(problem)

        def per_node(v: int) -> Fraction:
            return Fraction(float(problem.work[v])) + Fraction(max(0, int(problem.size_param[v]) + int(ws[v]) - mem)) / bw

        over = np.maximum(0, problem.size_param + ws - mem)
        parts["per_node"] = _exact_max(problem.work + over / problem.bandwidth, per_node)
        spill = max(0, int(problem.size_param.sum()) + int(ws.max()) - k * mem)
        parts["averaged"] = (exact_sum(problem.work) + Fraction(spill) / bw) / k
    return parts


def check_k(problem: PipelineProblem, k: int) -> None:
    if not isinstance(k, int) or k < 1:
        raise InputError(f"k: expected an integer >= 1, got {k!r}")


def simple_bound(problem: PipelineProblem, k: int) -> Bound:
    """Closed-form lower bound, the maximum of:

    * Lemma 3.3: ``max(max_v work(v), W / k)``;
    * neighbourhood: per node, its work plus, for each producer and for its consumers, the
      cheaper of the tensor crossing the block boundary or the neighbours' work joining
      the block (:func:`neighbourhood_bound`);
    * with memory M, per node: the block holding v costs at least
      ``work(v) + (size_param(v) + ws(v) - M)^+ / B`` (its peak is at least ``ws(v)``);
    * with memory M, averaged: the k block costs sum to at least
      ``W + (sum size_param + max_v ws(v) - k M)^+ / B``, since
      ``sum_b (a_b - M)^+ >= (sum_b a_b - k M)^+`` and the peaks sum to at least
      one working set; the bottleneck is at least a k-th of that.

    Computed in exact rational arithmetic, then nudged down a few ulps.
    """
    t0 = time.perf_counter()
    check_k(problem, k)
    parts = simple_parts(problem, k)
    detail: dict[str, Any] = {"k": k, **{name: nudge_down(float(x), problem.n) for name, x in parts.items()}}
    best = max(parts.values())
    value = nudge_down(float(best), problem.n)
    return Bound("simple", value, "closed-form", time.perf_counter() - t0, "closed-form", detail)
