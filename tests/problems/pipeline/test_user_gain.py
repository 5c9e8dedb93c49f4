"""benchmarks/user_gain.py: the baselines' partition rules against independent brute force and
the runtimes' own published expectations, and their plans on an imported graph against the
module tree and the naive reference evaluator."""

from __future__ import annotations

import importlib.util
import itertools
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.problems.pipeline import reference as ref

ROOT = Path(__file__).resolve().parents[3]


def _bench() -> Any:
    spec = importlib.util.spec_from_file_location("user_gain", ROOT / "benchmarks" / "user_gain.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


ug = _bench()


def _titan_by_counting(n_layers: int, k: int, iw: int = 1, ow: int = 1) -> list[int] | None:
    """torchtitan's rule written out another way: a row of iw input units, the layers and ow output
    units, cut into k runs whose lengths differ by at most one, the longer runs first; stage s holds
    the layers of run s. None where a run would hold no layer-sized unit or a weight would not fit."""
    eff = n_layers + iw + ow
    if k > eff:
        return None
    sizes = [eff // k + (1 if s < eff % k else 0) for s in range(k)]
    if min(sizes) < max(iw, ow) or min(sizes) == 0:
        return None
    units = ["in"] * iw + list(range(n_layers)) + ["out"] * ow
    runs, at = [], 0
    for size in sizes:
        runs.append(units[at:at + size])
        at += size
    # item boundaries: item 0 the embeddings, items 1..L the layers, L+1 the outputs
    parts = [0]
    for run in runs[1:]:
        layers = [u for u in run if isinstance(u, int)]
        parts.append(1 + layers[0] if layers else n_layers + 1)
    return parts + [n_layers + 2]


def test_torchtitan_rule_matches_counting_it_out() -> None:
    for n_layers in range(1, 14):
        for k in range(1, n_layers + 4):
            want = _titan_by_counting(n_layers, k)
            if want is None:
                with pytest.raises(ValueError):
                    ug.torchtitan_parts(n_layers, k)
            else:
                assert ug.torchtitan_parts(n_layers, k) == want, (n_layers, k)
    # Llama-3 8B (32 layers) on 4 ranks: 34 effective layers, 9/9/8/8 -> 8, 9, 8, 7 layers
    assert ug.torchtitan_parts(32, 4) == [0, 9, 18, 26, 34]


def test_torchtitan_legacy_rule_splits_layers_evenly_middle_stages_first() -> None:
    # 10 layers on 4 stages: 2, 3, 3, 2 (the first stage never takes an extra layer)
    assert ug.torchtitan_legacy_parts(10, 4) == [0, 3, 6, 9, 12]
    assert ug.torchtitan_legacy_parts(8, 4) == [0, 3, 5, 7, 10]
    with pytest.raises(ValueError):
        ug.torchtitan_legacy_parts(3, 4)


def _spread(weights: list[int], parts: list[int]) -> int:
    sums = [sum(weights[a:b]) for a, b in zip(parts, parts[1:])]
    return max(sums) - min(sums)


def _least_spread(weights: list[int], k: int) -> int:
    n = len(weights)
    return min(_spread(weights, [0, *cuts, n]) for cuts in itertools.combinations(range(1, n), k - 1))


def test_deepspeed_rule_gives_the_spreads_deepspeed_tests_for() -> None:
    # DeepSpeed's own unit test of partition_balanced (test_partition_balanced, its check_partition cases):
    # weights, parts, largest - smallest part
    for weights, k, spread in (([1, 2, 1], 4, 2), ([1, 1, 1, 1], 4, 0), ([1, 1, 1, 1, 1], 4, 1),
                               ([1, 1, 1, 1, 0, 1], 4, 1)):
        parts = ug.deepspeed_parts(weights, k)
        assert len(parts) == k + 1 and parts[0] == 0 and parts[-1] == len(weights) and parts == sorted(parts)
        assert _spread(weights, parts) == spread


def test_deepspeed_rule_breaks_ties_as_deepspeed_does() -> None:
    # equal spreads: DeepSpeed's DP keeps the last split point tried (its update is on >=), so a
    # parameterless item (a dropout, a rotary embedding) joins the stage before it
    assert ug.deepspeed_parts([2, 0, 2], 2) == [0, 2, 3]
    assert ug.deepspeed_parts([3, 1, 0, 0, 1, 3], 2) == [0, 4, 6]


def test_deepspeed_rule_finds_the_least_spread_on_model_shaped_weights() -> None:
    # embeddings, equal layers, a small norm, a head: the shape of every model of the benchmark.
    # (The rule is a heuristic for the least spread; on arbitrary weights it can miss it.)
    rng = random.Random(7)
    for _ in range(300):
        n_layers = rng.randint(1, 10)
        weights = [rng.randint(0, 30)] + [rng.randint(1, 9)] * n_layers + [rng.randint(0, 2), rng.randint(0, 30)]
        k = rng.randint(2, min(len(weights), 6))
        parts = ug.deepspeed_parts(weights, k)
        assert parts[0] == 0 and parts[-1] == len(weights) and parts == sorted(parts) and len(parts) == k + 1
        assert _spread(weights, parts) == _least_spread(weights, k), (weights, k, parts)


# -- on an imported graph --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_llama() -> tuple[Any, Any, Any]:
    torch = pytest.importorskip("torch")
    tf = pytest.importorskip("transformers")
    from gapstop.problems.pipeline.api import import_module

    torch.manual_seed(0)
    cfg = tf.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                         num_key_value_heads=4, vocab_size=512)
    model = tf.LlamaForCausalLM(cfg).eval()
    layout = ug.Layout(("model.embed_tokens", "model.rotary_emb"), "model.layers", ("model.norm", "lm_head"))
    ids = torch.randint(0, 512, (1, 16))
    return model, layout, import_module(model, (ids,), "a100-sxm-80gb", {"use_cache": False})


@pytest.mark.torch
@pytest.mark.slow  # the fixture's torch + transformers imports and export: 83 s at load 13 on 2 cores
@pytest.mark.parametrize("k", [2, 3, 5])
def test_baseline_plans_put_each_item_whole_in_its_stage_and_score_as_the_reference(
        tiny_llama: tuple[Any, Any, Any], k: int) -> None:
    model, layout, problem = tiny_llama
    items = ug.layout_items(model, layout, problem)
    # parameter counts straight from the state dict (tied weights would count in each item)
    sd = {name: t.numel() for name, t in model.named_parameters()}
    prefixes = [layout.pre, *((f"model.layers.{i}",) for i in range(4)), *((p,) for p in layout.post)]
    assert list(items.params) == [sum(n for name, n in sd.items() if any(name.startswith(p + ".") for p in ps))
                                  for ps in prefixes]
    for parts in (ug.torchtitan_parts(4, k, n_outputs=2), ug.deepspeed_parts(items.params, k)):
        assert parts[-1] == len(prefixes)
        ev = ug.plan_from_parts(problem, items, parts, k)
        stage_of_item = {j: s for s in range(k) for j in range(parts[s], parts[s + 1])}
        used = sorted(set(stage_of_item.values()))  # empty stages are dropped and the rest renumbered
        for i, op in enumerate(problem.ops):
            stack = set((op or {}).get("module_stack") or [])
            hit = [j for j, ps in enumerate(prefixes) if stack & set(ps)]
            if hit:  # an op of an item runs in that item's stage
                assert int(ev.blocks[i]) == used.index(stage_of_item[hit[0]]), (parts, i, op["name"])
        assert list(ev.blocks) == sorted(ev.blocks)  # stages contiguous in the program's order
        stages = [[v for v in range(problem.n) if ev.blocks[v] == b] for b in range(int(ev.blocks.max()) + 1)]
        assert ev.objective == pytest.approx(max(ref.block_cost(problem, s) for s in stages), rel=1e-9)
