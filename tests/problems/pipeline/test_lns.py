"""CP-SAT large-neighbourhood search: window optima against brute force, every kept move
re-scored equal to the evaluator, hinted exact MIP still optimal, the LNS loop of the
exact job reporting only evaluator-checked gains."""

from __future__ import annotations

import itertools
import math
import time
from typing import Any, Callable

import numpy as np
import pytest

from gapstop.problems.pipeline import bounds
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag, regal_like
from gapstop.problems.pipeline.lns import StageLNS, stage_costs
from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline import reference
from tests.problems.pipeline.runs import FakeJobContext, poor_split

pytestmark = pytest.mark.mip


def _window_brute_force(p: PipelineProblem, labels: np.ndarray, a: int, w: int) -> float:
    """Least bottleneck over the window's stages, over every relabelling of the window's
    nodes within the window that keeps every edge going forward (reference block costs)."""
    free = [v for v in range(p.n) if a <= labels[v] < a + w]
    best = math.inf
    for choice in itertools.product(range(a, a + w), repeat=len(free)):
        lab = labels.copy()
        lab[free] = choice
        if any(lab[u] > lab[v] for u, v in p.edges):
            continue
        costs = []
        for b in range(a, a + w):
            nodes = [v for v in range(p.n) if lab[v] == b]
            if nodes:  # no memory limit here: the schedule does not matter
                costs.append(reference.block_cost(p, nodes))
        best = min(best, max(costs))
    return best


@pytest.mark.parametrize("i", range(12))
def test_window_optimum_equals_brute_force(i: int) -> None:
    p = random_dag(6 + i % 3, 8100 + i, memory=False, bandwidth=(1.0, 0.7, 3.0)[i % 3])
    k = 3
    lns = StageLNS(p, k, np.random.default_rng(i))
    start = poor_split(p, k, i)
    lns.reset(start.blocks, start.order)
    cur = lns.current
    assert cur is not None
    p_used = len(cur.block_costs)
    for a in range(p_used):
        w = min(2, k - a)
        if w < 2:
            continue
        lns.reset(start.blocks, start.order)
        labels = lns.current.blocks.copy()
        old = float(stage_costs(lns.current, k)[a:a + w].max())
        brute = _window_brute_force(p, labels, a, w)
        move = lns.solve_window(a, w, time_s=10.0)
        assert move.status in ("optimal", "infeasible")
        tol = 1e-9 * max(1.0, brute)
        if move.improved is not None:
            ev = move.improved
            window_nodes = (labels >= a) & (labels < a + w)
            got = float(ev.block_costs[np.unique(ev.blocks[window_nodes])].max())
            assert got == pytest.approx(brute, abs=tol)
            # the nodes outside the window stay together, stage by stage
            for b in set(range(k)) - set(range(a, a + w)):
                same = labels == b
                if same.any():
                    assert len(set(ev.blocks[same].tolist())) == 1
        else:   # proven: no relabelling of the window does better than it is
            assert old <= brute + tol


def _quotient_reach(p: PipelineProblem, labels: np.ndarray, m: int) -> np.ndarray:
    """reach[a, b]: a path of at least one edge from stage a to stage b (naive closure)."""
    reach = np.zeros((m, m), dtype=bool)
    for u, v in p.edges:
        if labels[u] != labels[v]:
            reach[labels[u], labels[v]] = True
    for _ in range(m):
        reach = reach | ((reach.astype(int) @ reach.astype(int)) > 0)
    return reach


def _stages_brute_force(p: PipelineProblem, labels: np.ndarray, stages: tuple[int, ...], m: int) -> float:
    """Least bottleneck over the window's stages, over every assignment of the window's nodes to
    the window's stages whose quotient graph stays acyclic and in which no window stage reaches
    one labelled below it (the window keeps its order; reference block costs)."""
    free = [v for v in range(p.n) if labels[v] in stages]
    best = math.inf
    for choice in itertools.product(stages, repeat=len(free)):
        lab = labels.copy()
        lab[free] = choice
        reach = _quotient_reach(p, lab, m)
        if reach.diagonal().any() or any(reach[b, a] for a in stages for b in stages if a < b):
            continue
        costs = [reference.block_cost(p, [v for v in range(p.n) if lab[v] == b]) for b in stages
                 if (lab == b).any()]
        best = min(best, max(costs))
    return best


