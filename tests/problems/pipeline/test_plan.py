"""Plans: cost terms add up to the evaluator's stage costs, module summaries, contiguous optimum."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gapstop.engine.errors import InputError
from gapstop.launch import main
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.io import save_graph
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.plan import contiguous_split, cost_terms, module_summary, solve_contiguous, stage_plan
from tests.problems.pipeline import reference as ref


def _relabel_topological(p: PipelineProblem) -> PipelineProblem:
    """The same graph with nodes numbered in a topological order (as importers write them)."""
    order = next(ref.topological_orders(p))
    new = np.empty(p.n, np.int64)
    new[order] = np.arange(p.n)
    return PipelineProblem(p.name, p.work[order], p.size_param[order], p.size_out[order],
                           new[p.edges.astype(np.int64)], p.bandwidth, p.memory)


@pytest.mark.parametrize("seed", range(6))
def test_cost_terms_add_up_to_the_evaluator_stage_costs(seed: int) -> None:
    q = _relabel_topological(random_dag(12, seed, memory=seed % 2 == 0, k_hint=3))
    overflow_seen = False
    for k in (1, 2, 4):
        e = evaluate(q, contiguous_split(q, k).blocks)
        for s, t in enumerate(cost_terms(q, e)):
            assert t["compute"] + t["communication"] + t["overflow"] == e.block_costs[s]
            assert t["compute"] == e.work[s] and t["communication"] == (e.in_bytes[s] + e.out_bytes[s]) / q.bandwidth
            assert t["overflow"] >= 0 and (q.memory is not None or t["overflow"] == 0)
            overflow_seen |= t["overflow"] > 0
    # memory = total params // 3: one stage holding everything overflows
    assert overflow_seen == (q.memory is not None)


@pytest.mark.parametrize("seed", range(8))
def test_contiguous_split_is_the_best_split_of_the_node_order(seed: int) -> None:
    p = _relabel_topological(random_dag(8, seed, memory=seed % 2 == 1, k_hint=3))
    for k in (2, 3):
        ev = contiguous_split(p, k)
        assert ev.objective == pytest.approx(ref.best_split(p, list(range(p.n)), k), rel=1e-12)
        assert (np.diff(ev.blocks) >= 0).all()  # stages are runs of the node order


def test_contiguous_rejects_a_non_topological_order() -> None:
    p = random_dag(8, 3)
    v = int(p.edges[0][1])
    order = sorted(range(p.n), key=lambda x: (x != v, x))  # consumer v first
    with pytest.raises(InputError, match="not topological"):
        contiguous_split(p, 2, order)


def test_module_summary_collapses_whole_modules_and_names_cut_ones() -> None:
    mods = ["enc.layer.0.attn", "enc.layer.0.mlp", "enc.layer.1.attn", "enc.layer.1.mlp", None, "head"]
    blocks = np.array([0, 0, 0, 1, 1, 1])
    whole, cut = module_summary(mods, blocks, 2)
    assert whole == [["enc.layer.0", "enc.layer.1.attn"], ["enc.layer.1.mlp", "head"]]
    assert cut == [["enc.layer.1"], ["enc.layer.1"]]
    # a module used twice (a shared activation) on both sides of the boundary; listed in schedule order
    whole, cut = module_summary(["b.y", "a.x", "a.x", "c"], np.array([0, 0, 1, 1]), 2, [1, 0, 2, 3])
    assert whole == [["b"], ["c"]] and cut == [["a.x"], ["a.x"]]
    whole, _ = module_summary(["m.10", "m.9", "m.2"], np.array([0, 0, 0]), 1)
    assert whole == [["m"]]
    whole, cut = module_summary(["m.10", "m.9", "m.2"], np.array([0, 0, 1]), 2, [1, 0, 2])
    assert whole == [["m.9", "m.10"], ["m.2"]] and cut == [["m"], ["m"]]


def test_stage_plan_lists_every_op_once_in_schedule_order() -> None:
    p = _relabel_topological(random_dag(10, 1, memory=True))
    ev = contiguous_split(p, 3)
    plan = stage_plan(p, ev)
    assert [x for s in plan for x in s["ops"]] == [str(v) for v in ev.order]
    assert [s["cost"] for s in plan] == ev.block_costs.tolist()


def test_solve_contiguous_without_bounds_and_on_the_command_line(tmp_path: Path) -> None:
    p = _relabel_topological(random_dag(10, 2, memory=True, k_hint=3))
    doc = solve_contiguous(p, 3, bounds=False)
    assert doc["contiguous_optimal"] and doc["mode"] == "contiguous"
    assert doc["objective"] == pytest.approx(ref.best_split(p, list(range(p.n)), 3), rel=1e-12)
    assert doc["lower_bound"] <= doc["objective"] and doc["lower_bound_method"] == "simple"
    f = tmp_path / "g.json"
    save_graph(p, f)
    out = tmp_path / "r.json"
    r = CliRunner().invoke(main, ["pipeline", "solve", str(f), "-k", "3", "--contiguous", "--no-bounds",
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    res = json.loads(out.read_text())
    assert res["objective"] == doc["objective"] and res["stopped_because"] == "contiguous-optimal"
    r = CliRunner().invoke(main, ["pipeline", "evaluate", str(f), str(out)])
    assert json.loads(r.output)["objective"] == doc["objective"]
    bad = tmp_path / "shuffled.json"
    save_graph(random_dag(8, 3), bad)  # nodes numbered along a random permutation, not topologically
    r = CliRunner().invoke(main, ["pipeline", "solve", str(bad), "-k", "2", "--contiguous", "--no-bounds"])
    assert r.exit_code == 2
    assert r.output.startswith(f"error: {bad}: --contiguous needs the node order to be topological; order: ")


def test_solve_result_carries_the_stage_plan_of_its_partition(tmp_path) -> None:
    from tests.problems.pipeline.runs import solve_in_process

    p = random_dag(14, 4, memory=True, k_hint=3)
    # stops at the first partition found (its gap against the simple bound is below 99 %)
    doc = solve_in_process(p, 3, tmp_path, time_limit_s=30.0, target_gap=0.99, bounds=False)
    ev = evaluate(p, doc["blocks"], doc["order"], k=3)
    assert [s["cost"] for s in doc["stages"]] == doc["block_costs"] == ev.block_costs.tolist()
    assert sorted(int(x) for s in doc["stages"] for x in s["ops"]) == list(range(p.n))
    for s in doc["stages"]:
        assert s["compute"] + s["communication"] + s["overflow"] == s["cost"]
        assert all(doc["blocks"][int(x)] == s["stage"] for x in s["ops"])


def test_contiguous_gap_is_the_certified_gap_of_the_other_modes() -> None:
    # nothing to compute or move: objective 0 and bound 0 prove the plan optimal, gap 0 (not unknown)
    z = np.zeros(3)
    p = PipelineProblem("zero", z, z.astype(np.int64), z.astype(np.int64), np.array([[0, 1], [1, 2]]), 1.0, None)
    doc = solve_contiguous(p, 2, bounds=False)
    assert (doc["objective"], doc["lower_bound"], doc["gap"]) == (0.0, 0.0, 0.0)


def test_contiguous_refuses_the_options_of_a_ray_run(tmp_path: Path) -> None:
    # --contiguous runs in this process and writes no run directory: a run directory, a run to
    # resume or a cluster asked for alongside it would be silently ignored
    p = _relabel_topological(random_dag(6, 1))
    f = tmp_path / "g.json"
    save_graph(p, f)
    for extra in (["--run-dir", str(tmp_path / "rd")], ["--resume", str(tmp_path)], ["--address", "auto"]):
        r = CliRunner().invoke(main, ["pipeline", "solve", str(f), "-k", "2", "--contiguous", "--no-bounds", *extra])
        assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
        assert r.output.startswith(f"error: {extra[0]}: not with --contiguous"), r.output
    assert not (tmp_path / "rd").exists()


@pytest.mark.parametrize("entry, field", [({"module": ["m"]}, "ops[0].module"),
                                          ({"module_stack": 5}, "ops[0].module_stack"),
                                          ({"module_stack": [["m"]]}, "ops[0].module_stack")])
def test_malformed_module_metadata_is_one_line(tmp_path: Path, entry: dict, field: str) -> None:
    p = _relabel_topological(random_dag(3, 1))
    f = tmp_path / "g.json"
    save_graph(p, f)
    doc = json.loads(f.read_text())
    doc["graph"]["nodes"]["ops"] = [{"name": "a", "op": "x", **entry}, None, None]
    doc["meta"] = {"source": "torch"}
    f.write_text(json.dumps(doc))
    r = CliRunner().invoke(main, ["pipeline", "solve", str(f), "-k", "2", "--contiguous", "--no-bounds"])
    assert r.exit_code == 2 and r.output.count("\n") == 1, r.output
    assert r.output.startswith(f"error: {f}: graph.nodes.{field}: expected "), r.output
