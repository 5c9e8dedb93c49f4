"""What a user gains over the default splits of torchtitan and DeepSpeed (a script, not a test).

    python benchmarks/user_gain.py [--models llama,gpt2,bert,vit,t5] [--sizes small,base] [--ks 2,4,8]
                                   [--time-limit 20] [--chip a100-sxm-80gb] [--seq 128] [--json out.jsonl]

Each ``transformers`` model (random weights from a config, eval mode, batch 1, sequence --seq;
ViT takes a 224 x 224 image, 197 tokens) is exported and imported once
(``problems.pipeline.api.import_module``, the graph ``gapstop.plan_pipeline`` solves). On that
one graph, for each k, four plans are scored by the exact evaluator:

- ``titan``: torchtitan's default split (:func:`torchtitan_parts`);
- ``ds``: DeepSpeed ``PipelineModule(partition_method="parameters")`` (:func:`deepspeed_parts`);
- ``module``: gapstop's optimum among module-boundary plans (``split_at="module"``), with the
  certificate of its run;
- ``op``: gapstop's unrestricted search (``split_at="op"``), best plan found and bound.

The baselines split the model as a user of those runtimes lists it: one item for everything
before the first layer (the embeddings), one per layer, then one per module after the last
layer (final norm, head or pooler). A stage that begins at item j begins at the first op of
that item's modules in the program's order, a cut of ``problems.pipeline.plan.module_cuts``;
ops between items (mask construction, a reshape in the root module) stay with the stage before.
Prints a markdown table; ``--json`` also writes one JSON line per (model, size, k).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _inprocess import solve_in_process  # noqa: E402

from gapstop.problems.pipeline.evaluate import Evaluation, evaluate  # noqa: E402
from gapstop.problems.pipeline.model import PipelineProblem  # noqa: E402


# -- the baselines' partition rules, on a list of items -------------------------------------------

def torchtitan_parts(n_layers: int, k: int, n_outputs: int = 1, input_weight: int = 1,
                     output_weight: int = 1) -> list[int]:
    """torchtitan's default split of the items [embeddings, layer 0..L-1, n_outputs output modules]
    into k stages, as item boundaries ``parts`` (stage s holds items parts[s]:parts[s+1]).

    The rule of ``generate_llm_fqn_per_model_part`` (torchtitan/distributed/pipeline_parallel.py),
    used when neither ``module_fqns_per_model_part`` nor ``pipeline_parallel_layers_per_stage``
    is set, with a single-stage schedule (the default ``1F1B``: one stage per rank) and the
    defaults ``pipeline_parallel_first_stage_less_layers = 1`` and ``..._last_stage_less_layers
    = 1``: the embeddings count as ``input_weight`` layers and the norm + output as
    ``output_weight``; the L + input_weight + output_weight effective layers are dealt out evenly,
    ``(L + iw + ow) // k`` per stage and one more to each of the first ``(L + iw + ow) % k``.
    One stage holds everything. Raises ValueError where torchtitan does (k above the effective
    layers, a weight above the layers per stage).
    """
    if k == 1:
        return [0, 1 + n_layers + n_outputs]
    eff = n_layers + input_weight + output_weight
    if k > eff:
        raise ValueError(f"{k} stages > {eff} effective layers")
    per, extra = divmod(eff, k)
    if per < max(input_weight, output_weight) or per == 0:
        raise ValueError(f"{per} effective layers per stage < the input/output weight")
    layers = [per + (s < extra) for s in range(k)]
    layers[0] -= input_weight
    layers[-1] -= output_weight
    parts = [0, 1 + layers[0]]  # item 0 is the embeddings
    for s in range(1, k - 1):
        parts.append(parts[-1] + layers[s])
    parts.append(1 + n_layers + n_outputs)
    return parts


def torchtitan_legacy_parts(n_layers: int, k: int, n_outputs: int = 1) -> list[int]:
    """The earlier default, ``generate_split_points`` (torchtitan/parallelisms/pipelining_utils.py,
    one stage per rank): split points ``layers.N`` every ``L // k`` layers, the middle stages
    taking one more while ``L % k`` lasts; the embeddings go with stage 0, the outputs with the
    last. Same item boundaries as :func:`torchtitan_parts`. Raises ValueError for k > L."""
    if k > n_layers:
        raise ValueError(f"{k} stages > {n_layers} layers")
    per, extra = divmod(n_layers, k)
    parts, layer = [0], 0
    for s in range(k - 1):
        layer += per + (1 if 0 < s and s <= extra else 0)
        parts.append(1 + layer)
    parts.append(1 + n_layers + n_outputs)
    return parts


def partition_uniform(n_items: int, k: int) -> list[int]:
    """DeepSpeed's ``partition_uniform``: ``n // k`` items per part, one more to each of the first
    ``n % k``; with n <= k, one item to each of the first n parts."""
    if n_items <= k:
        return [min(p, n_items) for p in range(k + 1)]
    per, extra = divmod(n_items, k)
    return [p * per + min(p, extra) for p in range(k + 1)]


def deepspeed_parts(weights: Sequence[float], k: int) -> list[int]:
    """DeepSpeed's ``partition_balanced(weights, k)`` (deepspeed/runtime/utils.py): the items cut
    into k contiguous parts by a dynamic program over (items, parts) that keeps, per state, the
    choice of least (largest part - smallest part) of the parts so far, the last such choice on
    ties; ``partition_uniform`` when there are no more items than parts. Item boundaries as in
    :func:`torchtitan_parts`. ``PipelineModule(partition_method="parameters")`` calls it with
    each layer's count of trainable parameters."""
    n = len(weights)
    if n <= k:
        return partition_uniform(n, k)
    prefix = np.concatenate([[0.0], np.cumsum(np.asarray(weights, np.float64))])
    inf = np.inf
    spread = np.full((n + 1, k + 1), inf)
    hi = np.full((n + 1, k + 1), inf)
    lo = np.full((n + 1, k + 1), inf)
    arg = np.zeros((n + 1, k + 1), np.int64)
    spread[0, 0] = hi[0, 0] = 0.0
    for i in range(1, n + 1):
        for j in range(1, min(i, k) + 1):
            for m in range(i):
                part = prefix[i] - prefix[m]
                top, bottom = max(hi[m, j - 1], part), min(lo[m, j - 1], part)
                if top - bottom <= spread[i, j]:  # nan (inf - inf) never wins, as in the original
                    spread[i, j], hi[i, j], lo[i, j], arg[i, j] = top - bottom, top, bottom, m
    parts = [n]
    for j in range(k, 0, -1):
        parts.append(int(arg[parts[-1], j]))
    return parts[::-1]


