"""Problems by name, behind one small interface the runners and actors use.

An adapter knows how to load its problem, build the exact evaluator, the search
workers and the bound jobs, and write the result document. The runners
(:mod:`engine.local_runner`, :mod:`actors`) only ever talk to adapters, so a new
problem plugs in without touching them. ``params`` is a small JSON-serialisable
dict of problem options (e.g. ``{"k": 8}``).
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
                      seed: int, parallel: bool, num_workers: int) -> None: ...

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
                      seed: int, parallel: bool, num_workers: int) -> None:
        from gapstop.problems.pipeline.run import run_bound_job
        run_bound_job(problem, params["k"], spec, ctx, seed, parallel=parallel, num_workers=num_workers,
                      constraints=_pipeline_constraints(params))

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]:
        from gapstop.problems.pipeline.run import result_doc
        return result_doc(problem, params["k"], coord, reason, elapsed_s, _pipeline_constraints(params))

    def extend_head_start(self, job_bounds: dict[str, Any], lb: float | None, waited_s: float) -> bool | None:
        from gapstop.problems.pipeline.run import extend_head_start
        return extend_head_start(job_bounds, lb, waited_s)


#: The Lagrangian bound job leaves this share of its time, when the usage limit can bind, to a
#: penalty search started from its multipliers' usage prices (a Lagrangian heuristic), whose
#: solutions it reports. Instance A at 60 s on 2 CPUs (one island, one bound worker): median 1.00025
#: x the best known cost over 11 runs (8 at 1.000025-1.00026) against 1.0033 over 7 (3 at
#: 1.00026-1.00035) when the first island priced usage itself instead (BENCHMARKS.md).
LAGRANGIAN_HEURISTIC_SHARE = 0.5


class IntraopAdapter:
    """Intra-operator sharding (IOPDDL): no params; exact integer costs."""

    name = "intraop"
    #: bound methods run by bound workers after the instant ``trivial`` one, with their shares of
    #: the time left: the exact model first (it proves small instances optimal at once and is
    #: skipped on large ones), then the Lagrangian to the end. No ``unconstrained`` job: the
    #: Lagrangian's bound is at least as high (its multipliers start at 0, and without a usage
    #: limit that can bind it computes the same relaxation).
    BOUND_JOBS = (("exact", 0.2), ("lagrangian", 1.0))

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
        return [{"kind": k, "share": s} for k, s in self.BOUND_JOBS]

    def prepare_bounds(self) -> None:
        import gapstop.problems.intraop.bounds  # noqa: F401

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any,
                      seed: int, parallel: bool, num_workers: int) -> None:
        import math
        import time

        from gapstop.problems.intraop.bounds import lower_bound
        from gapstop.engine.local_runner import job_budget, live_bound
        budget = job_budget(ctx, spec, parallel)
        if budget is None:
            return
        end = time.perf_counter() + budget
        kw: dict[str, Any] = {"num_workers": max(2, num_workers), "seed": seed} if spec["kind"] == "exact" else {}
        prices: list[Any] = []
        if spec["kind"] == "lagrangian":
            # the incumbent's cost steers the Polyak step size; the searches keep lowering it, so it is
            # asked again (at most once a second: the answer carries the solution)
            seen = {"t": -math.inf, "ub": None}

            def target() -> float | None:
                if time.monotonic() - seen["t"] >= 1.0:
                    seen["t"], seen["ub"] = time.monotonic(), ctx.incumbent()[0]
                return seen["ub"]

            kw["upper_bound"] = target
            # every improving multiplier vector's value is itself a valid bound: report it now
            kw["on_improvement"] = live_bound(ctx, "lagrangian", "trw-s", 0.0)
            kw.update(price_reserve=LAGRANGIAN_HEURISTIC_SHARE, on_prices=prices.append)
        b = lower_bound(problem, spec["kind"], budget, **kw)
        sol = (b.detail or {}).get("solution")
        if sol is not None:
            ctx.solution(sol, f"{spec['kind']}-cpsat")
        ctx.bound(b)
        if prices and not ctx.should_stop():
            from gapstop.problems.intraop.penalty import PenaltySearch, run_until
            from gapstop.problems.intraop.relaxed import prepare

            search = PenaltySearch(prepare(problem), prices[0], seed, jitter=0.0)
            run_until(search, end, lambda f: ctx.solution(self.to_solution(f), "lagrangian-heuristic"),
                      ctx.should_stop)

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
                "stopped_because": reason}


_ADAPTERS: dict[str, Adapter] = {"pipeline": PipelineAdapter(), "intraop": IntraopAdapter()}


def register(adapter: Adapter) -> None:
    """Make an adapter available by its name."""
    _ADAPTERS[adapter.name] = adapter


def get(name: str) -> Adapter:
    try:
        return _ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown problem {name!r}; known: {sorted(_ADAPTERS)}") from None
