"""intraop solve's ``plan``: per op its name, module, configuration and, where exact, the DTensor
placements of its output; checked against the configurations' own layouts."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from gapstop.launch import main
from gapstop.problems.intraop.io import load_problem, problem_from_dict
from gapstop.problems.intraop.strategies import (all_configs, config_label, generate, named_plan, op_domain, placement,
                                                 read_ops)
from tests.problems.intraop.test_strategies import CHIP, conv_block, gemm_chain


def _mm1():
    _, ops, _ = read_ops(gemm_chain(), "chain.json")
    return op_domain(ops[0])  # y[8, 32] = x[8, 16] @ w[16, 32]: dims m n k, k a reduction


def test_gemm_placements_on_a_line_of_four_devices():
    dom = _mm1()
    got = {config_label(dom, c): placement(dom, c, 4) for c in all_configs(dom, 4)}
    assert got["replicated"] == ["Replicate()"]
    assert got["split m by 4"] == ["Shard(0)"] and got["split n by 4"] == ["Shard(1)"]
    assert got["split k by 4"] == ["Replicate()"]  # partial sums, all-reduced by the cost model
    # two ways on four devices leaves replica pairs, and two split dims need two mesh axes
    assert got["split m by 2"] is None and got["split m by 2, n by 2"] is None


def test_gemm_placements_on_a_2x2_mesh():
    dom = _mm1()
    mesh = (2, 2)
    got = {config_label(dom, c): placement(dom, c, 4, mesh) for c in all_configs(dom, 4, mesh)}
    assert got["split m by 4"] == ["Shard(0)", "Shard(0)"]
    assert sorted(got["split m by 2, n by 2"]) == ["Shard(0)", "Shard(1)"]
    assert sorted(got["split m by 2"]) == ["Replicate()", "Shard(0)"]
    assert sorted(got["split n by 2, k by 2"]) == ["Replicate()", "Shard(1)"]


@pytest.mark.parametrize("make, nprocs, mesh", [(gemm_chain, 4, None), (gemm_chain, 8, (2, 4)),
                                                (conv_block, 4, (2, 2)), (conv_block, 8, None)])
def test_placements_shard_each_output_dim_as_the_configuration_does(make, nprocs, mesh):
    _, ops, _ = read_ops(make(), "g.json")
    axes = list(mesh) if mesh else [nprocs]
    seen = 0
    for op in ops:
        dom = op_domain(op)
        for c in all_configs(dom, nprocs, mesh):
            pl = placement(dom, c, nprocs, mesh)
            if pl is None:
                continue
            seen += 1
            assert len(pl) == len(axes)
            # parts per output dim: the product of the axes sharding it = the split of the domain dim it follows
            for d, j in enumerate(dom.out_map):
                parts = math.prod(a for a, p in zip(axes, pl) if p == f"Shard({d})")
                assert parts == (1 if j is None else c[j]), (op.name, c, pl)
            # every device is used: the configuration's splits and the replicas fill the mesh
            replicated = math.prod(a for a, p in zip(axes, pl) if p == "Replicate()")
            reduced = math.prod(c[i] for i in range(len(c)) if dom.reduce[i])
            assert math.prod(c) * replicated == math.prod(axes) * reduced
    assert seen


def test_solve_writes_the_named_plan(tmp_path: Path):
    g = gemm_chain()
    for op, module in zip(g["graph"]["nodes"]["ops"], ("layers.0.fc", "layers.1.fc")):
        op["module"] = module
    graph = tmp_path / "chain.json"
    graph.write_text(json.dumps(g))
    chip = tmp_path / "chip.toml"
    chip.write_text('name = "t"\nmemory_bandwidth = 1e11\nlink_bandwidth = 1e10\nmemory = 1000000000\n'
                    '[peak_flops]\nfloat32 = 1e12\n')
    inst, out = tmp_path / "inst.json", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["intraop", "generate", str(graph), "--nprocs", "4", "--chip", str(chip),
                                  "--out", str(inst)])
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["intraop", "solve", str(inst), "--time-limit", "10", "--quiet", "--in-process",
                                  "--run-dir", str(tmp_path / "rd"), "--out", str(out)],
                           env={"GAPSTOP_CACHE": str(tmp_path / "cache")})
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    meta = json.loads(inst.read_text())["meta"]
    assert [p["op"] for p in doc["plan"]] == ["mm1", "mm2"]
    assert [p["module"] for p in doc["plan"]] == ["layers.0.fc", "layers.1.fc"]
    for i, (p, s) in enumerate(zip(doc["plan"], doc["solution"])):
        assert p["configuration"] == meta["configs"][i][s] and p["placement"] == meta["placements"][i][s]
    assert json.loads((tmp_path / "rd" / "result.json").read_text())["plan"] == doc["plan"]


def test_meta_survives_the_cache_and_contest_instances_have_no_plan(tmp_path: Path):
    doc = generate(gemm_chain(), "chain.json", 4, CHIP)
    f = tmp_path / "inst.json"
    f.write_text(json.dumps(doc))
    first = load_problem(f, cache_dir=tmp_path)
    again = load_problem(f, cache_dir=tmp_path)  # from the cache
    assert first.meta == again.meta == doc["meta"]
    assert named_plan(again.meta, [0, 0])[0]["configuration"] == "replicated"
    bare = problem_from_dict({"problem": doc["problem"]}, f)
    assert bare.meta is None and named_plan(bare.meta, [0, 0]) is None
    assert named_plan(doc["meta"], [0]) is None  # not this instance's nodes