# -- the models ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Layout:
    """How a user of torchtitan or DeepSpeed lists a model: the modules before the first layer
    (one item), the layer container (one item per layer) and the modules after it (one item each)."""

    pre: tuple[str, ...]
    layers: str
    post: tuple[str, ...]


def _llama(size: str) -> tuple[Any, Layout]:
    import transformers as tf

    h, n, inter = {"small": (512, 8, 1376), "base": (768, 12, 2048)}[size]
    cfg = tf.LlamaConfig(hidden_size=h, intermediate_size=inter, num_hidden_layers=n, num_attention_heads=h // 64,
                         num_key_value_heads=h // 64, vocab_size=32000)
    return tf.LlamaForCausalLM(cfg), Layout(("model.embed_tokens", "model.rotary_emb"), "model.layers",
                                           ("model.norm", "lm_head"))


def _gpt2(size: str) -> tuple[Any, Layout]:
    import transformers as tf

    h, n = {"small": (512, 8), "base": (768, 12)}[size]
    cfg = tf.GPT2Config(n_embd=h, n_layer=n, n_head=h // 64)
    return tf.GPT2LMHeadModel(cfg), Layout(("transformer.wte", "transformer.wpe", "transformer.drop"),
                                           "transformer.h", ("transformer.ln_f", "lm_head"))


def _bert(size: str) -> tuple[Any, Layout]:
    import transformers as tf

    h, n = {"small": (512, 8), "base": (768, 12)}[size]
    cfg = tf.BertConfig(hidden_size=h, num_hidden_layers=n, num_attention_heads=h // 64, intermediate_size=4 * h)
    return tf.BertModel(cfg), Layout(("embeddings",), "encoder.layer", ("pooler",))


def _vit(size: str) -> tuple[Any, Layout]:
    import transformers as tf

    h, n = {"small": (384, 12), "base": (768, 12)}[size]
    cfg = tf.ViTConfig(hidden_size=h, num_hidden_layers=n, num_attention_heads=h // 64, intermediate_size=4 * h)
    model = tf.ViTModel(cfg)
    layers = next(name for name in ("layers", "encoder.layer") if _has(model, name))
    return model, Layout(("embeddings",), layers, ("layernorm", "pooler"))


def _t5(size: str) -> tuple[Any, Layout]:
    import transformers as tf

    h, n, heads, ff = {"small": (512, 6, 8, 2048), "base": (768, 12, 12, 3072)}[size]
    cfg = tf.T5Config(d_model=h, num_layers=n, num_heads=heads, d_ff=ff, d_kv=64, vocab_size=32128)
    return tf.T5EncoderModel(cfg), Layout(("encoder.embed_tokens",), "encoder.block", ("encoder.final_layer_norm",))


def _has(module: Any, path: str) -> bool:
    try:
        module.get_submodule(path)
        return True
    except AttributeError:
        return False


#: name -> (builder(size) -> (module, layout), what the model is)
MODELS: dict[str, tuple[Callable[[str], tuple[Any, Layout]], str]] = {
    "llama": (_llama, "LlamaForCausalLM, vocab 32000 (small: 512 x 8 layers; base: 768 x 12)"),
    "gpt2": (_gpt2, "GPT2LMHeadModel, vocab 50257, tied head (small: 512 x 8; base: 768 x 12 = GPT-2 124M)"),
    "bert": (_bert, "BertModel with pooler (small: 512 x 8 = BERT-Medium; base: BertConfig())"),
    "vit": (_vit, "ViTModel with pooler, 224 x 224, patch 16 (small: 384 x 12 = ViT-S/16; base: ViT-B/16)"),
    "t5": (_t5, "T5EncoderModel (small: t5-small's encoder, 512 x 6; base: t5-base's, 768 x 12)"),
}


def example_inputs(name: str, seq: int) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import torch

    g = torch.Generator().manual_seed(0)
    if name == "vit":
        return (torch.randn(1, 3, 224, 224, generator=g),), {}
    ids = torch.randint(0, 30000, (1, seq), generator=g)  # below every vocabulary here
    return (ids,), ({"use_cache": False} if name in ("llama", "gpt2") else {})


# -- items on the graph ----------------------------------------------------------------------------

@dataclass(frozen=True)
class Items:
    """A model's items (see :class:`Layout`): names, trainable parameter counts, and the node where
    each begins in the imported graph's order (its modules' first op)."""

    names: tuple[str, ...]
    params: tuple[int, ...]
    first_op: tuple[int, ...]
    n_layers: int


def layout_items(module: Any, layout: Layout, problem: PipelineProblem) -> Items:
    """The items of ``module`` listed by ``layout``, located in ``problem`` (imported from it).
    Parameters shared by two items count in both, as DeepSpeed counts a tied layer in every
    stage that builds it."""
    n_layers = len(module.get_submodule(layout.layers))
    groups = [layout.pre, *((f"{layout.layers}.{i}",) for i in range(n_layers)), *((p,) for p in layout.post)]
    params = []
    for paths in groups:
        seen = {id(p): p for path in paths for p in module.get_submodule(path).parameters() if p.requires_grad}
        params.append(sum(p.numel() for p in seen.values()))
    assert problem.ops is not None
    stacks = [set(op.get("module_stack") or []) if op else set() for op in problem.ops]
    first = []
    for paths in groups:
        hits = [i for i, st in enumerate(stacks) if st & set(paths)]
        if not hits:
            raise ValueError(f"no op of {paths} in the graph")
        first.append(hits[0])
    if first != sorted(first):
        raise ValueError(f"items out of program order: {first}")
    return Items(tuple(" + ".join(g) for g in groups), tuple(params), tuple(first), n_layers)


def plan_from_parts(problem: PipelineProblem, items: Items, parts: Sequence[int], k: int) -> Evaluation:
    """The plan whose stage s holds items parts[s]:parts[s+1] (empty stages dropped), scored by the
    exact evaluator in the program's order. Stage s >= 1 begins at its first item's first op."""
    if parts[0] != 0 or parts[-1] != len(items.names) or list(parts) != sorted(parts):
        raise ValueError(f"parts {list(parts)}: not item boundaries from 0 to {len(items.names)}")
    blocks = np.zeros(problem.n, np.int64)
    for s in range(1, len(parts) - 1):
        start = problem.n if parts[s] >= len(items.names) else items.first_op[parts[s]]
        blocks[start:] = s
    _, blocks = np.unique(blocks, return_inverse=True)  # empty stages dropped
    return evaluate(problem, blocks.astype(np.int64), np.arange(problem.n), k=k)


def stage_starts(ev: Evaluation) -> list[int]:
    """The node where each stage after the first begins."""
    return [int(np.argmax(ev.blocks == s)) for s in range(1, int(ev.blocks.max()) + 1)]


# -- one row ---------------------------------------------------------------------------------------

def _load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def _baseline(problem: PipelineProblem, items: Items, rule: Callable[[], list[int]], k: int,
              cuts: dict[int, str]) -> dict[str, Any]:
    try:
        parts = rule()
    except ValueError as e:
        return {"objective": None, "why": str(e)}
    ev = plan_from_parts(problem, items, parts, k)
    starts = stage_starts(ev)
    return {"objective": ev.objective, "parts": parts, "stages": int(ev.blocks.max()) + 1,
            "block_costs": ev.block_costs.tolist(), "split_points": [cuts.get(i) for i in starts],
            "runnable": all(i in cuts for i in starts)}


def row(name: str, size: str, module: Any, layout: Layout, problem: PipelineProblem, k: int,
        time_limit: float, seed: int = 0) -> dict[str, Any]:
    """The four plans of one (model, size, k), each re-scored by the exact evaluator."""
    from gapstop.problems.pipeline.plan import module_cuts, solve_module_split

    cuts = module_cuts(problem)
    items = layout_items(module, layout, problem)
    out: dict[str, Any] = {"model": name, "size": size, "k": k, "nodes": problem.n, "layers": items.n_layers,
                           "time_limit_s": time_limit, "params": list(items.params), "items": list(items.names)}
    n_out = len(layout.post)
    out["titan"] = _baseline(problem, items, lambda: torchtitan_parts(items.n_layers, k, n_out), k, cuts)
    out["titan_legacy"] = _baseline(problem, items, lambda: torchtitan_legacy_parts(items.n_layers, k, n_out), k,
                                    cuts)
    out["ds"] = _baseline(problem, items, lambda: deepspeed_parts(items.params, k), k, cuts)
    for key, solve in (("module", lambda: solve_module_split(problem, k, time_limit_s=time_limit, seed=seed,
                                                             num_workers=2)),
                       ("op", lambda: solve_in_process("pipeline", problem, {"k": k}, time_limit, seed=seed,
                                                       workers=2))):
        load0, t0 = _load(), time.monotonic()
        doc = solve()
        ev = evaluate(problem, np.asarray(doc["blocks"], np.int64), np.asarray(doc["order"]), k=k)
        assert abs(ev.objective - doc["objective"]) <= 1e-9 * max(1.0, ev.objective), (key, ev.objective, doc)
        out[key] = {"objective": ev.objective, "lower_bound": doc["lower_bound"], "gap": doc["gap"],
                    "stopped_because": doc["stopped_because"], "wall_s": round(time.monotonic() - t0, 1),
                    "load_before": load0, "load_after": _load(), "block_costs": ev.block_costs.tolist(),
                    "split_points": doc.get("split_points")}
    bounds = [b for b in (out["module"]["lower_bound"], out["op"]["lower_bound"]) if b is not None]
    out["lower_bound"] = max(bounds) if bounds else None
    out["best"] = min(out["module"]["objective"], out["op"]["objective"])
    return out


# -- the table -------------------------------------------------------------------------------------

def _f(x: float | None, fmt: str = ".1f") -> str:
    return "n/a" if x is None else format(x, fmt)


def _ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None or b <= 0 else f"{a / b:.2f}"


HEADER = ("| model | size | k | titan (µs) | DS params (µs) | gapstop module (µs) | module gap | gapstop op (µs) "
          "| bound (µs) | titan / module | DS / module | module / op | module / bound |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")


def table_line(r: dict[str, Any]) -> str:
    t, d, m, o, lb = (r["titan"]["objective"], r["ds"]["objective"], r["module"]["objective"], r["op"]["objective"],
                      r["lower_bound"])
    gap = "n/a" if r["module"]["gap"] is None else f"{r['module']['gap']:.2%}"
    return (f"| {r['model']} | {r['size']} | {r['k']} | {_f(t)} | {_f(d)} | {_f(m)} | {gap} | {_f(o)} | {_f(lb)} "
            f"| {_ratio(t, m)} | {_ratio(d, m)} | {_ratio(m, o)} | {_ratio(m, lb)} |")


def summary(rows: Sequence[dict[str, Any]]) -> list[str]:
    """Lines summing up the rows: per baseline, the geometric mean and the largest ratio to the
    module-boundary optimum and how often it is within 0.1 % of it; how often the unrestricted
    search beat the module optimum; the largest module / bound."""
    out = []
    for key, label in (("titan", "torchtitan default"), ("titan_legacy", "torchtitan generate_split_points"),
                       ("ds", "DeepSpeed parameters")):
        ratios = [r[key]["objective"] / r["module"]["objective"] for r in rows if r[key]["objective"] is not None]
        if ratios:
            out.append(f"{label} / gapstop module: geometric mean {float(np.exp(np.mean(np.log(ratios)))):.3f}, "
                       f"max {max(ratios):.2f}, within 0.1 % in {sum(x <= 1.001 for x in ratios)} of {len(ratios)}")
    beat = [r for r in rows if r["op"]["objective"] < r["module"]["objective"] * (1 - 1e-3)]
    worst = max(r["module"]["objective"] / r["lower_bound"] for r in rows if r["lower_bound"])
    out.append(f"unrestricted search below the module optimum by > 0.1 % in {len(beat)} of {len(rows)} rows; "
               f"largest module / bound {worst:.3f}")
    loads = [float(r[key][f"load_{w}"].split("/")[0]) for r in rows for key in ("module", "op")
             for w in ("before", "after")]
    walls = sorted(r[key]["wall_s"] for r in rows for key in ("module", "op"))
    out.append(f"1-min load average {min(loads):.1f}-{max(loads):.1f}; solve wall time median "
               f"{walls[len(walls) // 2]:.0f} s (max {walls[-1]:.0f} s) at a {rows[0]['time_limit_s']:g} s limit")
    return out


def machine() -> dict[str, Any]:
    import torch
    import transformers

    cpu = platform.processor()
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                            text=True).stdout.strip()
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "torch": torch.__version__,
            "transformers": transformers.__version__, "commit": commit}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--sizes", default="small,base")
    ap.add_argument("--ks", default="2,4,8")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per gapstop solve")
    ap.add_argument("--chip", default="a100-sxm-80gb")
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--json", help="also write one JSON line per row here")
    ap.add_argument("--from-json", help="print the table and summary of rows written by --json, and exit")
    args = ap.parse_args()
    if args.from_json:
        rows = [json.loads(line) for line in Path(args.from_json).read_text().splitlines() if line.strip()]
        print("\n".join([HEADER, *map(table_line, rows), "", *summary(rows)]))
        return
    import torch

    from gapstop.problems.pipeline.api import import_module

    torch.manual_seed(0)
    print(json.dumps(machine()), flush=True)
    print(HEADER, flush=True)
    sink = open(args.json, "a") if args.json else None
    try:
        for size in args.sizes.split(","):
            for name in args.models.split(","):
                module, layout = MODELS[name][0](size)
                module.eval()
                ex_args, ex_kwargs = example_inputs(name, args.seq)
                t0 = time.monotonic()
                try:
                    problem = import_module(module, ex_args, args.chip, ex_kwargs)
                except Exception as e:  # report and go on with the other models
                    print(f"| {name} | {size} | import failed: {type(e).__name__}: {str(e)[:200]} |", flush=True)
                    continue
                imported_s = round(time.monotonic() - t0, 1)
                for k in (int(x) for x in args.ks.split(",")):
                    r = row(name, size, module, layout, problem, k, args.time_limit)
                    r["import_s"] = imported_s
                    print(table_line(r), flush=True)
                    if sink is not None:
                        sink.write(json.dumps(r) + "\n")
                        sink.flush()
    finally:
        if sink is not None:
            sink.close()


if __name__ == "__main__":
    main()
