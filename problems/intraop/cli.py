"""The intra-op problem's commands: ``intraop solve|bound|evaluate|generate``."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import click

from gapstop.engine.cli import (cannot_write, check_run_options, check_time_limit, exit_for, format_option, print_summary,
                                refuse_given, run_options, solve_command, user_errors, wants_summary, write_json)
from gapstop.engine.errors import InputError
from gapstop.engine.persist import read_json_file
from gapstop.engine.report import check_plot


@click.group()
def intraop() -> None:
    """Intra-operator sharding strategies (IOPDDL contest problem)."""


def groups() -> list[click.Group]:
    """The commands of this problem, as the command line shows them."""
    return [intraop]


@intraop.command("solve")
@click.argument("instance", type=click.Path(dir_okay=False))
@run_options
@click.option("--method", type=click.Choice(["search", "elimination"]), default="search", show_default=True,
              help="search: penalty search with bounds; elimination: FindOptStrategy in this process.")
@click.option("--max-table", type=int, default=1 << 24, show_default=True,
              help="elimination: largest factor table (entries) built exactly.")
@functools.partial(format_option, extra=("contest",))
@user_errors
def intraop_solve(instance: str, time_limit: float, target_gap: float, seed: int, out: str | None,
                  run_dir: str | None, resume: str | None, address: str | None, workers: int | None,
                  cpus_per_worker: float, in_process: bool, quiet: bool, plot: str | None, fmt: str, method: str,
                  max_table: int) -> None:
    """Choose one strategy per node of INSTANCE (.json or .json.gz) within the usage limit.

    Penalty-search islands and lower-bound jobs report to one coordinator, which stops at
    --target-gap, on a proven optimum or at the time limit; in this process with threads,
    or on Ray with --address or --workers. Leaves a run directory with result.json,
    best_solution.json, events.parquet and a checkpoint. --method elimination
    eliminates vertices exactly (no usage limit) and reports the optimum only if it
    fits the limit, else only a lower bound (exit 1).
    """
    import time

    from gapstop.problems.intraop.io import load_problem

    t0 = time.perf_counter()
    check_run_options(target_gap, time_limit, workers, cpus_per_worker)
    if max_table < 1:
        raise InputError(f"--max-table: must be >= 1, got {max_table}")
    if plot is not None and method == "elimination":
        raise InputError("--plot: not with --method elimination, which leaves no run directory to draw")
    if method == "elimination":  # one exact computation in this process: no run, no search, no Ray
        refuse_given("to --method elimination (it reads --time-limit, --out and --format)",
                      ("target_gap", "seed", "run_dir", "resume", "address", "workers", "cpus_per_worker",
                       "in_process", "quiet"))
    else:
        refuse_given("to --method search (it is --method elimination's table cap)", ("max_table",))
    check_plot(plot)

    def emit(doc: dict[str, Any]) -> None:
        write_json(out, doc)
        if fmt == "contest":
            if doc["solution"] is not None:
                click.echo("[" + ", ".join(map(str, doc["solution"])) + "]")
        elif wants_summary(fmt):
            print_summary(doc, "cost")
        else:
            click.echo(json.dumps(doc))

    problem = load_problem(instance)  # fail fast on bad input, before starting anything
    if method == "elimination":
        doc = _intraop_eliminate(problem, time_limit, max_table, t0)
        emit(doc)
    else:
        doc = solve_command("intraop", instance, problem, {}, emit, time_limit=time_limit, target_gap=target_gap,
                            seed=seed, run_dir=run_dir, resume=resume, address=address, workers=workers,
                            cpus_per_worker=cpus_per_worker, in_process=in_process, quiet=quiet, plot=plot, out=out)
    if not doc["feasible"]:
        from gapstop.engine.deadline import compile_note

        click.echo(f"error: no feasible solution found ({doc['stopped_because']}{compile_note()})", err=True)
    exit_for(doc)


def _intraop_eliminate(problem: Any, time_limit: float, max_table: int, t0: float) -> dict[str, Any]:
    """The result document of FindOptStrategy; the solution only when it is the proven optimum."""
    import math
    import time

    from gapstop.problems.intraop.definition import result_document
    from gapstop.problems.intraop.elimination import find_opt_strategy

    r = find_opt_strategy(problem, table_limit=max_table, time_limit_s=time_limit, prune_memory=True)
    feasible = r.evaluation is not None and r.evaluation.feasible
    why = ("infeasible" if r.value == math.inf else "optimal" if r.optimal
           else "unconstrained optimum exceeds the usage limit" if r.exact
           else "table cap: decoded solution, certified gap" if feasible else "table cap or time limit: bound only")
    cost = r.evaluation.cost if feasible and r.evaluation is not None else None
    return result_document(problem, cost=cost, solution=r.solution if feasible else None,
                           lower_bound=None if r.value == math.inf else r.value, reason=why,
                           elapsed_s=time.perf_counter() - t0, method="elimination", elimination=r.detail())


@intraop.command("generate")
@click.argument("graph", type=click.Path(dir_okay=False))
@click.option("--nprocs", type=int, required=True, help="Processors p to shard every op over.")
@click.option("--mesh", default=None, help="Device mesh shape, e.g. 2x4 (product = --nprocs).")
@click.option("--chip", "chip_spec", required=True, help="Chip profile: a shipped name or a TOML/JSON file.")
@click.option("--training", is_flag=True, help="Backward pass and gradient all-reduce in t_V, gradients in memory.")
@click.option("--max-configs", type=int, default=32, show_default=True, help="Configurations kept per op.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="The contest-format instance.")
@user_errors
def intraop_generate(graph: str, nprocs: int, mesh: str | None, chip_spec: str, training: bool, max_configs: int,
                     out: str) -> None:
    """Write a contest-format sharding instance for GRAPH (a pipeline graph with op metadata)."""
    from gapstop.problems.chip import load_chip
    from gapstop.problems.intraop.strategies import generate_file, parse_mesh

    from gapstop.engine.persist import write_json_atomic

    shape = parse_mesh(mesh, nprocs)
    doc = generate_file(graph, nprocs, load_chip(chip_spec), mesh=shape, training=training, max_configs=max_configs)
    try:  # the instance is this command's only product: not writing it is an error
        write_json_atomic(out, doc)
    except OSError as e:
        raise cannot_write(out, e) from None
    m = doc["meta"]
    click.echo(json.dumps({"instance": out, "nodes": len(m["ops"]), "edges": len(doc["problem"]["edges"]["nodes"]),
                           "configurations": sum(len(c) for c in m["configs"]), "dropped": m["dropped_total"],
                           "view_ops": m["view_ops"]}))


@intraop.command("evaluate")
@click.argument("instance", type=click.Path(dir_okay=False))
@click.argument("solution", type=click.Path(dir_okay=False))
@user_errors
def intraop_evaluate(instance: str, solution: str) -> None:
    """Score SOLUTION (a result.json or a contest line [s0, ...]) exactly on INSTANCE."""
    from gapstop.problems.intraop.evaluate import evaluate
    from gapstop.problems.intraop.io import load_problem

    problem = load_problem(instance)
    doc = read_json_file(solution)  # size and nesting limits as for instances
    try:
        sol = doc["solution"] if isinstance(doc, dict) else doc
    except KeyError as e:
        raise InputError(f"{solution}: not a result file or a list of strategy indices ({e})") from None
    if not isinstance(sol, list) or not all(type(s) is int for s in sol):
        raise InputError(f"{solution}: solution: expected a list of integers")
    ev = evaluate(problem, sol)
    click.echo(json.dumps(ev.to_dict()))
    if not ev.feasible:
        sys.exit(1)


@intraop.command("bound")
@click.argument("instance", type=click.Path(dir_okay=False))
@click.option("--method", type=click.Choice(["trivial", "unconstrained", "lagrangian", "exact", "elimination"]),
              default="lagrangian", show_default=True)
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Seconds for the bound itself.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Also write the Bound record here.")
@click.option("--max-table", type=int, default=1 << 24, show_default=True,
              help="elimination: largest factor table (entries) built exactly; beyond it, mini-buckets.")
@user_errors
def intraop_bound(instance: str, method: str, time_limit: float, out: str | None, max_table: int) -> None:
    """Print a certified lower bound on INSTANCE's optimum as one JSON line (a Bound record)."""
    from gapstop.problems.intraop.bounds import lower_bound
    from gapstop.problems.intraop.io import load_problem

    check_time_limit(time_limit)
    problem = load_problem(instance)
    # value null: nothing proven, or (status "infeasible") no feasible solution exists
    if max_table < 1:
        raise InputError(f"--max-table: must be >= 1, got {max_table}")
    kw = {"table_limit": max_table} if method == "elimination" else {}
    doc = {"problem": "intraop", "instance": problem.name,
           **lower_bound(problem, method, time_limit, **kw).to_dict()}
    write_json(out, doc)
    click.echo(json.dumps(doc))
