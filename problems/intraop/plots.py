"""What an intra-op plan figure shows, re-scored by the exact evaluator: no drawing here.

:func:`memory_profile`: the usage of the chosen strategies at every time step against the
usage limit (:func:`problems.intraop.evaluate.usage_profile`, the evaluator's own sum).
:func:`costliest_ops`: the nodes whose choices cost the most (the node's strategy cost plus
the cost of its incoming edges, so the parts add up to the evaluator's total), named by the
instance's ``meta`` when ``intraop generate`` made it ("op: split n by 4").
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.problems.intraop.evaluate import evaluate, usage_profile
from gapstop.problems.intraop.model import IntraopProblem

#: Instances larger than this are not parsed a second time for their ``meta`` (the contest's
#: instances reach hundreds of MB and have none; generated ones are far smaller).
META_MAX_BYTES = 64 << 20


@dataclass(frozen=True)
class MemoryProfile:
    """Usage per time step of one solution.

    Attributes:
        usage: int64[T], summed usage of the nodes live at each time step.
        limit: the usage limit, or None (unconstrained).
        peak_step: the time step of the largest usage (the first one on a tie).
        step_names: per time step, the op it runs (generated instances), else empty.
    """

    usage: NDArray[np.int64]
    limit: int | None
    peak_step: int
    step_names: tuple[str, ...]


@dataclass(frozen=True)
class CostlyOps:
    """The costliest nodes of a solution, costliest first.

    Attributes:
        node: int64[r], node indices.
        cost: float64[r], the node's strategy cost plus its incoming edges' costs.
        label: per node, ``"op: configuration"`` for generated instances, else
            ``"node i: strategy s"``.
        total: the solution's exact total cost (all nodes, not just these).
    """

    node: NDArray[np.int64]
    cost: NDArray[np.float64]
    label: tuple[str, ...]
    total: int


def _solution(problem: IntraopProblem, solution: Any) -> NDArray[np.int64]:
    ev = evaluate(problem, solution if solution is not None else [])
    if ev.cost is None:
        raise InputError(f"result.json: solution: {ev.reason}")
    return np.asarray(solution, dtype=np.int64)


def memory_profile(problem: IntraopProblem, solution: Any, meta: dict[str, Any] | None = None) -> MemoryProfile:
    """The usage profile of ``solution`` (one strategy per node; InputError if malformed)."""
    s = _solution(problem, solution)
    use = usage_profile(problem, s)
    names: tuple[str, ...] = ()
    ops = (meta or {}).get("ops")
    if isinstance(ops, list) and len(ops) == len(use):  # generated: step t runs op t
        names = tuple(str(o) for o in ops)
    return MemoryProfile(usage=use, limit=problem.usage_limit, peak_step=int(np.argmax(use)) if len(use) else 0,
                         step_names=names)


def node_costs(problem: IntraopProblem, solution: Any) -> list[int]:
    """Exact cost per node: its strategy's cost plus the costs of the edges whose second
    endpoint it is. They sum to the evaluator's total cost."""
    s = _solution(problem, solution)
    k = problem.num_strategies
    per = problem.node_cost[problem.node_ptr[:-1] + s].tolist()
    eu, ev = problem.edge_u, problem.edge_v
    terms = problem.edge_cost[problem.edge_ptr[:-1] + s[eu] * k[ev] + s[ev]].tolist()
    for v, c in zip(ev.tolist(), terms):
        per[v] += c
    return per


def costliest_ops(problem: IntraopProblem, solution: Any, meta: dict[str, Any] | None = None,
                  top: int = 12) -> CostlyOps:
    """The ``top`` costliest nodes of ``solution`` (see :class:`CostlyOps`)."""
    s = _solution(problem, solution)
    per = node_costs(problem, s)
    idx = sorted(range(len(per)), key=lambda v: (-per[v], v))[:top]
    ops, configs = (meta or {}).get("ops"), (meta or {}).get("configs")
    named = isinstance(ops, list) and isinstance(configs, list) and len(ops) == len(configs) == problem.n
    labels = tuple(f"{ops[v]}: {configs[v][int(s[v])]}" if named else f"node {v}: strategy {int(s[v])}"  # type: ignore[index]
                   for v in idx)
    return CostlyOps(node=np.asarray(idx, dtype=np.int64), cost=np.asarray([float(per[v]) for v in idx]),
                     label=labels, total=sum(per))


def instance_meta(path: str | Path) -> dict[str, Any] | None:
    """The ``meta`` of an instance file (None if it has none, is unreadable or too large)."""
    from gapstop.engine.persist import read_json_file

    p = Path(path)
    try:
        if p.stat().st_size > META_MAX_BYTES:
            return None
        doc = read_json_file(p)
    except (OSError, InputError):
        return None
    meta = doc.get("meta") if isinstance(doc, dict) else None
    return meta if isinstance(meta, dict) else None


def plan_from_run(result: dict[str, Any], config: dict[str, Any] | None) -> tuple[MemoryProfile, CostlyOps]:
    """The plan figures' data of an intra-op run, from the instance ``config.json`` names.

    Raises:
        InputError: no feasible solution in the result, or the instance is missing or changed
            (the usage per step needs its tables; ``result.json`` does not hold them).
    """
    from gapstop.engine.persist import file_digest
    from gapstop.problems.intraop.io import load_problem

    if result.get("solution") is None:
        raise InputError("result.json: no solution to plot (the run found no feasible solution)")
    path = (config or {}).get("problem_path")
    if not path or not Path(path).is_file():
        raise InputError(f"{path}: the run's instance is not there; the plan figure needs it")
    if file_digest(path) != config.get("problem_digest"):  # type: ignore[union-attr]
        raise InputError(f"{path}: the instance changed since the run; the plan figure needs the run's own")
    problem = load_problem(path)
    meta = instance_meta(path)
    return memory_profile(problem, result["solution"], meta), costliest_ops(problem, result["solution"], meta)
