"""ONNX import: FLOPs, bytes, params and edges against hand-computed figures; one-line errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from gapstop.engine.errors import InputError
from gapstop.launch import main
from gapstop.problems.chip import load_chip
from gapstop.problems.pipeline.importers.roofline import op_work_us
from gapstop.problems.pipeline.io import load_graph, problem_from_dict, problem_to_dict

onnx = pytest.importorskip("onnx")
from onnx import TensorProto as T  # noqa: E402
from onnx import helper as h  # noqa: E402

A100 = load_chip("a100-sxm-80gb")


def _init(name: str, shape: list[int], dtype: int = T.FLOAT) -> Any:
    n = 1
    for d in shape:
        n *= d
    if dtype == T.INT64:
        return h.make_tensor(name, dtype, shape, [1] * n)
    return h.make_tensor(name, dtype, shape, [0.0] * n)


def _save(tmp_path: Path, name: str, nodes: list[Any], inputs: list[Any], outputs: list[Any],
          inits: list[Any], value_info: list[Any] | None = None, extra_opsets: list[Any] | None = None,
          opset: int = 17) -> Path:
    g = h.make_graph(nodes, name, inputs, outputs, inits, value_info=value_info or [])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", opset)] + (extra_opsets or []))
    p = tmp_path / f"{name}.onnx"
    onnx.save(m, str(p))
    return p


def _import(path: Path, **kw: Any) -> tuple[dict[str, Any], str | None]:
    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx
    return import_onnx(path, A100, **kw)


def _by_name(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {op["name"]: op for op in doc["graph"]["nodes"]["ops"]}


@pytest.fixture()
def mlp(tmp_path: Path) -> Path:
    nodes = [h.make_node("MatMul", ["x", "w1"], ["h"], name="/fc1/MatMul"),
             h.make_node("Add", ["h", "b1"], ["h2"], name="/fc1/Add"),
             h.make_node("Relu", ["h2"], ["h3"], name="/act/Relu"),
             h.make_node("Gemm", ["h3", "w2", "b2"], ["y"], name="/fc2/Gemm", transB=1)]
    return _save(tmp_path, "mlp", nodes, [h.make_tensor_value_info("x", T.FLOAT, ["batch", 16])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])],
                 [_init("w1", [16, 32]), _init("b1", [32]), _init("w2", [4, 32]), _init("b2", [4])])


def test_mlp_flops_bytes_params_edges_and_roofline(mlp: Path) -> None:
    doc, warning = _import(mlp, batch=8)
    assert warning is None
    nodes = doc["graph"]["nodes"]
    ops = _by_name(doc)
    # x[8,16] @ w1[16,32]: 2*8*32*16; bytes x 512 + w1 2048 + out 1024
    assert (ops["/fc1/MatMul"]["flops"], ops["/fc1/MatMul"]["bytes"]) == (8192, 3584)
    assert (ops["/fc1/Add"]["flops"], ops["/fc1/Add"]["bytes"]) == (256, 1024 + 128 + 1024)
    assert (ops["/act/Relu"]["flops"], ops["/act/Relu"]["bytes"]) == (256, 2048)
    # Gemm with transB: out [8,4], K = 32 (the fused bias is not counted); bytes 1024 + 512 + 16 + 128
    assert (ops["/fc2/Gemm"]["flops"], ops["/fc2/Gemm"]["bytes"]) == (2 * 8 * 4 * 32, 1680)
    assert ops["/fc2/Gemm"]["attrs"] == {"transA": 0, "transB": 1}
    assert ops["/fc1/MatMul"]["kind"] == "gemm" and ops["/fc1/MatMul"]["module"] == "fc1"
    assert ops["/fc1/MatMul"]["inputs"][1] == {"name": "w1", "shape": [16, 32], "dtype": "float32", "param": True}
    assert nodes["names"] == ["x", "/fc1/MatMul", "/fc1/Add", "/act/Relu", "/fc2/Gemm"]
    assert nodes["size_param"] == [0, 2048, 128, 0, 512 + 16]
    assert nodes["size_out"] == [512, 1024, 1024, 1024, 128]
    assert doc["graph"]["edges"] == [[0, 1], [1, 2], [2, 3], [3, 4]]
    assert nodes["work"][0] == 0.0
    # memory-bound on an A100: 3584 B / 2.039e12 B/s = 1.7577 ns; compute 8192 / 19.5e12 = 0.42 ns
    assert nodes["work"][1] == pytest.approx(3584 / 2.039e12 * 1e6, rel=1e-12)
    assert doc["bandwidth"] == 3e11 / 1e6 and doc["memory"] == 80 * 10**9
    assert doc["meta"]["total_flops"] == 8192 + 256 + 256 + 2048


def test_compute_bound_op_uses_the_dtype_peak() -> None:
    assert op_work_us(A100, "gemm", 2e9, 1000, "float16") == pytest.approx(2e9 / 312e12 * 1e6)
    assert op_work_us(A100, "gemm", 2e9, 1000, "float32") == pytest.approx(2e9 / 19.5e12 * 1e6)
    assert op_work_us(A100, "view", 2e9, 10**9, "float32") == 0.0


def test_conv_block(tmp_path: Path) -> None:
    nodes = [h.make_node("Conv", ["x", "w", "b"], ["c"], name="/conv/Conv", pads=[1, 1, 1, 1]),
             h.make_node("BatchNormalization", ["c", "s", "bb", "m", "v"], ["n"], name="/bn/BN"),
             h.make_node("Relu", ["n"], ["r"], name="/relu/Relu"),
             h.make_node("MaxPool", ["r"], ["p"], name="/pool/MaxPool", kernel_shape=[2, 2], strides=[2, 2]),
             h.make_node("GlobalAveragePool", ["p"], ["g"], name="/gap/GlobalAveragePool"),
             h.make_node("Flatten", ["g"], ["y"], name="/flat/Flatten")]
    p = _save(tmp_path, "convblock", nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 8, 8])],
              [h.make_tensor_value_info("y", T.FLOAT, [1, 4])],
              [_init("w", [4, 3, 3, 3]), _init("b", [4])] + [_init(n, [4]) for n in ("s", "bb", "m", "v")])
    doc, _ = _import(p)
    ops = _by_name(doc)
    # out [1,4,8,8] = 256 elements, C_in 3, kernel 9: 2*256*27 (the fused bias is not counted)
    assert ops["/conv/Conv"]["flops"] == 13824
    assert ops["/conv/Conv"]["bytes"] == 768 + 432 + 16 + 1024
    assert ops["/conv/Conv"]["attrs"] == {"pads": [1, 1, 1, 1], "kernel_shape": [3, 3], "strides": [1, 1],
                                          "dilations": [1, 1], "group": 1}
    assert (ops["/bn/BN"]["flops"], ops["/bn/BN"]["bytes"], ops["/bn/BN"]["kind"]) == (512, 1024 + 64 + 1024, "norm")
    assert ops["/pool/MaxPool"]["flops"] == 64 * 4 and ops["/pool/MaxPool"]["bytes"] == 1024 + 256
    assert ops["/gap/GlobalAveragePool"]["flops"] == 64
    flat = ops["/flat/Flatten"]
    assert (flat["kind"], flat["flops"], flat["bytes"]) == ("view", 0, 0)
    assert doc["graph"]["nodes"]["work"][-1] == 0.0
    assert doc["graph"]["nodes"]["size_param"][1:3] == [432 + 16, 64]


def test_attention_block(tmp_path: Path) -> None:
    # x [2,4,8], 2 heads of 4: q = x Wq, k = x Wk, v = x; scores = q k^T * s; softmax; probs v
    nodes = [h.make_node("MatMul", ["x", "wq"], ["q"], name="/attn/q/MatMul"),
             h.make_node("MatMul", ["x", "wk"], ["k"], name="/attn/k/MatMul"),
             h.make_node("Reshape", ["q", "shp"], ["q4"], name="/attn/q/Reshape"),
             h.make_node("Reshape", ["k", "shp"], ["k4"], name="/attn/k/Reshape"),
             h.make_node("Reshape", ["x", "shp"], ["v4"], name="/attn/v/Reshape"),
             h.make_node("Transpose", ["q4"], ["qt"], name="/attn/q/Transpose", perm=[0, 2, 1, 3]),
             h.make_node("Transpose", ["k4"], ["kt"], name="/attn/k/Transpose", perm=[0, 2, 3, 1]),
             h.make_node("Transpose", ["v4"], ["vt"], name="/attn/v/Transpose", perm=[0, 2, 1, 3]),
             h.make_node("MatMul", ["qt", "kt"], ["s"], name="/attn/scores/MatMul"),
             h.make_node("Mul", ["s", "scale"], ["s2"], name="/attn/scores/Mul"),
             h.make_node("Softmax", ["s2"], ["pr"], name="/attn/Softmax", axis=-1),
             h.make_node("MatMul", ["pr", "vt"], ["y"], name="/attn/context/MatMul")]
    p = _save(tmp_path, "attn", nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 4, 8])],
              [h.make_tensor_value_info("y", T.FLOAT, [2, 2, 4, 4])],
              [_init("wq", [8, 8]), _init("wk", [8, 8]), h.make_tensor("shp", T.INT64, [4], [2, 4, 2, 4]),
               h.make_tensor("scale", T.FLOAT, [], [0.5])])
    doc, _ = _import(p)
    ops = _by_name(doc)
    assert (ops["/attn/q/MatMul"]["flops"], ops["/attn/q/MatMul"]["bytes"]) == (2 * 2 * 4 * 8 * 8, 256 * 3)
    r = ops["/attn/q/Reshape"]
    assert (r["kind"], r["flops"], r["bytes"]) == ("view", 0, 0)
    t = ops["/attn/k/Transpose"]
    assert (t["kind"], t["flops"], t["bytes"], t["outputs"][0]["shape"]) == ("other", 0, 512, [2, 2, 4, 4])
    # [2,2,4,4] @ [2,2,4,4]: 64 outputs, K = 4
    assert ops["/attn/scores/MatMul"]["flops"] == 2 * 64 * 4
    assert (ops["/attn/scores/Mul"]["flops"], ops["/attn/scores/Mul"]["bytes"]) == (64, 256 + 4 + 256)
    sm = ops["/attn/Softmax"]
    assert (sm["kind"], sm["flops"], sm["bytes"], sm["attrs"]) == ("softmax", 5 * 64, 512, {"axis": -1})
    assert ops["/attn/context/MatMul"]["flops"] == 2 * 64 * 4
    names = doc["graph"]["nodes"]["names"]
    x, v_reshape = names.index("x"), names.index("/attn/v/Reshape")
    assert [x, v_reshape] in doc["graph"]["edges"]
    # the shape constant is a parameter of each Reshape that reads it
    sp = doc["graph"]["nodes"]["size_param"]
    assert [sp[names.index(f"/attn/{n}/Reshape")] for n in "qkv"] == [32, 32, 32]


def test_symbolic_dims_resolve_from_batch_or_input_shape(tmp_path: Path, mlp: Path) -> None:
    a, _ = _import(mlp, batch=8)
    b, _ = _import(mlp, input_shapes=["x=8,16"])
    assert a["graph"]["nodes"]["ops"] == b["graph"]["nodes"]["ops"]
    c, _ = _import(mlp, batch=3)
    assert _by_name(c)["/fc1/MatMul"]["flops"] == 2 * 3 * 32 * 16
    with pytest.raises(InputError, match=r"input 'x': dim 0 \('batch'\) is symbolic; give --batch N"):
        _import(mlp)
    with pytest.raises(InputError, match=r"--input-shape: the model has no input 'z'"):
        _import(mlp, input_shapes=["z=1,2"])
    with pytest.raises(InputError, match=r"--input-shape: input 'x': dim 1 is fixed at 16 in the model, got 5"):
        _import(mlp, input_shapes=["x=8,5"])
    seq = _save(tmp_path, "seq", [h.make_node("Relu", ["x"], ["y"], name="r")],
                [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq"])],
                [h.make_tensor_value_info("y", T.FLOAT, ["batch", "seq"])], [])
    with pytest.raises(InputError, match=r"input 'x': dim 1 \('seq'\) is symbolic; give --input-shape x="):
        _import(seq, batch=2)
    with pytest.raises(InputError, match=r"^--batch: no input left with a symbolic leading dim .*x \[8, 16\]"):
        _import(mlp, batch=2, input_shapes=["x=8,16"])


def test_unknown_op_is_memory_bound_and_warned_once(tmp_path: Path) -> None:
    nodes = [h.make_node("Relu", ["x"], ["a"], name="r1"),
             h.make_node("Frobnicate", ["a"], ["b"], name="f1", domain="custom.ops"),
             h.make_node("Frobnicate", ["b"], ["c"], name="f2", domain="custom.ops"),
             h.make_node("Twiddle", ["c"], ["y"], name="t1", domain="custom.ops")]
    vi = [h.make_tensor_value_info(n, T.FLOAT, [2, 8]) for n in ("b", "c")]
    p = _save(tmp_path, "unk", nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 8])],
              [h.make_tensor_value_info("y", T.FLOAT, [2, 8])], [], vi, [h.make_opsetid("custom.ops", 1)])
    doc, warning = _import(p)
    ops = _by_name(doc)
    assert (ops["f1"]["kind"], ops["f1"]["flops"], ops["f1"]["bytes"]) == ("unknown", 0, 128)
    assert doc["graph"]["nodes"]["work"][2] == pytest.approx(128 / 2.039e12 * 1e6, rel=1e-12)
    assert warning is not None and "\n" not in warning
    assert "3 ops of unknown type" in warning and "Frobnicate x2, Twiddle x1" in warning
    assert doc["meta"]["unknown_ops"] == {"Frobnicate": 2, "Twiddle": 1}


def test_multi_output_node_sums_its_used_outputs(tmp_path: Path) -> None:
    nodes = [h.make_node("Split", ["x", "parts"], ["a", "b", "c"], name="split", axis=1),
             h.make_node("Relu", ["a"], ["ra"], name="ra"), h.make_node("Relu", ["c"], ["rc"], name="rc"),
             h.make_node("Add", ["ra", "rc"], ["y"], name="add")]
    p = _save(tmp_path, "split", nodes, [h.make_tensor_value_info("x", T.FLOAT, [1, 12])],
              [h.make_tensor_value_info("y", T.FLOAT, [1, 4])], [h.make_tensor("parts", T.INT64, [3], [4, 4, 4])])
    doc, _ = _import(p)
    names = doc["graph"]["nodes"]["names"]
    s = names.index("split")
    assert doc["graph"]["nodes"]["size_out"][s] == 32  # a and c are read, b is not
    assert _by_name(doc)["split"]["bytes"] == 48 + 24 + 48
    assert [s, names.index("ra")] in doc["graph"]["edges"] and [s, names.index("rc")] in doc["graph"]["edges"]


def _dropout_net(tmp_path: Path, read_mask: bool) -> Path:
    # opset 9's Dropout has a mask output whose shape ONNX shape inference leaves unknown
    nodes = [h.make_node("Relu", ["x"], ["a"], name="relu"),
             h.make_node("Dropout", ["a"], ["b", "mask"], name="drop", ratio=0.5),
             h.make_node("Relu", ["b"], ["y"], name="out")]
    outputs = [h.make_tensor_value_info("y", T.FLOAT, [2, 8])]
    if read_mask:
        nodes.append(h.make_node("Not", ["mask"], ["keep"], name="keep"))
        outputs.append(h.make_tensor_value_info("keep", T.BOOL, None))
    return _save(tmp_path, "drop", nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 8])], outputs, [], opset=9)


def test_an_output_nothing_reads_needs_no_shape(tmp_path: Path) -> None:
    doc, _ = _import(_dropout_net(tmp_path, read_mask=False))
    ops = _by_name(doc)
    assert [t["name"] for t in ops["drop"]["outputs"]] == ["b"]
    names = doc["graph"]["nodes"]["names"]
    assert doc["graph"]["nodes"]["size_out"][names.index("drop")] == 2 * 8 * 4
    assert [names.index("drop"), names.index("out")] in doc["graph"]["edges"]
    # a mask that something reads must have a shape
    with pytest.raises(InputError, match="tensor 'mask' .*shape unknown"):
        _import(_dropout_net(tmp_path, read_mask=True))


def test_a_sequence_value_is_one_line_saying_it_is_not_a_tensor(tmp_path: Path) -> None:
    nodes = [h.make_node("SequenceConstruct", ["x", "x"], ["seq"], name="pack"),
             h.make_node("SequenceAt", ["seq", "i"], ["y"], name="at")]
    p = _save(tmp_path, "seq", nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
              [h.make_tensor_value_info("y", T.FLOAT, None)], [h.make_tensor("i", T.INT64, [], [1])])
    with pytest.raises(InputError, match=r"'seq' \(output of node 'pack'\) is a sequence, not a tensor"):
        _import(p)


def test_what_does_not_depend_on_the_inputs_folds_into_parameters(tmp_path: Path) -> None:
    # weights built in the graph, as exporters that drop initializer data write them: a
    # ConstantOfShape, then constant arithmetic and a Transpose; a bias from an Unsqueeze of a
    # Constant, and a Shape of that weight; only ops reading x, and the random draw, stay nodes
    fill = h.make_tensor("fill", T.FLOAT, [1], [0.5])
    nodes = [h.make_node("ConstantOfShape", ["wshape"], ["w0"], name="cos", value=fill),
             h.make_node("Constant", [], ["two"], name="two", value=h.make_tensor("v", T.FLOAT, [], [2.0])),
             h.make_node("Mul", ["w0", "two"], ["w1"], name="scale"),
             h.make_node("Transpose", ["w1"], ["w"], name="wT", perm=[1, 0]),
             h.make_node("Shape", ["w"], ["wdims"], name="wdims"),
             h.make_node("Gather", ["wdims", "one"], ["n"], name="n"),
             h.make_node("ConstantOfShape", ["n"], ["b0"], name="bias_cos", value=fill),
             h.make_node("Unsqueeze", ["b0", "ax0"], ["b"], name="bias_unsq"),
             h.make_node("MatMul", ["x", "w"], ["xw"], name="mm"),
             h.make_node("Add", ["xw", "b"], ["z"], name="add"),
             h.make_node("RandomNormal", [], ["noise"], name="noise", shape=[4, 16], dtype=T.FLOAT),
             h.make_node("Add", ["z", "noise"], ["y"], name="jitter")]
    inits = [h.make_tensor("wshape", T.INT64, [2], [16, 8]), h.make_tensor("one", T.INT64, [1], [1]),
             h.make_tensor("ax0", T.INT64, [1], [0])]
    p = _save(tmp_path, "built", nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 8])],
              [h.make_tensor_value_info("y", T.FLOAT, [4, 16])], inits)
    doc, _ = _import(p)
    nodes_out = doc["graph"]["nodes"]
    assert nodes_out["names"] == ["x", "mm", "add", "noise", "jitter"]
    assert doc["meta"]["onnx_nodes"] == 12 and doc["meta"]["folded_nodes"] == 8
    ops = _by_name(doc)
    assert [(t["name"], t["shape"], t["param"]) for t in ops["mm"]["inputs"]] == [("x", [4, 8], False),
                                                                                 ("w", [8, 16], True)]
    assert [(t["name"], t["shape"], t["param"]) for t in ops["add"]["inputs"]] == [("xw", [4, 16], False),
                                                                                  ("b", [1, 16], True)]
    # charged as initializers are: the folded tensor's bytes, to the op that reads it
    assert nodes_out["size_param"] == [0, 8 * 16 * 4, 16 * 4, 0, 0]
    assert ops["mm"]["bytes"] == (4 * 8 + 8 * 16 + 4 * 16) * 4
    # nothing computed on constants is counted: MatMul, the bias Add and the jitter Add
    assert doc["meta"]["total_flops"] == 2 * 4 * 16 * 8 + 4 * 16 + 4 * 16
    assert sorted(map(tuple, doc["graph"]["edges"])) == [(0, 1), (1, 2), (2, 4), (3, 4)]


def test_a_folded_lookup_in_a_constant_table_still_holds_the_table(tmp_path: Path) -> None:
    # position embeddings with the positions baked in: the rows fold, the table stays held
    nodes = [h.make_node("Gather", ["table", "pos"], ["rows"], name="lookup", axis=0),
             h.make_node("Add", ["x", "rows"], ["y"], name="add")]
    p = _save(tmp_path, "pos", nodes, [h.make_tensor_value_info("x", T.FLOAT, [4, 16])],
              [h.make_tensor_value_info("y", T.FLOAT, [4, 16])],
              [_init("table", [100, 16]), h.make_tensor("pos", T.INT64, [4], [0, 1, 2, 3])])
    doc, _ = _import(p)
    assert doc["graph"]["nodes"]["names"] == ["x", "add"]
    ops = _by_name(doc)
    assert [(t["name"], t["shape"], t["param"]) for t in ops["add"]["inputs"]] == [("x", [4, 16], False),
                                                                                  ("rows", [4, 16], True)]
    assert doc["graph"]["nodes"]["size_param"][1] == 100 * 16 * 4 + 4 * 8  # the table and the positions
    assert ops["add"]["bytes"] == 3 * 4 * 16 * 4  # what the Add reads and writes: the rows


def test_ops_survive_the_graph_file_round_trip(mlp: Path, tmp_path: Path) -> None:
    doc, _ = _import(mlp, batch=2)
    prob = problem_from_dict(json.loads(json.dumps(doc)), "g.json")
    assert problem_to_dict(prob)["graph"]["nodes"]["ops"] == doc["graph"]["nodes"]["ops"]
    bad = json.loads(json.dumps(doc))
    bad["graph"]["nodes"]["ops"][2]["flops"] = -1
    with pytest.raises(InputError, match=r"^g.json: graph.nodes.ops\[2\].flops: expected a finite number >= 0"):
        problem_from_dict(bad, "g.json")
    bad["graph"]["nodes"]["ops"] = bad["graph"]["nodes"]["ops"][:3]
    with pytest.raises(InputError, match=r"graph.nodes.ops: expected a list of 5 entries"):
        problem_from_dict(bad, "g.json")


# ------------------------------------------------------------------------- command line
def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def test_cli_import_writes_a_loadable_graph(mlp: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.json.gz"
    r = _cli("import", "onnx", str(mlp), "--chip", "h100-sxm", "--batch", "4", "--out", str(out))
    assert r.exit_code == 0, r.output
    prob = load_graph(out)
    assert prob.n == 5 and prob.ops is not None and prob.ops[1]["flops"] == 2 * 4 * 32 * 16
    assert prob.bandwidth == 4.5e5 and prob.meta["chip"] == "h100-sxm"


def _one_line_error(r: Any) -> str:
    assert r.exit_code == 2, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.output
    return lines[0]


def test_cli_malformed_inputs_fail_in_one_line(mlp: Path, tmp_path: Path) -> None:
    out = str(tmp_path / "g.json")
    text = tmp_path / "notes.onnx"
    text.write_text("this is not a model\n" * 20)
    assert "not" in _one_line_error(_cli("import", "onnx", str(text), "--chip", "tpu-v4", "--out", out))
    truncated = tmp_path / "cut.onnx"
    truncated.write_bytes(mlp.read_bytes()[: len(mlp.read_bytes()) // 2])
    msg = _one_line_error(_cli("import", "onnx", str(truncated), "--chip", "tpu-v4", "--out", out))
    assert str(truncated) in msg
    msg = _one_line_error(_cli("import", "onnx", str(mlp), "--chip", "tpu-v4", "--out", out))
    assert "input 'x': dim 0 ('batch') is symbolic" in msg
    msg = _one_line_error(_cli("import", "onnx", str(mlp), "--chip", "no-such-chip", "--batch", "2", "--out", out))
    assert "no-such-chip: chip profile: no such file and not a shipped profile" in msg
    for value, problem in (("-1.0e12", "must be > 0"), ("nan", "not finite")):
        chip = tmp_path / "bad.toml"
        chip.write_text(f'name = "bad"\nmemory_bandwidth = {value}\nlink_bandwidth = 1e11\nmemory = 10\n'
                        '[peak_flops]\nfloat32 = 1e13\n')
        msg = _one_line_error(_cli("import", "onnx", str(mlp), "--chip", str(chip), "--batch", "2", "--out", out))
        assert f"{chip}: memory_bandwidth: {problem}" in msg
    assert not Path(out).exists()


def test_missing_onnx_package_is_one_line_saying_how_to_install(mlp: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "onnx", None)  # import onnx now raises ImportError
    msg = _one_line_error(_cli("import", "onnx", str(mlp), "--chip", "tpu-v4", "--batch", "2",
                               "--out", str(tmp_path / "g.json")))
    assert "pip install 'gapstop[onnx]'" in msg


def test_runtime_shape_computations_fold_once_the_inputs_are_fixed(tmp_path: Path) -> None:
    # what exporters write for dynamic axes: the head split's target shape is computed at run time
    # (Shape -> Gather -> Div -> Unsqueeze -> Concat -> Reshape), which ONNX's data propagation
    # alone does not follow through Div
    nodes = [h.make_node("Shape", ["x"], ["shp"], name="/attn/Shape"),
             h.make_node("Gather", ["shp", "i0"], ["b"], name="/attn/Gather", axis=0),
             h.make_node("Gather", ["shp", "i1"], ["s"], name="/attn/Gather_1", axis=0),
             h.make_node("Gather", ["shp", "i2"], ["d"], name="/attn/Gather_2", axis=0),
             h.make_node("Div", ["d", "heads"], ["dh"], name="/attn/Div"),
             h.make_node("Unsqueeze", ["b", "ax0"], ["ub"], name="/attn/Unsqueeze"),
             h.make_node("Unsqueeze", ["s", "ax0"], ["us"], name="/attn/Unsqueeze_1"),
             h.make_node("Unsqueeze", ["dh", "ax0"], ["ud"], name="/attn/Unsqueeze_2"),
             h.make_node("Concat", ["ub", "us", "hh", "ud"], ["target"], name="/attn/Concat", axis=0),
             h.make_node("Reshape", ["x", "target"], ["x4"], name="/attn/Reshape"),
             h.make_node("Transpose", ["x4"], ["xt"], name="/attn/Transpose", perm=[0, 2, 1, 3]),
             h.make_node("Transpose", ["x4"], ["xk"], name="/attn/Transpose_1", perm=[0, 2, 3, 1]),
             h.make_node("MatMul", ["xt", "xk"], ["y"], name="/attn/MatMul")]
    inits = [h.make_tensor(n, T.INT64, [], [v]) for n, v in (("i0", 0), ("i1", 1), ("i2", 2), ("heads", 2))]
    inits += [h.make_tensor("ax0", T.INT64, [1], [0]), h.make_tensor("hh", T.INT64, [1], [2])]
    p = _save(tmp_path, "dyn", nodes, [h.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 8])],
              [h.make_tensor_value_info("y", T.FLOAT, ["batch", 2, "seq", "seq"])], inits)
    doc, _ = _import(p, input_shapes=["x=3,5,8"])
    ops = _by_name(doc)
    assert ops["/attn/Reshape"]["outputs"][0]["shape"] == [3, 5, 2, 4]
    # [3,2,5,4] @ [3,2,4,5]: 150 outputs, K = 4
    assert ops["/attn/MatMul"]["outputs"][0]["shape"] == [3, 2, 5, 5] and ops["/attn/MatMul"]["flops"] == 2 * 150 * 4
    # the target is fixed once the input shape is: the Reshape reads it as a parameter, and the
    # nine nodes that computed it are no graph nodes
    names = doc["graph"]["nodes"]["names"]
    assert names == ["x", "/attn/Reshape", "/attn/Transpose", "/attn/Transpose_1", "/attn/MatMul"]
    assert [i["param"] for i in ops["/attn/Reshape"]["inputs"]] == [False, True]
    assert doc["meta"]["onnx_nodes"] == 13 and doc["meta"]["folded_nodes"] == 9


def test_reduction_axes_given_as_an_input_become_an_attribute(tmp_path: Path) -> None:
    nodes = [h.make_node("ReduceSum", ["x", "axes"], ["y"], name="sum", keepdims=0)]
    p = _save(tmp_path, "red", nodes, [h.make_tensor_value_info("x", T.FLOAT, [2, 3, 4])],
              [h.make_tensor_value_info("y", T.FLOAT, [2, 4])], [h.make_tensor("axes", T.INT64, [1], [1])])
    op = _by_name(_import(p)[0])["sum"]
    assert (op["kind"], op["flops"], op["attrs"]) == ("reduction", 24, {"keepdims": 0, "axes": [1]})


def test_cli_unwritable_out_is_one_line(mlp: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    out = blocker / "g.json"  # its "directory" is a file
    msg = _one_line_error(_cli("import", "onnx", str(mlp), "--chip", "tpu-v4", "--batch", "2", "--out", str(out)))
    assert msg.startswith(f"error: {out}: cannot write")


def test_a_negative_inferred_dimension_is_one_line(tmp_path: Path) -> None:
    # a 5x5 kernel on a 2x2 image: shape inference gives the output spatial dims -2, and the
    # FLOP count of two negative dims would come out positive
    p = _save(tmp_path, "conv", [h.make_node("Conv", ["x", "w"], ["y"], name="conv")],
              [h.make_tensor_value_info("x", T.FLOAT, [1, 3, 2, 2])], [h.make_tensor_value_info("y", T.FLOAT, None)],
              [_init("w", [4, 3, 5, 5])])
    msg = _one_line_error(_cli("import", "onnx", str(p), "--chip", "a100-sxm-80gb", "--out", str(tmp_path / "g.json")))
    assert "tensor 'y'" in msg and "negative" in msg
    assert not (tmp_path / "g.json").exists()


def test_a_tensor_written_by_two_nodes_is_one_line(tmp_path: Path) -> None:
    # ONNX graphs are single-assignment: a second writer of 'y' would silently take the first's consumers
    nodes = [h.make_node("Relu", ["x"], ["y"], name="a"), h.make_node("Sigmoid", ["x"], ["y"], name="b"),
             h.make_node("Neg", ["y"], ["z"], name="c")]
    p = _save(tmp_path, "twice", nodes,
              [h.make_tensor_value_info("x", T.FLOAT, [2, 3])], [h.make_tensor_value_info("z", T.FLOAT, None)], [])
    msg = _one_line_error(_cli("import", "onnx", str(p), "--chip", "a100-sxm-80gb", "--out", str(tmp_path / "g.json")))
    assert "tensor 'y'" in msg and "'b'" in msg
