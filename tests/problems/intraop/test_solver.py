"""The intra-op search against brute force on small constrained instances: the island alone,
and whole runs of the solve loop (islands + bound jobs, in-process)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.island import IntraopIsland
from gapstop.problems.intraop.penalty import PenaltySearch
from gapstop.problems.intraop.relaxed import prepare
from tests.problems.intraop.reference import brute_force_table
from tests.problems.intraop.runs import solve_in_process


def _instance(seed):
    rng = np.random.default_rng(seed)
    return random_instance(3 + seed % 6, seed, max_k=3, limit_quantile=float(rng.uniform(0.05, 0.7)),
                           forbidden_p=0.1 if seed % 4 == 0 else 0.0)


def test_island_feasible_whenever_possible_and_mostly_optimal():
    optimal = feasible_instances = 0
    for seed in range(100):
        p = _instance(seed)
        best, _ = brute_force_table(p)
        island = IntraopIsland(prepare(p), seed)
        found = []
        for _ in range(8):
            island.step(0.004, lambda cost, f: found.append((cost, f)))
        if best is None:
            assert not found
            continue
        feasible_instances += 1
        assert found, f"seed {seed}: a feasible solution exists but none was found"
        cost, f = found[-1]
        ev = evaluate(p, f.solution)
        assert ev.feasible and ev.cost == cost >= best
        optimal += cost == best
    share = optimal / feasible_instances
    print(f"\noptimal on {optimal}/{feasible_instances} feasible instances ({share:.1%})")
    assert feasible_instances >= 80 and share >= 0.9


def test_run_result_document(tmp_path):
    p = random_instance(40, 7, max_k=4, limit_quantile=0.3)
    r = solve_in_process(p, tmp_path, time_limit_s=1.5)
    assert set(r) >= {"problem", "instance", "cost", "feasible", "solution", "lower_bound", "gap", "elapsed_s",
                      "stopped_because", "jobs", "run_dir", "bounds"}
    assert r["problem"] == "intraop" and r["feasible"]
    assert r["jobs"]["searches"] == ["search-0"] and r["jobs"]["bounds"][0] == "exact"
    assert evaluate(p, r["solution"]).cost == r["cost"] >= r["lower_bound"]
    on_disk = json.loads((tmp_path / "run" / "result.json").read_text())
    assert on_disk == r
    best = json.loads((tmp_path / "run" / "best_solution.json").read_text())
    assert best["cost"] == r["cost"]


@pytest.mark.mip
def test_runs_prove_small_instances_optimal_against_brute_force(tmp_path):
    for seed in range(6):
        p = _instance(seed * 5 + 2)
        best, _ = brute_force_table(p)
        r = solve_in_process(p, tmp_path / str(seed), time_limit_s=10)
        if best is None:
            assert not r["feasible"]
            continue
        assert r["stopped_because"] == "optimal" and r["cost"] == r["lower_bound"] == best


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
    r = solve_in_process(p, tmp_path, time_limit_s=8)
    assert r["feasible"]
    assert evaluate(p, r["solution"]).cost == r["cost"] <= 1.2 * 217039  # best known 217039
