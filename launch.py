"""gapstop command line: ``python launch.py <problem> <command> ...`` (also the ``gapstop`` script).

Only parses options, loads the problem, and hands over to the solver/bound code;
no algorithm logic lives here. Bad input ends with a one-line ``error: ...`` on
stderr and exit code 2; a run that finds nothing feasible exits with 1.
"""

from __future__ import annotations

import os

# One OpenBLAS thread unless the user sets otherwise, before numpy loads OpenBLAS: gapstop's
# parallelism is its islands and bound jobs, one per core (Ray gives its workers OMP_NUM_THREADS
# = their CPUs for the same reason), and nothing it runs wants a BLAS thread pool (the spectral
# bound limits itself to one). OpenBLAS starts its pool when it loads, and numba's first call
# loads SciPy's copy when SciPy is installed: 0.13 s of CPU there and 0.04 s in numpy's import,
# taken from the exact MIP's two workers at the start of a run (BENCHMARKS.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import functools
import json
import math
import sys
from pathlib import Path
from typing import Any, Callable

import click

from gapstop.engine.errors import InputError
from gapstop.engine.persist import WriteFailures, read_json_file

#: a failed write of an output file is one line on stderr; the command goes on and prints its result
#: (one reporter per command: :func:`main` renews it)
_OUT_WRITES = WriteFailures(emit=lambda line: click.echo(line, err=True))


def _user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn InputError (and unreadable files) into one line on stderr and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)
        except KeyboardInterrupt as e:  # a signal outside a run's loop (which turns it into a stop reason)
            from gapstop.engine.interrupts import exit_code, stop_reason

            reason = stop_reason(e)
            click.echo(f"error: {'SIGTERM' if reason == 'terminated' else 'SIGINT'}: stopped before a result "
                       "was ready", err=True)
            sys.exit(exit_code(reason))

    return wrapper


def _write_json(path: str | None, doc: dict[str, Any]) -> None:
    if path:
        _OUT_WRITES.write_json(path, doc)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """gapstop: partition ML computation graphs and certify how good the answer is."""
    global _OUT_WRITES
    _OUT_WRITES = WriteFailures(emit=lambda line: click.echo(line, err=True))


# ----------------------------------------------------------------------------- pipeline
@main.group()
def pipeline() -> None:
    """Max-throughput pipeline partitioning (MTPP)."""


def _format_option(fn: Callable[..., Any], extra: tuple[str, ...] = ()) -> Callable[..., Any]:
    return click.option("--format", "fmt", type=click.Choice(["summary", "json", *extra]), default=None,
                        help="stdout: a short summary (the default on a terminal), the result document"
                             + (", or the contest's single line [s0, s1, ...]" if extra else "")
                             + " (README: Output).")(fn)


def _exit_for(doc: dict[str, Any]) -> None:
    """End a solve command: 130 or 143 after Ctrl-C or SIGTERM (the result is written), 1 when
    nothing feasible was found, else 0."""
    from gapstop.engine.interrupts import exit_code

    code = exit_code(doc["stopped_because"])
    if code is not None:
        sys.exit(code)
    if not _feasible(doc):
        sys.exit(1)


def _wants_summary(fmt: str | None) -> bool:
    """``--format summary``, or no ``--format`` with stdout on a terminal."""
    return fmt == "summary" or (fmt is None and sys.stdout.isatty())


def _print_summary(doc: dict[str, Any], objective_key: str) -> None:
    from gapstop.engine.summary import summary_lines

    for line in summary_lines(doc, objective_key):
        click.echo(line)


def _print_pipeline_result(doc: dict[str, Any], fmt: str | None = None) -> None:
    """``fmt``: ``json`` (the document), ``summary`` (with the stage table), or None: two lines
    (certificate, stage costs), and the summary's rows as well when stdout is a terminal."""
    if fmt == "json":
        click.echo(json.dumps(doc))
        return
    if _wants_summary(fmt):
        from gapstop.problems.pipeline.plan import stage_lines

        _print_summary(doc, "objective")
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


