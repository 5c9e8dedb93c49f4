"""Bound paths the sweeps of ``test_bounds.py`` (k = 2..4, one bound call at a time) do not
reach, each against the brute-force optimum (:func:`tests.problems.pipeline.reference.brute_force`):

* many blocks: k >= 5, and k > n (the spectral bound pads its k - n missing eigenvalues);
* guess-the-bottleneck as the runs compute it: one job per guessed stage, reported in any
  order (and twice) to a real coordinator, which offers the group minimum;
* live bounds (the exact MIP's and the spectral bound's, reported while they run) with a
  memory limit;
* bounds restored by ``--resume`` from a checkpoint.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import pytest

from gapstop.engine.coordinator import Coordinator
from gapstop.engine.records import Bound
from gapstop.engine.stopping import standard
from gapstop.problems import registry
from gapstop.problems.pipeline import bounds, spectral
from gapstop.problems.pipeline.generators import random_dag, regal_like
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.run import GUESS_GROUP, PipelineEvaluator
from tests.problems.pipeline import reference

TOL = 1e-9


def _below(value: float, opt: float) -> bool:
    return value <= opt + TOL * max(1.0, abs(opt))


def _graph(i: int, n: int, memory: bool) -> PipelineProblem:
    # REGAL-style (communication-heavy, where the spectral bound is strong) and random DAGs
    if i % 3 == 0:
        return regal_like(500 + i, n=n)
    return random_dag(n, 9100 + i, memory=memory, bandwidth=(1.0, 0.7, 3.0)[i % 3])


#: (n, k): k >= 5, and k > n down to n = 2
MANY = ((6, 5), (7, 5), (5, 6), (4, 6), (3, 7), (2, 5), (6, 8))


def test_closed_form_and_spectral_bounds_with_many_blocks() -> None:
    padded = 0
    for i in range(6):
        for n, k in MANY:
            p = _graph(i, n, memory=i % 2 == 1)
            opt = reference.brute_force(p, k)
            assert _below(bounds.simple_bound(p, k).value, opt), (i, n, k)
            seen: list[float] = []
            value, _ = spectral.spectral_bound_value(p, k, 5.0, max_iters=40, on_improve=seen.append)
            assert seen == sorted(seen) and all(_below(v, opt) for v in seen + [value]), (i, n, k, value, opt)
            padded += k > n and value > 0
    assert padded >= 20  # the padded eigenvalues take part in bounds that say something


@pytest.mark.mip
def test_mip_bounds_with_many_blocks() -> None:
    for i in range(3):
        for n, k in ((6, 5), (4, 6), (3, 7)):
            p = _graph(i, n, memory=i == 1)
            opt = reference.brute_force(p, k)
            for m in ("bottleneck", "guess-the-bottleneck", "exact"):
                b = bounds.lower_bound(p, k, m, 10.0)
                assert _below(b.value, opt), (i, n, k, m, b.value, opt)
                assert b.status in ("optimal", "closed-form"), (i, n, k, m, b.status)
            if p.memory is None:
                assert bounds.lower_bound(p, k, "exact", 10.0).value == pytest.approx(opt, rel=1e-6)


class _Recorder:
    """A bound job's context that records its reports (and never has an incumbent)."""

    def __init__(self) -> None:
        self.bounds: list[Bound] = []
        self.lock = threading.Lock()

    def should_stop(self) -> bool:
        return False

    def time_left(self) -> float:
        return 20.0

    def bound(self, b: Bound) -> None:
        with self.lock:
            self.bounds.append(b)

    def solution(self, solution: Any, source: str) -> None:
        pass

    def incumbent(self) -> tuple[None, None]:
        return None, None

    def ready(self) -> None:
        pass


