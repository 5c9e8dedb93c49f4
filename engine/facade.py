"""One certified run of any problem: ``solve(definition, problem, params, config)``.

The command line, the Python API, the tests and the benchmarks call this one function. It
runs the same islands, bound jobs and session in this process (threads,
:mod:`engine.local_runner`) or on Ray (a backend the entry point registers, so that the
engine never imports Ray): Ray when :attr:`RunConfig.on_ray`, i.e. asked for by an address
or a number of workers without ``in_process``; otherwise the work fits this process and
Ray (5-10 s of start-up on a laptop) is not started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from gapstop.engine.errors import InputError
from gapstop.engine.protocol import RunStatus


@dataclass(frozen=True)
class RunConfig:
    """How one run goes. ``path``: the problem's file (recorded in the run directory; a Ray
    run's actors get the driver's loaded copy through the object store), None for a problem
    built in memory (a local run only). ``time_limit_s``:
    the search's budget in seconds. ``resume``: continue the run in ``run_dir``.
    ``islands``: search islands (None: the plan's default). ``bounds``: run the bound jobs.
    ``out``: also write result.json there."""

    path: str | None
    run_dir: str
    time_limit_s: float
    target_gap: float = 0.0
    seed: int = 0
    resume: bool = False
    address: str | None = None
    workers: int | None = None
    cpus_per_worker: float = 1.0
    in_process: bool = False
    bounds: bool = True
    islands: int | None = None
    out: str | None = None

    @property
    def on_ray(self) -> bool:
        return not self.in_process and (self.address is not None or self.workers is not None)


#: a backend runs one run elsewhere than in this process's threads: ``backend(problem_name, problem,
#: params, config, progress=..., out_failures=...)`` returns the result document
Backend = Callable[..., dict[str, Any]]
_BACKENDS: dict[str, Backend] = {}


def register_backend(name: str, backend: Backend) -> None:
    """Make a backend available (the entry point registers ``"ray"``)."""
    _BACKENDS[name] = backend


def solve(definition: Any, problem: Any, params: dict[str, Any], config: RunConfig, *,
          progress: Callable[[RunStatus], None] | None = None, out_failures: Any = None,
          t_end: float | None = None) -> dict[str, Any]:
    """Run ``problem`` (loaded and checked by the caller) to its stop and return the result
    document, re-scored by the problem's exact evaluator. ``t_end``: the process's run end
    (:func:`engine.deadline.run_end`), which a local run never passes."""
    from gapstop.engine.rundir import holds_run, run_config

    if not config.resume and holds_run(config.run_dir):
        raise InputError(f"--run-dir: {config.run_dir} already holds a run; continue it with --resume "
                         f"{config.run_dir} or choose another directory")
    if config.on_ray:
        if config.path is None:
            raise InputError("a run on Ray needs the problem's file (RunConfig.path)")
        return backend("ray")(definition.name, problem, params, config, progress=progress, out_failures=out_failures)
    from gapstop.engine.local_runner import run_local

    record = run_config(definition.name, config.path, params, config.seed, config.target_gap, config.time_limit_s)
    return run_local(definition, problem, params, run_dir=config.run_dir, config=record,
                     time_limit_s=config.time_limit_s, target_gap=config.target_gap, seed=config.seed,
                     resume=config.resume, workers=config.workers, islands=config.islands, bounds=config.bounds,
                     progress=progress, out_path=config.out, out_failures=out_failures, t_end=t_end)


def backend(name: str) -> Backend:
    """A registered backend, or one line and exit 2 if this process has none by that name."""
    try:
        return _BACKENDS[name]
    except KeyError:
        raise InputError(f"{name}: needs Ray, which this process has not set up (run through the gapstop "
                         "command)") from None
