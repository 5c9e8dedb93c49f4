"""Strategy generation: hand-computed t_V, t_E and usage on a GEMM chain and a conv block at p = 4."""

from __future__ import annotations

import json
import math

import pytest
from click.testing import CliRunner

from gapstop.engine.errors import InputError
from gapstop.launch import main
from gapstop.problems.chip import ChipProfile
from gapstop.problems.intraop.elimination import find_opt_strategy
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.io import problem_from_dict
from gapstop.problems.intraop.strategies import (Op, all_configs, describe_solution, generate, op_domain, read_ops,
                                                 view_layout)
from tests.problems.intraop.test_elimination import optima

# round numbers: 1 TFLOP/s, 100 GB/s memory, 10 GB/s link
CHIP = ChipProfile(name="test", peak_flops={"float32": 1e12}, memory_bandwidth=1e11, link_bandwidth=1e10,
                   memory=10**9)


def T(name, shape, param=False):
    return {"name": name, "shape": shape, "dtype": "float32", "param": param}


def graph(ops, edges):
    n = len(ops)
    return {"graph": {"name": "g", "nodes": {"work": [1.0] * n, "size_param": [0] * n, "size_out": [0] * n,
                                              "ops": ops}, "edges": edges}, "bandwidth": 1.0}


def gemm_chain():
    mm1 = {"name": "mm1", "op": "MatMul", "kind": "gemm", "inputs": [T("x", [8, 16]), T("w1", [16, 32], True)],
           "outputs": [T("y", [8, 32])], "attrs": {}, "flops": 2 * 8 * 16 * 32, "bytes": (128 + 512 + 256) * 4}
    mm2 = {"name": "mm2", "op": "MatMul", "kind": "gemm", "inputs": [T("y", [8, 32]), T("w2", [32, 8], True)],
           "outputs": [T("z", [8, 8])], "attrs": {}, "flops": 2 * 8 * 32 * 8, "bytes": (256 + 256 + 64) * 4}
    return graph([mm1, mm2], [[0, 1]])


def conv_block():
    conv = {"name": "conv", "op": "Conv", "kind": "conv",
            "inputs": [T("x", [2, 8, 8, 8]), T("w", [16, 8, 3, 3], True), T("b", [16], True)],
            "outputs": [T("c", [2, 16, 8, 8])], "attrs": {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "group": 1},
            "flops": 2 * 2 * 16 * 8 * 9 * 64, "bytes": (1024 + 1152 + 16 + 2048) * 4}
    relu = {"name": "relu", "op": "Relu", "kind": "elementwise", "inputs": [T("c", [2, 16, 8, 8])],
            "outputs": [T("r", [2, 16, 8, 8])], "attrs": {}, "flops": 2048, "bytes": 2 * 2048 * 4}
    return graph([conv, relu], [[0, 1]])


def _tables(doc):
    p = doc["problem"]
    labels = doc["meta"]["configs"]
    node = [dict(zip(lab, zip(c, u))) for lab, c, u in zip(labels, p["nodes"]["costs"], p["nodes"]["usages"])]
    (u, v), = p["edges"]["nodes"]
    flat = p["edges"]["costs"][0]
    edge = {(a, b): flat[i * len(labels[v]) + j] for i, a in enumerate(labels[u]) for j, b in enumerate(labels[v])}
    return node, edge


def test_gemm_chain_costs_by_hand():
    doc = generate(gemm_chain(), "chain.json", 4, CHIP)
    node, edge = _tables(doc)
    assert doc["problem"]["nodes"]["intervals"] == [[0, 2], [0, 2]]  # both hold weights
    assert len(node[0]) == 10 and doc["meta"]["dropped_total"] == 0
    # mm1 split m by 4: max(8192 / 4e12, 3584 / 4e11) = 8.96 ns; w1 whole (2048 B) + y block 1024/4
    assert node[0]["split m by 4"] == (9, 2048 + 256)
    # split k by 4: 8.96 ns + all-reduce of y (1024 B): 2 * 3/4 * 1024 / 1e10 = 153.6 ns; w1 rows / 4
    assert node[0]["split k by 4"] == (163, 512 + 1024)
    assert node[0]["replicated"] == (36, 2048 + 1024)  # max(8.192, 35.84) ns
    # y: 1024 B; producer layout (m, n) -> consumer's A layout (m, k)
    assert edge["split m by 4", "split m by 4"] == 0
    assert edge["split m by 4", "split k by 4"] == 19  # all-to-all: 256 - 1024/16 = 192 B -> 19.2 ns
    assert edge["split m by 4", "replicated"] == 77  # all-gather: 1024 - 256 = 768 B
    assert edge["split n by 4", "split k by 4"] == 0  # column- then row-parallel: no communication
    assert edge["split m by 2, n by 2", "split m by 4"] == 13  # 256 - 1024/8 = 128 B
    assert edge["replicated", "split m by 2, k by 2"] == 0
    train = generate(gemm_chain(), "chain.json", 4, CHIP, training=True)
    tnode, _ = _tables(train)
    # 3 x 8.96 ns + gradient all-reduce of w1 over 4 replicas: 2 * 3/4 * 2048 / 1e10 = 307.2 ns
    assert tnode[0]["split m by 4"] == (334, 2 * 2048 + 256)


