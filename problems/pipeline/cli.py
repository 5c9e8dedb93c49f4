"""The pipeline problem's commands: ``pipeline solve|bound|evaluate``, ``import onnx|torch``
(model files to pipeline graphs) and ``rl pretrain`` (the learned proposal policy)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import click

from gapstop.engine.cli import (MAX_WORKERS, cannot_write, check_run_options, check_time_limit, exit_for,
                                format_option, print_summary, refuse_given, run_options, solve_command,
                                user_errors, wants_summary, write_json)
from gapstop.engine.errors import InputError
from gapstop.engine.persist import read_json_file
from gapstop.engine.report import check_plot


@click.group()
def pipeline() -> None:
    """Max-throughput pipeline partitioning (MTPP)."""


def groups() -> list[click.Group]:
    """The commands of this problem, as the command line shows them."""
    return [pipeline, import_, rl]


def _print_pipeline_result(doc: dict[str, Any], fmt: str | None = None) -> None:
    """``fmt``: ``json`` (the document), ``summary`` (with the stage table), or None: two lines
    (certificate, stage costs), and the summary's rows as well when stdout is a terminal."""
    if fmt == "json":
        click.echo(json.dumps(doc))
        return
    if wants_summary(fmt):
        from gapstop.problems.pipeline.plan import stage_lines

        print_summary(doc, "objective")
        for line in stage_lines(doc.get("stages") or []):
            click.echo("  " + line)
        return
    if doc["objective"] is None:
        from gapstop.engine.deadline import compile_note

        exists = (doc.get("constraints") or {}).get("existence")
        click.echo(f"no feasible partition found ({doc['stopped_because']}{compile_note()})"
                   + ("" if not exists else f"; {exists['message']}"))
        return
    gap = "unknown" if doc["gap"] is None else f"{100 * doc['gap']:.3f}%"
    lb = "none" if doc["lower_bound"] is None else f"{doc['lower_bound']:.6g} ({doc['lower_bound_method']})"
    click.echo(f"graph {doc['graph']}  k={doc['k']}  objective {doc['objective']:.6g}  "
               f"lower bound {lb}  gap {gap}  "
               f"stopped: {doc['stopped_because']}  {doc['elapsed_s']:.1f}s")
    costs = ", ".join(f"{c:.4g}" for c in doc["block_costs"])
    click.echo(f"stage costs: [{costs}]")


