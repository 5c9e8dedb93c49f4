"""The intra-operator sharding problem (IOPDDL) as the engine and the command line see it:
loader, exact evaluator, search islands, bound jobs, the one result document builder,
plan figures and commands. The algorithms are in this package's modules."""

from __future__ import annotations

import math
from typing import Any

from gapstop.engine.coordinator import Coordinator, Evaluator
from gapstop.engine.protocol import Island, JobSpec


def result_document(problem: Any, *, cost: int | None, solution: list[int] | None, lower_bound: float | None,
                    reason: str, elapsed_s: float, **fields: Any) -> dict[str, Any]:
    """The result document of every intra-op solve (a run's, and ``--method elimination``'s):
    the solution, its exact cost, the bound and gap, and ``plan`` (the solution by op name)
    for instances from ``intraop generate``. ``fields`` add method-specific entries."""
    from gapstop.engine.records import relative_gap
    from gapstop.problems.intraop.strategies import named_plan

    lb = None if lower_bound is None or not math.isfinite(lower_bound) else int(lower_bound)
    doc = {"problem": "intraop", "instance": problem.name, "cost": cost, "feasible": solution is not None,
           "solution": solution, "lower_bound": lb, "gap": relative_gap(cost, lb),
           "elapsed_s": round(elapsed_s, 3), "stopped_because": reason, **fields}
    plan = None if solution is None else named_plan(getattr(problem, "meta", None), solution)
    if plan is not None:
        doc["plan"] = plan
    return doc


class IntraopAdapter:
    """Intra-operator sharding (IOPDDL): no params; exact integer costs."""

    name = "intraop"
    def load(self, path: str) -> Any:
        from gapstop.problems.intraop.io import load_problem
        return load_problem(path)

    def check_params(self, problem: Any, params: dict[str, Any]) -> None:
        pass

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Evaluator:
        from gapstop.problems.intraop.evaluate import evaluate

        def score(solution: Any) -> tuple[int, list[int]]:
            sol = [int(s) for s in solution]
            ev = evaluate(problem, sol)
            if not ev.feasible or ev.cost is None:
                raise ValueError(ev.reason or "infeasible")
            return ev.cost, sol

        from gapstop.engine.coordinator import integral
        return integral(score)  # exact int costs and bounds: optimal means bound == cost

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, island: Island) -> Any:
        from gapstop.problems.intraop.island import IntraopIsland
        from gapstop.problems.intraop.relaxed import prepare
        return IntraopIsland(prepare(problem), seed, island.index, island.count)

    def to_solution(self, found: Any) -> Any:
        return [int(s) for s in found.solution]

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]:
        from gapstop.problems.intraop.bounds import lower_bound
        return [lower_bound(problem, "trivial", 5.0)]

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[JobSpec]:
        from gapstop.problems.intraop.jobs import BOUND_JOBS
        return [JobSpec(k, share=s) for k, s in BOUND_JOBS]

    def prepare_bounds(self) -> None:
        import gapstop.problems.intraop.bounds  # noqa: F401

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: JobSpec, ctx: Any,
                      seed: int, num_workers: int) -> None:
        from gapstop.problems.intraop.jobs import run_bound_job
        run_bound_job(problem, spec, ctx, seed, num_workers)

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]:
        inc = coord.incumbent
        bounds = sorted(coord.bounds.values(), key=lambda b: -b.value if math.isfinite(b.value) else math.inf)
        return result_document(
            problem, cost=None if inc is None else int(inc.cost), solution=None if inc is None else inc.solution,
            lower_bound=coord.lb, reason=reason, elapsed_s=elapsed_s,
            lower_bound_method=None if coord.bound is None else coord.bound.method,
            found_by=None if inc is None else inc.source, bounds=[b.to_dict() for b in bounds])

    def plan_panels(self, doc: dict[str, Any], config: dict[str, Any], figures: Any) -> list[Any]:
        """The memory profile over time and the costliest ops."""
        from gapstop.problems.intraop.plots import plan_from_run

        prof, ops = plan_from_run(doc, config)
        return [figures.memory_panel(prof), figures.costly_panel(ops)]

    def cli_groups(self) -> list[Any]:
        from gapstop.problems.intraop.cli import groups

        return groups()


DEFINITION = IntraopAdapter()