def test_conv_block_costs_by_hand():
    doc = generate(conv_block(), "conv.json", 4, CHIP)
    node, edge = _tables(doc)
    assert len(node[0]) == 9  # (n, f, c) in (2, 16, 8): n | 2, prod <= 4
    assert doc["problem"]["nodes"]["intervals"] == [[0, 2], [1, 2]]
    # split f by 4: max(294912 / 4e12, 16960 / 4e11) = 73.728 ns; w/4 + b/4 + output/4
    assert node[0]["split f by 4"] == (74, 1152 + 16 + 2048)
    # split n by 2, c by 2: + all-reduce over 2 of the 4096 B output block: 409.6 ns; w/2, b whole, output/2
    assert node[0]["split n by 2, c by 2"] == (483, 2304 + 64 + 4096)
    assert node[1]["replicated"] == (164, 8192)  # max(2.048, 163.84) ns
    assert edge["split f by 4", "split d1 by 4"] == 0
    assert edge["split f by 4", "split d0 by 2, d1 by 2"] == 102  # 2048 - 8192/8 = 1024 B
    assert edge["split c by 4", "replicated"] == 0  # after the all-reduce every processor holds the output


@pytest.mark.parametrize("make", [gemm_chain, conv_block])
@pytest.mark.parametrize("p", [1, 4, 6, 8])
def test_configurations_respect_p_and_divisibility(make, p):
    _, ops, _ = read_ops(make(), "g.json")
    for op in ops:
        dom = op_domain(op)
        cs = all_configs(dom, p)
        assert len(set(cs)) == len(cs) and (1,) * len(dom.dims) in cs
        for c in cs:
            assert math.prod(c) <= p
            assert all(s % x == 0 for s, x in zip(dom.sizes, c))
            assert all(x == 1 or ok for x, ok in zip(c, dom.splittable))
        # complete: every divisor tuple within p is there (brute force over all tuples)
        import itertools
        every = [c for c in itertools.product(*[range(1, p + 1)] * len(dom.dims))
                 if math.prod(c) <= p and all(s % x == 0 for s, x in zip(dom.sizes, c))]
        assert sorted(every) == cs
    mesh = all_configs(op_domain(ops[0]), 4, (2, 2))
    assert all(math.prod(c) in (1, 2, 4) for c in mesh) and (1, 4, 1) in mesh and (2, 2, 1) in mesh


def test_cap_keeps_replicated_and_reports_dropped():
    doc = generate(gemm_chain(), "chain.json", 4, CHIP, max_configs=3)
    assert [len(c) for c in doc["meta"]["configs"]] == [3, 3]
    assert all("replicated" in c for c in doc["meta"]["configs"])
    assert doc["meta"]["dropped"] == {"mm1": 7, "mm2": 7} and doc["meta"]["dropped_total"] == 14


def test_view_layouts():
    reshape = Op(0, "r", "Reshape", "view", (), (), {}, 0.0, 0.0)
    assert view_layout((4, 1), (8, 32), (8, 4, 8), reshape) == (4, 1, 1)
    assert view_layout((1, 4), (8, 32), (8, 4, 8), reshape) == (1, 4, 1)
    assert view_layout((1, 8), (8, 32), (8, 4, 8), reshape) is None  # 8 does not divide the leading 4
    assert view_layout((2, 2), (4, 8), (32,), reshape) is None  # the minor dim of a merged group is split
    tr = Op(0, "t", "Transpose", "view", (), (), {"perm": [1, 0]}, 0.0, 0.0)
    assert view_layout((4, 1), (8, 32), (32, 8), tr) == (1, 4)


