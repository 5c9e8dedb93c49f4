"""The end-blocks bound: a partition's first stage is a down-set, its last an up-set.

The argument. Number the blocks of an acyclic partition into at most k blocks in a
topological order of its stage graph, with empty blocks at the end: ``B_0, ..., B_{k-1}``.
No edge enters ``B_0`` from another block, so ``B_0`` is a *down-set* (it holds every
producer of its nodes) and pays no input bytes; no edge leaves ``B_{k-1}``, an *up-set*
that sends nothing; every block is convex. For a node weighting ``pi`` and a cap ``T``, let
``D(T)`` (``U(T)``) be the largest ``pi`` of a down-set (up-set) whose cost
``work + cut / B`` is at most ``T``. If every block of the partition costs at most ``T``,

    pi(V) = pi(B_0) + pi(B_{k-1}) + sum of the k - 2 middle blocks <= D(T) + U(T) + (k - 2) max pi(B_i),

so some convex block of cost at most ``T`` holds ``(pi(V) - D(T) - U(T)) / (k - 2)``. If
CP-SAT proves that none does, no partition reaches ``T``: ``OPT > T``. This is the
heaviest-block test (:mod:`problems.pipeline.heaviest_block`, share ``pi(V) / k``) with a
larger share wherever the end blocks cannot hold their k-th: on communication-heavy graphs
at small k the cheapest blocks holding a k-th are prefixes and suffixes that pay a boundary
on one side only, and only two of the k blocks can be such. On regal_003 at k = 4 the
middle share is 4-5 % above a quarter near the optimum, and caps 2 % above the heaviest-block
bound fall (docs/decisions/0009-end-blocks-bound.md). Needs ``k >= 3``.

``D(T)`` and ``U(T)`` need only be upper bounds: each is CP-SAT's proven bound on a
maximisation (the closure constraints ``x_w -> x_u`` for a down-set), stopped at a limit
of deterministic time; the middle test is :func:`problems.pipeline.heaviest_block.build_model`
with the share and the cap.

Rounding as in :mod:`problems.pipeline.heaviest_block`: costs are scaled and rounded down, a
cap ``T`` is ``floor(s T)`` units (every true block of cost at most ``T`` is within it),
``pi`` is an integer vector, the end maxima are rounded up and the share up. A refuted cap
shows that some block of every partition has at least ``cap + 1`` scaled units; the value
reported is that over ``s``, nudged down. Memory overflow is ignored (it only adds cost).
"""

from __future__ import annotations

import math
import time
from fractions import Fraction
from typing import Any, Callable, Sequence

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.records import Bound
from gapstop.problems.pipeline import _mip
from gapstop.problems.pipeline.closed_form import check_k, nudge_down, simple_bound
from gapstop.problems.pipeline.heaviest_block import build_model, integer_weights, touched_bytes, weighting_bound
from gapstop.problems.pipeline.model import PipelineProblem

cp_model = _mip.cp_model

#: Weightings ``pi = work + mu * touched / B`` tried in turn. On regal_003 at k = 4, mu = 0.1
#: refuted a cap 2 % above the heaviest-block bound where mu = 0 refuted none in 120 s.
MUS: tuple[float, ...] = (0.1, 0.0, 0.2, 0.3, 0.5)
#: From k = LARGE_K the weightings start at mu = 0.2: smaller blocks make the touched bytes a
#: larger part of a block's cost. Alone at k = 16 for 20 s from the spectral bound, this order
#: was at or above MUS's on the six REGAL-style graphs where the bound rises there, and higher
#: on two (regal_009 10263.2 against 10212.5; a dense graph 7315.4 where MUS's order stayed
#: under the spectral 7279.0) (docs/decisions/0009-end-blocks-bound.md).
LARGE_K = 9
MUS_LARGE_K: tuple[float, ...] = (0.2, 0.1, 0.3, 0.5, 0.0)
#: First cap this far above the best bound known (relative); doubles after a refutation (up to
#: MAX_STEP) until a cap of the weighting is not refuted, and halves after each such cap.
STEP = 0.01
MAX_STEP = 0.04
#: A weighting's climb ends when its step would fall below this (relative), or below
#: MIN_STEP_TIMEOUT after a cap whose test ran out of time (those cost the most).
MIN_STEP = 0.001
MIN_STEP_TIMEOUT = 0.0025
#: The first weighting's heaviest-block value ``H(pi)`` is first minimised for this much of CP-SAT's
#: deterministic time (:func:`problems.pipeline.heaviest_block.weighting_bound`), and every later
#: one's too if that solved it: where blocks are small it is solved outright, and the caps climb
#: from there; on regal_like(7, n = 40) at k = 4 a climb from the spectral bound without it ended
#: 0.4 % under the heaviest-block bound.
PLAIN_DET = 1.0
#: CP-SAT's deterministic time for one end maximisation and for one middle test (about 2 s of
#: wall time per unit alone on 2 cores). An end maximisation stopped early still gives
#: a valid (weaker) maximum.
END_DET = 1.5
MID_DET = 4.0
#: The ascent over the weightings ends after this many in a row that do not raise the bound.
PATIENCE = 2


