"""What the command line's commands share: errors as one line, output files, the run
options of every solve command and their checks, progress lines, and :func:`solve_command`
(a solve under the process's time-limit guard). Each problem's commands are in its
package (``problems/<p>/cli.py``); ``launch.py`` only collects them.
"""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path
from typing import Any, Callable

import click

from gapstop.engine.errors import InputError
from gapstop.engine.guard import feasible
from gapstop.engine.persist import WriteFailures
from gapstop.engine.protocol import RunStatus

#: a failed write of an output file is one line on stderr; the command goes on and prints its result
#: (one reporter per command: :func:`renew_out_writes`)
OUT_WRITES = WriteFailures(emit=lambda line: click.echo(line, err=True))


def renew_out_writes() -> None:
    """A fresh reporter of failed output writes for the command about to run."""
    global OUT_WRITES
    OUT_WRITES = WriteFailures(emit=lambda line: click.echo(line, err=True))


def write_json(path: str | None, doc: dict[str, Any]) -> None:
    if path:
        OUT_WRITES.write_json(path, doc)


def user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
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


def format_option(fn: Callable[..., Any], extra: tuple[str, ...] = ()) -> Callable[..., Any]:
    return click.option("--format", "fmt", type=click.Choice(["summary", "json", *extra]), default=None,
                        help="stdout: a short summary (the default on a terminal), the result document"
                             + (", or the contest's single line [s0, s1, ...]" if extra else "")
                             + " (docs/cli.md: Output).")(fn)


def exit_for(doc: dict[str, Any]) -> None:
    """End a solve command: 130 or 143 after Ctrl-C or SIGTERM (the result is written), 1 when
    nothing feasible was found, else 0."""
    from gapstop.engine.interrupts import exit_code

    code = exit_code(doc["stopped_because"])
    if code is not None:
        sys.exit(code)
    if not feasible(doc):
        sys.exit(1)


def wants_summary(fmt: str | None) -> bool:
    """``--format summary``, or no ``--format`` with stdout on a terminal."""
    return fmt == "summary" or (fmt is None and sys.stdout.isatty())


def print_summary(doc: dict[str, Any], objective_key: str) -> None:
    from gapstop.engine.summary import summary_lines

    for line in summary_lines(doc, objective_key):
        click.echo(line)


def status_printer(quiet: bool) -> Callable[[RunStatus], None] | None:
    """Progress from the run's status: a live line on a terminal, plain lines every 5 s otherwise."""
    if quiet:
        return None
    import time

    state = {"last": 0.0}
    tty = sys.stderr.isatty()

    def show(st: RunStatus) -> None:
        now = time.monotonic()
        if now - state["last"] < (0.5 if tty else 5.0):
            return
        state["last"] = now
        ub = "-" if st.ub is None else f"{st.ub:.6g}"
        lb = "-" if st.lb is None else f"{st.lb:.6g}"
        gap = "-" if st.gap is None else f"{100 * st.gap:.2f}%"
        rate = st.evals / st.elapsed if st.elapsed > 0 else 0.0
        line = f"[{st.elapsed:7.1f}s] best {ub}  bound {lb}  gap {gap}  {rate:,.0f} evals/s  workers {len(st.nodes)}"
        click.echo(("\r" + line.ljust(79)) if tty else line, nl=not tty, err=True)

    return show


def run_options(fn: Callable[..., Any]) -> Callable[..., Any]:
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


def check_time_limit(time_limit: float) -> None:
    if not 0 < time_limit <= MAX_TIME_LIMIT_S:  # also refuses nan
        raise InputError(f"--time-limit: must be > 0 and at most {MAX_TIME_LIMIT_S:g} seconds, got {time_limit}")


def refuse_given(mode: str, names: tuple[str, ...]) -> None:
    """A flag given on the command line that ``mode`` would ignore is an error (one line, exit 2)."""
    from click.core import ParameterSource

    ctx = click.get_current_context()
    for name in names:
        if ctx.get_parameter_source(name) in (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT):
            flag = next(p.opts[0] for p in ctx.command.params if p.name == name)
            raise InputError(f"{flag}: does not apply {mode}")


