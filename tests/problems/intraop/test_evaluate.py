"""The exact evaluator against the contest example and a naive per-time-step reimplementation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.io import load_problem
from gapstop.problems.intraop.model import FORBIDDEN
from tests.problems.intraop.reference import naive_evaluate

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def example():
    return load_problem(DATA / "example.json", cache=False)


def test_example_solution_costs_445(example):
    ev = evaluate(example, [0, 0, 2, 1, 0])
    assert (ev.cost, ev.feasible, ev.peak_usage) == (445, True, 50)
    assert type(ev.cost) is int


def test_example_all_solutions_match_naive(example):
    seen_infeasible = False
    for sol in np.ndindex(*example.num_strategies):
        ev = evaluate(example, list(sol))
        assert (ev.cost, ev.feasible) == naive_evaluate(example, list(sol))
        seen_infeasible |= not ev.feasible
    assert seen_infeasible  # the limit of 50 does bind on this instance


@pytest.mark.parametrize("seed", range(60))
def test_random_instances_match_naive(seed):
    rng = np.random.default_rng(seed)
    p = random_instance(2 + seed % 6, seed, max_k=4, limit_quantile=float(rng.uniform(0, 1)) if seed % 5 else None,
                        forbidden_p=0.1 if seed % 3 == 0 else 0.0, self_loops=seed % 2 == 0)
    for _ in range(20):
        sol = [int(rng.integers(0, k)) for k in p.num_strategies]
        ev = evaluate(p, sol)
        cost, ok = naive_evaluate(p, sol)
        assert ev.cost == cost and ev.feasible == ok
        if ev.violated_step is not None:
            assert not ev.feasible


def test_totals_beyond_int64_are_exact():
    p = random_instance(12, 3, max_k=1, forbidden_p=1.0, limit_quantile=None)
    ev = evaluate(p, [0] * 12)
    assert ev.cost == naive_evaluate(p, [0] * 12)[0] >= 12 * FORBIDDEN > 2**63
    assert not ev.feasible and "forbidden" in ev.reason


@pytest.mark.parametrize("sol, needle", [([0, 0, 2, 1], "entries"), ([0, 0, 3, 1, 0], "solution[2]"),
                                         ([0, -1, 0, 0, 0], "solution[1]"), ([0.5, 0, 0, 0, 0], "integers")])
def test_malformed_solutions(example, sol, needle):
    ev = evaluate(example, sol)
    assert ev.cost is None and not ev.feasible and needle in ev.reason


def test_violation_names_the_step(example):
    ev = evaluate(example, [0, 0, 1, 1, 0])  # node 2 strategy 1 uses 20 while 0, 1, 2 are live
    cost, ok = naive_evaluate(example, [0, 0, 1, 1, 0])
    assert not ok and ev.cost == cost and not ev.feasible
    assert ev.violated_step == 50 and "time step 50" in ev.reason
