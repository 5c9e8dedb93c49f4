"""The problem adapters' bound jobs, run with a recording context (no coordinator, no Ray)."""

from __future__ import annotations

import time
from typing import Any

from gapstop.engine.records import Bound
from gapstop.problems import registry
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from tests.problems.intraop.reference import brute_force_table
from tests.timing import slack, wall_s_without_compiling, watch_compiling


class _Ctx:
    """Records what a bound job reports, in order."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.events: list[tuple[Any, ...]] = []

    def should_stop(self) -> bool:
        return time.monotonic() >= self.deadline

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def bound(self, b: Bound) -> None:
        self.events.append(("bound", b))

    def solution(self, solution: Any, source: str) -> None:
        self.events.append(("solution", solution, source))

    def incumbent(self) -> tuple[float | None, Any]:
        return None, None


def test_intraop_lagrangian_job_reports_its_bound_then_priced_solutions() -> None:
    adapter = registry.get("intraop")
    # on a new machine the first job compiles the kernels: not part of the timing below
    adapter.run_bound_job(random_instance(8, 0, max_k=3, limit_quantile=0.2), {}, {"kind": "lagrangian"},
                          _Ctx(0.3), 0, num_workers=1)
    watch_compiling()
    priced = 0
    for seed in range(12):
        p = random_instance(8, seed, max_k=3, limit_quantile=0.2)
        best, _ = brute_force_table(p)
        ctx = _Ctx(1.0)
        t0 = time.monotonic()
        adapter.run_bound_job(p, {}, {"kind": "lagrangian", "share": 1.0}, ctx, seed, num_workers=1)
        assert wall_s_without_compiling(t0) < slack(2.0)  # the job keeps to its deadline of 1 s
        bounds = [i for i, e in enumerate(ctx.events) if e[0] == "bound"]
        found = [(i, e[1]) for i, e in enumerate(ctx.events) if e[0] == "solution" and e[2] == "lagrangian-heuristic"]
        assert bounds
        for i in bounds:
            b = ctx.events[i][1]
            assert b.value <= (best if best is not None else float("inf"))
        if best is None:
            assert not found
            continue
        costs = []
        for i, sol in found:
            assert i > max(bounds)  # the bound is final before the search starts
            ev = evaluate(p, sol)
            assert ev.feasible and ev.cost >= best
            costs.append(ev.cost)
        assert costs == sorted(costs, reverse=True) and len(set(costs)) == len(costs)
        priced += bool(found)
    assert priced >= 4


def test_intraop_lagrangian_job_without_a_usage_limit_only_bounds() -> None:
    p = random_instance(8, 2, max_k=3, limit_quantile=None)
    ctx = _Ctx(0.5)
    registry.get("intraop").run_bound_job(p, {}, {"kind": "lagrangian", "share": 1.0}, ctx, 0,
                                          num_workers=1)
    assert ctx.events and all(e[0] == "bound" for e in ctx.events)


def test_intraop_bound_jobs_run_the_exact_model_first() -> None:
    # small instances are proven by the exact model at once; the Lagrangian then takes the rest
    specs = registry.get("intraop").bound_job_specs(random_instance(8, 0), {})
    assert [s["kind"] for s in specs] == ["exact", "lagrangian"] and specs[-1]["share"] == 1.0
