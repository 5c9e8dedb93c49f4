"""Whole in-process pipeline runs for tests: the solve loop with the pipeline adapter."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

from gapstop.engine.local_runner import run_local
from gapstop.problems import registry
from gapstop.problems.pipeline.model import PipelineProblem


def poor_split(p: PipelineProblem, k: int, seed: int) -> Any:
    """The optimal split of a random Kahn order: a valid, usually improvable partition."""
    import numpy as np

    from gapstop.problems.pipeline.decoder import SliceDecoder

    return SliceDecoder(p, k).decode(np.random.default_rng(seed).random(p.n))


def solve_in_process(p: PipelineProblem, k: int, tmp: Path, time_limit_s: float, target_gap: float = 0.0,
                     seed: int = 0, workers: int = 2, **kw: Any) -> dict[str, Any]:
    """The result document of one run in ``tmp / "run"`` (islands and bound jobs in threads)."""
    return run_local(registry.get("pipeline"), p, {"k": k}, run_dir=str(Path(tmp) / "run"),
                     config={"problem": "pipeline"}, time_limit_s=time_limit_s, target_gap=target_gap, seed=seed,
                     workers=workers, **kw)


class FakeJobContext:
    """A bound job's ctx: a fixed incumbent, solutions and bounds collected, stop after ``seconds``,
    or earlier once ``done(ctx)`` holds (what the test checks is in: the rest of the job's time
    would check nothing more)."""

    def __init__(self, cost: float | None, solution: dict[str, Any] | None, seconds: float,
                 done: Callable[[FakeJobContext], bool] | None = None) -> None:
        self.inc = (cost, solution)
        self.solutions: list[tuple[dict[str, Any], str]] = []
        self.bounds: list[Any] = []
        self.end = time.monotonic() + seconds
        self.done = done

    def should_stop(self) -> bool:
        return time.monotonic() >= self.end or (self.done is not None and self.done(self))

    def time_left(self) -> float:
        return max(0.0, self.end - time.monotonic())

    def incumbent(self) -> tuple[float | None, dict[str, Any] | None]:
        return self.inc

    def solution(self, solution: dict[str, Any], source: str) -> None:
        self.solutions.append((solution, source))

    def bound(self, b: Any) -> None:
        self.bounds.append(b)

    def ready(self) -> None:
        pass