@pytest.mark.parametrize("i", range(16))
def test_windows_of_stages_apart_equal_brute_force(i: int) -> None:
    """Windows whose stages are not adjacent labels (convex in the quotient graph, made adjacent
    by another numbering): the window's optimum equals brute force over the moves that keep the
    partition acyclic and the window's order; kept moves re-score equal and leave every stage
    outside the window as it was."""
    p = random_dag(7 + i % 2, 8300 + i, p=0.3, memory=False, bandwidth=(1.0, 0.7, 3.0)[i % 3])
    k = 5
    start = poor_split(p, k, i)
    lns = StageLNS(p, k, np.random.default_rng(i))
    lns.reset(start.blocks, start.order)
    labels = lns.current.blocks.copy()
    start_cost = lns.current.objective
    m = len(lns.current.block_costs)
    reach = _quotient_reach(p, labels, m)
    apart = [ws for w in (2, 3, 4) for ws in itertools.combinations(range(m), w)
             if ws[-1] - ws[0] != w - 1
             and not any(reach[a, x] and reach[x, b] for x in range(m) if x not in ws for a in ws for b in ws)]
    listed = {ws for ws in lns.windows() if ws[-1] - ws[0] != len(ws) - 1}
    assert listed <= set(apart)   # every listed window of stages apart is convex
    for ws in (ws for ws in apart if len(ws) <= 3):
        lns.reset(start.blocks, start.order)
        old = float(stage_costs(lns.current, k)[list(ws)].max())
        brute = _stages_brute_force(p, labels, ws, m)
        move = lns.solve_stages(ws, time_s=10.0)
        assert move.status in ("optimal", "infeasible") and move.stages == ws
        tol = 1e-9 * max(1.0, brute)
        if move.improved is None:   # proven: no move of the window's nodes does better
            assert old <= brute + tol
            continue
        ev = move.improved
        again = evaluate(p, ev.blocks, ev.order, k=k)
        assert again.objective == ev.objective and ev.objective <= start_cost
        inside = np.isin(labels, ws)
        assert float(ev.block_costs[np.unique(ev.blocks[inside])].max()) == pytest.approx(brute, abs=tol)
        for b in set(range(m)) - set(ws):   # the other stages keep their nodes, hence their costs
            same = labels == b
            assert len(set(ev.blocks[same].tolist())) == 1
            assert set(np.flatnonzero(ev.blocks == ev.blocks[same][0]).tolist()) == set(np.flatnonzero(same).tolist())


def test_kept_moves_rescore_equal_and_never_worsen() -> None:
    p = regal_like(2026, n=45)
    k = 4
    start = poor_split(p, k, 1)
    lns = StageLNS(p, k, np.random.default_rng(0))
    lns.reset(start.blocks, start.order)
    prev = lns.current.objective
    assert prev == evaluate(p, start.blocks, start.order, k=k).objective
    kept = 0
    for _ in range(4):
        for m in lns.run(1.0):
            if m.improved is None:
                continue
            kept += 1
            ev = m.improved
            again = evaluate(p, ev.blocks, ev.order, k=k)
            assert again.objective == ev.objective   # bit-equal: the evaluator's own score
            assert np.array_equal(again.block_costs, ev.block_costs)
            assert ev.objective <= prev
            prev = ev.objective
    assert kept >= 1
    assert lns.current.objective < evaluate(p, start.blocks, start.order, k=k).objective


