"""End-to-end solver against brute force on small constrained instances."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.penalty import PenaltySearch
from gapstop.problems.intraop.relaxed import prepare
from gapstop.problems.intraop.runner import solve
from tests.problems.intraop.reference import brute_force_table


def _instance(seed):
    rng = np.random.default_rng(seed)
    return random_instance(3 + seed % 6, seed, max_k=3, limit_quantile=float(rng.uniform(0.05, 0.7)),
                           forbidden_p=0.1 if seed % 4 == 0 else 0.0)


def test_feasible_whenever_possible_and_mostly_optimal():
    optimal = feasible_instances = 0
    for seed in range(240):
        p = _instance(seed)
        best, _ = brute_force_table(p)
        r = solve(p, time_limit_s=60, seed=seed, max_iterations=25)
        if best is None:
            assert not r["feasible"] and r["cost"] is None
            continue
        feasible_instances += 1
        assert r["feasible"], f"seed {seed}: a feasible solution exists but none was found"
        ev = evaluate(p, r["solution"])
        assert ev.feasible and ev.cost == r["cost"] >= best
        optimal += r["cost"] == best
    share = optimal / feasible_instances
    print(f"\noptimal on {optimal}/{feasible_instances} feasible instances ({share:.1%})")
    assert feasible_instances >= 200 and share >= 0.9


def test_result_document_and_callback():
    p = _instance(5)
    seen = []
    r = solve(p, time_limit_s=60, seed=1, max_iterations=10, on_improvement=seen.append)
    assert set(r) >= {"problem", "instance", "cost", "feasible", "solution", "lower_bound", "gap",
                      "elapsed_s", "stopped_because"}
    assert r["problem"] == "intraop" and r["stopped_because"] == "iteration-limit"
    assert seen and seen[-1].cost == r["cost"] and seen[-1].solution == r["solution"]
    assert all(a.cost > b.cost for a, b in zip(seen, seen[1:]))
    json.dumps(r)


def test_same_seed_same_result():
    p = random_instance(40, 7, max_k=4, limit_quantile=0.3)
    a = solve(p, time_limit_s=60, seed=3, max_iterations=15)
    b = solve(p, time_limit_s=60, seed=3, max_iterations=15)
    assert a["cost"] == b["cost"] and a["solution"] == b["solution"]


def test_unconstrained_tiny_core_stops_as_optimal():
    p = random_instance(8, 2, limit_quantile=None)
    r = solve(p, time_limit_s=60, seed=0)
    assert r["stopped_because"] == "optimal" and r["cost"] == brute_force_table(p)[0]


def test_search_best_never_gets_worse():
    p = random_instance(60, 11, max_k=4, limit_quantile=0.2)
    s = PenaltySearch(prepare(p), 1.0, seed=0)
    costs = []
    for _ in range(30):
        s.iterate()
        if s.best() is not None:
            costs.append(s.best().cost)
            assert evaluate(p, s.best().solution).cost == costs[-1]
    assert costs and costs == sorted(costs, reverse=True)


def test_weights_fall_faster_after_feasible_solutions_in_a_row():
    """Without a usage limit every relaxed solution is feasible: after iteration j (1-based) the
    weights are the start times down^min(1, cap) * ... * down^min(j, cap) (no jitter)."""
    p = random_instance(12, 3, max_k=3, limit_quantile=None)
    live = p.end > p.start
    for cap in (1, 3):
        s = PenaltySearch(prepare(p), 2.0, seed=0, jitter=0.0, down=0.9, max_streak=cap, restart_after=0)
        want = 2.0
        for j in range(1, 7):
            s.iterate()
            want *= 0.9 ** min(j, cap)
            np.testing.assert_allclose(s.weight[live], want, rtol=1e-12)
            assert np.all(s.weight[~live] == 0)


SHARED = __import__("pathlib").Path(__file__).resolve().parents[4] / "shared" / "data" / "iopddl"


@pytest.mark.skipif(not (SHARED / "asplos-2025-iopddl-G.json.gz").exists(), reason="shared contest data not available")
def test_contest_instance_g_feasible_and_close(tmp_path):
    from gapstop.problems.intraop.io import load_problem

    p = load_problem(SHARED / "asplos-2025-iopddl-G.json.gz", cache_dir=tmp_path)
    r = solve(p, time_limit_s=8, seed=0)
    assert r["feasible"] and r["time_to_first_feasible_s"] < 8
    assert evaluate(p, r["solution"]).cost == r["cost"] <= 1.2 * 217039  # best known 217039


def test_lagrangian_seeded_search_runs_and_stays_feasible(monkeypatch):
    """With two workers and a usage limit, one worker prices usage by Lagrangian multipliers and
    searches from there; every result is feasible, never below the brute-force optimum."""
    import gapstop.problems.intraop.runner as runner

    calls = []
    real = runner._lagrangian_search

    def spy(prep, best, budget_s, deadline, seed, searches, names):
        before = len(searches)
        real(prep, best, budget_s, deadline, seed, searches, names)
        calls.append((budget_s, [names[id(s)] for s in searches[before:]]))

    monkeypatch.setattr(runner, "_lagrangian_search", spy)
    for seed in range(6):
        p = _instance(seed * 4 + 1)
        best, _ = brute_force_table(p)
        r = solve(p, time_limit_s=2.0, seed=seed, workers=2, lagrangian_share=0.15)
        if best is None:
            assert not r["feasible"]
            continue
        assert r["feasible"] and evaluate(p, r["solution"]).cost == r["cost"] >= best
    # instances whose limit can never bind have no multipliers to search
    assert all(names in ([], ["penalty-lagrangian"]) for _, names in calls)
    assert sum(names == ["penalty-lagrangian"] for _, names in calls) >= 3
    assert all(0 < budget <= 0.15 * 2.0 + 1e-9 for budget, _ in calls)
