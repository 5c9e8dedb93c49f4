"""Problems by name: each adapter declares what a run of its problem is made of.

An adapter says how to load the problem, which exact evaluator re-scores solutions,
which search islands and bound jobs run, and which result document is written; the
algorithms themselves live in ``problems/<p>/`` (e.g. :mod:`problems.pipeline.run`,
:mod:`problems.intraop.jobs`). The one solve loop (:mod:`engine.solve_loop`, with
threads or Ray actors) only ever talks to adapters, so a new problem is a subpackage
of ``problems/`` and one adapter here (or :func:`register`), touching neither
``engine/`` nor ``actors/``. ``params`` is a small JSON-serialisable dict of problem
options (e.g. ``{"k": 8}``).

Optional: ``extend_head_start(last_bounds, other_lb, waited_s) -> bool | None``, asked
when the dedicated job's head start is over (:func:`engine.solve_loop.drive`).
"""

from __future__ import annotations

from typing import Any, Protocol

from gapstop.engine.coordinator import Coordinator, Evaluator


class Adapter(Protocol):
    name: str

    def load(self, path: str) -> Any: ...

    def check_params(self, problem: Any, params: dict[str, Any]) -> None: ...

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Evaluator: ...

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, index: int) -> Any: ...

    def to_solution(self, found: Any) -> Any: ...

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]: ...

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]: ...

    def prepare_bounds(self) -> None:
        """Import what bound jobs need (solvers), so a bound worker pays it at start-up."""

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any,
                      seed: int, num_workers: int) -> None: ...

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]: ...


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

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, index: int) -> Any:
        from gapstop.problems.pipeline.run import make_search
        return make_search(problem, params["k"], seed, index, constraints=_pipeline_constraints(params),
                           policy=params.get("policy"))

    def to_solution(self, found: Any) -> Any:
        from gapstop.problems.pipeline.run import split_to_solution
        return split_to_solution(found)

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]:
        from gapstop.problems.pipeline.closed_form import simple_bound
        return [simple_bound(problem, params["k"])]

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        from gapstop.problems.pipeline.run import bound_job_specs
        return bound_job_specs(problem, params["k"])

    def prepare_bounds(self) -> None:
        import gapstop.problems.pipeline.bounds  # noqa: F401  (OR-Tools)
        import gapstop.problems.pipeline.evaluate  # noqa: F401  (compiled kernels, for the MIP's hints)

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any,
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

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, index: int) -> Any:
        from gapstop.problems.intraop.island import IntraopIsland
        from gapstop.problems.intraop.relaxed import prepare
        return IntraopIsland(prepare(problem), seed, index, int(params.get("_islands", 1)))

    def to_solution(self, found: Any) -> Any:
        return [int(s) for s in found.solution]

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]:
        from gapstop.problems.intraop.bounds import lower_bound
        return [lower_bound(problem, "trivial", 5.0)]

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        from gapstop.problems.intraop.jobs import BOUND_JOBS
        return [{"kind": k, "share": s} for k, s in BOUND_JOBS]

    def prepare_bounds(self) -> None:
        import gapstop.problems.intraop.bounds  # noqa: F401

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any,
                      seed: int, num_workers: int) -> None:
        from gapstop.problems.intraop.jobs import run_bound_job
        run_bound_job(problem, spec, ctx, seed, num_workers)

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]:
        import math
        inc = coord.incumbent
        lb = coord.lb
        bounds = sorted(coord.bounds.values(), key=lambda b: -b.value if math.isfinite(b.value) else math.inf)
        return {"problem": "intraop", "instance": problem.name,
                "cost": None if inc is None else int(inc.cost), "feasible": inc is not None,
                "solution": None if inc is None else inc.solution,
                "lower_bound": None if lb is None or not math.isfinite(lb) else int(lb),
                "lower_bound_method": None if coord.bound is None else coord.bound.method,
                "gap": coord.gap, "found_by": None if inc is None else inc.source,
                "bounds": [b.to_dict() for b in bounds], "elapsed_s": round(elapsed_s, 3),
                "stopped_because": reason, **self._plan(problem, inc)}

    @staticmethod
    def _plan(problem: Any, inc: Any) -> dict[str, Any]:
        """``plan``: the solution by op name, module, configuration and DTensor placement, for
        instances from ``intraop generate`` (whose meta names them)."""
        from gapstop.problems.intraop.strategies import named_plan

        plan = None if inc is None else named_plan(getattr(problem, "meta", None), inc.solution)
        return {} if plan is None else {"plan": plan}


_ADAPTERS: dict[str, Adapter] = {"pipeline": PipelineAdapter(), "intraop": IntraopAdapter()}


def register(adapter: Adapter) -> None:
    """Make an adapter available by its name."""
    _ADAPTERS[adapter.name] = adapter


def get(name: str) -> Adapter:
    try:
        return _ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown problem {name!r}; known: {sorted(_ADAPTERS)}") from None