@pytest.mark.parametrize("i", range(0, 40, 4))
def test_hinted_exact_mip_still_equals_brute_force(i: int) -> None:
    p = random_dag(4 + (i // 4) % 5, 7000 + i, memory=False, bandwidth=(1.0, 0.7, 3.0)[i % 3])
    for k in (2, 3):
        opt = reference.brute_force(p, k)
        hint = poor_split(p, k, i).blocks.tolist()
        b = bounds.exact_bound(p, k, 10.0, hint=hint)
        assert b.status == "optimal"
        # as in test_bounds: the proven value within the integer scale's rounding, the partition exact
        assert b.value <= opt and b.value == pytest.approx(opt, rel=1e-6)
        assert evaluate(p, b.detail["blocks"], k=k).objective == pytest.approx(opt, rel=1e-12)


def test_exact_jobs_lns_loop_reports_evaluated_gains_from_the_incumbent() -> None:
    from gapstop.problems.pipeline.run import _lns_loop

    p = regal_like(77, n=40)
    k = 4
    start = poor_split(p, k, 5)
    start_cost = evaluate(p, start.blocks, start.order, k=k).objective
    ctx = FakeJobContext(start_cost, {"blocks": start.blocks.tolist(), "order": start.order.tolist()}, 3.0,
                         done=_lns_reported)
    _lns_loop(p, k, ctx, 0, 1, lambda ev: None)
    assert ctx.solutions
    costs = []
    for sol, source in ctx.solutions:
        assert source in ("mip-lns", "mip-hinted")
        costs.append(evaluate(p, sol["blocks"], sol.get("order"), k=k).objective)
    assert min(costs) < start_cost


def _lns_reported(ctx: FakeJobContext) -> bool:
    return any(source == "mip-lns" for _, source in ctx.solutions)


class _SourcesCtx(FakeJobContext):
    def __init__(self, cost: float, solution: dict[str, Any], seconds: float,
                 done: Callable[[FakeJobContext], bool] | None = None) -> None:
        super().__init__(cost, solution, seconds, done)
        self.sources: list[str] = []

    def solution(self, solution: dict[str, Any], source: str) -> None:
        super().solution(solution, source)
        self.sources.append(source)


def test_exact_job_hands_over_to_the_lns_where_communication_matters() -> None:
    """On a REGAL-style graph the spectral bound lies far above the MIP's: after its share of
    the budget the MIP stops, its bound stays reported, and the LNS reports evaluated gains."""
    from gapstop.problems.pipeline.run import run_bound_job

    p = regal_like(31, n=60)
    k = 8
    start = poor_split(p, k, 2)
    start_cost = evaluate(p, start.blocks, start.order, k=k).objective
    def handed_over(c: FakeJobContext) -> bool:
        return _lns_reported(c) and {"exact", "spectral"} <= {b.method for b in c.bounds}

    ctx = _SourcesCtx(start_cost, {"blocks": start.blocks.tolist(), "order": start.order.tolist()}, 6.0,
                      done=handed_over)
    run_bound_job(p, k, {"kind": "exact"}, ctx, seed=0, num_workers=1)
    methods = {b.method for b in ctx.bounds}
    assert {"exact", "spectral"} <= methods
    assert "mip-lns" in ctx.sources
    for (sol, source) in ctx.solutions:
        if source == "mip-lns":
            assert evaluate(p, sol["blocks"], sol["order"], k=k).objective < start_cost


def test_islands_skip_the_lns_on_memory_graphs_and_windows_need_small_stages() -> None:
    from gapstop.problems.pipeline.lns import MAX_NODES_PER_STAGE, lns_share, windows_pay

    free = regal_like(5, n=80)
    assert free.memory is None
    assert windows_pay(free, 4) == (80 <= 4 * MAX_NODES_PER_STAGE)
    assert not windows_pay(free, 2) and lns_share(free, 2, 0.6, 0.2) == 0.2
    assert windows_pay(free, 16) and lns_share(free, 16, 0.6, 0.2) == 0.6
    limited = random_dag(8, 1, memory=True)
    assert limited.memory is not None
    assert not windows_pay(limited, 4) and lns_share(limited, 4, 0.6, 0.2) == 0.0


def test_the_lns_yields_its_slot_once_stalled_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ``yield_when_stalled`` the loop returns, long before its job would be stopped,
    once every window was tried and the hinted MIP found nothing twice in a row; without it,
    it runs until the job stops. What it reported is evaluator-checked either way."""
    from gapstop.problems.pipeline import run

    monkeypatch.setattr(run, "HINTED_MIP_S", 0.1)
    p, k = regal_like(12, n=16), 4
    ctx = _from_poor_split(p, k, 1, 60.0)
    t0 = time.monotonic()
    run._lns_loop(p, k, ctx, 0, 1, lambda ev: None, yield_when_stalled=True)
    assert time.monotonic() - t0 < 30.0 and not ctx.should_stop()
    _check_reported(p, k, ctx)
    ctx = _from_poor_split(p, k, 1, 2.0)
    run._lns_loop(p, k, ctx, 0, 1, lambda ev: None)
    assert ctx.should_stop()
    _check_reported(p, k, ctx)


def _from_poor_split(p: PipelineProblem, k: int, seed: int, seconds: float,
                     done: Callable[[FakeJobContext], bool] | None = None) -> _SourcesCtx:
    start = poor_split(p, k, seed)
    cost = evaluate(p, start.blocks, start.order, k=k).objective
    return _SourcesCtx(cost, {"blocks": start.blocks.tolist(), "order": start.order.tolist()}, seconds, done)


def _check_reported(p: PipelineProblem, k: int, ctx: _SourcesCtx) -> None:
    """Every partition reported is valid; the LNS's beat the start (the hinted MIP reports
    every incumbent it finds on the way)."""
    for sol, source in ctx.solutions:
        cost = evaluate(p, sol["blocks"], sol.get("order"), k=k).objective
        assert source in ("mip-lns", "mip-hinted") and (source == "mip-hinted" or cost < ctx.inc[0])


def test_the_lns_job_runs_from_the_incumbent_and_skips_memory_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan's fallback job (:func:`problems.pipeline.run.bound_job_specs`): the LNS on its
    own, from the run's incumbent; with a memory limit, which it does not model, it ends at once."""
    from gapstop.problems.pipeline import run

    monkeypatch.setattr(run, "HINTED_MIP_S", 0.1)
    p, k = regal_like(31, n=60), 8
    ctx = _from_poor_split(p, k, 2, 4.0, done=_lns_reported)
    run.run_bound_job(p, k, {"kind": "lns", "yield_when_stalled": True, "turn": 1}, ctx, seed=0, num_workers=1)
    assert "mip-lns" in ctx.sources
    _check_reported(p, k, ctx)
    assert all(b.method == "exact" for b in ctx.bounds)

    mem = random_dag(30, 3, memory=True, k_hint=4)
    ctx = _SourcesCtx(math.inf, {"blocks": [0] * mem.n}, 30.0)
    t0 = time.monotonic()
    run.run_bound_job(mem, 4, {"kind": "lns"}, ctx, seed=0, num_workers=1)
    assert time.monotonic() - t0 < 1.0 and not ctx.solutions


def test_only_communication_heavy_runs_with_guesses_get_the_lns_fallback() -> None:
    from gapstop.problems.pipeline.run import bound_job_specs

    def kinds(p: PipelineProblem, k: int) -> tuple[list[str], bool]:
        specs = bound_job_specs(p, k)
        exact = [s for s in specs if s["kind"] == "exact"][0]
        return [s["kind"] for s in specs if s.get("fallback")], bool(exact.get("yield_when_stalled"))

    free = regal_like(5, n=40)
    assert kinds(free, 4) == (["lns"], True)
    assert kinds(free, 2) == (["lns"], True)
    # the model does not pay there: no fallback, and the stalled LNS leaves the cores to the rest
    assert kinds(free, 8) == kinds(free, 16) == ([], True)
    assert kinds(random_dag(30, 3, memory=True, k_hint=4), 4) == ([], False)


@pytest.mark.parametrize("i", range(16))
def test_label_ranges_build_the_model_with_fixed_domains(i: int) -> None:
    """A window's model built with ``label_range`` (only the free nodes' y inside the window
    are variables) has the optimum of the full model with every other y fixed by its domain,
    with and without a memory limit, for any set of free nodes (none, some, all)."""
    from ortools.sat.python import cp_model

    from gapstop.problems.pipeline import _mip

    p = random_dag(6 + i % 4, 9100 + i, memory=i % 2 == 1, bandwidth=(1.0, 0.7, 3.0)[i % 3])
    k = 3 + i % 2
    labels = evaluate(p, poor_split(p, k, i).blocks, k=k).blocks
    rng = np.random.default_rng(i)
    a = int(rng.integers(0, k - 1))
    w = 2
    inside = (labels >= a) & (labels < a + w)
    free = inside & (rng.random(p.n) < (0.0, 0.6, 1.0)[i % 3])
    sc = _mip.scale(p)
    costed = list(range(a + 1, a + w + 1))

    def optimum(pm: _mip.PartitionModel) -> int:
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.max_time_in_seconds = 30.0
        assert solver.solve(pm.model) == cp_model.OPTIMAL
        return round(solver.objective_value)

    ranges = [(a, a + w - 1) if free[v] else (int(labels[v]), int(labels[v])) for v in range(p.n)]
    compact = _mip.build_partition_model(p, sc, k, costed=costed, label_range=ranges)
    full = _mip.build_partition_model(p, sc, k, costed=costed)
    for v, row in enumerate(full.y):
        for b in range(1, k):
            if isinstance(row[b], int) or (free[v] and a < b < a + w):
                continue
            val = int(b >= a + w) if free[v] else int(labels[v] <= b - 1)
            full.model.add(row[b] == val)
    n_vars = sum(not isinstance(x, int) for row in compact.y for x in row)
    assert n_vars == int(free.sum()) * (w - 1)
    assert optimum(compact) == optimum(full)