#: run options that only a Ray run reads
RAY_ONLY = ("address", "cpus_per_worker")


def check_run_options(target_gap: float, time_limit: float, workers: int | None, cpus_per_worker: float) -> None:
    if not 0 <= target_gap < 1:
        raise InputError(f"--target-gap: must be in [0, 1), got {target_gap}")
    check_time_limit(time_limit)
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"--workers: must be in [1, {MAX_WORKERS}], got {workers}")
    if not 0 < cpus_per_worker < math.inf:  # also refuses nan
        raise InputError(f"--cpus-per-worker: must be a finite number > 0, got {cpus_per_worker}")
    ctx = click.get_current_context()
    if ctx.params.get("in_process"):
        refuse_given("with --in-process (threads in this process, never Ray)", RAY_ONLY)
    elif ctx.params.get("address") is None and ctx.params.get("workers") is None:
        refuse_given("to a run in this process (Ray runs with --address or --workers)", ("cpus_per_worker",))


def plot_finished(run_dir: str, plot: str | None) -> None:
    """With ``--plot``, draw the finished run before its answer is given: should drawing
    overrun ``--time-limit``, the watchdog still gives the answer (without the figure), and
    the next runs of the kind reserve more time for their finish."""
    if plot is None:
        return
    from gapstop.engine.report import plot_run

    try:
        plot_run(run_dir, plot)
    except InputError as e:  # the run's answer stands; only the picture is missing
        click.echo(f"error: {e}", err=True)


def cannot_write(path: str, e: OSError) -> InputError:
    """An output file that is a command's only product and could not be written: one line, exit 2."""
    return InputError(f"{path}: cannot write: {e.strerror or e}")


def solve_command(problem_name: str, path: str, problem: Any, params: dict[str, Any],
                  emit: Callable[[dict[str, Any]], None], *, time_limit: float, target_gap: float, seed: int,
                  run_dir: str | None, resume: str | None, address: str | None, workers: int | None,
                  cpus_per_worker: float, in_process: bool, quiet: bool, plot: str | None, out: str | None,
                  bounds: bool = True, islands: int | None = None) -> dict[str, Any]:
    """A solve command's run: under the time-limit guard (:class:`engine.guard.Guard`), through
    :func:`engine.facade.solve`, drawn with ``--plot``, and its answer given by ``emit``
    (written and printed) once. The run options are checked here too, for problems whose
    commands do not check them before loading. Returns the result document."""
    from gapstop.engine.facade import RunConfig, solve
    from gapstop.engine.guard import Guard, guard_kind
    from gapstop.engine.persist import default_run_dir
    from gapstop.problems import registry

    check_run_options(target_gap, time_limit, workers, cpus_per_worker)
    rd = resume or run_dir or str(default_run_dir())
    local = in_process or (address is None and workers is None)
    guard = Guard(guard_kind(problem_name, local, plot), time_limit, Path(rd) / "result.json", emit,
                  OUT_WRITES.write_json)
    config = RunConfig(path=path, run_dir=rd, time_limit_s=guard.budget_s(), target_gap=target_gap, seed=seed,
                       resume=resume is not None, address=address, workers=workers,
                       cpus_per_worker=cpus_per_worker, in_process=in_process, bounds=bounds, islands=islands,
                       out=out)
    show = status_printer(quiet)
    from gapstop.engine.deadline import run_end

    try:
        doc = solve(registry.get(problem_name), problem, params, config, progress=show, out_failures=OUT_WRITES,
                    t_end=None if config.on_ray else run_end())
    except ConnectionError as e:
        raise InputError(f"--address: cannot connect to Ray at {address!r}: {e}") from None
    if show is not None and sys.stderr.isatty():
        click.echo("", err=True)
    plot_finished(rd, plot)
    guard.give(doc, emit)
    return doc
