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
at k = 8 and 16 (docs/decisions/0010-heaviest-block-bound.md). The bound tries a few ``mu`` and keeps the best; every
value it reports is valid on its own.

How a weighting is bounded: by minimising where that works, else by caps. Where blocks are
small (k = 16 on the REGAL-style graphs) CP-SAT solves the model outright in seconds. On
graphs above about 80 nodes at k = 4 its proven bound on the minimum barely moves (the LP
relaxation zeroes the cut), but adding ``work(S) + cut(S) / B <= U`` for a ``U`` a little
above the best bound known and proving the model infeasible takes a second or two there,
and certifies ``H(pi) > U``. :func:`weighting_bound` minimises for part of its time, then
climbs such caps from a start value (the spectral bound in a run) and stops at the first cap
it cannot refute: on regal_001/003/007 at k = 4 that is 1-2 % above the spectral bound where
minimising proved nothing in the same 8 s (docs/decisions/0010-heaviest-block-bound.md). A capped solve that finds the
optimum below its cap gives ``H(pi)`` exactly; one stopped early gives ``min(its proven
bound, U)``, valid whether or not ``H(pi) <= U``.

Rounding (as in :mod:`problems.pipeline._mip`): costs are scaled by a power of two and
rounded down, ``pi`` is an integer vector used exactly, and the right side is
``ceil(pi(V) / k)``, which every true block satisfying ``pi(P) >= pi(V) / k`` meets. A cap
``U`` becomes ``floor(s U)`` scaled units; refuting it shows every block's scaled cost is at
least one unit more, so the bound reported is that unit count over ``s``, nudged down.
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
from gapstop.problems.pipeline.closed_form import check_k, simple_bound, working_set_bytes
from gapstop.problems.pipeline.model import PipelineProblem

cp_model = _mip.cp_model

#: The weights tried, in order: ``pi = work + mu * touched / B``. On the REGAL-style graphs at
#: k = 8 and 16 the best mu lay in 0.1-0.5; above it CP-SAT proves less per second.
MUS: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
#: The ascent over MUS ends after this many values in a row that do not raise the bound.
PATIENCE = 2
#: Most work spent on one weighting, in CP-SAT's deterministic time (0.35-0.53 units per second of
#: wall time alone on 2 cores: about 8 s); a solve stopped early still gives a valid bound. A
#: cap in wall time would give a weighting beside a run's search half the work it gets alone
#: (docs/decisions/0010-heaviest-block-bound.md).
EVAL_CAP_DET = 3.5
#: A climb does not start a solve with less deterministic time than this.
MIN_DET = 0.02
#: The first cap lies this far above the start value (relative); it doubles after a refutation
#: that took under a quarter of its allowance and halves after a cap that was not refuted.
STEP = 0.01
#: A weighting's climb ends when its step would fall below this (relative).
MIN_STEP = 0.0025
#: Share of the first weighting's time for a plain minimisation before its caps climb.
PLAIN_SHARE = 0.75
#: Integer weights are scaled so that the largest is this (exact arithmetic up to n * PI_SCALE).
PI_SCALE = 10 ** 6


def touched_bytes(problem: PipelineProblem) -> NDArray[np.float64]:
    """Per node, the bytes of the tensors it touches divided by B: its own output (if it has a
    consumer) plus the outputs of its producers (the working set without a sink's own output).
    float64[n]."""
    sink = np.diff(problem.succ_ptr) == 0
    t = working_set_bytes(problem) - np.where(sink, problem.size_out, 0)
    return t.astype(np.float64) / float(problem.bandwidth)


def integer_weights(pi: Sequence[float] | NDArray[np.float64], *, signed: bool = False) -> NDArray[np.int64]:
    """``pi`` scaled so its largest entry (by magnitude, with ``signed``) is :data:`PI_SCALE`,
    rounded down. Any integer vector is a valid weighting: the blocks' weights sum to
    ``pi(V)`` whatever the signs. Without ``signed`` a negative entry is an error (the
    weightings of this module are non-negative by construction)."""
    p = np.asarray(pi, dtype=np.float64)
    if p.size == 0 or not np.all(np.isfinite(p)) or (not signed and p.min() < 0):
        raise ValueError("weights must be finite" + ("" if signed else " and non-negative"))
    top = np.abs(p).max()
    if top <= 0:
        return np.zeros(p.size, dtype=np.int64)
    return np.floor(p * (PI_SCALE / top)).astype(np.int64)


