"""The intra-op bound jobs, by name: what the adapter (:mod:`problems.registry`) declares.

Each job is ``job(problem, ctx, seed, num_workers)`` and reports through ``ctx``
(:class:`engine.workers.JobContext`): its bounds, and any solution it finds on the way.

* ``exact``: the whole model in CP-SAT; proves small instances optimal at once and is
  skipped on large ones;
* ``lagrangian``: the usage limit's Lagrangian relaxation (TRW-S), every improving
  multiplier vector's value reported live; when the limit can bind it leaves
  :data:`LAGRANGIAN_HEURISTIC_SHARE` of its time to a penalty search started from its
  multipliers' usage prices (a Lagrangian heuristic), whose solutions it reports. Once that
  search has stalled (:data:`PRICED_STALL` iterations) behind the run's incumbent, the rest of
  the time goes to CP-SAT neighbourhood moves on the incumbent
  (:class:`~problems.intraop.lns.NeighbourhoodSearch`), which follow every better incumbent,
  until they yield less than :data:`MOVES_MIN_GAIN` of it in :data:`MOVES_WINDOW_S`; then the slot
  is left idle, so that the island has the machine to itself.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from gapstop.engine.workers import job_budget, live_bound
from gapstop.problems.intraop.model import IntraopProblem

#: bound jobs with their shares of the time left when a bound slot runs them one after the
#: other: the exact model first, then the Lagrangian to the end. No ``unconstrained`` job: the
#: Lagrangian's bound is at least as high (its multipliers start at 0, and without a usage
#: limit that can bind it computes the same relaxation).
BOUND_JOBS = (("exact", 0.2), ("lagrangian", 1.0))

#: The Lagrangian job's share of its time left, when the usage limit can bind, to the penalty
#: search started from its usage prices: on instance A at 60 s on 2 CPUs it ends lower, at the
#: median, than an island that prices usage itself (docs/decisions/0015-intraop-bound-slot.md).
LAGRANGIAN_HEURISTIC_SHARE = 0.5

#: Iterations without a new best of its own after which the priced search, if another search
#: holds a cheaper solution, gives the rest of its time to neighbourhood moves on that
#: incumbent: on instance S the priced search never holds the incumbent, and the moves lower the
#: island's stalled one (docs/decisions/0015-intraop-bound-slot.md).
PRICED_STALL = 60

#: The neighbourhood moves end, leaving the bound slot idle to the end of the run, once their own
#: finds over the last this many seconds lowered the incumbent by less than
#: :data:`MOVES_MIN_GAIN` of its cost. Beside them the island makes about 15 % fewer
#: iterations (a second busy core, and the interpreter lock their model building holds). On
#: instance M the moves find next to nothing and the island gains more from the core; on S their
#: finds of note come within 20 s, so there they run on (docs/decisions/0015-intraop-bound-slot.md).
MOVES_WINDOW_S = 20.0
MOVES_MIN_GAIN = 1e-6

#: a neighbourhood move with less time than this left does not start (CP-SAT's set-up alone takes longer)
MIN_MOVE_S = 0.2


def exact(problem: IntraopProblem, ctx: Any, seed: int, num_workers: int) -> None:
    from gapstop.problems.intraop.bounds import lower_bound

    budget = job_budget(ctx)
    if budget is None:
        return
    b = lower_bound(problem, "exact", budget, num_workers=max(2, num_workers), seed=seed)
    sol = (b.detail or {}).get("solution")
    if sol is not None:
        ctx.solution(sol, "exact-cpsat")
    ctx.bound(b)


def lagrangian(problem: IntraopProblem, ctx: Any, seed: int, num_workers: int) -> None:
    from gapstop.problems.intraop.bounds import lower_bound

    budget = job_budget(ctx)
    if budget is None:
        return
    end = time.perf_counter() + budget
    prices: list[Any] = []
    incumbent_cost = _incumbent_cost(ctx)
    b = lower_bound(problem, "lagrangian", budget, upper_bound=incumbent_cost,
                    # every improving multiplier vector's value is itself a valid bound: report it now
                    on_improvement=live_bound(ctx, "lagrangian", "trw-s", 0.0),
                    price_reserve=LAGRANGIAN_HEURISTIC_SHARE, on_prices=prices.append)
    sol = (b.detail or {}).get("solution")
    if sol is not None:
        ctx.solution(sol, "lagrangian-cpsat")
    ctx.bound(b)
    if prices and not ctx.should_stop():
        from gapstop.problems.intraop.penalty import PenaltySearch, run_until
        from gapstop.problems.intraop.relaxed import prepare

        prep = prepare(problem)
        search = PenaltySearch(prep, prices[0], seed, jitter=0.0)
        run_until(search, end, lambda f: ctx.solution([int(s) for s in f.solution], "lagrangian-heuristic"),
                  lambda: ctx.should_stop() or _stalled_behind(search, incumbent_cost))
        if time.perf_counter() < end and not ctx.should_stop():
            neighbourhood_moves(prep, ctx, end, seed)


def _stalled_behind(search: Any, incumbent_cost: Callable[[], float | None]) -> bool:
    """True once ``search`` has gone :data:`PRICED_STALL` iterations without a new best of its own
    and the run's incumbent (cost from ``incumbent_cost()``) is cheaper than that best."""
    own = search.best()
    since = search.iterations - (0 if own is None else own.iteration)
    if since < PRICED_STALL:
        return False
    ub = incumbent_cost()
    return ub is not None and (own is None or ub < own.cost)


