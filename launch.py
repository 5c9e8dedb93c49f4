"""gapstop command line: ``python launch.py <problem> <command> ...`` (also the ``gapstop`` script).

This file only collects: each problem's commands come from its definition
(``problems/<p>/cli.py``, through :mod:`problems.registry`), what they share from
:mod:`engine.cli`, ``report`` from :mod:`engine.report`, the time-limit guard from
:mod:`engine.guard`. It is, with ``actors/`` and ``cluster/``, where Ray is set up: it
registers the Ray backends that ``--address``/``--workers`` runs use. Bad input ends with a
one-line ``error: ...`` on stderr and exit code 2; a run that finds nothing feasible exits with 1.
"""

from __future__ import annotations

import os

# One OpenBLAS thread unless the user sets otherwise, before numpy loads OpenBLAS: gapstop's
# parallelism is its islands and bound jobs, one per core (Ray gives its workers OMP_NUM_THREADS
# = their CPUs for the same reason), and nothing it runs wants a BLAS thread pool (the spectral
# bound limits itself to one). OpenBLAS starts its pool when it loads, and numba's first call
# loads SciPy's copy when SciPy is installed: 0.13 s of CPU there and 0.04 s in numpy's import,
# taken from the exact MIP's two workers at the start of a run (docs/decisions/0004-one-openblas-thread.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import sys
from typing import Any

import click

from gapstop.engine import facade


def _ray_run(problem_name: str, problem: Any, params: dict[str, Any], config: facade.RunConfig,
             **kw: Any) -> dict[str, Any]:
    """A run on Ray: actors for the coordinator, the islands and the bound jobs (``problem``: as
    the command loaded and checked it, put in the object store once)."""
    from gapstop.actors.runner import run

    return run(problem_name, config.path, params, time_limit_s=config.time_limit_s, target_gap=config.target_gap,
               seed=config.seed, run_dir=config.run_dir, resume=config.resume, address=config.address,
               workers=config.workers, cpus_per_worker=config.cpus_per_worker, bounds=config.bounds,
               islands=config.islands, out_path=config.out, problem=problem, **kw)


def _rl_rollouts(workers: int, mode: str, seed: int) -> Any:
    """The learned policy's training rollouts on ``workers`` local Ray workers."""
    from gapstop.actors.rl_rollout import RolloutPool
    from gapstop.cluster.connect import connect

    connect(None, workers)
    return RolloutPool(workers, mode, seed).runner


facade.register_backend("ray", _ray_run)
facade.register_backend("rl-rollouts", _rl_rollouts)


class _Problems(click.Group):
    """The top-level group: ``report``, and every registered problem's commands, looked up
    when the command line is read (a problem registered after this module loads has its
    commands too)."""

    def _all(self) -> dict[str, click.Command]:
        from gapstop.engine.report import report
        from gapstop.problems import registry

        found: dict[str, click.Command] = {}
        for definition in registry.definitions():
            for group in getattr(definition, "cli_groups", lambda: [])():
                found.setdefault(group.name or "", group)
        return {**found, "report": report, **self.commands}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self._all())

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self._all().get(cmd_name)


@click.group(cls=_Problems, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """gapstop: partition ML computation graphs and certify how good the answer is."""
    from gapstop.engine.cli import renew_out_writes

    renew_out_writes()


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

    from gapstop.engine.guard import mark_entry, record_finish
    from gapstop.engine.interrupts import install_sigterm

    mark_entry()  # this process is the command: --time-limit counts from its start
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
    record_finish()  # a solve command: how long its finish took, for the next run's reserve
    os._exit(code)


if __name__ == "__main__":
    run()
