"""What a pipeline plan figure shows, re-scored by the exact evaluator: no drawing here.

:func:`stage_bars` gives one bar per stage, split into compute, communication and overflow
(the evaluator's own terms, :func:`problems.pipeline.plan.cost_terms`), with the bottleneck
stage and each stage's modules; :func:`chip_graph` gives the stage graph's edges, which a
multi-chip-module run draws as chips on its ring. Both recompute everything from the
partition in ``result.json`` and the graph; :func:`plan_from_run` falls back to the
``stages`` ``result.json`` holds (also the evaluator's numbers) when the graph file is gone
or changed.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.problems.pipeline.evaluate import Evaluation, evaluate
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.plan import stage_plan


@dataclass(frozen=True)
class StageBars:
    """One bar per stage, in DAG order (the graph's time unit).

    Attributes:
        compute, communication, overflow: float64[p], the cost terms of each stage; their
            sum is the stage cost.
        cost: float64[p], each stage's cost as the evaluator reports it.
        bottleneck: index of the costliest stage (the first one on a tie).
        modules: per stage, the module paths it holds whole (empty without op metadata).
        ops: per stage, its number of ops.
        source: ``"evaluator"`` (re-scored here) or ``"result.json"`` (its stored ``stages``).
    """

    compute: NDArray[np.float64]
    communication: NDArray[np.float64]
    overflow: NDArray[np.float64]
    cost: NDArray[np.float64]
    bottleneck: int
    modules: tuple[tuple[str, ...], ...]
    ops: tuple[int, ...]
    source: str


@dataclass(frozen=True)
class ChipGraph:
    """The stage graph of a partition: chips (stages) and the bytes sent between them.

    Attributes:
        chips: number of chips (stages).
        ring: whether the run put the chips on a uni-directional ring (``--ring``).
        edges: int64[e, 2], chip pairs (a, b), a != b, with at least one tensor from a to b.
        bytes: int64[e], bytes sent along each edge (each tensor counted once per chip it
            goes to, as the evaluator charges it).
    """

    chips: int
    ring: bool
    edges: NDArray[np.int64]
    bytes: NDArray[np.int64]


def _bars(stages: list[dict[str, Any]], source: str) -> StageBars:
    cost = np.asarray([float(s["cost"]) for s in stages], dtype=np.float64)
    return StageBars(
        compute=np.asarray([float(s["compute"]) for s in stages], dtype=np.float64),
        communication=np.asarray([float(s["communication"]) for s in stages], dtype=np.float64),
        overflow=np.asarray([float(s["overflow"]) for s in stages], dtype=np.float64),
        cost=cost, bottleneck=int(np.argmax(cost)) if len(cost) else 0,
        modules=tuple(tuple(s.get("modules") or ()) for s in stages),
        ops=tuple(len(s.get("ops") or ()) for s in stages), source=source)


def stage_bars(problem: PipelineProblem, ev: Evaluation) -> StageBars:
    """The bars of an evaluated partition (see :class:`StageBars`)."""
    return _bars(stage_plan(problem, ev), "evaluator")


def chip_graph(problem: PipelineProblem, ev: Evaluation, ring: bool) -> ChipGraph:
    """The stage graph of an evaluated partition (see :class:`ChipGraph`)."""
    b = ev.blocks
    sent: dict[tuple[int, int], int] = {}
    # a tensor goes to every other chip that consumes it once, whatever its consumers there
    for u in range(problem.n):
        to = {int(b[int(v)]) for v in problem.succ[problem.succ_ptr[u]:problem.succ_ptr[u + 1]]} - {int(b[u])}
        for c in to:
            key = (int(b[u]), c)
            sent[key] = sent.get(key, 0) + int(problem.size_out[u])
    keys = sorted(sent)
    return ChipGraph(chips=len(ev.block_costs), ring=ring,
                     edges=np.asarray(keys, dtype=np.int64).reshape(-1, 2),
                     bytes=np.asarray([sent[k] for k in keys], dtype=np.int64))


def evaluate_result(problem: PipelineProblem, result: dict[str, Any]) -> Evaluation:
    """Re-score the partition of a ``result.json`` exactly (its ``blocks`` and ``order``).

    Raises:
        InputError: the document holds no partition, or not one of this graph.
    """
    try:
        blocks, order = result["blocks"], result.get("order")
    except (KeyError, TypeError):
        raise InputError("result.json: no partition ('blocks') to plot") from None
    if blocks is None:
        raise InputError("result.json: no partition ('blocks') to plot")
    return evaluate(problem, blocks, order)


def plan_from_run(result: dict[str, Any], config: dict[str, Any] | None) -> tuple[StageBars, ChipGraph | None]:
    """The plan figures' data of a pipeline run: the stage bars, and the chip graph when the
    run had multi-chip-module constraints (else None).

    The graph is the one ``config.json`` names, used only if its digest still matches the
    run's; otherwise the bars come from ``result.json``'s ``stages`` and there is no chip graph.

    Raises:
        InputError: no partition in the result, or no way to get its stages.
    """
    from gapstop.engine.persist import file_digest
    from gapstop.problems.pipeline.io import load_graph

    cons = (config or {}).get("params", {}).get("constraints") or result.get("constraints")
    path = (config or {}).get("problem_path")
    problem = None
    if path and Path(path).is_file():
        try:
            if file_digest(path) == config.get("problem_digest"):  # type: ignore[union-attr]
                problem = load_graph(path)
        except (OSError, InputError):
            problem = None
    if problem is not None:
        ev = evaluate_result(problem, result)
        return stage_bars(problem, ev), chip_graph(problem, ev, bool(cons and cons.get("ring"))) if cons else None
    if result.get("stages"):
        return _bars(result["stages"], "result.json"), None
    if result.get("block_costs") is None:
        raise InputError("result.json: no partition to plot (the run found no feasible partition)")
    raise InputError(f"{path}: the run's graph is missing or changed, and result.json has no 'stages' to plot")