def neighbourhood_moves(prep: Any, ctx: Any, end: float, seed: int, *,
                        window_s: float = MOVES_WINDOW_S, min_gain: float = MOVES_MIN_GAIN) -> None:
    """CP-SAT neighbourhood moves on the run's incumbent until ``end`` (``time.perf_counter()``),
    ``ctx.should_stop()``, or the moves' own finds over the last ``window_s`` seconds lowering
    the cost by less than ``min_gain`` of it (the first ``window_s`` seconds always run); each
    cheaper solution is reported. A cheaper incumbent found meanwhile by another job replaces
    the one being improved (that drop is not the moves' yield)."""
    import numpy as np

    from gapstop.problems.intraop.lns import NeighbourhoodSearch

    cost, sol = ctx.incumbent()
    if sol is None:
        return
    moves = NeighbourhoodSearch(prep, np.asarray(sol, dtype=np.int64), seed)
    start = time.perf_counter()
    gains: list[tuple[float, int]] = []  # (time, cost lowered) of each of the moves' own finds
    # a move is not interrupted: none starts that the recent ones say would end after ``end``
    while (left := end - time.perf_counter()) > max(MIN_MOVE_S, moves.recent_move_s) and not ctx.should_stop():
        before = moves.cost
        for found_cost, found in moves.step(min(1.0, left)):
            ctx.solution([int(s) for s in found], "lagrangian-neighbourhood")
            gains.append((time.perf_counter(), before - found_cost))
            before = found_cost
        now = time.perf_counter()
        if now - start >= window_s and sum(g for t, g in gains if t >= now - window_s) < min_gain * moves.cost:
            return
        cost, sol = ctx.incumbent()
        if sol is not None and cost is not None and cost < moves.cost:
            moves.offer(np.asarray(sol, dtype=np.int64), int(cost))


def _incumbent_cost(ctx: Any) -> Callable[[], float | None]:
    """The run's incumbent cost, asked at most once a second (the answer carries the
    solution): it steers the Polyak step size, and the searches keep lowering it."""
    seen: dict[str, Any] = {"t": -math.inf, "ub": None}

    def target() -> float | None:
        if time.monotonic() - seen["t"] >= 1.0:
            seen["t"], seen["ub"] = time.monotonic(), ctx.incumbent()[0]
        return seen["ub"]

    return target


JOBS: dict[str, Callable[[IntraopProblem, Any, int, int], None]] = {"exact": exact, "lagrangian": lagrangian}


def run_bound_job(problem: IntraopProblem, spec: dict[str, Any], ctx: Any, seed: int, num_workers: int) -> None:
    """Run the job ``spec["kind"]`` (one of :data:`JOBS`)."""
    try:
        job = JOBS[spec["kind"]]
    except KeyError:
        raise ValueError(f"unknown intra-op bound job {spec['kind']!r}; known: {sorted(JOBS)}") from None
    job(problem, ctx, seed, num_workers)
