"""The intra-op bound jobs, by name: what the adapter (:mod:`problems.registry`) declares.

Each job is ``job(problem, ctx, seed, num_workers)`` and reports through ``ctx``
(:class:`engine.workers.JobContext`): its bounds, and any solution it finds on the way.

* ``exact``: the whole model in CP-SAT; proves small instances optimal at once and is
  skipped on large ones;
* ``lagrangian``: the usage limit's Lagrangian relaxation (TRW-S), every improving
  multiplier vector's value reported live; when the limit can bind it leaves
  :data:`LAGRANGIAN_HEURISTIC_SHARE` of its time to a penalty search started from its
  multipliers' usage prices (a Lagrangian heuristic), whose solutions it reports.
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
#: search started from its usage prices. Instance A at 60 s on 2 CPUs (one island, one bound
#: worker): median 1.00025 x the best known cost over 11 runs (8 at 1.000025-1.00026) against
#: 1.0033 over 7 (3 at 1.00026-1.00035) when the first island priced usage itself instead
#: (BENCHMARKS.md).
LAGRANGIAN_HEURISTIC_SHARE = 0.5


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
    b = lower_bound(problem, "lagrangian", budget, upper_bound=_incumbent_cost(ctx),
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

        search = PenaltySearch(prepare(problem), prices[0], seed, jitter=0.0)
        run_until(search, end, lambda f: ctx.solution([int(s) for s in f.solution], "lagrangian-heuristic"),
                  ctx.should_stop)


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
