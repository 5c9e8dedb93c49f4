"""Whole in-process pipeline runs for tests: the solve loop with the pipeline adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gapstop.engine.local_runner import run_local
from gapstop.problems import registry
from gapstop.problems.pipeline.model import PipelineProblem


def solve_in_process(p: PipelineProblem, k: int, tmp: Path, time_limit_s: float, target_gap: float = 0.0,
                     seed: int = 0, workers: int = 2, **kw: Any) -> dict[str, Any]:
    """The result document of one run in ``tmp / "run"`` (islands and bound jobs in threads)."""
    return run_local(registry.get("pipeline"), p, {"k": k}, run_dir=str(Path(tmp) / "run"),
                     config={"problem": "pipeline"}, time_limit_s=time_limit_s, target_gap=target_gap, seed=seed,
                     workers=workers, **kw)
