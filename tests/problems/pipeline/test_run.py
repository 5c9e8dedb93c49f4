"""Bound jobs as the engine runs them (problems/pipeline/run.run_bound_job)."""

from __future__ import annotations

import math
import time
from typing import Any

import pytest

from gapstop.engine.records import Bound
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.run import run_bound_job
from tests.problems.pipeline import reference as ref


class _Ctx:
    """A job context that never asks the job to stop (the driver is slow to react)."""

    def __init__(self, time_limit_s: float) -> None:
        self.deadline = time.monotonic() + time_limit_s
        self.bounds: list[Bound] = []
        self.solutions: list[Any] = []

    def bound(self, b: Bound) -> None:
        self.bounds.append(b)

    def solution(self, sol: Any, source: str) -> None:
        self.solutions.append(sol)

    def incumbent(self) -> tuple[None, None]:
        return None, None

    def time_left(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def should_stop(self) -> bool:
        return False

    def ready(self) -> None:
        pass


class _StopOnceIn(_Ctx):
    """Asks the job to stop at its deadline, as the driver does (the LNS runs until then), or once
    what the test checks is in: a bound of ``method`` and a solution to compare it with."""

    def __init__(self, time_limit_s: float, method: str) -> None:
        super().__init__(time_limit_s)
        self.method = method

    def should_stop(self) -> bool:
        done = self.solutions and any(b.method == self.method for b in self.bounds)
        return bool(done) or self.time_left() <= 0.0


@pytest.mark.mip
def test_exact_job_ends_when_its_mip_proves_optimality() -> None:
    """The spectral thread next to the MIP waits out the head start; once the MIP has proved
    optimality the job must end at once, not after that wait (or a spectral run)."""
    p = random_dag(7, 3, memory=False, k_hint=3)
    ctx = _Ctx(120.0)
    t0 = time.monotonic()
    run_bound_job(p, 3, {"kind": "exact", "head_start_s": 60.0}, ctx, seed=0, num_workers=1)
    assert time.monotonic() - t0 < 30.0
    final = [b for b in ctx.bounds if b.method == "exact" and b.status == "optimal"]
    assert len(final) == 1
    assert final[0].value == pytest.approx(ref.brute_force(p, 3), rel=1e-9)
    assert not [b for b in ctx.bounds if b.method == "spectral"]


def test_head_start_extension_follows_the_spectral_bound() -> None:
    from gapstop.problems.pipeline.run import SPECTRAL_MARGIN, SPECTRAL_WAIT_S, extend_head_start

    def spectral(value: float, final: bool) -> dict[str, Bound]:
        detail = {"iterations": 7} if final else {}
        return {"spectral": Bound("spectral", value, "bound-only", 0.1, "eigenvalues", detail)}

    lb = 100.0
    above = 100.0 * (1 + SPECTRAL_MARGIN) * 1.001
    within = 100.0 * (1 + SPECTRAL_MARGIN) * 0.999
    assert extend_head_start({}, lb, 0.0) is None  # the spectral bound is still to come
    assert extend_head_start({}, lb, SPECTRAL_WAIT_S) is False  # ... and never came
    assert extend_head_start(spectral(above, False), lb, 0.0) is False  # a live value decides already
    assert extend_head_start(spectral(within, False), lb, 0.0) is None  # it may still rise
    assert extend_head_start(spectral(within, True), lb, 0.0) is True
    assert extend_head_start(spectral(above, True), lb, 0.0) is False
    assert extend_head_start(spectral(50.0, True), None, 0.0) is True


@pytest.mark.mip
def test_exact_job_adds_the_end_blocks_bound_where_communication_matters() -> None:
    from gapstop.problems.pipeline.evaluate import evaluate
    from gapstop.problems.pipeline.generators import regal_like

    p = regal_like(7, n=80)   # heaviest-block alone 1.03 x spectral at k = 4 (test_heaviest_block)
    ctx = _StopOnceIn(15.0, "end-blocks")
    run_bound_job(p, 4, {"kind": "exact"}, ctx, seed=0, num_workers=1)
    best = {m: max((b.value for b in ctx.bounds if b.method == m), default=-1.0)
            for m in ("spectral", "end-blocks", "heaviest-block")}
    assert best["end-blocks"] > 1.01 * best["spectral"] > 0, best
    assert best["heaviest-block"] == -1.0, best   # at k = 4 the end-blocks bound takes its place
    found = min(evaluate(p, sol["blocks"], sol.get("order"), k=4).objective for sol in ctx.solutions)
    assert best["end-blocks"] <= found


@pytest.mark.mip
def test_exact_job_adds_the_block_cover_bound_where_communication_matters() -> None:
    from gapstop.problems.pipeline.evaluate import evaluate
    from gapstop.problems.pipeline.generators import regal_like

    p = regal_like(9, n=40)
    ctx = _StopOnceIn(6.0, "block-cover")
    run_bound_job(p, 12, {"kind": "exact"}, ctx, seed=0, num_workers=1)
    cover = [b.value for b in ctx.bounds if b.method == "block-cover"]
    assert cover, [b.method for b in ctx.bounds]
    found = min(evaluate(p, sol["blocks"], sol.get("order"), k=12).objective for sol in ctx.solutions)
    assert max(cover) <= found


@pytest.mark.parametrize("heaviest, expect_ends", [(95.0, True), (105.0, False)])
def test_bound_thread_tries_the_ends_at_large_k_when_heaviest_block_stays_under_spectral(
        monkeypatch: pytest.MonkeyPatch, heaviest: float, expect_ends: bool) -> None:
    """Above END_BLOCKS_MAX_K: spectral, heaviest-block, then end-blocks only if heaviest-block
    did not rise above the spectral bound, then block-cover from the best of them (the
    methods replaced by canned values: this is the thread's order, not a bound)."""
    from gapstop.problems.pipeline import bounds
    from gapstop.problems.pipeline import run as run_mod

    calls: list[tuple[str, float]] = []

    def canned(method: str, value: float) -> Bound:
        return Bound(method, value, "bound-only", 0.0, "test")

    def spectral(problem: Any, k: int, time_limit_s: float, **kw: Any) -> Bound:
        calls.append(("spectral", -1.0))
        return canned("spectral", 100.0)

    def lower_bound(problem: Any, k: int, method: str, time_limit_s: float, **kw: Any) -> Bound:
        calls.append((method, kw["floor"]))
        return canned(method, {"heaviest-block": heaviest, "end-blocks": 102.0, "block-cover": 90.0}[method])

    monkeypatch.setattr(bounds, "spectral_bound", spectral)
    monkeypatch.setattr(bounds, "lower_bound", lower_bound)
    p = random_dag(30, seed=1)
    k = run_mod.END_BLOCKS_MAX_K + 1
    assert bounds.simple_bound(p, k).value < 100.0 / (1.0 + run_mod.SPECTRAL_MARGIN)
    ctx = _Ctx(60.0)
    run_mod._spectral_alongside(p, k, ctx, 60.0).join(10.0)
    if expect_ends:
        assert calls == [("spectral", -1.0), ("heaviest-block", 100.0), ("end-blocks", 100.0),
                         ("block-cover", 102.0)], calls
    else:
        assert calls == [("spectral", -1.0), ("heaviest-block", 100.0), ("block-cover", 105.0)], calls


def test_models_too_large_skip_themselves_with_the_reason_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    from gapstop.problems.pipeline import bounds
    from gapstop.problems.pipeline.generators import random_dag
    from gapstop.problems.pipeline.run import bound_job_specs

    p = random_dag(30, 1)   # 30 nodes + its edges, x 4 blocks: above a limit of 50 terms
    monkeypatch.setattr(bounds, "MODEL_MAX_TERMS", 50)
    # nothing to hold the islands for, and no members to rerun: each would skip itself at once
    specs = bound_job_specs(p, 4)
    assert {s["kind"] for s in specs} <= {"exact", "lns"} and not any(s.get("head_start") for s in specs)
    class _Stopping(_Ctx):
        def should_stop(self) -> bool:
            return self.time_left() <= 0.0

    for spec in ({"kind": "bottleneck"}, {"kind": "guess", "j": 2, "group": "g"}, {"kind": "lns"}, {"kind": "exact"}):
        ctx = _Stopping(1.5)
        t0 = time.monotonic()
        run_bound_job(p, 4, spec, ctx, seed=0, num_workers=1)
        assert time.monotonic() - t0 < (1.0 if spec["kind"] != "exact" else 10.0)
        if spec["kind"] == "lns":
            continue   # no incumbent to start from, no full MIP to fall back on: nothing to do
        # the MIP's bound says why it is missing; the spectral bound and those after it still run
        first = ctx.bounds[0]
        assert first.status == "skipped" and first.value == -math.inf and "model too large" in first.detail["reason"]
        assert all(b.status == "skipped" for b in ctx.bounds if b.method == first.method)


def test_on_deep_graphs_a_model_waits_for_the_first_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    from gapstop.problems.pipeline import bounds
    from gapstop.problems.pipeline.generators import chained
    from gapstop.problems.pipeline.run import AT_ONCE_MIN_NODES

    p = chained(random_dag(10, 1), AT_ONCE_MIN_NODES // 10)
    monkeypatch.setattr(bounds, "MODEL_MAX_TERMS", 50)   # the model then skips itself at once

    class _Late(_Ctx):
        def __init__(self) -> None:
            super().__init__(30.0)
            self.t0, self.ready_at = time.monotonic(), None

        def ready(self) -> None:
            self.ready_at = time.monotonic() - self.t0

        def incumbent(self) -> tuple[Any, Any]:
            late = time.monotonic() - self.t0 >= 0.3
            return (1.0, {"blocks": [0] * p.n}) if late else (None, None)

    ctx = _Late()
    run_bound_job(p, 4, {"kind": "bottleneck"}, ctx, seed=0, num_workers=1)
    assert ctx.ready_at is not None and ctx.ready_at < 0.1           # the islands may set up at once
    assert ctx.bounds and ctx.bounds[0].wall_s >= 0.0 and time.monotonic() - ctx.t0 >= 0.3
