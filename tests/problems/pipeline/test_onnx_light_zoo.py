"""The ``onnx`` package's own test models, which the importer was not written against.

The light model-zoo files (``onnx/backend/test/data/light``): weights built in the graph by
``ConstantOfShape``, opset 9 ``Dropout`` masks nothing reads. Each file imports in under 10 s,
keeps no node that reads only parameters, has a contiguous plan, and its total FLOPs are within
5 % of the architecture's published count. The small backend test models import, or fail in one
line for a reason the README names. Skipped without the onnx package."""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gapstop.problems.chip import load_chip
from gapstop.problems.pipeline.io import problem_from_dict
from gapstop.problems.pipeline.plan import solve_contiguous

onnx = pytest.importorskip("onnx")

DATA = Path(onnx.__file__).parent / "backend" / "test" / "data"
LIGHT = DATA / "light"
A100 = load_chip("a100-sxm-80gb")
needs_light = pytest.mark.skipif(not LIGHT.is_dir(), reason="this onnx version ships no light models")


@dataclass(frozen=True)
class Published:
    """A published forward cost at batch 1, in multiply-adds (the importer counts one as 2 FLOPs)."""

    macs: float
    side: int  # the input's height and width the figure is for
    source: str


#: the published counts; every source below counts a multiply-add once
PUBLISHED = {
    "bvlc_alexnet": Published(724e6, 227, "Sze et al. 2017, Efficient Processing of Deep Neural Networks "
                                          "(Proc. IEEE 105(12)), Table III: 666M conv + 58.6M FC MACs at 227x227"),
    "densenet121": Published(2.834e9, 224, "torchvision, DenseNet121_Weights.IMAGENET1K_V1: 2.834 GFLOPS "
                                           "(multiply-adds)"),
    "inception_v1": Published(1.43e9, 224, "Sze et al. 2017, Table III: GoogLeNet v1 1.43G MACs (Szegedy et al. "
                                           "2015: about 1.5 billion multiply-adds)"),
    "inception_v2": Published(2.03e9, 224, "Hu et al. 2018, Squeeze-and-Excitation Networks, Table 2: "
                                           "BN-Inception 2.03 GFLOPs (multiply-adds)"),
    "resnet50": Published(4.09e9, 224, "torchvision, ResNet50_Weights.IMAGENET1K_V1: 4.09 GFLOPS (multiply-adds; "
                                       "stride 2 on the 3x3 conv, as in this file; He et al. 2016's 3.8e9 "
                                       "puts it on the 1x1)"),
    "squeezenet": Published(0.35e9, 224, "torchvision, SqueezeNet1_1_Weights.IMAGENET1K_V1: 0.35 GFLOPS "
                                         "(this file is SqueezeNet 1.1: a 64-channel 3x3 first conv)"),
    "vgg19": Published(19.6e9, 224, "He et al. 2016, Deep Residual Learning, Sec. 3.3: VGG-19 19.6 billion FLOPs "
                                    "(multiply-adds); torchvision VGG19_Weights: 19.63"),
}


def _conv_out(side: int, k: int, s: int, pad: int = 0) -> int:
    return (side + pad - k) // s + 1