def end_model(problem: PipelineProblem, pi: NDArray[np.int64], cap: int, kind: str
              ) -> tuple[cp_model.CpModel, list[Any]]:
    """CP-SAT model of ``max pi(S)`` over down-sets (``kind = "down"``) or up-sets (``"up"``) S
    of scaled cost ``work(S) + cut(S) / B`` at most ``cap`` units: (model, x)."""
    if kind not in ("down", "up"):
        raise ValueError(f"kind must be 'down' or 'up', not {kind!r}")
    sc = _mip.scale(problem)
    model = cp_model.CpModel()
    n = problem.n
    x = [model.new_bool_var(f"x{v}") for v in range(n)]
    lits: list[Any] = list(x)
    coefs: list[int] = list(sc.work_lo)
    for u in range(n):
        consumers = [int(w) for w in problem.succ[problem.succ_ptr[u]:problem.succ_ptr[u + 1]]]
        if not consumers:
            continue
        for w in consumers:
            if kind == "down":
                model.add_implication(x[w], x[u])
            else:
                model.add_implication(x[u], x[w])
        # a down-set only sends (u in S, a consumer outside), an up-set only receives
        c = model.new_bool_var(f"c{u}")
        for w in consumers:
            model.add(c >= (x[u] - x[w] if kind == "down" else x[w] - x[u]))
        lits.append(c)
        coefs.append(sc.out_lo[u])
    model.add(cp_model.LinearExpr.weighted_sum(lits, coefs) <= cap)
    model.maximize(cp_model.LinearExpr.weighted_sum(x, [int(p) for p in pi]))
    return model, x


def end_weight(problem: PipelineProblem, pi: NDArray[np.int64], cap: int, kind: str, *, det: float = END_DET,
               wall: float = 60.0, num_workers: int = 1, random_seed: int = 0,
               hint: Sequence[int] | None = None, should_stop: Callable[[], bool] | None = None
               ) -> tuple[int, str, list[int] | None]:
    """A proven upper bound on ``max pi(S)`` over down-sets or up-sets S (``kind``) of scaled
    cost at most ``cap``: (bound, status, the best set found as 0/1 per node or None).

    Without a proven bound (stopped before its first solution) the bound is ``pi``'s positive
    total, which every set respects."""
    total = int(np.maximum(np.asarray(pi, dtype=np.int64), 0).sum())
    model, x = end_model(problem, pi, cap, kind)
    if hint is not None:
        for var, val in zip(x, hint):
            model.add_hint(var, int(val))
    st, solver, _ = _mip.run(model, time_limit_s=wall, work_limit=det, num_workers=num_workers,
                             random_seed=random_seed, should_stop=should_stop)
    if st == cp_model.OPTIMAL:
        return int(round(solver.objective_value)), "optimal", [int(solver.value(v)) for v in x]
    if st == cp_model.FEASIBLE:
        found = int(round(solver.objective_value))
        # the objective is integral: its maximum is at most the proven bound rounded down, after a
        # margin for float noise (never below the truth)
        bound = solver.best_objective_bound
        ub = math.floor(bound + 1e-6 * max(1.0, abs(bound)))
        return min(total, max(found, ub)), "feasible", [int(solver.value(v)) for v in x]
    if st == cp_model.INFEASIBLE:   # cannot happen (the empty set is a down-set of cost 0)
        return 0, "infeasible", None
    return total, "timeout", None


