"""torch.export import: per-op FLOPs against torch.utils.flop_counter, and split_spec against
torch.distributed.pipelining. Skipped without torch."""

from __future__ import annotations

import operator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from gapstop.launch import main
from gapstop.problems.chip import load_chip
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.io import load_graph, problem_from_dict
from gapstop.problems.pipeline.plan import solve_contiguous, split_spec

torch = pytest.importorskip("torch")
nn = torch.nn
pytestmark = pytest.mark.torch


class Attention(nn.Module):
    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)

    def forward(self, x: Any) -> Any:
        b, s, d = x.shape
        q, k, v = (t.view(b, s, self.heads, d // self.heads).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        a = (q @ k.transpose(-2, -1) / (d // self.heads) ** 0.5).softmax(-1)
        return self.proj((a @ v).transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d: int = 16) -> None:
        super().__init__()
        self.ln1, self.attn, self.ln2 = nn.LayerNorm(d), Attention(d), nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x: Any) -> Any:
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Transformer(nn.Module):
    def __init__(self, vocab: int = 50, d: int = 16, layers: int = 3) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([Block(d) for _ in range(layers)])
        self.head = nn.Linear(d, vocab)

    def forward(self, ids: Any) -> Any:
        x = self.emb(ids)
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


def _cnn() -> Any:
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=2), nn.BatchNorm2d(16), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10))


def _models() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    torch.manual_seed(0)
    return {"transformer": (Transformer().eval(), (torch.randint(0, 50, (2, 8)),)),
            "cnn": (_cnn().eval(), (torch.randn(2, 3, 16, 16),))}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from gapstop.problems.pipeline.importers.torch_export import import_torch

    out = {}
    for name, (model, args) in _models().items():
        ep = torch.export.export(model, args)
        path = tmp_path_factory.mktemp(name) / f"{name}.pt2"
        torch.export.save(ep, str(path))
        doc, warning = import_torch(path, load_chip("a100-sxm-80gb"))
        out[name] = {"model": model, "args": args, "ep": torch.export.load(str(path)), "path": path,
                     "doc": doc, "warning": warning, "problem": problem_from_dict(doc, name)}
    return out


def _random_like(x: Any) -> Any:
    v = x.meta.get("val")
    if isinstance(v, torch.Tensor):
        return torch.randn(v.shape, dtype=v.dtype) if v.dtype.is_floating_point else torch.zeros(v.shape, dtype=v.dtype)
    return v


@pytest.mark.parametrize("name", ["transformer", "cnn"])
def test_per_op_flops_match_the_flop_counter(exported: dict[str, Any], name: str) -> None:
    from torch.utils.flop_counter import FlopCounterMode

    e = exported[name]
    assert e["warning"] is None
    ops = {op["name"]: op for op in e["doc"]["graph"]["nodes"]["ops"]}
    checked = 0
    for node in e["ep"].graph.nodes:
        if node.op != "call_function" or node.target is operator.getitem or node.name not in ops:
            continue
        args = torch.fx.node.map_arg(node.args, _random_like)
        kwargs = torch.fx.node.map_arg(node.kwargs, _random_like)
        with FlopCounterMode(display=False) as counter:
            node.target(*args, **kwargs)
        ref = counter.get_total_flops()
        ours = ops[node.name]["flops"]
        if ref or ops[node.name]["kind"] in ("gemm", "conv"):
            assert ours == pytest.approx(ref, rel=0.01), (node.name, ours, ref)
            checked += 1
    assert checked >= (10 if name == "transformer" else 3)
    # the whole program: the counter's total is the sum over the ops it counts
    with FlopCounterMode(display=False) as counter:
        e["ep"].module()(*e["args"])
    counted = sum(op["flops"] for op in ops.values() if op["kind"] in ("gemm", "conv"))
    assert counted == pytest.approx(counter.get_total_flops(), rel=0.01)


def test_params_tuples_views_and_modules(exported: dict[str, Any]) -> None:
    doc = exported["transformer"]["doc"]
    ops = {op["name"]: op for op in doc["graph"]["nodes"]["ops"]}
    names = doc["graph"]["nodes"]["names"]
    qkv = ops["linear"]
    assert qkv["module"] == "layers.0.attn.qkv" and qkv["module_stack"] == ["layers.0", "layers.0.attn",
                                                                           "layers.0.attn.qkv"]
    assert [i["name"] for i in qkv["inputs"] if i["param"]] == ["layers.0.attn.qkv.weight", "layers.0.attn.qkv.bias"]
    assert doc["graph"]["nodes"]["size_param"][names.index("linear")] == (48 * 16 + 48) * 4
    split = ops["split"]  # a tuple of three [2, 8, 16] float32 tensors, all read: one node, all three travel
    assert split["kind"] == "view" and split["bytes"] == 0 and split["flops"] == 0
    assert doc["graph"]["nodes"]["size_out"][names.index("split")] == 3 * 2 * 8 * 16 * 4
    emb = ops["embedding"]
    assert emb["kind"] == "embedding" and emb["bytes"] == 2 * 8 * 8 + 2 * (2 * 8 * 16 * 4)
    assert doc["graph"]["nodes"]["work"][names.index("split")] == 0.0
    assert ops["softmax"]["attrs"] == {"axis": -1} and ops["layer_norm"]["attrs"] == {"axis": -1}