def _shufflenet_macs() -> float:
    """ShuffleNet v1 as this file has it (no published count for it: groups 4, stage widths
    136/272/544 as the paper's 0.5x, but each unit's bottleneck as wide as the unit, and the
    first 1x1 conv grouped): conv1, the three stages' units (1x1 group conv, 3x3 depthwise,
    1x1 group conv; a stride-2 unit's branch is concatenated with the pooled input), the FC."""
    g = 4
    macs = 112 * 112 * 24 * 3 * 9
    side, cin = 56, 24
    for width, units in ((136, 4), (272, 8), (544, 4)):
        mid = width - cin
        half = side // 2
        macs += side * side * mid * cin // g + half * half * mid * 9 + half * half * mid * mid // g
        side, cin = half, width
        macs += (units - 1) * (2 * side * side * width * width // g + side * side * width * 9)
    return float(macs + 544 * 1000)


def _zfnet512_macs() -> float:
    """ZFNet-512 as this file has it (no published count for it: ZFNet's 7x7/2 and 5x5/2 convs,
    then three 3x3 convs of 512 channels and FCs of 4096 and 1024)."""
    c1 = _conv_out(224, 7, 2)
    c2 = _conv_out(_conv_out(c1, 3, 2), 5, 2)
    c3 = _conv_out(c2, 3, 2)
    convs = c1 * c1 * 96 * 3 * 49 + c2 * c2 * 256 * 96 * 25 + c3 * c3 * 512 * 9 * (256 + 512 + 512)
    return float(convs + 512 * 6 * 6 * 4096 + 4096 * 1024 + 1024 * 1000)


#: files with no published count: the conv and FC multiply-adds counted by hand from the layer list
HAND_COUNTED = {"shufflenet": _shufflenet_macs, "zfnet512": _zfnet512_macs}

FILES = sorted(p.stem.removeprefix("light_") for p in LIGHT.glob("light_*.onnx")) if LIGHT.is_dir() else []


def _at_side(tmp_path: Path, name: str, side: int) -> Path:
    """The file with its input's height and width set to ``side`` (the published figure's resolution)."""
    model = onnx.load(str(LIGHT / f"light_{name}.onnx"))
    for d in model.graph.input[0].type.tensor_type.shape.dim[2:]:
        d.dim_value = side
    out = tmp_path / f"{name}_{side}.onnx"
    onnx.save(model, str(out))
    return out


def _import(path: Path) -> dict[str, Any]:
    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx

    doc, warning = import_onnx(path, A100)
    assert warning is None, warning
    return doc


@needs_light
def test_the_nine_light_files_are_there() -> None:
    assert set(FILES) == set(PUBLISHED) | set(HAND_COUNTED)


@needs_light
@pytest.mark.parametrize("name", FILES)
def test_light_file_imports_quickly_with_weights_as_parameters(name: str) -> None:
    t0 = time.perf_counter()
    doc = _import(LIGHT / f"light_{name}.onnx")
    problem = problem_from_dict(doc, name)
    assert time.perf_counter() - t0 < 10.0
    ops = [op for op in doc["graph"]["nodes"]["ops"] if op["op"] != "Input"]
    # nothing that depends on no input is left as a node: every op reads an activation
    assert all(any(not t["param"] for t in op["inputs"]) for op in ops), name
    kinds = Counter(op["op"] for op in ops)
    assert kinds["ConstantOfShape"] == 0 and kinds["Constant"] == 0
    assert doc["meta"]["onnx_nodes"] - doc["meta"]["folded_nodes"] == len(ops)
    # every conv and FC reads its weight as a parameter of the weight's full size
    for op in ops:
        if op["kind"] in ("conv", "gemm"):
            w = op["inputs"][1]
            assert w["param"] and min(w["shape"]) >= 1
    assert sum(problem.size_param) > 0
    plan = solve_contiguous(problem, 4, bounds=False)
    assert plan["lower_bound"] <= plan["objective"]
    assert sum(len(s["ops"]) for s in plan["stages"]) == problem.n


def _conv_fc_macs(doc: dict[str, Any]) -> float:
    return sum(op["flops"] for op in doc["graph"]["nodes"]["ops"] if op["kind"] in ("conv", "gemm")) / 2


@needs_light
@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_light_file_flops_match_the_published_count(name: str, tmp_path: Path) -> None:
    pub = PUBLISHED[name]
    path = LIGHT / f"light_{name}.onnx"
    doc = _import(path)
    if doc["meta"]["input_shapes"][next(iter(doc["meta"]["input_shapes"]))][2] != pub.side:
        doc = _import(_at_side(tmp_path, name, pub.side))
    # every FLOP the importer counts (multiply-add = 2, plus norms, activations, pools)
    assert doc["meta"]["total_flops"] / (2 * pub.macs) - 1 == pytest.approx(0, abs=0.05), pub.source
    # the published figures count the convs and FCs alone
    assert _conv_fc_macs(doc) / pub.macs - 1 == pytest.approx(0, abs=0.05), pub.source


@needs_light
@pytest.mark.parametrize("name", sorted(HAND_COUNTED))
def test_unpublished_light_file_flops_match_a_hand_count(name: str) -> None:
    doc = _import(LIGHT / f"light_{name}.onnx")
    macs = HAND_COUNTED[name]()
    assert _conv_fc_macs(doc) == pytest.approx(macs, rel=1e-12)
    assert doc["meta"]["total_flops"] / (2 * macs) - 1 == pytest.approx(0, abs=0.05)


def test_backend_test_models_import_or_fail_in_one_line_for_a_named_reason() -> None:
    from gapstop.engine.errors import InputError
    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx

    paths = sorted(DATA.glob("*/*/model.onnx"))
    if not paths:
        pytest.skip("this onnx version ships no backend test models")
    imported = 0
    for path in paths:
        try:
            doc, _ = import_onnx(path, A100)
        except InputError as e:
            msg = str(e)
            assert "\n" not in msg, path
            # the two things the importer does not take: non-tensor values, unresolved symbolic dims
            assert "not a tensor" in msg or "is symbolic" in msg, msg
            continue
        problem_from_dict(doc, path.parent.name)
        imported += 1
    assert imported > len(paths) // 2


@needs_light
@pytest.mark.slow
@pytest.mark.parametrize("name", FILES)
def test_light_file_imports_and_solves_from_the_command_line(name: str, tmp_path: Path) -> None:
    import json

    from click.testing import CliRunner

    from gapstop.launch import main

    graph, result = tmp_path / "g.json.gz", tmp_path / "r.json"
    r = CliRunner().invoke(main, ["import", "onnx", str(LIGHT / f"light_{name}.onnx"), "--chip", "a100-sxm-80gb",
                                  "--out", str(graph)])
    assert r.exit_code == 0 and "warning" not in r.output, r.output
    r = CliRunner().invoke(main, ["pipeline", "solve", str(graph), "-k", "4", "--in-process", "--time-limit", "10",
                                  "--quiet", "--out", str(result)])
    assert r.exit_code == 0, r.output
    doc = json.loads(result.read_text())
    assert doc["lower_bound"] <= doc["objective"] * (1 + 1e-9)