def _mcm_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Multi-chip-module constraints of ``pipeline solve`` (chips = -k/--chips)."""
    opts = [
        click.option("--ring", is_flag=True,
                     help="Chips on a uni-directional ring: every edge goes to the same or a higher chip, "
                          "and the used chips are 0..m for some m < C (no empty chip below a used one)."),
        click.option("--all-chips", is_flag=True,
                     help="Like --ring, and every chip 0..C-1 is used, none empty (implies --ring)."),
        click.option("--no-triangle", is_flag=True,
                     help="No direct chip dependency next to an indirect path between the same chips."),
        click.option("--memory-hard", is_flag=True,
                     help="The graph's per-stage memory is a hard limit instead of an overflow cost."),
        click.option("--check", "check", default=None, metavar="MODULE:FUNCTION",
                     help="User check fn(problem, chips) -> bool; False or an exception rejects a partition."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _mcm_constraints(k: int, ring: bool, no_triangle: bool, memory_hard: bool, check: str | None,
                     all_chips: bool = False) -> Any:
    from gapstop.problems.pipeline.constraints import Constraints
    return Constraints(chips=k, ring=ring, no_triangle=no_triangle, memory_hard=memory_hard, check=check,
                       all_chips=all_chips)


def _policy_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A learned policy's island in ``pipeline solve`` (the optional extra gapstop[rl])."""
    opts = [
        click.option("--policy", type=click.Path(dir_okay=False), default=None,
                     help="A policy file from 'rl pretrain': island 0 samples it (needs gapstop[rl])."),
        click.option("--finetune", is_flag=True, help="With --policy: PPO on this graph while searching."),
        click.option("--policy-mode", type=click.Choice(["fix", "sample"]), default="fix", show_default=True,
                     help="With --policy: how the constraint solver uses the proposals."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


def _policy_spec(policy: str | None, finetune: bool, mode: str) -> dict[str, Any] | None:
    """``params["policy"]``, after checking that torch is there and the file loads."""
    if policy is None:
        if finetune:
            raise InputError("--finetune: needs --policy")
        return None
    from gapstop.problems.pipeline.rl import require_torch

    require_torch()
    from gapstop.problems.pipeline.rl.policy import load_policy

    load_policy(policy)  # a bad file fails here, in one line, before anything starts
    return {"path": str(Path(policy).resolve()), "finetune": finetune, "mode": mode}


@pipeline.command("solve")
@click.argument("graph", type=click.Path(dir_okay=False))
@click.option("-k", "--chips", "k", type=int, required=True,
              help="Number of pipeline stages / chips (1 to 1024; docs/security.md: Input limits).")
@run_options
@click.option("--islands", type=int, default=None,
              help="Search islands (default: half the worker slots, at least one).")
@click.option("--no-bounds", is_flag=True, help="Search only; report the simple bound.")
@click.option("--contiguous", is_flag=True,
              help="Stages contiguous in the file's node order (optimal by construction); in-process.")
@click.option("--split-at", "split_at", type=click.Choice(["module", "op"]), default=None,
              help="module: only plans torch.distributed.pipelining can run (stages begin at submodule "
                   "calls; optimal among them, in-process); op: any partition. Default: module for graphs "
                   "with module metadata (from 'import torch'), else op.")
@_mcm_options
@_policy_options
@format_option
@user_errors
def pipeline_solve(graph: str, k: int, time_limit: float, target_gap: float, seed: int, out: str | None,
                   run_dir: str | None, resume: str | None, address: str | None, workers: int | None,
                   cpus_per_worker: float, in_process: bool, quiet: bool, plot: str | None, islands: int | None,
                   no_bounds: bool,
                   contiguous: bool = False, split_at: str | None = None, ring: bool = False,
                   all_chips: bool = False, no_triangle: bool = False,
                   memory_hard: bool = False, check: str | None = None, policy: str | None = None,
                   finetune: bool = False, policy_mode: str = "fix", fmt: str | None = None) -> None:
    """Partition GRAPH into at most K stages and certify the result with lower bounds.

    Search islands and bound jobs report to one coordinator, in this process with threads,
    or on Ray with --address or --workers. Leaves a run directory with result.json,
    best_solution.json, events.parquet and a checkpoint.
    """
    from gapstop.problems.pipeline.io import check_stages, load_graph

    if k < 1:
        raise InputError(f"-k: must be >= 1, got {k}")
    check_run_options(target_gap, time_limit, workers, cpus_per_worker)
    check_plot(plot)
    if islands is not None and not 1 <= islands <= MAX_WORKERS:
        raise InputError(f"--islands: must be in [1, {MAX_WORKERS}], got {islands}")
    problem = load_graph(graph)  # fail fast on bad input, before starting Ray
    check_stages(problem, k)
    constraints = _mcm_constraints(k, ring, no_triangle, memory_hard, check, all_chips)
    constraints.validate(problem)
    params: dict[str, Any] = {"k": k}
    if constraints.any:
        params["constraints"] = constraints.to_dict()
    policy_spec = _policy_spec(policy, finetune, policy_mode)
    if policy_spec is not None:
        params["policy"] = policy_spec
    split_at = _split_at(problem, split_at, contiguous, constraints.any or policy_spec is not None)
    if contiguous or split_at == "module":
        flag = "--contiguous" if contiguous else "--split-at module"
        if constraints.any:
            raise InputError(f"{flag}: cannot be combined with --ring, --all-chips, --no-triangle, --memory-hard "
                             "or --check")
        if policy_spec is not None:
            raise InputError(f"--policy: not with {flag}, which has no search islands")
        refuse_given(f"with {flag}, which computes its plan in this process without search islands",
                      ("islands", "workers", "cpus_per_worker"))
        for opt, value in (("--run-dir", run_dir), ("--resume", resume), ("--address", address), ("--plot", plot)):
            if value is not None:  # would be ignored: the plan is computed here, without a run directory
                raise InputError(f"{opt}: not with {flag}, which runs in this process without a run "
                                 "directory (use --out for the result; --split-at op for a run)")
        if contiguous:
            _solve_contiguous(graph, problem, k, time_limit, seed, out, not no_bounds, fmt)
        else:
            _solve_module_split(problem, k, time_limit, target_gap, seed, out, not no_bounds, fmt)
        return

    def emit(doc: dict[str, Any]) -> None:
        write_json(out, doc)
        _print_pipeline_result(doc, fmt)

    doc = solve_command("pipeline", graph, problem, params, emit, time_limit=time_limit, target_gap=target_gap,
                        seed=seed, run_dir=run_dir, resume=resume, address=address, workers=workers,
                        cpus_per_worker=cpus_per_worker, in_process=in_process, quiet=quiet, plot=plot, out=out,
                        bounds=not no_bounds, islands=islands)
    exit_for(doc)


def _split_at(problem: Any, split_at: str | None, contiguous: bool, other_mode: bool) -> str:
    """``--split-at`` resolved: module by default for graphs with module metadata, unless
    --contiguous or a multi-chip or policy option asks for another kind of solve."""
    from gapstop.problems.pipeline.plan import has_module_metadata

    if split_at == "module":
        if contiguous:
            raise InputError("--contiguous: not with --split-at module, whose plans are contiguous already")
        if not has_module_metadata(problem):
            raise InputError("--split-at module: the graph has no module metadata (graphs from 'import torch' "
                             "carry it); use --split-at op")
        return "module"
    if split_at is None and not contiguous and not other_mode and has_module_metadata(problem):
        return "module"
    return "op"


def _solve_module_split(problem: Any, k: int, time_limit: float, target_gap: float, seed: int, out: str | None,
                        bounds: bool, fmt: str | None = None) -> None:
    from gapstop.problems.pipeline.plan import solve_module_split, stage_lines

    doc = solve_module_split(problem, k, time_limit_s=time_limit, bounds=bounds, target_gap=target_gap, seed=seed,
                             num_workers=max(2, os.cpu_count() or 1))
    write_json(out, doc)
    _print_pipeline_result(doc, fmt)
    if fmt == "json":
        return
    click.echo("stages begin at submodule calls (--split-at module): optimal among such plans; the gap is "
               "against the unrestricted lower bound")
    if not wants_summary(fmt):  # else printed with the summary
        for line in stage_lines(doc["stages"]):
            click.echo(line)
    click.echo(f"split_spec: {json.dumps(doc['split_spec'])}")


def _solve_contiguous(graph: str, problem: Any, k: int, time_limit: float, seed: int, out: str | None,
                      bounds: bool, fmt: str | None = None) -> None:
    from gapstop.problems.pipeline.plan import solve_contiguous

    try:
        doc = solve_contiguous(problem, k, time_limit_s=time_limit, bounds=bounds, seed=seed,
                               num_workers=max(2, os.cpu_count() or 1))
    except InputError as e:  # the file's node order is the plan's order: say which file
        raise InputError(f"{graph}: --contiguous needs the node order to be topological; {e}") from None
    write_json(out, doc)
    if fmt == "json":
        click.echo(json.dumps(doc))
        return
    _print_pipeline_result(doc)
    click.echo("contiguous in the file's node order: optimal among such plans; the gap is against the "
               "unrestricted lower bound")
    from gapstop.problems.pipeline.plan import stage_lines

    for line in stage_lines(doc["stages"]):
        click.echo(line)
    if "split_spec" in doc:
        click.echo(f"split_spec: {json.dumps(doc['split_spec'])}"
                   + "".join(f"\n  {line}" for line in doc["split_spec_problems"]))


@pipeline.command("bound")
@click.argument("graph", type=click.Path(dir_okay=False))
@click.option("-k", "k", type=int, required=True, help="Number of pipeline stages (1 to 1024; docs/security.md: Input limits).")
@click.option("--method", required=True,
              type=click.Choice(["simple", "spectral", "heaviest-block", "end-blocks", "block-cover", "bottleneck",
                                 "bottleneck-no-dag", "bottleneck-no-io", "guess-the-bottleneck", "exact"]))
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Solver seconds.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the bound record as JSON.")
@user_errors
def pipeline_bound(graph: str, k: int, method: str, time_limit: float, out: str | None) -> None:
    """Compute one lower bound on the optimal bottleneck of GRAPH with K stages."""
    from gapstop.problems.pipeline.bounds import lower_bound
    from gapstop.problems.pipeline.io import check_stages, load_graph

    if k < 1:
        raise InputError(f"-k: must be >= 1, got {k}")
    check_time_limit(time_limit)
    problem = load_graph(graph)
    check_stages(problem, k)
    # the MIP methods solve with one CP-SAT worker per core (CP-SAT's portfolio needs >= 2)
    kw = {} if method in ("simple", "spectral") else {"num_workers": max(2, os.cpu_count() or 1)}
    b = lower_bound(problem, k, method, time_limit, **kw)
    rec = b.to_dict()
    rec["detail"] = {key: v for key, v in rec["detail"].items() if key != "blocks"}
    click.echo(json.dumps(rec))
    write_json(out, rec)


@pipeline.command("evaluate")
@click.argument("graph", type=click.Path(dir_okay=False))
@click.argument("result", type=click.Path(dir_okay=False))
@user_errors
def pipeline_evaluate(graph: str, result: str) -> None:
    """Re-score the partition in RESULT (a result.json) exactly on GRAPH."""
    from gapstop.problems.pipeline.evaluate import evaluate
    from gapstop.problems.pipeline.io import load_graph

    problem = load_graph(graph)
    doc = read_json_file(result)  # size and nesting limits as for input graphs
    try:
        blocks, order = doc["blocks"], doc.get("order")
    except (KeyError, TypeError, AttributeError) as e:
        raise InputError(f"{result}: not a result file with a 'blocks' field ({e})") from None
    cons = doc.get("constraints")  # a constrained run's partition is checked against its constraints
    ev = evaluate(problem, blocks, order, k=doc.get("k"),
                  constraints=None if not cons else _mcm_constraints(
                      doc["k"], bool(cons.get("ring")), bool(cons.get("no_triangle")),
                      bool(cons.get("memory_hard")), cons.get("check"), bool(cons.get("all_chips"))))
    click.echo(json.dumps({"objective": ev.objective, "block_costs": ev.block_costs.tolist()}))


# ----------------------------------------------------------------------------- rl
@click.group()
def rl() -> None:
    """The learned proposal policy (needs the optional extra gapstop[rl])."""


@rl.command("pretrain")
@click.option("--graphs", "graphs", type=click.Path(file_okay=False), required=True,
              help="Directory of pipeline graphs (.json / .json.gz): split into train, validation and test.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="The policy file to write.")
@click.option("--chips", default="4,8", show_default=True, help="Comma-separated C values to train for.")
@click.option("--no-ring", is_flag=True, help="Free labels instead of the ring constraints.")
@click.option("--all-chips", is_flag=True, help="Every chip used (the strict reading of the ring constraints).")
@click.option("--no-triangle", is_flag=True, help="Train with the triangle constraint.")
@click.option("--samples", type=int, default=20000, show_default=True, help="Evaluated proposals in all.")
@click.option("--checkpoint-every", type=int, default=10, show_default=True, help="PPO iterations per checkpoint.")
@click.option("--val-samples", type=int, default=20, show_default=True, help="Proposals per validation task.")
@click.option("--layers", type=int, default=8, show_default=True)
@click.option("--width", type=int, default=128, show_default=True)
@click.option("--iterations", type=int, default=2, show_default=True, help="T, refinements per proposal.")
@click.option("--mode", type=click.Choice(["fix", "sample"]), default="fix", show_default=True)
@click.option("--time-limit", type=float, default=None, help="Stop after this many seconds (at a checkpoint).")
@click.option("--threads", type=int, default=1, show_default=True, help="torch threads.")
@click.option("--rollout-workers", type=int, default=0, show_default=True,
              help="Run the training rollouts on this many local Ray workers (0: in this process).")
@click.option("--seed", type=int, default=0, show_default=True)
@user_errors
def rl_pretrain(graphs: str, out: str, chips: str, no_ring: bool, all_chips: bool, no_triangle: bool, samples: int,
                checkpoint_every: int, val_samples: int, layers: int, width: int, iterations: int, mode: str,
                time_limit: float | None, threads: int, rollout_workers: int, seed: int) -> None:
    """Pre-train a policy on a graph corpus; keep the checkpoint with the best validation reward."""
    if no_ring and all_chips:
        raise InputError("--all-chips: not with --no-ring")
    import math

    from gapstop.problems.pipeline.rl import require_torch

    torch = require_torch()
    try:
        cs = [int(c) for c in chips.split(",") if c.strip()]
    except ValueError:
        raise InputError(f"--chips: expected comma-separated integers, got {chips!r}") from None
    if not cs or min(cs) < 1:
        raise InputError(f"--chips: expected integers >= 1, got {chips!r}")
    for name, v in (("--samples", samples), ("--checkpoint-every", checkpoint_every),
                    ("--val-samples", val_samples), ("--layers", layers), ("--width", width),
                    ("--iterations", iterations), ("--threads", threads)):
        if v < 1:
            raise InputError(f"{name}: must be >= 1, got {v}")
    from gapstop.problems.pipeline.rl.policy import PolicyConfig
    from gapstop.problems.pipeline.rl.ppo import PPOConfig
    from gapstop.problems.pipeline.rl.pretrain import pretrain, split_corpus

    if rollout_workers < 0:
        raise InputError(f"--rollout-workers: must be >= 0, got {rollout_workers}")
    torch.set_num_threads(threads)
    split = split_corpus(graphs, seed)
    factory: Any = None
    if rollout_workers:  # on local Ray workers, through the backend the entry point registers
        from gapstop.engine.facade import backend

        factory = backend("rl-rollouts")(rollout_workers, mode, seed)
    click.echo(f"{len(split.train)} training, {len(split.val)} validation, {len(split.test)} test graphs",
               err=True)
    summary = pretrain(split, out, chips=cs, ring=not no_ring, all_chips=all_chips, no_triangle=no_triangle,
                       samples=samples,
                       checkpoint_every=checkpoint_every, val_samples=val_samples,
                       config=PolicyConfig(layers=layers, width=width, iterations=iterations),
                       ppo=PPOConfig(mode=mode), seed=seed,
                       time_limit_s=math.inf if time_limit is None else time_limit,
                       log=lambda line: click.echo(line, err=True), runner_factory=factory)
    c = summary["chosen"]
    click.echo(f"wrote {out}: iteration {c['iteration']} ({c['samples']} samples), "
               f"validation reward {c['val_reward']:.4f}")


# ------------------------------------------------------------------------------- import
@click.group("import")
def import_() -> None:
    """Import a model file as a pipeline graph (roofline costs on a chip profile)."""


@import_.command("onnx")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--chip", required=True, help="Shipped chip profile name (e.g. a100-sxm-80gb) or a profile file.")
@click.option("--batch", type=int, default=None, help="Value of every input's symbolic leading dim.")
@click.option("--input-shape", "input_shape", multiple=True, metavar="NAME=d0,d1,...",
              help="Whole shape of one input (repeatable).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Graph file (.json or .json.gz).")
@user_errors
def import_onnx_cmd(model: str, chip: str, batch: int | None, input_shape: tuple[str, ...], out: str) -> None:
    """Import MODEL (an ONNX file; weights not needed) with per-op roofline costs on --chip."""
    from gapstop.problems.chip import load_chip
    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx

    profile = load_chip(chip)
    _save_imported(model, out, profile.name, *import_onnx(model, profile, batch=batch, input_shapes=list(input_shape)))


def _save_imported(source: str, out: str, chip: str, doc: dict[str, Any], warning: str | None) -> None:
    from gapstop.problems.pipeline.io import problem_from_dict, save_graph

    if warning:
        click.echo(warning, err=True)
    problem = problem_from_dict(doc, source)
    try:
        save_graph(problem, out)
    except OSError as e:
        raise cannot_write(out, e) from None
    click.echo(f"{out}: {problem.n} nodes, {problem.m} edges, {doc['meta']['total_flops']:.4g} FLOPs, "
               f"total work {problem.work.sum():.6g} us on {chip}")


@import_.command("torch")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--chip", required=True, help="Shipped chip profile name (e.g. a100-sxm-80gb) or a profile file.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Graph file (.json or .json.gz).")
@user_errors
def import_torch_cmd(program: str, chip: str, out: str) -> None:
    """Import PROGRAM (saved by torch.export.save, static shapes) with per-op roofline costs on --chip."""
    from gapstop.problems.chip import load_chip
    from gapstop.problems.pipeline.importers.torch_export import import_torch

    profile = load_chip(chip)
    _save_imported(program, out, profile.name, *import_torch(program, profile))
