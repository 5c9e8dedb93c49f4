"""One in-process run (the solve loop in threads) for benchmark scripts, in a throw-away run directory."""

from __future__ import annotations

import tempfile
from typing import Any

from gapstop.engine.facade import RunConfig, solve
from gapstop.engine.rundir import read_events
from gapstop.problems import registry


def solve_in_process(problem_name: str, problem: Any, params: dict[str, Any], time_limit_s: float, seed: int = 0,
                     workers: int | None = None, bounds: bool = True) -> dict[str, Any]:
    """The run's result document, with its event log as ``events`` (rows of :func:`engine.rundir.read_events`)."""
    with tempfile.TemporaryDirectory(prefix="gapstop-bench-") as tmp:
        config = RunConfig(path=None, run_dir=f"{tmp}/run",
                           time_limit_s=time_limit_s, seed=seed, workers=workers, in_process=True, bounds=bounds)
        doc = solve(registry.get(problem_name), problem, params, config)
        doc["events"] = read_events(f"{tmp}/run")
    return doc
