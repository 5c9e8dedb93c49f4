"""The command line, through click's runner: results, re-scoring, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gapstop.launch import main
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.io import load_graph, save_graph
from tests.problems.pipeline import reference as ref


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    f = tmp_path / "tiny.json"
    save_graph(random_dag(7, 5, memory=True, k_hint=3), f)
    return f


@pytest.mark.mip
@pytest.mark.ray
@pytest.mark.parametrize("memory", [False, True])
def test_solve_reaches_optimum_and_writes_a_consistent_result(tmp_path: Path, memory: bool,
                                                              request: pytest.FixtureRequest) -> None:
    if not memory:
        request.getfixturevalue("shared_ray")  # the default path joins the session's Ray
    tiny = tmp_path / "tiny.json"
    save_graph(random_dag(7, 5, memory=memory, k_hint=3), tiny)
    out = tmp_path / "r.json"
    # without a memory limit through the default path (Ray local), with one in-process
    mode = ["--run-dir", str(tmp_path / "rd")] if not memory else ["--in-process"]
    # generous limit for the Ray path: on a fresh machine every worker first compiles the kernels
    res = CliRunner().invoke(main, ["pipeline", "solve", str(tiny), "-k", "3", "--time-limit", "240" if not memory else "4",
                                    "--target-gap", "0.0", "--out", str(out), "--quiet", *mode])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    p = load_graph(tiny)
    opt = ref.brute_force(p, 3)
    assert doc["objective"] == pytest.approx(opt, rel=1e-9)
    assert doc["lower_bound"] <= opt + 1e-9
    if not memory:  # the exact MIP is exact without a memory limit: the run proves optimality
        assert doc["stopped_because"] == "optimal", doc
        assert json.loads((tmp_path / "rd" / "result.json").read_text())["objective"] == doc["objective"]
    ev = evaluate(p, doc["blocks"], doc["order"], k=3)
    assert ev.objective == doc["objective"] and ev.block_costs.tolist() == doc["block_costs"]
    assert doc["blocks"] == ev.blocks.tolist()  # numbered in DAG order
    assert {"problem", "graph", "k", "gap", "bounds", "elapsed_s"} <= set(doc)


def test_solve_search_only_stops_at_time_limit(tiny: Path) -> None:
    res = CliRunner().invoke(main, ["pipeline", "solve", str(tiny), "-k", "2", "--time-limit", "2",
                                    "--no-bounds", "--quiet", "--in-process"])
    assert res.exit_code == 0, res.output
    assert "objective" in res.output


@pytest.mark.parametrize("args,msg", [
    (["-k", "0"], "-k: must be >= 1"),
    (["-k", "2", "--target-gap", "1.5"], "--target-gap: must be in [0, 1)"),
])
def test_bad_options_exit_2_with_one_line(tiny: Path, args: list[str], msg: str) -> None:
    res = CliRunner().invoke(main, ["pipeline", "solve", str(tiny), *args, "--quiet"])
    assert res.exit_code == 2
    assert msg in res.output and "Traceback" not in res.output


def test_bad_graph_file_exit_2(tmp_path: Path) -> None:
    f = tmp_path / "bad.json"
    f.write_text(json.dumps({"graph": {"nodes": {"work": [1, 2], "size_param": [0, 0], "size_out": [1, 1]},
                                       "edges": [[0, 1], [1, 0]]}, "bandwidth": 1}))
    res = CliRunner().invoke(main, ["pipeline", "solve", str(f), "-k", "2", "--quiet"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "graph.edges: the graph has a cycle" in lines[0] and str(f) in lines[0]


@pytest.mark.mip
def test_bound_command_is_below_brute_force(tiny: Path) -> None:
    p = load_graph(tiny)
    opt = ref.brute_force(p, 3)
    for method in ("simple", "bottleneck", "exact"):
        res = CliRunner().invoke(main, ["pipeline", "bound", str(tiny), "-k", "3", "--method", method,
                                        "--time-limit", "10"])
        assert res.exit_code == 0, res.output
        rec = json.loads(res.output.strip().splitlines()[-1])
        assert rec["method"] == method and rec["value"] <= opt + 1e-9


def test_evaluate_command_rescores(tiny: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    p = load_graph(tiny)
    order = next(ref.topological_orders(p))
    blocks = [0] * p.n
    for v in order[3:]:
        blocks[v] = 1
    out.write_text(json.dumps({"k": 2, "blocks": blocks}))
    res = CliRunner().invoke(main, ["pipeline", "evaluate", str(tiny), str(out)])
    assert res.exit_code == 0, res.output
    want = max(ref.block_cost(p, order[:3]), ref.block_cost(p, order[3:]))
    assert json.loads(res.output)["objective"] == pytest.approx(want, rel=1e-12)
    out.write_text(json.dumps({"k": 2, "blocks": [1] * 3 + [0] * 4, "order": list(range(p.n))[::-1]}))
    res = CliRunner().invoke(main, ["pipeline", "evaluate", str(tiny), str(out)])
    assert res.exit_code == 2 and "error:" in res.output


def test_process_exit_keeps_output_files_and_codes(tiny: Path, tmp_path: Path) -> None:
    """``python launch.py`` ends through ``run``'s quick exit: stdout, the --out file and the
    exit code must be what ``main`` produced (0 on success, 2 with one line on bad input)."""
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "r.json"
    cmd = [sys.executable, str(root / "launch.py"), "pipeline", "solve", str(tiny), "-k", "2", "--time-limit", "3",
           "--no-bounds", "--quiet", "--in-process", "--out", str(out)]
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=root, timeout=120)
    assert res.returncode == 0, res.stderr
    doc = json.loads(out.read_text())
    assert doc["objective"] == pytest.approx(evaluate(load_graph(tiny), doc["blocks"]).objective, rel=1e-12)
    assert "objective" in res.stdout
    res = subprocess.run([*cmd[:5], "-k", "0", "--quiet"], capture_output=True, text=True, cwd=root, timeout=120)
    assert res.returncode == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: -k: must be >= 1"), res.stderr
