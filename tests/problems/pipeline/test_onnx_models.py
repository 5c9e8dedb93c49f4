"""The bundled real-architecture ONNX files: in sync with their builder, quick to import, and
their total FLOPs within 5 % of the architectures' published counts."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from gapstop.problems.chip import load_chip
from gapstop.problems.pipeline.io import problem_from_dict
from gapstop.problems.pipeline.plan import solve_contiguous
from tests.timing import cpu_s

pytest.importorskip("onnx")

ROOT = Path(__file__).resolve().parents[3]
BUNDLED = ROOT / "examples" / "onnx"


def _kaplan_gpt2_small(seq: int) -> float:
    """Kaplan et al. 2020 (arXiv:2001.08361), Table 1, forward FLOPs per token, every row summed
    (embed, attention QKV/mask/project, feedforward, de-embed), times the tokens."""
    n_layer, d, d_ff, vocab = 12, 768, 3072, 50257
    n_nonembed = 2 * d * n_layer * (2 * d + d_ff)
    return seq * (4 * d + 2 * n_nonembed + 2 * n_layer * seq * d + 2 * d * vocab)


#: model -> (published FLOPs at batch 1 (multiply-add = 2), source)
PUBLISHED = {
    # TinyBERT (Jiao et al. 2020, arXiv:1909.10351), Table 1: BERT-base 22.5B FLOPs at sequence 128
    "bert_base": 22.5e9,
    "gpt2": _kaplan_gpt2_small(128),
    # torchvision model table, ResNet50_Weights.IMAGENET1K_V1: 4.09 "GFLOPS", counted as multiply-adds
    "resnet50": 2 * 4.09e9,
}


def _builder() -> Any:
    spec = importlib.util.spec_from_file_location("onnx_models", ROOT / "benchmarks" / "onnx_models.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_bundled_files_are_what_the_builder_writes_and_hold_no_weights(tmp_path: Path) -> None:
    mod = _builder()
    for name, build in mod.MODELS.items():
        built = build(tmp_path, False)
        shipped = BUNDLED / f"{name}.onnx"
        assert built.read_bytes() == shipped.read_bytes(), name
        assert shipped.stat().st_size < 300 * 1024
        assert not (tmp_path / f"{name}.onnx.data").exists()


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_bundled_model_imports_quickly_with_the_published_flops(name: str) -> None:
    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx

    t0 = cpu_s()  # CPU seconds, which other processes' load does not stretch
    doc, warning = import_onnx(BUNDLED / f"{name}.onnx", load_chip("a100-sxm-80gb"), batch=1)
    problem = problem_from_dict(doc, name)
    elapsed = cpu_s() - t0
    assert elapsed < 10.0
    assert warning is None
    flops = doc["meta"]["total_flops"]
    assert abs(flops / PUBLISHED[name] - 1) < 0.05, (name, flops, PUBLISHED[name])
    # batch 2 doubles every activation-proportional figure
    doc2, _ = import_onnx(BUNDLED / f"{name}.onnx", load_chip("a100-sxm-80gb"), batch=2)
    assert doc2["meta"]["total_flops"] == pytest.approx(2 * flops, rel=1e-9)
    # the file's node order is the execution order: the contiguous plan needs no other
    plan = solve_contiguous(problem, 4, bounds=False)
    assert plan["lower_bound"] <= plan["objective"]
    mods = [m for s in plan["stages"] for m in s["modules"]]
    assert len(mods) == len(set(mods)) and mods


def test_bert_plan_names_whole_layers() -> None:
    from gapstop.problems.pipeline.importers.onnx_graph import import_onnx

    doc, _ = import_onnx(BUNDLED / "bert_base.onnx", load_chip("a100-sxm-80gb"), batch=1)
    plan = solve_contiguous(problem_from_dict(doc, "bert"), 4, bounds=False)
    layers = [m for s in plan["stages"] for m in s["modules"] if m.startswith("encoder.layer.")
              and m.count(".") == 2]
    assert len(layers) >= 8  # most layers sit whole in one stage
    assert sum(len(s["ops"]) for s in plan["stages"]) == len(doc["graph"]["nodes"]["work"])