def _status_printer(quiet: bool) -> Callable[[dict[str, Any]], None] | None:
    """Progress from coordinator status dicts: a live line on a terminal, plain lines every 5 s otherwise."""
    if quiet:
        return None
    import time

    state = {"last": 0.0}
    tty = sys.stderr.isatty()

    def show(st: dict[str, Any]) -> None:
        now = time.monotonic()
        if now - state["last"] < (0.5 if tty else 5.0):
            return
        state["last"] = now
        ub = "-" if st["ub"] is None else f"{st['ub']:.6g}"
        lb = "-" if st["lb"] is None else f"{st['lb']:.6g}"
        gap = "-" if st["gap"] is None else f"{100 * st['gap']:.2f}%"
        rate = st["evals"] / st["elapsed"] if st["elapsed"] > 0 else 0.0
        alive = f"  workers {len(st['nodes'])}" if "nodes" in st else ""
        line = f"[{st['elapsed']:7.1f}s] best {ub}  bound {lb}  gap {gap}  {rate:,.0f} evals/s{alive}"
        click.echo(("\r" + line.ljust(79)) if tty else line, nl=not tty, err=True)

    return show


#: the least finish reserve of a run with ``--plot`` (seconds; at most half its time limit): about
#: twice what importing matplotlib and drawing a run take on a 2-core machine
PLOT_RESERVE_S = 3.0

#: the running command's time-limit guard (read by :func:`run` to record how long the finish took)
_GUARD: dict[str, Any] = {}


