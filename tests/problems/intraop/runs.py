"""Whole in-process intra-op runs for tests: the solve loop with the intra-op adapter."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gapstop.engine.local_runner import run_local
from gapstop.problems import registry
from gapstop.problems.intraop.model import IntraopProblem


def solve_in_process(p: IntraopProblem, tmp: Path, time_limit_s: float, seed: int = 0, workers: int = 2,
                     **kw: Any) -> dict[str, Any]:
    """The result document of one run in ``tmp / "run"`` (islands and bound jobs in threads)."""
    return run_local(registry.get("intraop"), p, {}, run_dir=str(Path(tmp) / "run"), config={"problem": "intraop"},
                     time_limit_s=time_limit_s, target_gap=0.0, seed=seed, workers=workers, **kw)