def build_model(problem: PipelineProblem, k: int, pi: NDArray[np.int64], share: int | None = None
                ) -> _mip.PartitionModel:
    """The CP-SAT model of ``H(pi)`` (module docstring): one block S, ``x_v`` = v in S, with
    ``pi(S) >= share`` (default ``ceil(pi(V) / k)``).

    Convexity: ``a_v`` (``d_v``) may be 1 when some strict ancestor (descendant) of v is in S
    and must be when one is; ``x_v >= a_v + d_v - 1``. A cut literal per tensor with a
    consumer must be 1 when the producer and any consumer differ.
    """
    n = problem.n
    sc = _mip.scale(problem)
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{v}") for v in range(n)]
    if share is None:
        share = -(-int(np.asarray(pi, dtype=np.int64).sum()) // k)
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


def _solve(problem: PipelineProblem, k: int, pi: NDArray[np.int64], time_limit_s: float, cap: int | None, *,
           num_workers: int, random_seed: int, should_stop: Callable[[], bool] | None,
           det: float | None = None) -> tuple[float, str, int | None, float]:
    """Minimise the model of ``H(pi)`` with the scaled objective at most ``cap`` units (None: no
    cap), for at most ``time_limit_s`` seconds and, if given, ``det`` units of CP-SAT's
    deterministic time: (valid lower bound on ``H(pi)``, status, best objective found in units or
    None, deterministic time used)."""
    pm = build_model(problem, k, pi)
    refuted = -math.inf
    if cap is not None:
        pm.model.add(pm.objective <= cap)
        refuted = _mip.to_value(pm, cap + 1, problem.n)
    status, value, solver, _ = _mip.solve(pm, problem.n, time_limit_s=time_limit_s, num_workers=num_workers,
                                          random_seed=random_seed, should_stop=should_stop, work_limit=det)
    used = float(solver.deterministic_time)
    found = round(solver.objective_value) if status in ("optimal", "feasible") else None
    if status == "infeasible":
        return refuted, status, None, used
    if status != "optimal" and cap is not None:
        value = min(value, refuted)
    return value, status, found, used


def block_value(problem: PipelineProblem, k: int, pi: NDArray[np.int64], time_limit_s: float, *,
                at_most: float | None = None, num_workers: int = 1, random_seed: int = 0,
                should_stop: Callable[[], bool] | None = None) -> tuple[float, str]:
    """A valid lower bound on ``H(pi)``, hence on OPT, from the weighting ``pi`` (int64[n], of
    either sign: the empty set, of cost 0, qualifies when ``pi(V) <= 0``): (value, solver status).

    Without ``at_most`` the model is minimised; ``value`` is ``H(pi)`` when the status is
    ``optimal``. With ``at_most = U`` the model also requires ``work(S) + cut(S) / B <= U``:
    status ``infeasible`` proves ``H(pi) > U`` and ``value`` is then at least ``U`` (module
    docstring); ``optimal`` gives ``H(pi)`` (which is at most ``U``); otherwise ``value`` is
    the smaller of the proven bound and the cap.
    """
    if problem.n == 0:
        return 0.0, "optimal"
    cap = None if at_most is None else _mip.scale(problem).floor_of(Fraction(float(at_most)))
    value, status, _, _ = _solve(problem, k, np.asarray(pi, dtype=np.int64), time_limit_s, cap,
                                 num_workers=num_workers, random_seed=random_seed, should_stop=should_stop)
    return value, status


def weighting_bound(problem: PipelineProblem, k: int, pi: NDArray[np.int64], time_limit_s: float,
                    start: float, *, plain_share: float = PLAIN_SHARE, num_workers: int = 1, random_seed: int = 0,
                    should_stop: Callable[[], bool] | None = None, det_limit: float | None = None
                    ) -> tuple[float, str, list[list[Any]]]:
    """A valid lower bound on ``H(pi)`` by refuting caps above ``start`` (module docstring):
    (value, status of the last solve, steps as [cap in units, value, status]).

    ``start`` only places the first cap, ``start * (1 + STEP)``, and need not be valid; with a
    ``start`` that is not positive and finite the model is minimised once instead. The model
    is first minimised for ``plain_share`` of the time (none if 0); a proven optimum ends
    there, and a block found (its cost is at least ``H(pi)``) bounds the caps from above. A refuted
    cap becomes the next start. A cap that is not refuted but under which a block was found
    bounds ``H(pi)`` from above: the next cap bisects, and once within ``4 MIN_STEP`` of the
    found block's cost lies just below it (refuting that proves the block optimal). Each solve
    gets half the time left (all of it for the last try); the climb ends at a solved optimum,
    when the next cap would gain less than :data:`MIN_STEP`, at the time limit or when
    ``should_stop()`` says so.

    ``det_limit``: the time to share out is this many units of CP-SAT's deterministic time
    (its measure of work done), ``time_limit_s`` only a wall-clock backstop. The climb then does
    the same beside other busy threads as alone, only more slowly. None: wall-clock seconds.
    """
    t0 = time.perf_counter()
    stop = should_stop or (lambda: False)
    pi = np.asarray(pi, dtype=np.int64)
    if problem.n == 0:
        return 0.0, "optimal", []
    used = 0.0   # deterministic time spent

    def left() -> float:
        """What is left to share out: deterministic units, or seconds without ``det_limit``."""
        wall = time_limit_s - (time.perf_counter() - t0)
        if det_limit is None:
            return wall
        return det_limit - used if wall > 0.05 else 0.0

    def solve(share: float, cap: int | None) -> tuple[float, str, int | None, float]:
        """One solve with ``share`` of what is left: (value, status, found, its share used)."""
        nonlocal used
        t1 = time.perf_counter()
        if det_limit is None:
            value, status, got, _ = _solve(problem, k, pi, share, cap, num_workers=num_workers,
                                           random_seed=random_seed, should_stop=stop)
            return value, status, got, time.perf_counter() - t1
        value, status, got, det = _solve(problem, k, pi, time_limit_s - (t1 - t0), cap, num_workers=num_workers,
                                         random_seed=random_seed, should_stop=stop, det=share)
        used += det
        return value, status, got, det

    sc = _mip.scale(problem)
    lo = sc.floor_of(Fraction(float(start))) if math.isfinite(start) and start > 0 else 0
    if lo <= 0:
        value, status, _, _ = solve(left(), None)
        return value, status, [[None, value, status]]
    best, status, found = -math.inf, "timeout", None
    steps: list[list[Any]] = []
    if plain_share > 0:
        # where blocks are small (large k) CP-SAT often solves the model outright in a second
        # or two, faster than a climb (regal_007 at k = 16: 2504.5 at mu = 0.2, where climbs
        # stopped at 2481-2487 in runs); a block it finds bounds the caps from above
        best, status, found, _ = solve(left() * plain_share, None)
        steps.append([None, best, status])
        if status == "optimal":
            return best, status, steps
        if math.isfinite(best):
            lo = max(lo, sc.floor_of(Fraction(best)))
    step = STEP
    failed: int | None = None    # least cap neither refuted nor satisfied in its time
    while True:
        remaining = left()
        if remaining <= (0.05 if det_limit is None else MIN_DET) or stop():
            break
        if found is not None and found - lo <= max(1.0, 4 * MIN_STEP * lo):
            # just below the block found: refuting this cap proves that block optimal
            cap, last = found - 1, True
            if cap <= lo:
                break
        else:
            ceiling = min(x for x in (found, failed, math.inf) if x is not None)
            gain = int(min(step * lo, (ceiling - lo) / 2))
            if gain < MIN_STEP * lo:
                break
            cap = lo + gain
            last = step <= MIN_STEP or (ceiling - lo) / 2 <= 2 * MIN_STEP * lo
        allowance = remaining if last else remaining / 2
        value, status, got, spent = solve(allowance, cap)
        steps.append([cap, value, status])
        best = max(best, value)
        if status == "optimal":
            break
        if status == "infeasible":
            lo = cap
            if found is None and failed is None and spent < allowance / 4:
                step *= 2
            continue
        if got is not None:
            found = got if found is None else min(found, got)
        else:
            failed = cap if failed is None else min(failed, cap)
            step = step / 2
        if last:
            break
    return best, status, steps


def heaviest_block_bound(problem: PipelineProblem, k: int, time_limit_s: float = 30.0, *,
                         num_workers: int = 1, random_seed: int = 0,
                         should_stop: Callable[[], bool] | None = None,
                         on_improve: Callable[[float], None] | None = None,
                         mus: Sequence[float] = MUS, eval_cap_det: float = EVAL_CAP_DET,
                         floor: float = -math.inf, **_: Any) -> Bound:
    """The best ``H(work + mu * touched)`` bound over ``mus`` found within ``time_limit_s``.

    Tries ``mus`` in order, each by :func:`weighting_bound` for at most ``eval_cap_det`` units
    of CP-SAT's deterministic time (and the wall-clock time left), so that it does the same
    work beside a run's search as alone. The first is minimised for :data:`PLAIN_SHARE` of
    that. If that solves it, every weighting is minimised, and a weighting not solved that way
    at or below the best bound known ends the ascent (a larger mu is harder to prove). If not,
    the rest of its time and every later weighting climb caps from the best bound known so
    far: ``floor`` (a valid bound from elsewhere, the spectral one in a run), this bound's
    best, or the closed-form bound. Stops also after :data:`PATIENCE` values in a row that do
    not raise this bound, after the first weighting when that one climbed caps and ended at or
    under ``floor``, at the time limit, or when ``should_stop()`` says so.
    ``on_improve(value)`` reports every rise. Other keyword arguments (the MIP methods'
    options) are ignored. The value is this method's own (it may lie below ``floor``).
    ``detail``: ``k``, ``mu`` (the best), ``tried`` (list
    of [mu, value, status of its last solve, number of solves]).
    """
    t0 = time.perf_counter()
    check_k(problem, k)
    stop = should_stop or (lambda: False)
    work = np.asarray(problem.work, dtype=np.float64)
    touched = touched_bytes(problem)
    closed = simple_bound(problem, k).value
    best, best_mu, since = -math.inf, None, 0
    # decided by the first weighting: solved by minimising, the later ones are minimised too
    # (a climb beside a run's search took its CPU at k = 16 for no gain); not solved, they climb
    climbing: bool | None = None
    tried: list[list[Any]] = []
    for mu in mus:
        left = time_limit_s - (time.perf_counter() - t0)
        if left <= 0.05 or stop():
            break
        pi = integer_weights(work + mu * touched)
        value, status, steps = weighting_bound(problem, k, pi, left, max(best, floor, closed), det_limit=eval_cap_det,
                                               plain_share=PLAIN_SHARE if climbing is None else
                                               0.0 if climbing else 1.0,
                                               num_workers=num_workers, random_seed=random_seed,
                                               should_stop=stop)
        if climbing is None:
            climbing = status != "optimal" or len(steps) > 1
        before = best
        tried.append([mu, value, status, len(steps)])
        # a rise below ``floor`` counts: the values climb with mu before they pass it (regal_000
        # at k = 16: 1679, 1758, then 1815 above the spectral 1765)
        since = 0 if value > best else since + 1
        if value > best:
            best, best_mu = value, mu
            if on_improve is not None and math.isfinite(value):
                on_improve(value)
        if since >= PATIENCE or (not climbing and status != "optimal" and value <= max(before, floor)):
            break
        if climbing and best <= floor:
            # (only ever true after the first weighting) climbed caps start above ``floor``; where
            # the first weighting could not even be minimised and refutes none of them, no later
            # one did: alone at k = 16 on the 7 such REGAL-style graphs of 23, 0 of 20 later
            # weightings passed the spectral bound, and they took 5-13 s of a core that the
            # end-blocks bound after it gets (docs/decisions/0010-heaviest-block-bound.md)
            break
    status = "bound-only" if tried else "timeout"
    return Bound("heaviest-block", best, status, time.perf_counter() - t0, "cp-sat",
                 {"k": k, "mu": best_mu, "tried": tried})
