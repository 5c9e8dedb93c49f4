"""Pipeline plan data (problems/pipeline/plots.py): the bars and the chip graph are the evaluator's numbers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.engine.persist import file_digest
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.io import save_graph
from gapstop.problems.pipeline.plots import chip_graph, evaluate_result, plan_from_run, stage_bars
from tests.problems.pipeline.runs import poor_split


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("memory", [False, True])
def test_bars_add_up_to_the_evaluated_stage_costs(seed: int, memory: bool) -> None:
    p = random_dag(30, seed, memory=memory, k_hint=4)
    ev = evaluate(p, poor_split(p, 4, seed).blocks)
    bars = stage_bars(p, ev)
    assert np.array_equal(bars.cost, ev.block_costs)
    assert np.array_equal(bars.compute + bars.communication + bars.overflow, ev.block_costs)
    assert bars.cost[bars.bottleneck] == ev.objective and sum(bars.ops) == p.n
    assert bars.source == "evaluator" and np.all(bars.overflow >= 0)


@pytest.mark.parametrize("seed", [0, 3])
def test_chip_graph_edges_carry_each_stages_in_bytes(seed: int) -> None:
    p = random_dag(30, seed, k_hint=4)
    ev = evaluate(p, poor_split(p, 4, seed).blocks)
    g = chip_graph(p, ev, ring=False)
    b = ev.blocks
    assert {tuple(e) for e in g.edges.tolist()} == {(int(b[u]), int(b[v])) for u, v in p.edges if b[u] != b[v]}
    into = np.zeros(g.chips, dtype=np.int64)
    np.add.at(into, g.edges[:, 1], g.bytes)
    assert np.array_equal(into, ev.in_bytes)  # each tensor once per chip that consumes it
    assert np.all(g.edges[:, 0] < g.edges[:, 1])  # stages in DAG order


def _run(tmp_path: Path, p, k: int = 3) -> tuple[dict, dict]:
    f = tmp_path / "g.json"
    save_graph(p, f)
    ev = evaluate(p, poor_split(p, k, 0).blocks)
    doc = {"problem": "pipeline", "k": k, **ev.to_dict(), "stages": [
        {"stage": s, "ops": [], "modules": [], "cost": 1.0, "compute": 1.0, "communication": 0.0, "overflow": 0.0}
        for s in range(len(ev.block_costs))]}
    return doc, {"problem_path": str(f), "problem_digest": file_digest(f), "params": {"k": k}}


def test_plan_from_run_re_scores_and_falls_back_to_the_stored_stages(tmp_path: Path) -> None:
    p = random_dag(20, 5, k_hint=3)
    doc, config = _run(tmp_path, p)
    bars, chips = plan_from_run(doc, config)
    assert bars.source == "evaluator" and chips is None
    assert np.array_equal(bars.cost, evaluate_result(p, doc).block_costs)
    ring = {**config, "params": {"k": 3, "constraints": {"ring": True}}}
    assert plan_from_run(doc, ring)[1].ring
    Path(config["problem_path"]).write_text(json.dumps({"changed": True}))  # another graph now
    bars, chips = plan_from_run(doc, config)
    assert bars.source == "result.json" and bars.cost.tolist() == [1.0] * len(doc["stages"]) and chips is None
    with pytest.raises(InputError, match="no partition"):
        plan_from_run({"problem": "pipeline", "blocks": None, "block_costs": None}, None)
