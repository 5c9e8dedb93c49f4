"""The pipeline problem (MTPP, and its multi-chip-module variant) as the engine and the
command line see it: loader, exact evaluator, search islands, bound jobs, result document,
plan figures and commands. The algorithms are in this package's modules."""

from __future__ import annotations

from typing import Any

from gapstop.engine.coordinator import Coordinator, Evaluator
from gapstop.engine.protocol import Island, JobSpec


def result_document(problem: Any, k: int, ev: Any, *, lower_bound: float | None, lower_bound_method: str | None,
                    gap: float | None, bounds: list[dict[str, Any]], found_by: str | None, elapsed_s: float,
                    stopped_because: str, **fields: Any) -> dict[str, Any]:
    """The result document of every pipeline solve (a run's, ``--contiguous`` and ``--split-at
    module``; schema in docs/formats.md). ``ev``: the plan's exact evaluation
    (:func:`problems.pipeline.evaluate.evaluate`), None when nothing feasible was found; the
    stages, their costs and the split spec all come from it. ``fields``: mode-specific entries."""
    from gapstop.problems.pipeline.plan import split_spec, stage_plan

    doc: dict[str, Any] = {
        "problem": "pipeline", "graph": problem.name, "k": k, **fields,
        "objective": None if ev is None else ev.objective,
        "lower_bound": lower_bound, "lower_bound_method": lower_bound_method, "gap": gap,
        "blocks": None if ev is None else ev.blocks.tolist(),
        "order": None if ev is None else ev.order.tolist(),
        "block_costs": None if ev is None else ev.block_costs.tolist(),
        "found_by": found_by, "bounds": bounds,
        "elapsed_s": round(elapsed_s, 3), "stopped_because": stopped_because,
    }
    if ev is not None:  # per-stage ops, modules and cost terms
        doc["stages"] = stage_plan(problem, ev)
        doc.update(split_spec(problem, ev))
    return doc


def _pipeline_constraints(params: dict[str, Any]) -> Any:
    """The MCM constraints of ``params["constraints"]`` (absent: none), chips = k."""
    from gapstop.problems.pipeline.constraints import Constraints
    return Constraints.from_dict(params.get("constraints"), params["k"])


class PipelineAdapter:
    """MTPP: params ``{"k": int, "constraints": {...} (optional, MCM constraints),
    "policy": {"path", "finetune", "mode"} (optional, a learned policy's island)}``."""

    name = "pipeline"

    def load(self, path: str) -> Any:
        from gapstop.problems.pipeline.io import load_graph
        return load_graph(path)

    def check_params(self, problem: Any, params: dict[str, Any]) -> None:
        from gapstop.engine.errors import InputError
        k = params.get("k")
        if not isinstance(k, int) or k < 1:
            raise InputError(f"-k: must be an integer >= 1, got {k!r}")
        _pipeline_constraints(params).validate(problem)

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Evaluator:
        from gapstop.problems.pipeline.run import PipelineEvaluator
        return PipelineEvaluator(problem, params["k"], _pipeline_constraints(params))

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, island: Island) -> Any:
        from gapstop.problems.pipeline.run import make_search
        return make_search(problem, params["k"], seed, island.index, constraints=_pipeline_constraints(params),
                           policy=params.get("policy"), generation=island.generation)

    def to_solution(self, found: Any) -> Any:
        from gapstop.problems.pipeline.run import split_to_solution
        return split_to_solution(found)

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]:
        from gapstop.problems.pipeline.closed_form import simple_bound
        return [simple_bound(problem, params["k"])]

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[JobSpec]:
        from gapstop.problems.pipeline.run import bound_job_specs
        return [JobSpec.of(s) for s in bound_job_specs(problem, params["k"])]

    def prepare_bounds(self) -> None:
        import gapstop.problems.pipeline.bounds  # noqa: F401  (OR-Tools)
        import gapstop.problems.pipeline.evaluate  # noqa: F401  (compiled kernels, for the MIP's hints)

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: JobSpec, ctx: Any,
                      seed: int, num_workers: int) -> None:
        from gapstop.problems.pipeline.run import run_bound_job
        run_bound_job(problem, params["k"], spec, ctx, seed, num_workers=num_workers,
                      constraints=_pipeline_constraints(params))

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]:
        from gapstop.problems.pipeline.run import result_doc
        return result_doc(problem, params["k"], coord, reason, elapsed_s, _pipeline_constraints(params))

    def extend_head_start(self, job_bounds: dict[str, Any], lb: float | None, waited_s: float) -> bool | None:
        from gapstop.problems.pipeline.run import extend_head_start
        return extend_head_start(job_bounds, lb, waited_s)

    def plan_panels(self, doc: dict[str, Any], config: dict[str, Any], figures: Any) -> list[Any]:
        """The stage bars, and the chips' ring with multi-chip-module constraints."""
        from gapstop.problems.pipeline.plots import plan_from_run

        bars, chips = plan_from_run(doc, config)
        return [figures.stages_panel(bars)] + ([] if chips is None else [figures.chips_panel(chips, bars)])

    def cli_groups(self) -> list[Any]:
        from gapstop.problems.pipeline.cli import groups

        return groups()


DEFINITION = PipelineAdapter()
