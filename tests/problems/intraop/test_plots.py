"""Intra-op plan data (problems/intraop/plots.py): usage and costs are the evaluator's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.engine.persist import file_digest
from gapstop.problems.intraop.evaluate import evaluate, usage_profile
from gapstop.problems.intraop.generators import least_usage_strategies, random_instance
from gapstop.problems.intraop.io import problem_from_dict
from gapstop.problems.intraop.plots import costliest_ops, memory_profile, node_costs, plan_from_run
from gapstop.problems.intraop.strategies import generate
from tests.problems.intraop.test_strategies import CHIP, gemm_chain


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_profile_and_node_costs_are_the_evaluators(seed: int) -> None:
    p = random_instance(25, seed)
    s = least_usage_strategies(p)
    ev = evaluate(p, s)
    prof = memory_profile(p, s)
    assert np.array_equal(prof.usage, usage_profile(p, s)) and int(prof.usage.max()) == ev.peak_usage
    assert prof.usage[prof.peak_step] == ev.peak_usage and prof.limit == p.usage_limit and prof.step_names == ()
    assert sum(node_costs(p, s)) == ev.cost
    top = costliest_ops(p, s, top=5)
    assert top.total == ev.cost and len(top.node) == 5 and np.all(np.diff(top.cost) <= 0)
    assert top.label[0] == f"node {top.node[0]}: strategy {s[top.node[0]]}"


def test_a_generated_instance_names_its_ops_and_configurations(tmp_path: Path) -> None:
    doc = generate(gemm_chain(), "chain.json", 4, CHIP)
    f = tmp_path / "chain.json"
    f.write_text(json.dumps(doc))
    p = problem_from_dict(doc, f)
    s = [1, 0]
    result = {"problem": "intraop", "cost": evaluate(p, s).cost, "solution": s}
    config = {"problem_path": str(f), "problem_digest": file_digest(f)}
    prof, ops = plan_from_run(result, config)
    assert prof.step_names == ("mm1", "mm2") and prof.limit == CHIP.memory
    meta = doc["meta"]
    assert set(ops.label) == {f"mm1: {meta['configs'][0][1]}", f"mm2: {meta['configs'][1][0]}"}
    assert ops.total == result["cost"]
    with pytest.raises(InputError, match="no solution"):
        plan_from_run({**result, "solution": None}, config)
    with pytest.raises(InputError, match="out of range"):
        plan_from_run({**result, "solution": [99, 0]}, config)
    f.write_text(json.dumps({**doc, "meta": {}}))
    with pytest.raises(InputError, match="changed since the run"):
        plan_from_run(result, config)