def test_generated_instance_solves_and_labels():
    for make in (gemm_chain, conv_block):
        doc = generate(make(), "g.json", 4, CHIP)
        problem = problem_from_dict(doc, "g.json")
        r = find_opt_strategy(problem)
        unc, con = optima(problem)
        assert r.exact and r.value == unc == evaluate(problem, r.solution).cost
        lines = describe_solution(doc["meta"], r.solution)
        assert len(lines) == problem.n and lines[0].split(":")[0] in ("mm1", "conv")


def test_cli_generate_and_bad_input(tmp_path):
    g = tmp_path / "chain.json"
    g.write_text(json.dumps(gemm_chain()))
    chip = tmp_path / "chip.toml"
    chip.write_text('name = "t"\nmemory_bandwidth = 1e11\nlink_bandwidth = 1e10\nmemory = 1000000000\n'
                    '[peak_flops]\nfloat32 = 1e12\n')
    out = tmp_path / "inst.json"
    r = CliRunner().invoke(main, ["intraop", "generate", str(g), "--nprocs", "4", "--chip", str(chip),
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert json.loads(r.output)["nodes"] == 2
    s = CliRunner().invoke(main, ["intraop", "solve", str(out), "--method", "elimination"])
    assert s.exit_code == 0 and json.loads(s.output)["stopped_because"] == "optimal"
    m = CliRunner().invoke(main, ["intraop", "generate", str(g), "--nprocs", "4", "--mesh", "2x2", "--chip",
                                  str(chip), "--out", str(out)])
    assert m.exit_code == 0, m.output

    def fails(args, what):
        r = CliRunner().invoke(main, ["intraop", "generate", *args, "--out", str(tmp_path / "x.json")])
        assert r.exit_code == 2 and r.output.count("\n") == 1 and r.output.startswith("error: "), r.output
        assert what in r.output and "Traceback" not in r.output

    fails([str(g), "--nprocs", "0", "--chip", str(chip)], "--nprocs")
    fails([str(g), "--nprocs", "4", "--mesh", "3x2", "--chip", str(chip)], "--mesh")
    zero = tmp_path / "zero.toml"
    zero.write_text(chip.read_text().replace("link_bandwidth = 1e10", "link_bandwidth = 0"))
    fails([str(g), "--nprocs", "4", "--chip", str(zero)], "link_bandwidth")
    bare = tmp_path / "bare.json"
    doc = gemm_chain()
    del doc["graph"]["nodes"]["ops"]
    bare.write_text(json.dumps(doc))
    fails([str(bare), "--nprocs", "4", "--chip", str(chip)], "graph.nodes.ops")
    bad = gemm_chain()
    bad["graph"]["nodes"]["ops"][1]["kind"] = "matmul"
    bare.write_text(json.dumps(bad))
    fails([str(bare), "--nprocs", "4", "--chip", str(chip)], "graph.nodes.ops[1].kind")
    tiny = tmp_path / "tiny.toml"
    tiny.write_text(chip.read_text().replace("memory = 1000000000", "memory = 100"))
    fails([str(g), "--nprocs", "4", "--chip", str(tiny)], "memory")
    # the instance file is the command's only product: not writing it is an error, not a warning
    r = CliRunner().invoke(main, ["intraop", "generate", str(g), "--nprocs", "4", "--chip", str(chip),
                                  "--out", str(chip / "inst.json")])
    assert r.exit_code == 2 and r.output.startswith(f"error: {chip / 'inst.json'}: cannot write: "), r.output
    assert r.output.count("\n") == 1


def test_edge_costs_through_a_transpose_view():
    mm1 = gemm_chain()["graph"]["nodes"]["ops"][0]
    tr = {"name": "t", "op": "Transpose", "kind": "view", "inputs": [T("y", [8, 32])], "outputs": [T("yt", [32, 8])],
          "attrs": {"perm": [1, 0]}, "flops": 0, "bytes": 0}
    mm2 = {"name": "mm2", "op": "MatMul", "kind": "gemm", "inputs": [T("yt", [32, 8]), T("w2", [8, 4], True)],
           "outputs": [T("z", [32, 4])], "attrs": {}, "flops": 2 * 32 * 8 * 4, "bytes": (256 + 32 + 128) * 4}
    for kind in ("view", "other"):  # a transpose labelled "other" is a view too
        tr["kind"] = kind
        doc = generate(graph([mm1, tr, mm2], [[0, 1], [1, 2]]), "g.json", 4, CHIP)
        assert doc["meta"]["ops"] == ["mm1", "mm2"] and doc["meta"]["view_ops"] == 1
        assert doc["problem"]["name"] == "g"  # the graph's name, not a tensor's met through the view
    _, edge = _tables(doc)
    # y split by rows (m of mm1) is yt split by columns: mm2's k
    assert edge["split m by 4", "split k by 4"] == 0
    assert edge["split m by 4", "split m by 4"] == 19  # 256 - 1024/16 = 192 B over 1e10 B/s
    assert edge["split n by 4", "split m by 4"] == 0


def test_second_output_is_charged_whole_unless_replicated():
    drop = {"name": "drop", "op": "Dropout", "kind": "elementwise", "inputs": [T("x", [8, 32])],
            "outputs": [T("y", [8, 32]), T("mask", [8, 32])], "attrs": {}, "flops": 256, "bytes": 3 * 1024}
    use = {"name": "use", "op": "Neg", "kind": "elementwise", "inputs": [T("mask", [8, 32])],
           "outputs": [T("z", [8, 32])], "attrs": {}, "flops": 256, "bytes": 2 * 1024}
    _, edge = _tables(generate(graph([drop, use], [[0, 1]]), "g.json", 4, CHIP))
    assert edge["split d0 by 4", "split d0 by 4"] == 26  # its layout is not tracked: the whole 256 B block
    assert edge["replicated", "split d0 by 4"] == 0


def test_nodes_without_metadata_are_left_out():
    g = gemm_chain()
    ops = g["graph"]["nodes"]["ops"]
    g["graph"]["nodes"]["ops"] = [ops[0], None, ops[1]]
    g["graph"]["edges"] = [[0, 2]]
    doc = generate(g, "g.json", 4, CHIP)
    assert doc["meta"]["ops"] == ["mm1", "mm2"] and doc["meta"]["ops_without_metadata"] == 1
    assert _tables(doc)[1] == _tables(generate(gemm_chain(), "g.json", 4, CHIP))[1]


def test_shapes_that_do_not_fit_their_kind_get_one_configuration():
    # a pool whose output has lost a dimension its input has: the domain cannot describe it
    pool = {"name": "p", "op": "MaxPool", "kind": "pool", "inputs": [T("x", [16, 4])], "outputs": [T("y", [64])],
            "attrs": {}, "flops": 64, "bytes": 64 * 8}
    # a dimension of size 0 has no split; the op still gets its replicated configuration
    empty = {"name": "e", "op": "Relu", "kind": "elementwise", "inputs": [T("y", [64])], "outputs": [T("z", [0])],
             "attrs": {}, "flops": 0, "bytes": 0}
    doc = generate(graph([pool, empty], [[0, 1]]), "g.json", 4, CHIP)
    assert doc["meta"]["configs"] == [["replicated"], ["replicated"]]
    ops = read_ops(graph([pool], []), "g.json")[1]
    assert op_domain(ops[0]).dims == ()


def test_costs_or_usages_the_instance_format_cannot_hold_are_one_line_errors():
    # 10^18 ns and more is the format's "forbidden" marker: an op that slow must not become forbidden
    slow = {"name": "r", "op": "Relu", "kind": "elementwise", "inputs": [T("x", [8, 8])], "outputs": [T("y", [8, 8])],
            "attrs": {}, "flops": 1e31, "bytes": 0}
    with pytest.raises(InputError, match=r"ops\[0\].*10\^18"):
        generate(graph([slow], []), "g.json", 4, CHIP)
    # usages past int64 (2^72 bytes replicated)
    huge = {"name": "r", "op": "Relu", "kind": "elementwise", "inputs": [T("x", [2**40, 2**30])],
            "outputs": [T("y", [2**40, 2**30])], "attrs": {}, "flops": 1, "bytes": 0}
    with pytest.raises(InputError, match=r"ops\[0\].*2\^62"):
        generate(graph([huge], []), "g.json", 4, CHIP)
    # a redistribution that slow (a link of 1 byte per 10^10 s); neither op's t_V uses the link
    relu = {"name": "relu", "op": "Relu", "kind": "elementwise", "inputs": [T("x", [8, 8])],
            "outputs": [T("y", [8, 8])], "attrs": {}, "flops": 64, "bytes": 512}
    soft = {"name": "soft", "op": "Softmax", "kind": "softmax", "inputs": [T("y", [8, 8])],
            "outputs": [T("z", [8, 8])], "attrs": {"axis": 0}, "flops": 64, "bytes": 512}
    crawl = ChipProfile(name="crawl", peak_flops={"float32": 1e12}, memory_bandwidth=1e11, link_bandwidth=1e-10,
                        memory=10**9)
    with pytest.raises(InputError, match=r"ops\[1\]\.inputs\[0\].*10\^18"):
        generate(graph([relu, soft], [[0, 1]]), "g.json", 4, crawl)


@pytest.mark.parametrize("attrs", [{"perm": "ab"}, {"perm": [None, 0]}, {"perm": 3}, {"dims": True},
                                   {"dim0": "x", "dim1": 0}, {"dim0": 0}, {"perm": [float("nan"), 0]}])
def test_a_transpose_with_malformed_attributes_carries_no_layout(attrs):
    # like shapes that do not fit their kind: no traceback; the consumer is charged its whole block
    view = Op(1, "t", "Transpose", "view", (), (), attrs, 0.0, 0.0)
    assert view_layout((2, 1), (4, 16), (16, 4), view) is None
    assert view_layout((2, 1), (4, 16), (16, 4), Op(1, "t", "Transpose", "view", (), (), {"perm": [1, 0]}, 0.0,
                                                       0.0)) == (1, 2)


def test_a_reshape_of_an_empty_tensor_carries_no_layout():
    reshape = Op(1, "r", "Reshape", "view", (), (), {}, 0.0, 0.0)
    assert view_layout((1, 2), (0, 4), (0, 8), reshape) is None  # no elements: nothing to carry or move
    assert view_layout((2, 1), (4, 6), (24,), reshape) == (2,)


def test_view_ops_feeding_each_other_are_one_line(tmp_path):
    # tensors name their producers: two views reading each other's output would be followed forever
    a = {"name": "a", "op": "Reshape", "kind": "view", "inputs": [T("vb", [4, 4])], "outputs": [T("va", [4, 4])],
         "attrs": {}}
    b = {"name": "b", "op": "Reshape", "kind": "view", "inputs": [T("va", [4, 4])], "outputs": [T("vb", [4, 4])],
         "attrs": {}}
    relu = {"name": "r", "op": "Relu", "kind": "elementwise", "inputs": [T("va", [4, 4])], "outputs": [T("z", [4, 4])],
            "attrs": {}, "flops": 16, "bytes": 64}
    with pytest.raises(InputError, match=r"g.json: graph.nodes.ops\[\d\]: .*cycle"):
        generate(graph([a, b, relu], []), "g.json", 2, CHIP)


def test_processor_counts_and_meshes_that_would_not_finish_are_refused():
    # configurations are enumerated per op: divisors up to p per dimension, (dims + 1)^axes mesh assignments
    from gapstop.problems.intraop.strategies import MAX_MESH_AXES, MAX_NPROCS, parse_mesh

    assert parse_mesh(None, MAX_NPROCS) is None and parse_mesh("2x2x2x2", 16) == (2, 2, 2, 2)
    with pytest.raises(InputError, match=r"--nprocs: must be in \[1, 65536\], got 65537"):
        parse_mesh(None, MAX_NPROCS + 1)
    with pytest.raises(InputError, match=r"--mesh: at most 4 axes"):
        parse_mesh("x".join(["2"] * (MAX_MESH_AXES + 1)), 2 ** (MAX_MESH_AXES + 1))


def test_every_output_counts_in_usage():
    # a split computed whole holds all three parts; a dropout's mask, whose layout is not
    # tracked, is counted whole (the most a processor can hold), so a plan that fits, fits
    split = {"name": "split", "op": "Split", "kind": "other", "inputs": [T("x", [8, 96])],
             "outputs": [T("q", [8, 32]), T("k", [8, 32]), T("v", [8, 32])], "attrs": {}, "flops": 0, "bytes": 6144}
    drop = {"name": "drop", "op": "Dropout", "kind": "elementwise", "inputs": [T("q", [8, 32])],
            "outputs": [T("y", [8, 32]), T("mask", [8, 32])], "attrs": {}, "flops": 256, "bytes": 3 * 1024}
    node, _ = _tables(generate(graph([split, drop], [[0, 1]]), "g.json", 4, CHIP))
    assert node[0]["replicated"][1] == 3 * 1024
    assert node[1]["split d0 by 4"][1] == 1024 // 4 + 1024 and node[1]["replicated"][1] == 2 * 1024
