"""What a pipeline partitioning run is made of: evaluator, search islands, bound jobs, result.

Problem-specific glue between :mod:`problems.pipeline` and the problem-agnostic
runners (:mod:`engine.local_runner` in-process, :mod:`actors` on Ray).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from engine.coordinator import Coordinator
from engine.records import Bound
from problems.pipeline.decoder import SliceDecoder, Split
from problems.pipeline.evaluate import evaluate
from problems.pipeline.model import PipelineProblem
from problems.pipeline.search import PipelineSearch, mla_seeds


class PipelineEvaluator:
    """Coordinator-side exact re-scoring of reported solutions.

    A solution is ``{"blocks": [block per node], "order": [schedule] (optional)}``.
    Before scoring, the blocks' own schedule is split optimally again by SliceGraph,
    which can only lower the cost (the reported split is one of the candidates);
    the better of the two is kept. Returns ``(cost, canonical solution)``.
    """

    def __init__(self, problem: PipelineProblem, k: int) -> None:
        self.problem = problem
        self.k = k
        self.decoder = SliceDecoder(problem, k)

    def __call__(self, solution: Any) -> tuple[float, dict[str, Any]]:
        ev = evaluate(self.problem, solution["blocks"], solution.get("order"), k=self.k)
        resplit = self.decoder.slice(ev.order)
        if resplit.value < ev.objective:
            ev = evaluate(self.problem, resplit.blocks, resplit.order, k=self.k)
        return ev.objective, {"blocks": ev.blocks.tolist(), "order": ev.order.tolist(),
                              "block_costs": ev.block_costs.tolist()}


def split_to_solution(split: Split) -> dict[str, Any]:
    return {"blocks": split.blocks.tolist(), "order": split.order.tolist()}


def make_searches(problem: PipelineProblem, k: int, seed: int, islands: int = 1,
                  population: int = 100) -> list[PipelineSearch]:
    """BRKGA islands (independent streams from one SeedSequence), seeded with MLA orders."""
    streams = np.random.SeedSequence(seed).spawn(islands + 1)
    seeds = mla_seeds(problem, np.random.default_rng(streams[0]))
    return [PipelineSearch(problem, k, np.random.default_rng(s), population=population, seeds=seeds)
            for s in streams[1:]]


def result_doc(problem: PipelineProblem, k: int, coord: Coordinator, stopped_because: str,
               elapsed_s: float) -> dict[str, Any]:
    """The ``result.json`` document (schema in the README)."""
    inc = coord.incumbent
    lb = coord.lb
    bounds = sorted(coord.bounds.values(), key=lambda b: -b.value if math.isfinite(b.value) else math.inf)
    return {
        "problem": "pipeline",
        "graph": problem.name,
        "k": k,
        "objective": None if inc is None else inc.cost,
        "lower_bound": lb,
        "lower_bound_method": None if coord.bound is None else coord.bound.method,
        "gap": coord.gap,
        "blocks": None if inc is None else inc.solution["blocks"],
        "order": None if inc is None else inc.solution["order"],
        "block_costs": None if inc is None else inc.solution["block_costs"],
        "found_by": None if inc is None else inc.source,
        "bounds": [b.to_dict() for b in bounds],
        "elapsed_s": round(elapsed_s, 3),
        "stopped_because": stopped_because,
    }


def bound_record_line(b: Bound) -> str:
    v = "-inf" if not math.isfinite(b.value) else f"{b.value:.6g}"
    return f"{b.method}: {v} ({b.status}, {b.wall_s:.2f}s, {b.solver})"


class _Job:
    """A named bound job for :func:`engine.local_runner.run_threads`."""

    def __init__(self, name: str, fn: Any) -> None:
        self.name = name
        self._fn = fn

    def __call__(self, ctx: Any) -> None:
        self._fn(ctx)


def make_bound_jobs(problem: PipelineProblem, k: int, time_limit_s: float, seed: int = 0) -> list[_Job]:
    """The bound hierarchy as sequential jobs sharing the run's time budget.

    simple (closed form) -> three-superblock ``bottleneck`` (≤ 10 % of the budget) ->
    ``guess-the-bottleneck`` for k ≤ 8 (≤ 25 %; beyond that it adds little over
    ``bottleneck``, Archer et al. 2024 Table 1) -> ``exact`` with the incumbent as a
    warm start for the rest. The exact MIP's partitions are reported as solutions too.
    """
    from problems.pipeline import bounds

    def simple(ctx: Any) -> None:
        ctx.bound(bounds.simple_bound(problem, k))

    def bottleneck(ctx: Any) -> None:
        ctx.bound(bounds.bottleneck_bound(problem, k, min(ctx.time_left(), 0.10 * time_limit_s),
                                          random_seed=seed))

    def guess(ctx: Any) -> None:
        deadline = min(ctx.time_left(), 0.25 * time_limit_s)
        jobs = bounds.guess_jobs(problem, k)
        import time as _t
        end = _t.monotonic() + deadline
        out = []
        for i, job in enumerate(jobs):
            if ctx.should_stop():
                return
            share = max(0.05, (end - _t.monotonic()) / (len(jobs) - i))
            out.append(job.run(share, random_seed=seed))
        ctx.bound(bounds.combine_guesses(out, k))

    def exact(ctx: Any) -> None:
        _, inc = ctx.incumbent()
        hint = None if inc is None else inc["blocks"]

        def on_event(ev: Any) -> None:
            if ev.kind == "incumbent" and ev.blocks is not None:
                ctx.solution({"blocks": list(ev.blocks)}, "exact-mip")
            if math.isfinite(ev.bound):
                ctx.bound(Bound("exact", ev.bound, "bound-only", ev.wall_s, bounds.SOLVER))

        kwargs: dict[str, Any] = {"hint": hint, "on_event": on_event, "random_seed": seed}
        if "should_stop" in bounds.exact_bound.__code__.co_varnames:
            kwargs["should_stop"] = ctx.should_stop
        ctx.bound(bounds.exact_bound(problem, k, ctx.time_left(), **kwargs))

    jobs = [_Job("simple", simple), _Job("bottleneck", bottleneck)]
    if k <= 8:
        jobs.append(_Job("guess-the-bottleneck", guess))
    jobs.append(_Job("exact", exact))
    return jobs


def solve_local(problem: PipelineProblem, k: int, *, time_limit_s: float = 60.0, target_gap: float = 0.0,
                seed: int = 0, islands: int = 1, out_path: str | None = None,
                progress: Any = None, bounds_enabled: bool = True,
                _expose: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run searches and bounds in-process until the target gap, optimality or the time limit.

    With ``out_path``, the result file is rewritten atomically at every improvement
    (``"stopped_because": "running"``), so a killed run keeps its best partition.
    Returns the final result document.
    """
    from engine.local_runner import run_threads
    from engine.stopping import Clock, standard
    from engine.persist import write_json_atomic

    clock = Clock()
    holder: dict[str, Coordinator] = {}

    def persist(_: Any) -> None:
        if out_path:
            write_json_atomic(out_path, result_doc(problem, k, holder["c"], "running", clock.elapsed()))

    coord = Coordinator(PipelineEvaluator(problem, k), standard(target_gap, time_limit_s), clock,
                        on_incumbent=persist)
    holder["c"] = coord
    if _expose is not None:  # lets a caller show live progress
        _expose.update(coord=coord, clock=clock)
    # the simple bound is instant; know it before anything else
    from problems.pipeline.bounds import simple_bound
    coord.offer_bound(simple_bound(problem, k))
    searches = make_searches(problem, k, seed, islands)
    jobs = make_bound_jobs(problem, k, time_limit_s, seed)[1:] if bounds_enabled else []
    reason, stats = run_threads(coord, searches, jobs, time_limit_s - clock.elapsed(),
                                on_tick=progress, to_solution=split_to_solution)
    doc = result_doc(problem, k, coord, reason, clock.elapsed())
    doc["evaluations"] = stats.evals
    if stats.errors:
        doc["worker_errors"] = stats.errors
    if out_path:
        write_json_atomic(out_path, doc)
    return doc