class _Guard:
    """``--time-limit`` as the whole process's wall clock: see :mod:`engine.deadline`.

    The search gets the time up to ``deadline - reserve``, where the reserve is what the
    finish (final writes, shutdown) of the last runs of the same ``kind`` took; a watchdog
    thread writes and prints the best answer so far, the run directory's ``result_path``
    (``result.json``, rewritten as the run goes), and ends the process if the normal path has
    not done so in time; it also writes that answer, final, back to ``result_path``, which the
    run's own finish did not get to write.
    """

    def __init__(self, kind: str, time_limit: float, result_path: Path,
                 emit: Callable[[dict[str, Any]], None]) -> None:
        import time

        from gapstop.engine.deadline import Deadline, FinishCosts, Watchdog, jit_clock, set_run_end

        # only a process that is this command (``run()``, the entry point) counts from its own
        # start and may be ended by the watchdog; called from a longer-lived one (tests, a
        # library), the limit counts from the command's start and no thread ends the caller
        whole = "entry" in _GUARD
        self.kind, self.costs, self.jit = kind, FinishCosts(), jit_clock()
        self.deadline = Deadline(time_limit) if whole else Deadline(time_limit, start=time.monotonic())
        self.reserve_s = self.costs.reserve_s(kind) if whole else 0.0
        if whole and kind.endswith("-plot"):
            # before a first measurement, drawing (importing matplotlib included) still needs its time
            self.reserve_s = max(self.reserve_s, min(PLOT_RESERVE_S, 0.5 * time_limit))
        self.t_emitted: float | None = None
        self.budget_end = self.deadline.end - self.reserve_s
        if whole:  # (a longer-lived caller keeps its own run clock)
            set_run_end(self.budget_end)

        def late(doc: dict[str, Any]) -> None:
            doc = {**doc, "elapsed_s": round(self.deadline.elapsed(), 3)}
            if doc.get("stopped_because") == "running":
                doc["stopped_because"] = "time-limit"
            # the run's own finish did not get to write it: the run directory's result.json
            # must not stay a running document
            if result_path.parent.is_dir():
                _OUT_WRITES.write_json(result_path, doc)
            emit(doc)

        self.watchdog = Watchdog(self.deadline, lambda: _running_doc(result_path), late,
                                 lambda d: 0 if _feasible(d) else 1, on_exit=self.record,
                                 on_poll=self.jit.attach)
        if whole:
            self.watchdog.start()
            _GUARD["guard"] = self

    def budget_s(self) -> float:
        import time

        return max(0.0, self.budget_end - time.monotonic())

    def give(self, doc: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
        """Write and print the normal path's answer, unless the watchdog is already giving
        its own (then wait for it to end the process)."""
        import time

        if "guard" in _GUARD and not self.watchdog.claim(0 if _feasible(doc) else 1):
            while True:
                time.sleep(1.0)
        emit(doc)
        self.t_emitted = time.monotonic()

    def record(self) -> None:
        """Remember how long after the search's end the answer was out (written and printed),
        when that was after it. What follows (Ray's shutdown) needs no reserve: the watchdog
        ends the process at the deadline. When the watchdog had to give the answer, the finish
        needed more than the reserve and the time that was left: twice the reserve (at least
        the watchdog's margin) is recorded, so the reserve of the following runs grows until
        their own finish fits and is measured. A finish that fitted records what it took
        (0 if nothing), so the reserve also shrinks again (it is the largest of the last few).
        Time spent compiling numba kernels in the finish is left out (see
        :func:`engine.deadline.finish_to_record`)."""
        import time

        from gapstop.engine.deadline import finish_to_record

        out = self.t_emitted or time.monotonic()
        over = out - self.budget_end
        seconds = finish_to_record(over, self.jit.within(self.budget_end, out), fired=self.watchdog.fired,
                                   gave_answer=self.watchdog.gave_answer, reserve_s=self.reserve_s,
                                   margin_s=self.watchdog.margin_s)
        if seconds is not None:
            self.costs.record(self.kind, seconds)


def _feasible(doc: dict[str, Any] | None) -> bool:
    return doc is not None and bool(doc.get("feasible", doc.get("objective") is not None))


def _running_doc(path: Path) -> dict[str, Any] | None:
    """The result document a run keeps rewriting (None until it holds a solution, or, under
    --all-chips, what is known of whether one exists)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    return doc if _feasible(doc) or (doc.get("constraints") or {}).get("existence") else None


def _run_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Options shared by the solve commands of every problem."""
    opts = [
        click.option("--time-limit", type=float, default=60.0, show_default=True, help="Seconds."),
        click.option("--target-gap", type=float, default=0.0, show_default=True,
                     help="Stop once 1 - bound/objective is at most this (0.05 = 5 %)."),
        click.option("--seed", type=int, default=0, show_default=True),
        click.option("--out", type=click.Path(dir_okay=False), default=None,
                     help="Also write result.json here."),
        click.option("--run-dir", type=click.Path(file_okay=False), default=None,
                     help="Run directory (default: runs/<timestamp>)."),
        click.option("--resume", type=click.Path(file_okay=False, exists=True), default=None,
                     help="Continue the run in this run directory."),
        click.option("--address", default=None,
                     help="Ray cluster to join ('auto', 'ray://host:10001'); the run then uses Ray."),
        click.option("--workers", type=int, default=None,
                     help="Worker slots (default: one per CPU); given, the run uses Ray (started locally "
                          "without --address) unless --in-process."),
        click.option("--cpus-per-worker", type=float, default=1.0, show_default=True, help="On Ray."),
        click.option("--in-process", is_flag=True,
                     help="Threads in this process, never Ray (the default without --address or --workers)."),
        click.option("--quiet", is_flag=True, help="No progress output."),
        click.option("--plot", type=click.Path(dir_okay=False), default=None,
                     help="At the end, draw the run as 'report --plot' does: FILE.png, .svg or .html "
                          "(needs gapstop[plot])."),
    ]
    for o in reversed(opts):
        fn = o(fn)
    return fn


#: Longest --time-limit accepted (seconds, about 116 days): waits on far longer timeouts overflow.
MAX_TIME_LIMIT_S = 1e7
#: Most --workers (and --islands) accepted: each is a thread or an actor with its own search state.
MAX_WORKERS = 4096


def _check_time_limit(time_limit: float) -> None:
    if not 0 < time_limit <= MAX_TIME_LIMIT_S:  # also refuses nan
        raise InputError(f"--time-limit: must be > 0 and at most {MAX_TIME_LIMIT_S:g} seconds, got {time_limit}")


def _refuse_given(mode: str, names: tuple[str, ...]) -> None:
    """A flag given on the command line that ``mode`` would ignore is an error (one line, exit 2)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    for name in names:
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            flag = next(p.opts[0] for p in ctx.command.params if p.name == name)
            raise InputError(f"{flag}: does not apply {mode}")


#: run options that only a Ray run reads
_RAY_ONLY = ("address", "cpus_per_worker")


def _check_run_options(target_gap: float, time_limit: float, workers: int | None, cpus_per_worker: float) -> None:
    if not 0 <= target_gap < 1:
        raise InputError(f"--target-gap: must be in [0, 1), got {target_gap}")
    _check_time_limit(time_limit)
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"--workers: must be in [1, {MAX_WORKERS}], got {workers}")
    if not 0 < cpus_per_worker < math.inf:  # also refuses nan
        raise InputError(f"--cpus-per-worker: must be a finite number > 0, got {cpus_per_worker}")
    ctx = click.get_current_context()
    if ctx.params.get("in_process"):
        _refuse_given("with --in-process (threads in this process, never Ray)", _RAY_ONLY)
    elif ctx.params.get("address") is None and ctx.params.get("workers") is None:
        _refuse_given("to a run in this process (Ray runs with --address or --workers)", ("cpus_per_worker",))


def _guard_kind(problem: str, local: bool, plot: str | None) -> str:
    """The time-limit guard's kind: runs that draw their figures at the end (``--plot``) learn
    their own finish reserve, so drawing never shortens the search of runs that do not."""
    return f"{problem}-{'in-process' if local else 'ray'}{'-plot' if plot else ''}"


def _plot_finished(run_dir: str, plot: str | None) -> None:
    """With ``--plot``, draw the finished run before its answer is given: should drawing
    overrun ``--time-limit``, the watchdog still gives the answer (without the figure), and
    the next runs of the kind reserve more time for their finish."""
    if plot is None:
        return
    try:
        _plot_run(run_dir, plot)
    except InputError as e:  # the run's answer stands; only the picture is missing
        click.echo(f"error: {e}", err=True)


def _solve(problem_name: str, path: str, problem: Any, params: dict[str, Any], *, time_limit: float, target_gap: float,
           seed: int, run_dir: str, resume: str | None, address: str | None, workers: int | None,
           cpus_per_worker: float, in_process: bool, quiet: bool, bounds: bool = True, islands: int | None = None,
           out: str | None = None) -> dict[str, Any]:
    """One certified run, in this process (threads) or on Ray: the same islands, bound jobs and
    session either way (:mod:`engine.solve_loop`). Ray runs it when asked for by ``--address`` or
    ``--workers`` (without ``--in-process``); otherwise the work fits this process and Ray
    (5-10 s of start-up on a laptop) is not started. ``problem``: ``path`` as loaded and checked by
    the command (a Ray run's actors load it from the driver's copy in the object store)."""
    from gapstop.engine.rundir import holds_run, run_config

    if resume is None and holds_run(run_dir):
        raise InputError(f"--run-dir: {run_dir} already holds a run; continue it with --resume {run_dir} "
                         "or choose another directory")
    show = _status_printer(quiet)
    if in_process or (address is None and workers is None):
        from gapstop.engine.deadline import run_end
        from gapstop.engine.local_runner import run_local
        from gapstop.problems import registry

        adapter = registry.get(problem_name)
        config = run_config(problem_name, path, params, seed, target_gap, time_limit)
        doc = run_local(adapter, problem, params, run_dir=run_dir, config=config, time_limit_s=time_limit,
                        target_gap=target_gap, seed=seed, resume=resume is not None, workers=workers,
                        islands=islands, bounds=bounds, progress=show, out_path=out, out_failures=_OUT_WRITES,
                        t_end=run_end())
    else:
        from gapstop.actors.runner import run

        try:
            doc = run(problem_name, path, params, time_limit_s=time_limit, target_gap=target_gap, seed=seed,
                      run_dir=run_dir, resume=resume is not None, address=address, workers=workers,
                      cpus_per_worker=cpus_per_worker, bounds=bounds, islands=islands, progress=show,
                      out_path=out, out_failures=_OUT_WRITES)
        except ConnectionError as e:
            raise InputError(f"--address: cannot connect to Ray at {address!r}: {e}") from None
    if show is not None and sys.stderr.isatty():
        click.echo("", err=True)
    return doc


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
              help="Number of pipeline stages / chips (1 to 1024; README: Input limits).")
@_run_options
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
@_format_option
@_user_errors
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
    from gapstop.engine.persist import default_run_dir
    from gapstop.problems.pipeline.io import check_stages, load_graph

    if k < 1:
        raise InputError(f"-k: must be >= 1, got {k}")
    _check_run_options(target_gap, time_limit, workers, cpus_per_worker)
    _check_plot(plot)
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
        _refuse_given(f"with {flag}, which computes its plan in this process without search islands",
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
    rd = resume or run_dir or str(default_run_dir())

    def emit(doc: dict[str, Any]) -> None:
        _write_json(out, doc)
        _print_pipeline_result(doc, fmt)

    guard = _Guard(_guard_kind("pipeline", in_process or (address is None and workers is None), plot),
                   time_limit, Path(rd) / "result.json", emit)
    doc = _solve("pipeline", graph, problem, params, time_limit=guard.budget_s(), target_gap=target_gap, seed=seed,
                 run_dir=rd, resume=resume, address=address, workers=workers, cpus_per_worker=cpus_per_worker,
                 in_process=in_process, quiet=quiet, bounds=not no_bounds, islands=islands, out=out)
    _plot_finished(rd, plot)
    guard.give(doc, emit)
    _exit_for(doc)


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
    _write_json(out, doc)
    _print_pipeline_result(doc, fmt)
    if fmt == "json":
        return
    click.echo("stages begin at submodule calls (--split-at module): optimal among such plans; the gap is "
               "against the unrestricted lower bound")
    if not (fmt == "summary" or (fmt is None and sys.stdout.isatty())):  # else printed with the summary
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
    _write_json(out, doc)
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
@click.option("-k", "k", type=int, required=True, help="Number of pipeline stages (1 to 1024; README: Input limits).")
@click.option("--method", required=True,
              type=click.Choice(["simple", "spectral", "heaviest-block", "end-blocks", "block-cover", "bottleneck",
                                 "bottleneck-no-dag", "bottleneck-no-io", "guess-the-bottleneck", "exact"]))
@click.option("--time-limit", type=float, default=60.0, show_default=True, help="Solver seconds.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write the bound record as JSON.")
@_user_errors
def pipeline_bound(graph: str, k: int, method: str, time_limit: float, out: str | None) -> None:
    """Compute one lower bound on the optimal bottleneck of GRAPH with K stages."""
    from gapstop.problems.pipeline.bounds import lower_bound
    from gapstop.problems.pipeline.io import check_stages, load_graph

    if k < 1:
        raise InputError(f"-k: must be >= 1, got {k}")
    _check_time_limit(time_limit)
    problem = load_graph(graph)
    check_stages(problem, k)
    # the MIP methods solve with one CP-SAT worker per core (CP-SAT's portfolio needs >= 2)
    kw = {} if method in ("simple", "spectral") else {"num_workers": max(2, os.cpu_count() or 1)}
    b = lower_bound(problem, k, method, time_limit, **kw)
    rec = b.to_dict()
    rec["detail"] = {key: v for key, v in rec["detail"].items() if key != "blocks"}
    click.echo(json.dumps(rec))
    _write_json(out, rec)


@pipeline.command("evaluate")
@click.argument("graph", type=click.Path(dir_okay=False))
@click.argument("result", type=click.Path(dir_okay=False))
@_user_errors
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


# ----------------------------------------------------------------------------- intraop
@main.group()
def intraop() -> None:
    """Intra-operator sharding strategies (IOPDDL contest problem)."""


@intraop.command("solve")
@click.argument("instance", type=click.Path(dir_okay=False))
@_run_options
@click.option("--method", type=click.Choice(["search", "elimination"]), default="search", show_default=True,
              help="search: penalty search with bounds; elimination: FindOptStrategy in this process.")
@click.option("--max-table", type=int, default=1 << 24, show_default=True,
              help="elimination: largest factor table (entries) built exactly.")
@functools.partial(_format_option, extra=("contest",))
@_user_errors
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

    from gapstop.engine.persist import default_run_dir
    from gapstop.problems.intraop.io import load_problem

    t0 = time.perf_counter()
    _check_run_options(target_gap, time_limit, workers, cpus_per_worker)
    if max_table < 1:
        raise InputError(f"--max-table: must be >= 1, got {max_table}")
    if plot is not None and method == "elimination":
        raise InputError("--plot: not with --method elimination, which leaves no run directory to draw")
    if method == "elimination":  # one exact computation in this process: no run, no search, no Ray
        _refuse_given("to --method elimination (it reads --time-limit, --out and --format)",
                      ("target_gap", "seed", "run_dir", "resume", "address", "workers", "cpus_per_worker",
                       "in_process", "quiet"))
    else:
        _refuse_given("to --method search (it is --method elimination's table cap)", ("max_table",))
    _check_plot(plot)
    rd = resume or run_dir or str(default_run_dir())

    def emit(doc: dict[str, Any]) -> None:
        _write_json(out, doc)
        if fmt == "contest":
            if doc["solution"] is not None:
                click.echo("[" + ", ".join(map(str, doc["solution"])) + "]")
        elif _wants_summary(fmt):
            _print_summary(doc, "cost")
        else:
            click.echo(json.dumps(doc))

    guard = None
    if method != "elimination":
        guard = _Guard(_guard_kind("intraop", in_process or (address is None and workers is None), plot),
                       time_limit, Path(rd) / "result.json", emit)
    problem = load_problem(instance)  # fail fast on bad input, before starting anything
    if guard is None:
        doc = _intraop_eliminate(problem, time_limit, max_table, t0)
        emit(doc)
    else:
        doc = _solve("intraop", instance, problem, {}, time_limit=guard.budget_s(), target_gap=target_gap, seed=seed,
                     run_dir=rd, resume=resume, address=address, workers=workers, cpus_per_worker=cpus_per_worker,
                     in_process=in_process, quiet=quiet, out=out)
        _plot_finished(rd, plot)
        guard.give(doc, emit)
    if not doc["feasible"]:
        from gapstop.engine.deadline import compile_note

        click.echo(f"error: no feasible solution found ({doc['stopped_because']}{compile_note()})", err=True)
    _exit_for(doc)


def _intraop_eliminate(problem: Any, time_limit: float, max_table: int, t0: float) -> dict[str, Any]:
    """The result document of FindOptStrategy; the solution only when it is the proven optimum."""
    import math
    import time

    from gapstop.engine.records import relative_gap
    from gapstop.problems.intraop.elimination import find_opt_strategy

    r = find_opt_strategy(problem, table_limit=max_table, time_limit_s=time_limit, prune_memory=True)
    lb = None if r.value == math.inf else r.value
    feasible = r.evaluation is not None and r.evaluation.feasible
    cost = r.evaluation.cost if feasible else None
    why = ("infeasible" if r.value == math.inf else "optimal" if r.optimal
           else "unconstrained optimum exceeds the usage limit" if r.exact
           else "table cap: decoded solution, certified gap" if feasible else "table cap or time limit: bound only")
    return {"problem": "intraop", "instance": problem.name, "method": "elimination", "cost": cost,
            "feasible": feasible, "solution": r.solution if feasible else None, "lower_bound": lb,
            "gap": relative_gap(cost, lb), "elapsed_s": round(time.perf_counter() - t0, 3), "stopped_because": why,
            "elimination": r.detail()}


@intraop.command("generate")
@click.argument("graph", type=click.Path(dir_okay=False))
@click.option("--nprocs", type=int, required=True, help="Processors p to shard every op over.")
@click.option("--mesh", default=None, help="Device mesh shape, e.g. 2x4 (product = --nprocs).")
@click.option("--chip", "chip_spec", required=True, help="Chip profile: a shipped name or a TOML/JSON file.")
@click.option("--training", is_flag=True, help="Backward pass and gradient all-reduce in t_V, gradients in memory.")
@click.option("--max-configs", type=int, default=32, show_default=True, help="Configurations kept per op.")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="The contest-format instance.")
@_user_errors
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
        raise _cannot_write(out, e) from None
    m = doc["meta"]
    click.echo(json.dumps({"instance": out, "nodes": len(m["ops"]), "edges": len(doc["problem"]["edges"]["nodes"]),
                           "configurations": sum(len(c) for c in m["configs"]), "dropped": m["dropped_total"],
                           "view_ops": m["view_ops"]}))


@intraop.command("evaluate")
@click.argument("instance", type=click.Path(dir_okay=False))
@click.argument("solution", type=click.Path(dir_okay=False))
@_user_errors
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
@_user_errors
def intraop_bound(instance: str, method: str, time_limit: float, out: str | None, max_table: int) -> None:
    """Print a certified lower bound on INSTANCE's optimum as one JSON line (a Bound record)."""
    from gapstop.problems.intraop.bounds import lower_bound
    from gapstop.problems.intraop.io import load_problem

    _check_time_limit(time_limit)
    problem = load_problem(instance)
    # value null: nothing proven, or (status "infeasible") no feasible solution exists
    if max_table < 1:
        raise InputError(f"--max-table: must be >= 1, got {max_table}")
    kw = {"table_limit": max_table} if method == "elimination" else {}
    doc = {"problem": "intraop", "instance": problem.name,
           **lower_bound(problem, method, time_limit, **kw).to_dict()}
    _write_json(out, doc)
    click.echo(json.dumps(doc))


# ----------------------------------------------------------------------------- rl
@main.group()
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
@_user_errors
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
    if rollout_workers:
        from gapstop.actors.rl_rollout import RolloutPool
        from gapstop.cluster.connect import connect

        connect(None, rollout_workers)
        factory = RolloutPool(rollout_workers, mode, seed).runner
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
@main.group("import")
def import_() -> None:
    """Import a model file as a pipeline graph (roofline costs on a chip profile)."""


@import_.command("onnx")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--chip", required=True, help="Shipped chip profile name (e.g. a100-sxm-80gb) or a profile file.")
@click.option("--batch", type=int, default=None, help="Value of every input's symbolic leading dim.")
@click.option("--input-shape", "input_shape", multiple=True, metavar="NAME=d0,d1,...",
              help="Whole shape of one input (repeatable).")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Graph file (.json or .json.gz).")
@_user_errors
def import_onnx_cmd(model: str, chip: str, batch: int | None, input_shape: tuple[str, ...], out: str) -> None:
    """Import MODEL (an ONNX file; weights not needed) with per-op roofline costs on --chip."""
    from gapstop.problems.chip import load_chip
    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx

    profile = load_chip(chip)
    _save_imported(model, out, profile.name, *import_onnx(model, profile, batch=batch, input_shapes=list(input_shape)))


def _cannot_write(path: str, e: OSError) -> InputError:
    """An output file that is a command's only product and could not be written: one line, exit 2."""
    return InputError(f"{path}: cannot write: {e.strerror or e}")


def _save_imported(source: str, out: str, chip: str, doc: dict[str, Any], warning: str | None) -> None:
    from gapstop.problems.pipeline.io import problem_from_dict, save_graph

    if warning:
        click.echo(warning, err=True)
    problem = problem_from_dict(doc, source)
    try:
        save_graph(problem, out)
    except OSError as e:
        raise _cannot_write(out, e) from None
    click.echo(f"{out}: {problem.n} nodes, {problem.m} edges, {doc['meta']['total_flops']:.4g} FLOPs, "
               f"total work {problem.work.sum():.6g} us on {chip}")


@import_.command("torch")
@click.argument("program", type=click.Path(dir_okay=False))
@click.option("--chip", required=True, help="Shipped chip profile name (e.g. a100-sxm-80gb) or a profile file.")
@click.option("--out", required=True, type=click.Path(dir_okay=False), help="Graph file (.json or .json.gz).")
@_user_errors
def import_torch_cmd(program: str, chip: str, out: str) -> None:
    """Import PROGRAM (saved by torch.export.save, static shapes) with per-op roofline costs on --chip."""
    from gapstop.problems.chip import load_chip
    from gapstop.problems.pipeline.importers.torch_export import import_torch

    profile = load_chip(chip)
    _save_imported(program, out, profile.name, *import_torch(program, profile))


def _report_lines(run_dir: str | Path) -> list[str]:
    """The certificate and the convergence table of a run directory, as ``report`` prints them."""
    from gapstop.engine.plots import read_run
    from gapstop.engine.summary import summary_lines

    doc, events, _ = read_run(run_dir)
    lines = summary_lines(doc, "objective" if "objective" in doc else "cost")  # as a solve's summary
    if doc.get("block_costs"):
        lines.append("  stage costs " + ", ".join(f"{c:.6g}" for c in doc["block_costs"]))
    for b in doc.get("bounds", []):
        v = "-" if b["value"] is None else f"{b['value']:.6g}"
        lines.append(f"  bound {b['method']:<28} {v:>14}  {b['status']:<10} {b['wall_s']:8.2f}s  {b.get('solver', '')}")
    if events:
        lines.append(f"{'t_s':>9}  {'kind':<5}  {'value':>14}  {'method':<28} {'worker':<22} status")
        lines.extend(f"{e['t_s']:9.2f}  {e['kind']:<5}  {e['value']:14.6g}  {e['method']:<28} "
                     f"{e['worker']:<22} {e['status']}" for e in events)
    return lines


def _check_plot(plot: str | None) -> None:
    """Refuse a ``--plot`` that cannot be written before any work starts (exit 2)."""
    if plot is not None:
        from gapstop.engine.figures import check_plot_path, require_matplotlib

        require_matplotlib()
        check_plot_path(plot)


def _plot_run(run_dir: str | Path, plot: str) -> None:
    """Write the figures of a run directory to ``plot``: convergence, then the problem's plan
    (a plan that cannot be drawn, e.g. no feasible solution, is one line on stderr)."""
    from gapstop.engine import figures
    from gapstop.engine.plots import convergence, read_run

    figures.require_matplotlib()
    figures.check_plot_path(plot)
    doc, events, config = read_run(run_dir)
    title = f"{doc.get('problem')} {doc.get('graph') or doc.get('instance') or ''}" \
            + (f"  k={doc['k']}" if "k" in doc else "")
    panels = [figures.convergence_panel(convergence(events, doc, config), title)]
    try:
        if doc.get("problem") == "pipeline":
            from gapstop.problems.pipeline.plots import plan_from_run

            bars, chips = plan_from_run(doc, config)
            panels.append(figures.stages_panel(bars))
            if chips is not None:
                panels.append(figures.chips_panel(chips, bars))
        elif doc.get("problem") == "intraop":
            from gapstop.problems.intraop.plots import plan_from_run as intraop_plan

            prof, ops = intraop_plan(doc, config)
            panels += [figures.memory_panel(prof), figures.costly_panel(ops)]
    except InputError as e:
        click.echo(f"note: no plan figure: {e}", err=True)
    try:
        figures.write(plot, panels, title=title, table=_report_lines(run_dir))
    except OSError as e:
        raise InputError(f"--plot: cannot write {plot}: {e}") from None


@main.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Also draw the run: FILE.png, .svg or .html (needs gapstop[plot]).")
@_user_errors
def report(run_dir: str, plot: str | None) -> None:
    """Print the certificate and the convergence table of a run directory (and draw it with --plot)."""
    _check_plot(plot)
    for line in _report_lines(run_dir):
        click.echo(line)
    if plot is not None:
        _plot_run(run_dir, plot)


def run() -> None:
    """Entry point (``python launch.py`` and the ``gapstop`` script): :func:`main`, then a quick exit.

    Every file a command writes is complete and closed when it returns (all writes
    are whole-file, atomic). What a normal interpreter exit adds after that is
    freeing every module's objects and LLVM's JIT state: 0.15-0.3 s that a user
    waiting on a run that took 1.5 s would notice. So the exit runs what must run
    (non-daemon threads finish, ``atexit`` hooks: Ray's shutdown, logging's flush,
    multiprocessing's reaping, in that order, as a normal exit would) and then ends
    the process with the command's exit code. Exceptions other than ``SystemExit``
    propagate as usual.
    """
    import atexit
    import threading

    from gapstop.engine.interrupts import install_sigterm

    _GUARD["entry"] = True  # this process is the command: --time-limit counts from its start
    install_sigterm()  # SIGTERM stops a run as Ctrl-C does (a graceful stop), and before one ends with one line
    try:
        main()
        code = 0
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            code = e.code or 0
        else:
            print(e.code, file=sys.stderr)
            code = 1
    for t in threading.enumerate():
        if t is not threading.main_thread() and not t.daemon:
            t.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # closed or broken pipe: nothing more can reach it
            pass
    if "guard" in _GUARD:  # a solve command: how long its finish took, for the next run's reserve
        _GUARD["guard"].record()
    os._exit(code)


if __name__ == "__main__":
    run()
