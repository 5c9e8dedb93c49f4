"""Problems by name. This module only collects the definitions; each problem declares its own.

A definition (``problems/<p>/definition.py``, ``DEFINITION``) says how to load the problem,
which exact evaluator re-scores solutions, which search islands and bound jobs run, and
which result document is written; the algorithms live in ``problems/<p>/``. The one solve
loop (:mod:`engine.solve_loop`, with threads or Ray actors) only ever talks to definitions,
and the command line (``launch.py``) shows each definition's ``cli_groups()``, so a new
problem is a subpackage of ``problems/`` listed in ``_BUILTIN`` (or given to
:func:`register`), touching neither ``engine/``, ``actors/`` nor ``launch.py``. ``params``
is a small JSON-serialisable dict of problem options (e.g. ``{"k": 8}``).

Optional members: ``extend_head_start(last_bounds, other_lb, waited_s) -> bool | None``, asked
when the dedicated job's head start is over (:func:`engine.solve_loop.drive`);
``cli_groups() -> list[click.Group]``, the problem's commands; ``plan_panels(doc, config,
figures) -> list``, its plan's figures for ``report --plot``.
"""

from __future__ import annotations

from typing import Any, Protocol

from gapstop.engine.coordinator import Coordinator, Evaluator
from gapstop.engine.protocol import Island, JobSpec


class Adapter(Protocol):
    name: str

    def load(self, path: str) -> Any: ...

    def check_params(self, problem: Any, params: dict[str, Any]) -> None: ...

    def evaluator(self, problem: Any, params: dict[str, Any]) -> Evaluator: ...

    def make_search(self, problem: Any, params: dict[str, Any], seed: int, island: Island) -> Any: ...

    def to_solution(self, found: Any) -> Any: ...

    def initial_bounds(self, problem: Any, params: dict[str, Any]) -> list[Any]: ...

    def bound_job_specs(self, problem: Any, params: dict[str, Any]) -> list[JobSpec]: ...

    def prepare_bounds(self) -> None:
        """Import what bound jobs need (solvers), so a bound worker pays it at start-up."""

    def run_bound_job(self, problem: Any, params: dict[str, Any], spec: JobSpec, ctx: Any,
                      seed: int, num_workers: int) -> None: ...

    def result_doc(self, problem: Any, params: dict[str, Any], coord: Coordinator, reason: str,
                   elapsed_s: float) -> dict[str, Any]: ...


_BUILTIN = ("gapstop.problems.pipeline.definition", "gapstop.problems.intraop.definition")
_ADAPTERS: dict[str, Adapter] = {}
_LOADED: list[bool] = []


def _load_builtin() -> None:
    """Import the built-in definitions on first use (each is light: its algorithms load later)."""
    if not _LOADED:
        import importlib

        for module in _BUILTIN:
            definition = importlib.import_module(module).DEFINITION
            _ADAPTERS.setdefault(definition.name, definition)
        _LOADED.append(True)


def register(adapter: Adapter) -> None:
    """Make a problem definition available by its name (its commands too, if it has ``cli_groups``)."""
    _load_builtin()
    _ADAPTERS[adapter.name] = adapter


def get(name: str) -> Adapter:
    _load_builtin()
    try:
        return _ADAPTERS[name]
    except KeyError:
        raise KeyError(f"unknown problem {name!r}; known: {sorted(_ADAPTERS)}") from None


def definitions() -> list[Adapter]:
    """Every known problem definition, the built-in ones first."""
    _load_builtin()
    return list(_ADAPTERS.values())
