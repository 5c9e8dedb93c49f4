"""``gapstop.plan_pipeline``: a torch module in, a pipeline plan that torch runs out.

Exports the module with ``torch.export`` (its outputs flattened to a tuple of tensors, so
dataclass, ``ModelOutput``, dict and tuple outputs need no wrapping by the user), imports the
program with per-op roofline costs on a chip profile, solves in this process and returns a
:class:`PipelinePlan`: a ``split_spec`` for ``torch.distributed.pipelining.pipeline``, the
same cuts as torchtitan's ``pipeline_parallel_split_points``, the stage costs, and the
certificate (objective, lower bound, gap). Imports torch lazily (extra ``gapstop[torch]``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Sequence

from gapstop.engine.errors import InputError
from gapstop.problems.chip import ChipProfile, load_chip
from gapstop.problems.pipeline.importers.roofline import optional_import
from gapstop.problems.pipeline.importers.torch_export import INSTALL_HINT, import_program
from gapstop.problems.pipeline.io import check_stages, problem_from_dict
from gapstop.problems.pipeline.model import PipelineProblem

__all__ = ["PipelinePlan", "StagePlan", "plan_pipeline"]

#: the attribute under which the export wrapper holds the user's module (stripped from every path)
_WRAPPED = "wrapped"


@dataclass(frozen=True)
class StagePlan:
    """One pipeline stage: the module paths it holds whole (outermost first, in program order),
    the modules a stage boundary cuts (none for module-boundary plans), its ops by name, and its
    cost (the graph's time unit, µs for imports) split into compute + communication + overflow."""

    stage: int
    modules: tuple[str, ...]
    cut_modules: tuple[str, ...]
    ops: tuple[str, ...]
    cost: float
    compute: float
    communication: float
    overflow: float


@dataclass(frozen=True)
class PipelinePlan:
    """A certified pipeline plan of a torch module.

    Attributes:
        split_spec: module path -> ``SplitPoint.BEGINNING``, for
            ``torch.distributed.pipelining.pipeline(module, mb_args, split_spec=...)``; None if
            the plan cannot be written so (``split_at="op"`` plans that cut inside a module).
        split_points: the same paths in program order (torchtitan's
            ``pipeline_parallel_split_points``), or None with ``split_spec``.
        stages: per stage, in program order.
        objective: the cost of the slowest stage, re-scored by the exact evaluator.
        lower_bound: a valid lower bound on every plan's bottleneck, restricted or not.
        gap: ``1 - lower_bound / objective``; with ``split_at="module"`` it includes what the
            restriction to module boundaries costs.
        stopped_because: ``optimal``, ``target-gap``, ``bounds-exhausted``, ``time-limit``, ...
        split_at: ``"module"`` or ``"op"``.
        k: the stage limit asked for (the plan may use fewer stages).
        problem: the imported pipeline graph the plan partitions.
        result: the ``result.json`` document of the solve.
    """

    split_spec: dict[str, Any] | None
    split_points: tuple[str, ...] | None
    stages: tuple[StagePlan, ...]
    objective: float
    lower_bound: float | None
    gap: float | None
    stopped_because: str
    split_at: str
    k: int
    problem: PipelineProblem = dataclasses.field(repr=False)
    result: dict[str, Any] = dataclasses.field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The plan as plain JSON values (split points as ``"BEGINNING"``)."""
        return {"split_at": self.split_at, "k": self.k,
                "split_spec": None if self.split_spec is None else {m: "BEGINNING" for m in self.split_spec},
                "split_points": None if self.split_points is None else list(self.split_points),
                "objective": self.objective, "lower_bound": self.lower_bound,
                "lower_bound_method": self.result.get("lower_bound_method"), "gap": self.gap,
                "stopped_because": self.stopped_because,
                "stages": [{**dataclasses.asdict(s), "modules": list(s.modules), "cut_modules": list(s.cut_modules),
                            "ops": list(s.ops)} for s in self.stages]}

    def to_json(self, indent: int | None = None) -> str:
        return json.dumps(self.to_dict(), indent=indent)


def flatten_tensors(value: Any) -> list[Any]:
    """The tensors of a module's output in order: tensors as they are; dataclass fields
    (``ModelOutput`` too), mapping values, list and tuple items recursively; anything else
    (None, numbers, caches objects) holds no tensor the plan needs and is dropped."""
    torch = optional_import("torch", INSTALL_HINT)
    if isinstance(value, torch.Tensor):
        return [value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        items: list[Any] = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, Mapping):
        items = list(value.values())
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        return []
    return [t for item in items for t in flatten_tensors(item)]


def export_flat(module: Any, example_args: Sequence[Any], example_kwargs: Mapping[str, Any] | None = None) -> Any:
    """``torch.export`` of ``module`` with its output flattened (:func:`flatten_tensors`); the
    program's module paths and parameter names start with ``wrapped.``."""
    torch = optional_import("torch", INSTALL_HINT)

    class Flat(torch.nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            setattr(self, _WRAPPED, module)

        def forward(self, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
            out = flatten_tensors(getattr(self, _WRAPPED)(*args, **kwargs))
            if not out:
                raise InputError("plan_pipeline: the module's output holds no tensor")
            return tuple(out)

    return torch.export.export(Flat(), tuple(example_args), kwargs=dict(example_kwargs or {}))


def _strip(path: str) -> str | None:
    """``wrapped.a.b`` -> ``a.b``; the wrapper's child itself (the user's root) -> None."""
    if path == _WRAPPED:
        return None
    return path[len(_WRAPPED) + 1:] if path.startswith(_WRAPPED + ".") else path


def _unwrap(doc: dict[str, Any]) -> None:
    """Rename the export wrapper's paths in an imported graph document to the user's module's."""
    for op in doc["graph"]["nodes"].get("ops") or []:
        if not op:
            continue
        if op.get("module"):
            op["module"] = _strip(op["module"])
        if op.get("module_stack") is not None:
            op["module_stack"] = [q for q in (_strip(m) for m in op["module_stack"]) if q]
        for x in op.get("inputs") or []:
            if x.get("param"):
                x["name"] = _strip(x["name"]) or x["name"]


def import_module(module: Any, example_args: Sequence[Any], chip: str | ChipProfile,
                  example_kwargs: Mapping[str, Any] | None = None) -> PipelineProblem:
    """The pipeline graph of ``module`` run on ``example_args`` (see the module docstring)."""
    profile = chip if isinstance(chip, ChipProfile) else load_chip(chip)
    name = type(module).__name__
    ep = export_flat(module, example_args, example_kwargs)
    doc, _ = import_program(ep, profile, name, name, name)
    _unwrap(doc)
    return problem_from_dict(doc, name)


def plan_pipeline(module: Any, example_args: Sequence[Any], k: int, chip: str | ChipProfile, *,
                  time_limit: float = 60.0, target_gap: float = 0.0, split_at: str = "module",
                  example_kwargs: Mapping[str, Any] | None = None, seed: int = 0) -> PipelinePlan:
    """Plan ``module`` as a pipeline of at most ``k`` stages on ``chip`` and certify the plan.

    Args:
        module: a ``torch.nn.Module`` that ``torch.export`` can capture with static shapes
            (in eval mode for inference plans). It is not changed.
        example_args: positional inputs of one micro-batch (the shapes the costs are for).
        k: the most stages (1 to 1024).
        chip: a shipped chip profile name (``"a100-sxm-80gb"``) or a :class:`ChipProfile`.
        time_limit: seconds for the solve (the export and import come on top).
        target_gap: stop once ``gap <= target_gap`` (0: until proven optimal or the time limit).
        split_at: ``"module"``: the best plan whose stages begin at submodule calls, exactly the
            cuts ``torch.distributed.pipelining`` makes (docs/importing.md, "Runnable plans"), with the
            unrestricted lower bound; ``"op"``: any partition (the full search, as
            ``pipeline solve --split-at op``), whose ``split_spec`` is None when a stage
            boundary falls inside a module.
        example_kwargs: keyword inputs of one micro-batch.
        seed: the seed of the searches and solvers.

    Returns:
        The :class:`PipelinePlan`.

    Raises:
        InputError: bad arguments, torch missing, or a module torch.export cannot capture.

    Example::

        import gapstop
        from torch.distributed.pipelining import pipeline

        plan = gapstop.plan_pipeline(model, (input_ids,), 4, "a100-sxm-80gb")
        pipe = pipeline(model, (input_ids,), split_spec=plan.split_spec)
    """
    if split_at not in ("module", "op"):
        raise InputError(f"split_at: expected 'module' or 'op', got {split_at!r}")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise InputError(f"k: expected an int >= 1, got {k!r}")
    if not (time_limit > 0 and 0 <= target_gap < 1):
        raise InputError(f"time_limit must be > 0 and target_gap in [0, 1), got {time_limit!r}, {target_gap!r}")
    optional_import("torch", INSTALL_HINT)
    profile = chip if isinstance(chip, ChipProfile) else load_chip(chip)  # a bad name fails before the export
    problem = import_module(module, example_args, profile, example_kwargs)
    check_stages(problem, k, "k")
    workers = max(2, os.cpu_count() or 1)
    if split_at == "module":
        from gapstop.problems.pipeline.plan import solve_module_split

        doc = solve_module_split(problem, k, time_limit_s=time_limit, target_gap=target_gap, seed=seed,
                                 num_workers=workers)
    else:
        from gapstop.engine.facade import RunConfig, solve
        from gapstop.problems import registry

        with tempfile.TemporaryDirectory(prefix="gapstop-plan-") as rd:
            config = RunConfig(path=None, run_dir=rd, time_limit_s=time_limit, target_gap=target_gap,
                               seed=seed, workers=workers, in_process=True)
            doc = solve(registry.get("pipeline"), problem, {"k": k}, config)
        doc.pop("run_dir", None)
    return _plan(problem, doc, split_at, k)


def _plan(problem: PipelineProblem, doc: dict[str, Any], split_at: str, k: int) -> PipelinePlan:
    spec = doc.get("split_spec")
    if spec is not None:
        from torch.distributed.pipelining import SplitPoint

        spec = {m: SplitPoint.BEGINNING for m in spec}
    stages = tuple(StagePlan(s["stage"], tuple(s["modules"]), tuple(s["cut_modules"]), tuple(s["ops"]), s["cost"],
                             s["compute"], s["communication"], s["overflow"]) for s in doc.get("stages") or [])
    return PipelinePlan(split_spec=spec, split_points=None if spec is None else tuple(spec), stages=stages,
                        objective=doc["objective"], lower_bound=doc["lower_bound"], gap=doc["gap"],
                        stopped_because=doc["stopped_because"], split_at=split_at, k=k, problem=problem,
                        result=doc)
