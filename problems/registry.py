"""Problems by name, behind one small interface the runners and actors use.

An adapter knows how to load its problem, build the exact evaluator, the search
workers and the bound jobs, and write the result document. The runners
(:mod:`engine.local_runner`, :mod:`actors`) only ever talk to adapters, so a new
problem plugs in without touching them. ``params`` is a small JSON-serialisable
dict of problem options (e.g. ``{"k": 8}``).
"""

from __future__ import annotations

from typing import Any, Protocol

from engine.coordinator import Coordinator, Evaluator


class Adapter(Protocol):
    name: str

    def load(self, path: str) -> Any: ...

    def check_params(self, problem: Any, params: dict[str, Any]) -> None: ...

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Evaluator: ...

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, index: int) -> Any: ...

    def to_solution(self, found: Any) -> Any: ...

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]: ...

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]: ...

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any,
                      seed: int, parallel: bool, num_workers: int) -> None: ...

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]: ...


class PipelineAdapter:
    """MTPP: params ``{"k": int}``."""

    name = "pipeline"

    def load(self, path: str) -> Any:
        from problems.pipeline.io import load_graph
        return load_graph(path)

    def check_params(self, problem: Any, params: dict[str, Any]) -> None:
        from engine.errors import InputError
        k = params.get("k")
        if not isinstance(k, int) or k < 1:
            raise InputError(f"-k: must be an integer >= 1, got {k!r}")

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Evaluator:
        from problems.pipeline.run import PipelineEvaluator
        return PipelineEvaluator(problem, params["k"])

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, index: int) -> Any:
        from problems.pipeline.run import make_search
        return make_search(problem, params["k"], seed, index)

    def to_solution(self, found: Any) -> Any:
        from problems.pipeline.run import split_to_solution
        return split_to_solution(found)

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]:
        from problems.pipeline.bounds import simple_bound
        return [simple_bound(problem, params["k"])]

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[dict[str, Any]]:
        from problems.pipeline.run import bound_job_specs
        return bound_job_specs(problem, params["k"])

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: dict[str, Any], ctx: Any,
                      seed: int, parallel: bool, num_workers: int) -> None:
        from problems.pipeline.run import run_bound_job
        run_bound_job(problem, params["k"], spec, ctx, seed, parallel=parallel, num_workers=num_workers)

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]:
        from problems.pipeline.run import result_doc
        return result_doc(problem, params["k"], coord, reason, elapsed_s)


_ADAPTERS: dict[str, Adapter] = {"pipeline": PipelineAdapter()}


def register(adapter: Adapter) -> None:
    """Make an adapter available by its name."""
    _ADAPTERS[adapter.name] = adapter


def get(name: str) -> Adapter:
    try:
        return _ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown problem {name!r}; known: {sorted(_ADAPTERS)}") from None