def middle_test(problem: PipelineProblem, k: int, pi: NDArray[np.int64], cap: int, share: int, *,
                det: float = MID_DET, wall: float = 60.0, num_workers: int = 1, random_seed: int = 0,
                should_stop: Callable[[], bool] | None = None) -> str:
    """Is there a convex set S with ``pi(S) >= share`` and scaled cost at most ``cap``?
    ``"infeasible"`` (proven none), ``"feasible"`` (one found) or ``"timeout"``."""
    pm = build_model(problem, k, pi, share=share)
    pm.model.add(pm.objective <= cap)
    pm.model.clear_objective()
    st, _, _ = _mip.run(pm.model, time_limit_s=wall, work_limit=det, num_workers=num_workers,
                        random_seed=random_seed, should_stop=should_stop)
    return _mip.STATUS.get(st, "timeout") if st != cp_model.OPTIMAL else "feasible"


def refute(problem: PipelineProblem, k: int, pi: NDArray[np.int64], cap: int, *, end_det: float = END_DET,
           mid_det: float = MID_DET, wall: float = 60.0, num_workers: int = 1, random_seed: int = 0,
           hints: dict[str, list[int] | None] | None = None, ends: bool = True,
           should_stop: Callable[[], bool] | None = None) -> tuple[str, int]:
    """Test the cap (module docstring): (``"refuted"``, ``"feasible"`` or ``"timeout"``, the share the
    middle test asked for). ``"refuted"`` proves that every acyclic partition into at most k
    blocks has a block of more than ``cap`` scaled units. ``hints`` (kind -> set) warm-starts the
    end maximisations and receives their best sets. ``ends=False`` skips them and asks for the
    heaviest-block share ``ceil(pi(V) / k)`` alone. ``should_stop`` is polled during each solve
    (a stopped solve refutes nothing)."""
    check_k(problem, k)
    t0 = time.perf_counter()
    pi = np.asarray(pi, dtype=np.int64)
    total = int(pi.sum())
    held = 0
    ends = ends and k >= 2
    for kind in (("down", "up") if ends else ()):
        left = wall - (time.perf_counter() - t0)
        value, _, best = end_weight(problem, pi, cap, kind, det=end_det, wall=left, num_workers=num_workers,
                                    random_seed=random_seed, hint=(hints or {}).get(kind), should_stop=should_stop)
        if hints is not None and best is not None:
            hints[kind] = best
        held += value
    quarter = -(-total // k)
    if ends and k == 2 and total > held:
        return "refuted", quarter   # the two end blocks are the whole partition
    # the larger of the two valid shares: the middle blocks' and heaviest-block's k-th of pi(V)
    share = max(-(-(total - held) // (k - 2)), quarter) if ends and k >= 3 else quarter
    status = middle_test(problem, k, pi, cap, share, det=mid_det, wall=wall - (time.perf_counter() - t0),
                         num_workers=num_workers, random_seed=random_seed, should_stop=should_stop)
    return ("refuted" if status == "infeasible" else status), share


def end_blocks_bound(problem: PipelineProblem, k: int, time_limit_s: float = 30.0, *, floor: float = -math.inf,
                     mus: Sequence[float] | None = None, num_workers: int = 1, random_seed: int = 0,
                     should_stop: Callable[[], bool] | None = None,
                     on_improve: Callable[[float], None] | None = None, **_: Any) -> Bound:
    """Climb caps from the best bound known (``floor``, else the closed-form bound) by
    :func:`refute`, one weighting of ``mus`` after another (default :data:`MUS`, from k =
    :data:`LARGE_K` :data:`MUS_LARGE_K`), each from its own ``H(pi)`` where
    that is minimised within :data:`PLAIN_DET` and lies higher: the first cap :data:`STEP`
    above, the step doubling after a refutation (until a cap of the weighting is not refuted)
    and halving after a cap that was not refuted,
    until it falls under :data:`MIN_STEP` (:data:`MIN_STEP_TIMEOUT` after a test out of time).
    Stops after :data:`PATIENCE` weightings in a row without a rise, at the time limit or when
    ``should_stop()`` says so. ``on_improve(value)`` reports every rise. The value is this
    method's own, the best minimised ``H(pi)`` or refuted cap (it may lie under ``floor``;
    ``-inf`` if there is neither). ``detail``: ``k``, ``mu`` (the best), ``tried`` ([mu, the
    best value so far, caps tested]). Other keyword arguments (the MIP methods' options) are
    ignored."""
    t0 = time.perf_counter()
    check_k(problem, k)
    stop = should_stop or (lambda: False)
    if problem.n == 0:
        return Bound("end-blocks", -math.inf, "timeout", 0.0, "cp-sat", {"k": k, "mu": None, "tried": []})
    sc = _mip.scale(problem)
    start = max(floor, simple_bound(problem, k).value)
    lo = sc.floor_of(Fraction(start))
    work = np.asarray(problem.work, dtype=np.float64)
    touched = touched_bytes(problem)
    best, best_mu, since = -math.inf, None, 0
    tried: list[list[Any]] = []
    minimise = PLAIN_DET > 0
    if mus is None:
        mus = MUS if k < LARGE_K else MUS_LARGE_K
    for mu in mus:
        pi = integer_weights(work + mu * touched)
        hints: dict[str, list[int] | None] = {}
        step, tests, raised, failed = STEP, 0, False, False
        quarter = -(-int(pi.sum()) // k)
        plain_from: int | None = None   # least cap where the ends held their k-th
        left = time_limit_s - (time.perf_counter() - t0)
        if minimise and left > 0.05 and not stop():
            # H(pi) itself (a valid bound: the share pi(V) / k), where CP-SAT solves it quickly
            plain, status, _ = weighting_bound(problem, k, pi, left, float(Fraction(lo) / sc.s), plain_share=1.0,
                                               det_limit=PLAIN_DET, num_workers=num_workers,
                                               random_seed=random_seed, should_stop=stop)
            minimise = status == "optimal"
            if plain > best:
                best, best_mu, raised = plain, mu, True
                lo = max(lo, sc.floor_of(Fraction(plain)))
                if on_improve is not None:
                    on_improve(plain)
        while True:
            left = time_limit_s - (time.perf_counter() - t0)
            if left <= 0.05 or stop():
                break
            gain = int(step * lo)
            if gain < MIN_STEP * lo or gain < 1:
                break
            cap = lo + gain
            status, share = refute(problem, k, pi, cap, wall=left, num_workers=num_workers,
                                   random_seed=random_seed, hints=hints, ends=plain_from is None or cap < plain_from,
                                   should_stop=stop)
            tests += 1
            if share <= quarter:
                # the end blocks hold their k-th at this cap, and D and U only grow with the cap:
                # above it the test is heaviest-block's, without the two maximisations
                plain_from = cap if plain_from is None else min(plain_from, cap)
            if status == "refuted":
                lo = cap
                value = nudge_down(float(Fraction(cap + 1) / sc.s), problem.n)
                if value > best:
                    best, best_mu, raised = value, mu, True
                    if on_improve is not None:
                        on_improve(value)
                if not failed:
                    # once a cap of this weighting has failed, the doubled step after a refutation
                    # failed again where the same step held (regal_009 at k = 16: +1 % refuted,
                    # +2 % out of time, three times in a row); alone from the spectral bound on 14
                    # REGAL-style graphs at k = 4 and 16, the same values or higher, 0-8 s sooner
                    # (docs/decisions/0009-end-blocks-bound.md)
                    step = min(2 * step, MAX_STEP)
            else:
                failed = True
                step /= 2
                if status == "timeout" and step < MIN_STEP_TIMEOUT * (1 - 1e-9):
                    break
        tried.append([mu, best, tests])
        since = 0 if raised else since + 1
        if since >= PATIENCE or time_limit_s - (time.perf_counter() - t0) <= 0.05 or stop():
            break
    return Bound("end-blocks", best, "bound-only" if math.isfinite(best) else "timeout",
                 time.perf_counter() - t0, "cp-sat", {"k": k, "mu": best_mu, "tried": tried})