def _stage_params(problem: Any, blocks: Any) -> list[set[str]]:
    out: list[set[str]] = [set() for _ in range(int(max(blocks)) + 1)]
    for i, op in enumerate(problem.ops):
        if op:
            out[int(blocks[i])].update(x["name"] for x in op["inputs"] if x["param"])
    return out


@pytest.mark.parametrize("name, k", [("transformer", 3), ("cnn", 2)])
def test_split_spec_builds_a_pipe_with_the_same_stages(exported: dict[str, Any], name: str, k: int) -> None:
    from torch.distributed.pipelining import SplitPoint, pipeline

    e = exported[name]
    problem = e["problem"]
    doc = solve_contiguous(problem, k, bounds=False)
    spec = doc["split_spec"]
    assert spec is not None, doc["split_spec_problems"]
    assert len(spec) == len(doc["stages"]) - 1
    pipe = pipeline(e["model"], mb_args=e["args"], split_spec={m: SplitPoint.BEGINNING for m in spec})
    assert pipe.num_stages == len(doc["stages"])
    ours = _stage_params(problem, doc["blocks"])
    for s in range(pipe.num_stages):
        theirs = {n for n, _ in pipe.get_stage_module(s).named_parameters()}
        assert ours[s] & {n for n, _ in e["model"].named_parameters()} == theirs


def test_a_boundary_inside_a_module_gives_no_split_point(exported: dict[str, Any]) -> None:
    problem = exported["transformer"]["problem"]
    names = list(problem.names)
    cut = names.index("softmax")  # inside layers.0.attn
    blocks = (np.arange(problem.n) >= cut).astype(np.int64)
    out = split_spec(problem, evaluate(problem, blocks))
    assert out["split_spec"] is None
    assert out["split_spec_problems"] == ["stage 1 begins at op 'softmax' inside module 'layers.0.attn'"]
    # only the labels matter here: stage 1 runs an op that comes before one of stage 0's
    blocks[cut - 1], blocks[cut] = 1, 0
    out = split_spec(problem, SimpleNamespace(blocks=blocks))
    assert out["split_spec"] is None and "not contiguous" in out["split_spec_problems"][0]


def test_cli_import_torch_and_bad_files(exported: dict[str, Any], tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    r = CliRunner().invoke(main, ["import", "torch", str(exported["cnn"]["path"]), "--chip", "tpu-v4",
                                  "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert load_graph(out).meta["source"] == "torch"
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip archive")
    r = CliRunner().invoke(main, ["import", "torch", str(bad), "--chip", "tpu-v4", "--out", str(out)])
    assert r.exit_code == 2 and r.output.startswith(f"error: {bad}: not a readable torch.export program")
    assert len(r.output.strip().splitlines()) == 1


def test_onnx_export_of_the_same_model_imports_with_the_same_gemm_flops(exported: dict[str, Any],
                                                                       tmp_path: Path) -> None:
    pytest.importorskip("onnx")
    import warnings

    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx

    e = exported["transformer"]
    path = tmp_path / "t.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(e["model"], e["args"], str(path), dynamo=False, input_names=["ids"],
                          dynamic_axes={"ids": {0: "batch", 1: "seq"}})
    doc, _ = import_onnx(path, load_chip("a100-sxm-80gb"), input_shapes=["ids=2,8"])

    def gemm_flops(d: dict[str, Any]) -> float:
        return sum(op["flops"] for op in d["graph"]["nodes"]["ops"] if op["kind"] == "gemm")

    assert gemm_flops(doc) == gemm_flops(e["doc"]) > 0


def test_a_tuple_output_is_charged_for_the_elements_read(tmp_path: Path) -> None:
    from gapstop.problems.pipeline.importers.torch_export import import_torch

    class MaxValues(nn.Module):
        def forward(self, x: Any) -> Any:
            values, _ = x.max(dim=-1)  # (float32 values, int64 indices); only the values are read
            return values * 2

    path = tmp_path / "m.pt2"
    torch.export.save(torch.export.export(MaxValues(), (torch.randn(2, 5, 3),)), str(path))
    doc, _ = import_torch(path, load_chip("a100-sxm-80gb"))
    names = doc["graph"]["nodes"]["names"]
    ops = {op["name"]: op for op in doc["graph"]["nodes"]["ops"]}
    mx = next(n for n in names if ops[n]["op"].startswith("aten.max"))
    assert [o["dtype"] for o in ops[mx]["outputs"]] == ["float32", "int64"]
    assert doc["graph"]["nodes"]["size_out"][names.index(mx)] == 2 * 5 * 4
    assert ops[mx]["bytes"] == 2 * 5 * 3 * 4 + 2 * 5 * 4 + 2 * 5 * 8
    mul = next(n for n in names if ops[n]["op"].startswith("aten.mul"))
    assert [names.index(mx), names.index(mul)] in doc["graph"]["edges"]


def test_an_unreadable_program_is_one_line_on_stderr(tmp_path: Path) -> None:
    # torch.export.load logs its own traceback (as a warning) before it fails: none of it may show
    import os
    import subprocess
    import sys

    bad = tmp_path / "bad.pt2"
    bad.write_text("not a zip archive\n")
    root = Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, str(root / "launch.py"), "import", "torch", str(bad), "--chip", "tpu-v4",
                        "--out", str(tmp_path / "g.json")], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and r.stderr.startswith(f"error: {bad}: not a readable torch.export program")