@pytest.mark.mip
def test_guess_group_minimum_from_real_jobs_in_any_order() -> None:
    adapter = registry.get("pipeline")
    above = 0
    for i, (n, k) in enumerate(((6, 3), (7, 4), (5, 5))):
        p = _graph(i + 1, n, memory=i == 1)
        opt = reference.brute_force(p, k)
        params = {"k": k}
        specs = [s for s in adapter.bound_job_specs(p, params) if s["kind"] == "guess"]
        assert sorted(s["j"] for s in specs) == list(range(1, k + 1))
        rec = _Recorder()
        for s in specs:
            adapter.run_bound_job(p, params, s, rec, 0, num_workers=1)
        members = rec.bounds
        assert all(b.detail["group"] == GUESS_GROUP for b in members)
        # one member alone bounds only its own case: some lie above OPT
        above += any(not _below(b.value, opt) for b in members)
        want = min(b.value for b in members)
        assert _below(want, opt), (i, want, opt)
        for seed in range(4):
            coord = Coordinator(PipelineEvaluator(p, k), standard(0.0, 1e9))
            order = members + members[:2]  # two members report twice
            random.Random(seed).shuffle(order)
            seen = set()
            for b in order:
                seen.add(b.detail["member"])
                coord.offer_bound(b, "bound-0:guess")  # what the session does with a job's report
                if len(seen) < k:
                    assert coord.lb is None  # the minimum over some members is no bound
            assert coord.bound.method == GUESS_GROUP and coord.lb == want and _below(coord.lb, opt)
    assert above >= 1  # so a minimum over a subset of the members could have been caught


@pytest.mark.mip
def test_live_bounds_with_a_memory_limit() -> None:
    adapter = registry.get("pipeline")
    checked = 0
    for i in (1, 2, 4, 5):  # random DAGs with a memory limit
        p = _graph(i, 7, memory=True)
        assert p.memory is not None
        for k in (2, 3, 5):
            opt = reference.brute_force(p, k)
            rec = _Recorder()
            # the exact MIP reports its proven bound as it rises, with the spectral bound's
            # values alongside
            adapter.run_bound_job(p, {"k": k}, {"kind": "exact", "share": 1.0}, rec, 0,
                                  num_workers=1)
            live = [b for b in rec.bounds if b.status == "bound-only"]
            assert rec.bounds and all(_below(b.value, opt) for b in rec.bounds), (i, k, opt, rec.bounds)
            checked += len(live)
    assert checked >= 8


def test_bounds_restored_on_resume_are_the_checkpointed_ones(tmp_path) -> None:
    pytest.importorskip("ray")
    from gapstop.actors.coordinator import CoordinatorActor

    adapter = registry.get("pipeline")
    for i, (n, k) in enumerate(((6, 3), (5, 6))):
        p = _graph(i + 1, n, memory=True)
        opt = reference.brute_force(p, k)
        params = {"k": k}
        rec = _Recorder()  # real bound jobs: the bottleneck MIP and every guess-the-bottleneck member
        for s in adapter.bound_job_specs(p, params):
            if s["kind"] in ("bottleneck", "guess"):
                adapter.run_bound_job(p, params, s, rec, 0, num_workers=1)
        rec.bounds.append(bounds.spectral_bound(p, k, 0.3))
        rd = tmp_path / f"rd{i}"
        args = ("pipeline", p, params, str(rd), {"problem": "pipeline", "params": params}, 0.0, 60.0)
        c = CoordinatorActor(*args)
        for b in rec.bounds:
            c.report_bound(b, b.method)
        before = {m: b.value for m, b in c.coord.bounds.items()}
        members = c.member_bounds(GUESS_GROUP)
        lb = c.coord.lb
        assert GUESS_GROUP in before and len(members) == k
        c.finalize("interrupted")
        back = CoordinatorActor(*args, resume=True)
        after = {m: b.value for m, b in back.coord.bounds.items()}
        assert after == before and back.coord.lb == lb  # exactly, floats included
        assert back.member_bounds(GUESS_GROUP) == members
        assert all(_below(v, opt) for v in after.values()), (after, opt)
