"""One in-process run (the solve loop in threads) for benchmark scripts, in a throw-away run directory."""

from __future__ import annotations

import tempfile
from typing import Any

from gapstop.engine.local_runner import run_local
from gapstop.engine.rundir import read_events
from gapstop.problems import registry


def solve_in_process(problem_name: str, problem: Any, params: dict[str, Any], time_limit_s: float, seed: int = 0,
                     workers: int | None = None, bounds: bool = True) -> dict[str, Any]:
    """The run's result document, with its event log as ``events`` (rows of :func:`engine.rundir.read_events`)."""
    with tempfile.TemporaryDirectory(prefix="gapstop-bench-") as tmp:
        doc = run_local(registry.get(problem_name), problem, params, run_dir=f"{tmp}/run",
                        config={"problem": problem_name}, time_limit_s=time_limit_s, target_gap=0.0, seed=seed,
                        workers=workers, bounds=bounds)
        doc["events"] = read_events(f"{tmp}/run")
    return doc
