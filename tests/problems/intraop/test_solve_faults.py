"""``intraop solve``: certificates only from a proven bound, costs only from the evaluator,
and the best solution kept on Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from gapstop.engine.rundir import read_events
from gapstop.problems.intraop import island
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.io import problem_to_dict
from gapstop.problems.intraop.model import IntraopProblem
from gapstop.problems.intraop.penalty import Found, PenaltySearch
from tests.problems.intraop.reference import brute_force_table
from tests.problems.intraop.runs import solve_in_process

ROOT = Path(__file__).resolve().parents[3]


def _no_limit_trap() -> IntraopProblem:
    """Two nodes, no usage limit: node 0's cheap strategy (10) has a huge usage, so every
    usage-penalised probe prefers its other one (11); the optimum is 10 + 5 = 15."""
    return IntraopProblem(name="trap", node_ptr=np.array([0, 2, 4]), node_cost=np.array([10, 11, 5, 5]),
                          node_usage=np.array([1000, 0, 0, 0]), start=np.array([0, 0]), end=np.array([1, 1]),
                          edge_u=np.array([0]), edge_v=np.array([1]), edge_ptr=np.array([0, 4]),
                          edge_cost=np.array([0, 0, 0, 0]), usage_limit=None)


@pytest.mark.mip
def test_optimal_only_with_a_proven_bound_equal_to_the_cost(tmp_path: Path) -> None:
    p = _no_limit_trap()
    assert brute_force_table(p)[0] == 15
    r = solve_in_process(p, tmp_path, time_limit_s=10)
    assert r["stopped_because"] == "optimal"
    assert r["lower_bound"] == r["cost"] == 15 and r["gap"] == 0.0


def test_a_bound_below_the_cost_is_no_optimum(monkeypatch, tmp_path: Path) -> None:
    from gapstop.engine.records import Bound
    from gapstop.problems.intraop import bounds

    # a valid but weaker bound than the optimum: the run must not call its result optimal
    monkeypatch.setattr(bounds, "lower_bound", lambda problem, method, t, **kw: Bound(
        method, 14, "bound-only", 0.0, "test", {}))
    r = solve_in_process(_no_limit_trap(), tmp_path, time_limit_s=1.0)
    assert r["cost"] == 15 and r["lower_bound"] == 14
    assert r["stopped_because"] == "time-limit" and 0 < r["gap"] < 0.1


def test_costs_come_from_the_evaluator_not_from_the_searches(monkeypatch, tmp_path: Path) -> None:
    class Lying(PenaltySearch):
        """Reports every solution as costing 1 less than it does."""

        def iterate(self) -> Found | None:
            f = super().iterate()
            return None if f is None else Found(f.cost - 1, f.solution, f.iteration, f.weight_scale)

        def step(self, budget_s: float) -> list[Found]:
            return [Found(f.cost - 1, f.solution, f.iteration, f.weight_scale) for f in super().step(budget_s)]

    monkeypatch.setattr(island, "PenaltySearch", Lying)
    p = random_instance(40, 7, max_k=4, limit_quantile=0.3)
    r = solve_in_process(p, tmp_path, time_limit_s=1.0, bounds=False)
    ev = evaluate(p, r["solution"])
    assert ev.feasible and r["cost"] == ev.cost
    # every logged improvement is the evaluator's cost of a reported solution, not the search's claim
    uppers = [e for e in read_events(tmp_path / "run") if e["kind"] == "upper"]
    assert uppers and all(e["worker"].startswith("search-") for e in uppers)  # any island (one per free CPU)
    assert min(e["value"] for e in uppers) == r["cost"]


def test_ctrl_c_keeps_and_prints_the_best_solution(tmp_path: Path) -> None:
    inst = tmp_path / "inst.json"
    p = random_instance(400, 1, max_k=4, limit_quantile=0.3)
    inst.write_text(json.dumps(problem_to_dict(p)))
    out = tmp_path / "out.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "GAPSTOP_CACHE": str(tmp_path / "cache")}
    proc = subprocess.Popen([sys.executable, str(ROOT / "launch.py"), "intraop", "solve", str(inst), "--in-process",
                             "--time-limit", "60", "--workers", "1", "--quiet", "--out", str(out),
                             "--run-dir", str(tmp_path / "run")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        t_end = time.monotonic() + 30
        while not out.exists() and time.monotonic() < t_end and proc.poll() is None:
            time.sleep(0.05)
        assert out.exists(), "no improvement written within 30 s"
        time.sleep(0.5)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, stderr  # 128 + SIGINT, after the result is written
    assert "Traceback" not in stderr
    doc = json.loads(stdout)
    assert doc["stopped_because"] == "interrupted" and doc["elapsed_s"] < 40
    assert json.loads(out.read_text()) == doc
    ev = evaluate(p, doc["solution"])
    assert ev.feasible and ev.cost == doc["cost"]
