"""What a partition means to a user: per-stage ops, module paths and cost terms; contiguous plans.

* :func:`stage_plan`: for each stage, its ops by name, the module paths it holds whole, the
  modules a stage boundary cuts, and its cost split into compute, communication and
  overflow. The split is read off the exact evaluator's own terms, so the three parts add up
  to the stage cost the evaluator reports.
* :func:`solve_contiguous`: the best partition whose stages are contiguous runs of one given
  order (by default the file's node order, which importers write in the model's execution
  order): SliceGraph on that order is exact, so this is optimal among such plans by
  construction. Lower bounds computed on the unrestricted problem then say how much the
  restriction can cost.
* :func:`solve_module_split`: the best plan that ``torch.distributed.pipelining`` can make from a
  ``split_spec``: stages contiguous in the program's order, each beginning where a call of a
  submodule begins (:func:`module_cuts`). Exact by a dynamic program over those cut positions;
  its gap is against the unrestricted lower bounds.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.engine.records import Bound, relative_gap
from gapstop.problems.pipeline.evaluate import Evaluation, check_order, evaluate
from gapstop.problems.pipeline.model import PipelineProblem


def cost_terms(problem: PipelineProblem, ev: Evaluation) -> list[dict[str, float]]:
    """Per stage: ``compute`` (work), ``communication`` ((in + out bytes) / B) and ``overflow``
    (max(param + peak - M, 0) / B, 0 without a memory limit), in the graph's time unit.

    These are the terms of the exact cost expression in :mod:`problems.pipeline._kernels`,
    added in the same order, so ``compute + communication + overflow`` equals the evaluator's
    stage cost to the last bit.
    """
    B = problem.bandwidth
    out = []
    for s in range(len(ev.block_costs)):
        comm = (int(ev.in_bytes[s]) + int(ev.out_bytes[s])) / B
        over = 0.0
        if problem.memory is not None:
            excess = int(ev.param_bytes[s]) + int(ev.peak_bytes[s]) - problem.memory
            over = excess / B if excess > 0 else 0.0
        out.append({"compute": float(ev.work[s]), "communication": comm, "overflow": over})
    return out


def _node_names(problem: PipelineProblem) -> list[str]:
    if problem.ops is not None:
        return [op["name"] if op else (problem.names[i] if problem.names else str(i))
                for i, op in enumerate(problem.ops)]
    return list(problem.names) if problem.names is not None else [str(i) for i in range(problem.n)]


def _prefixes(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts) + 1)]


def module_summary(modules: Sequence[str | None], blocks: np.ndarray, nblocks: int,
                   order: Sequence[int] | None = None) -> tuple[list[list[str]], list[list[str]]]:
    """Per stage: the module paths it holds whole, collapsed to the outermost such path, and
    the modules a stage boundary passes through (ops both in this stage and in another),
    the innermost such paths only. Both lists follow the first appearance of their ops in
    ``order`` (default: node order).

    ``modules[i]``: module path of node i (dot-separated) or None.
    """
    total: Counter[str] = Counter()
    per: list[Counter[str]] = [Counter() for _ in range(nblocks)]
    first: list[dict[str, int]] = [{} for _ in range(nblocks)]
    for t, i in enumerate(range(len(modules)) if order is None else order):
        m = modules[int(i)]
        if not m:
            continue
        s = int(blocks[int(i)])
        for p in _prefixes(m):
            total[p] += 1
            per[s][p] += 1
            first[s].setdefault(p, t)
    whole: list[list[str]] = []
    cut: list[list[str]] = []
    for s in range(nblocks):
        inside = {p for p, c in per[s].items() if c == total[p]}
        shared = set(per[s]) - inside
        outer = [p for p in inside if p.rpartition(".")[0] not in inside]
        inner = [p for p in shared if not any(q.startswith(p + ".") for q in shared)]
        whole.append(sorted(outer, key=lambda p: first[s][p]))
        cut.append(sorted(inner, key=lambda p: first[s][p]))
    return whole, cut


def stage_plan(problem: PipelineProblem, ev: Evaluation) -> list[dict[str, Any]]:
    """The ``stages`` list of ``result.json``: one entry per stage, in DAG order.

    Each entry: ``stage``, ``ops`` (node names in schedule order), ``modules`` (module paths
    held whole), ``cut_modules`` (modules a stage boundary passes through), ``cost`` and its
    ``compute``, ``communication`` and ``overflow`` terms, and the byte counts behind them.
    """
    names = _node_names(problem)
    nb = len(ev.block_costs)
    modules = [op.get("module") if op else None for op in problem.ops] if problem.ops is not None \
        else [None] * problem.n
    whole, cut = module_summary(modules, ev.blocks, nb, ev.order)
    members: list[list[str]] = [[] for _ in range(nb)]
    for v in ev.order:
        members[int(ev.blocks[v])].append(names[int(v)])
    terms = cost_terms(problem, ev)
    return [{"stage": s, "ops": members[s], "modules": whole[s], "cut_modules": cut[s],
             "cost": float(ev.block_costs[s]), **terms[s],
             "in_bytes": int(ev.in_bytes[s]), "out_bytes": int(ev.out_bytes[s]),
             "param_bytes": int(ev.param_bytes[s]), "peak_bytes": int(ev.peak_bytes[s])}
            for s in range(nb)]


def stage_lines(stages: Sequence[dict[str, Any]], max_modules: int = 4) -> list[str]:
    """One line per entry of :func:`stage_plan`'s list: its cost and terms, op count, and the
    first ``max_modules`` modules it holds whole; the bottleneck stage is marked."""
    worst = max((s["cost"] for s in stages), default=None)
    out = []
    for s in stages:
        mods = ", ".join(s["modules"][:max_modules]) + (
            f", ... ({len(s['modules'])} modules)" if len(s["modules"]) > max_modules else "")
        mark = "  <- bottleneck" if s["cost"] == worst else ""
        out.append(f"stage {s['stage']}: {s['cost']:.6g} = compute {s['compute']:.6g} + communication "
                   f"{s['communication']:.6g} + overflow {s['overflow']:.6g}; {len(s['ops'])} ops; "
                   f"{mods or '-'}{mark}")
    return out


def _stacks(problem: PipelineProblem) -> list[list[str]]:
    assert problem.ops is not None
    return [list(op.get("module_stack") or []) if op else [] for op in problem.ops]


def has_module_metadata(problem: PipelineProblem) -> bool:
    """True for a torch import whose ops carry the module paths that ran them."""
    return (problem.ops is not None and problem.meta.get("source") == "torch"
            and any(op and op.get("module_stack") for op in problem.ops))


def module_cuts(problem: PipelineProblem) -> dict[int, str]:
    """Where ``torch.distributed.pipelining`` can begin a stage: node index -> module path.

    ``SplitPoint.BEGINNING`` on a module splits the program before every call of that module,
    and the split program's stages are contiguous in its order. A node is a cut when it is the
    first op of a module whose ops form one contiguous run of the node order (the module runs
    once) and some op other than an input comes before it; the path given is the outermost
    such module. Empty for graphs without module metadata (:func:`has_module_metadata`).
    """
    if not has_module_metadata(problem):
        return {}
    assert problem.ops is not None
    stacks = _stacks(problem)
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    runs: Counter[str] = Counter()
    for i, stack in enumerate(stacks):
        for m in stack:
            if last.get(m) != i - 1:
                runs[m] += 1
            first.setdefault(m, i)
            last[m] = i
    first_op = next((i for i, op in enumerate(problem.ops) if op and op.get("op") != "Input"), problem.n)
    cuts: dict[int, str] = {}
    for i, stack in enumerate(stacks):
        if i <= first_op:
            continue
        starts = [m for m in stack if first[m] == i and runs[m] == 1]
        if starts:
            cuts[i] = starts[0]
    return cuts


def cut_bytes(problem: PipelineProblem, positions: Sequence[int]) -> NDArray[np.int64]:
    """Per position p of the node order: the bytes of the tensors made before p and read at or
    after it, which a stage boundary at p sends forward (once, however many later stages read
    them, as torch.distributed.pipelining passes values on)."""
    n = problem.n
    last = np.full(n, -1, np.int64)
    if problem.m:
        np.maximum.at(last, problem.edges[:, 0].astype(np.int64), problem.edges[:, 1].astype(np.int64))
    diff = np.zeros(n + 2, np.int64)
    for u in np.nonzero(last > np.arange(n))[0]:
        diff[u + 1] += int(problem.size_out[u])
        diff[last[u] + 1] -= int(problem.size_out[u])
    live = np.cumsum(diff)
    return np.array([live[p] for p in positions], np.int64)


def module_split(problem: PipelineProblem, k: int) -> Evaluation:
    """The best plan into at most k stages of the node order, each stage beginning at one of
    :func:`module_cuts`, re-scored by the exact evaluator.

    Exact among such plans: a dynamic program over the cut positions finds the least
    bottleneck T; among plans with bottleneck T it then takes the least sum of squared stage
    costs (the other stages as even as they can be), then the fewest bytes crossing the stage
    boundaries (:func:`cut_bytes`). Raises InputError without module metadata or when the node
    order is not topological.
    """
    from gapstop.problems.pipeline import _kernels

    cuts = module_cuts(problem)
    if not cuts:
        raise InputError(f"{problem.name}: no submodule call to begin a stage at (graphs imported from torch "
                         "carry module metadata); split at op instead")
    order = check_order(problem, np.arange(problem.n))
    positions = np.array([0, *sorted(cuts), problem.n], np.int64)
    p = problem
    cost = _kernels.cut_segment_costs(order, positions, p.work, p.size_param, p.size_out, p.succ_ptr, p.succ,
                                      p.pred_ptr, p.pred, p.bandwidth, p.memory_or_minus1)
    _, starts = _kernels.split_at_cuts(cost, cut_bytes(problem, positions), int(k))
    blocks = np.zeros(problem.n, np.int64)
    for s, a in enumerate(starts):
        blocks[positions[a]:] = s
    return evaluate(problem, blocks, order, k=k)


def split_spec(problem: PipelineProblem, ev: Evaluation) -> dict[str, Any]:
    """For torch imports: ``{"split_spec": {module path: "BEGINNING"} | None, "split_spec_problems": [...]}``
    ready for ``torch.distributed.pipelining.pipeline(module, mb_args, split_spec=...)``
    (with ``SplitPoint.BEGINNING``); ``{}`` for other graphs.

    Stage s >= 1 must begin at one of :func:`module_cuts`. A stage boundary inside a module,
    at an op outside every submodule, or stages not contiguous in the program's order give
    ``split_spec: None`` and one line per problem instead of a wrong split point.
    """
    if problem.ops is None or problem.meta.get("source") != "torch":
        return {}
    blocks = ev.blocks
    if len(blocks) > 1 and np.any(np.diff(blocks) < 0):
        return {"split_spec": None, "split_spec_problems": [
            "the stages are not contiguous in the program's order (solve with --split-at module)"]}
    stacks = _stacks(problem)
    cuts = module_cuts(problem)
    spec: dict[str, str] = {}
    problems: list[str] = []
    for s in range(1, int(blocks.max()) + 1 if len(blocks) else 0):
        i = int(np.argmax(blocks == s))
        op = problem.ops[i] or {}
        if i in cuts:
            spec[cuts[i]] = "BEGINNING"
        elif stacks[i]:
            problems.append(f"stage {s} begins at op {op.get('name')!r} inside module {stacks[i][-1]!r}")
        else:
            problems.append(f"stage {s} begins at op {op.get('name')!r}, which no submodule runs")
    return {"split_spec": None if problems else spec, "split_spec_problems": problems}


def contiguous_split(problem: PipelineProblem, k: int, order: Any = None) -> Evaluation:
    """The optimal split of ``order`` (default: node order 0..n-1) into at most k contiguous
    stages, re-scored by the exact evaluator. Raises InputError if the order is not topological."""
    from gapstop.problems.pipeline.decoder import SliceDecoder

    o = check_order(problem, np.arange(problem.n) if order is None else order)
    split = SliceDecoder(problem, k).slice(o)
    return evaluate(problem, split.blocks, split.order, k=k)


def solve_contiguous(problem: PipelineProblem, k: int, *, time_limit_s: float = 60.0, bounds: bool = True,
                     order: Any = None, seed: int = 0, num_workers: int = 2) -> dict[str, Any]:
    """``pipeline solve --contiguous``: the optimal contiguous plan and unrestricted lower bounds.

    The plan is optimal among plans whose stages are contiguous runs of the order. The bounds
    (``simple``; with ``bounds``, also ``spectral`` and the exact MIP for the remaining time) are
    valid for every plan, contiguous or not, so ``gap`` bounds what the restriction costs.
    Returns the result document (``result.json`` of docs/formats.md plus ``mode`` and ``stages``).
    """
    t0 = time.monotonic()
    ev = contiguous_split(problem, k, order)
    found = _unrestricted_bounds(problem, k, ev, t0, time_limit_s, bounds, 0.0, seed, num_workers)
    best = _best(found)
    lb = None if best is None else best.value
    from gapstop.problems.pipeline.definition import result_document

    return result_document(problem, k, ev, lower_bound=lb, lower_bound_method=None if best is None else best.method,
                           gap=relative_gap(ev.objective, lb), bounds=_bound_list(found),
                           found_by="contiguous-slicegraph", elapsed_s=time.monotonic() - t0,
                           stopped_because="contiguous-optimal", mode="contiguous", contiguous_optimal=True)


def _best(found: Sequence[Bound]) -> Bound | None:
    valid = [b for b in found if math.isfinite(b.value)]
    return max(valid, key=lambda b: b.value) if valid else None


def _bound_list(found: Sequence[Bound]) -> list[dict[str, Any]]:
    return [b.to_dict() for b in sorted(found, key=lambda b: -b.value if math.isfinite(b.value) else math.inf)]


def _unrestricted_bounds(problem: PipelineProblem, k: int, ev: Evaluation, t0: float, time_limit_s: float,
                         bounds: bool, target_gap: float, seed: int, num_workers: int) -> list[Bound]:
    """``simple``; with ``bounds`` also ``spectral`` (in a thread) next to the exact MIP (hinted
    with ``ev``, from the simple bound up) for the time left, until the gap to ``ev`` is at most
    ``target_gap``. All of them bound the unrestricted problem, so they hold for any
    restricted one too."""
    import threading

    from gapstop.problems.pipeline.bounds import exact_bound, spectral_bound
    from gapstop.problems.pipeline.closed_form import simple_bound

    found: list[Bound] = [simple_bound(problem, k)]

    def done() -> bool:
        best = _best(found)
        gap = relative_gap(ev.objective, None if best is None else best.value)
        return gap is not None and gap <= max(target_gap, OPTIMAL_GAP)

    if not bounds or done():
        return found
    stop = threading.Event()

    def spectral() -> None:
        found.append(spectral_bound(problem, k, min(30.0, 0.3 * time_limit_s), should_stop=stop.is_set))
        if done():
            stop.set()

    thread = threading.Thread(target=spectral, name="spectral-bound", daemon=True)
    thread.start()
    left = time_limit_s - (time.monotonic() - t0)
    if left > 1.0:
        floor = _best(found)
        found.append(exact_bound(problem, k, left, hint=ev.blocks.tolist(), random_seed=seed, num_workers=num_workers,
                                 should_stop=stop.is_set, floor=None if floor is None else floor.value))
    stop.set()
    thread.join()
    return found


#: the gap at which a plan counts as proven optimal (docs/formats.md: result.json)
OPTIMAL_GAP = 1e-5


def solve_module_split(problem: PipelineProblem, k: int, *, time_limit_s: float = 60.0, bounds: bool = True,
                       target_gap: float = 0.0, seed: int = 0, num_workers: int = 2) -> dict[str, Any]:
    """``pipeline solve --split-at module``: the best plan torch.distributed.pipelining can run
    (:func:`module_split`) and unrestricted lower bounds.

    The plan is optimal among module-boundary plans; the bounds hold for every plan, so
    ``gap`` is at least what the restriction costs. ``stopped_because``: ``optimal`` (gap at
    most 1e-5), ``target-gap``, ``bounds-exhausted`` (the exact MIP was solved: more time does
    not lower the bound; without a memory limit its value is the unrestricted optimum, so the
    gap is exactly what the restriction costs), ``time-limit``, or ``no-bounds``. Returns the result document with ``mode``,
    ``stages``, ``split_spec`` and ``split_points`` (the same module paths in program order,
    as torchtitan's ``pipeline_parallel_split_points`` lists them).
    """
    t0 = time.monotonic()
    ev = module_split(problem, k)
    found = _unrestricted_bounds(problem, k, ev, t0, time_limit_s, bounds, target_gap, seed, num_workers)
    best = _best(found)
    lb = None if best is None else best.value
    gap = relative_gap(ev.objective, lb)
    if gap is not None and gap <= OPTIMAL_GAP:
        why = "optimal"
    elif gap is not None and gap <= target_gap:
        why = "target-gap"
    elif any(b.method == "exact" and b.status == "optimal" for b in found):
        why = "bounds-exhausted"
    else:
        why = "time-limit" if bounds else "no-bounds"
    from gapstop.problems.pipeline.definition import result_document

    doc = result_document(problem, k, ev, lower_bound=lb, lower_bound_method=None if best is None else best.method,
                          gap=gap, bounds=_bound_list(found), found_by="module-cuts-dp",
                          elapsed_s=time.monotonic() - t0, stopped_because=why, mode="module", module_optimal=True,
                          module_cuts=len(module_cuts(problem)))
    assert doc["split_spec"] is not None, doc  # every stage begins at a module cut
    doc["split_points"] = list(doc["split_spec"])
    return doc
