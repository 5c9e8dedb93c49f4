"""gapstop.plan_pipeline: the plan runs. Its split_spec (and torchtitan's split points made into
one) builds a torch.distributed.pipelining Pipe whose stages, run one after another on CPU,
give the unsplit model's output, and hold exactly the plan's ops. HF transformers models when
transformers is importable, plain torch models of the same shape otherwise. Skipped without torch."""

from __future__ import annotations

import copy
import dataclasses
import json
import operator
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import gapstop
from gapstop.launch import main
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.io import load_graph

torch = pytest.importorskip("torch")
nn = torch.nn
pytestmark = pytest.mark.torch

try:
    import transformers
except ImportError:  # the plain torch models below stand in
    transformers = None

CHIP = "a100-sxm-80gb"
ROOT = Path(__file__).resolve().parents[3]


# -- plain torch stand-ins: a Llama-style decoder returning a dataclass, a BERT-style encoder a dict --

@dataclasses.dataclass
class LMOutput:
    logits: Any
    hidden: Any = None


# torch.distributed.pipelining traces the model with torch.export, which needs a dataclass output
# registered (plan_pipeline does not: test_outputs_need_no_registration_for_planning)
torch.export.register_dataclass(LMOutput, serialized_type_name="test_plan_api.LMOutput")


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x: Any) -> Any:
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)


class SelfAttention(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(d, d, bias=False) for _ in range(4))

    def forward(self, x: Any, causal: bool) -> Any:
        b, s, d = x.shape
        q, k, v = (p(x).view(b, s, self.heads, d // self.heads).transpose(1, 2)
                   for p in (self.q_proj, self.k_proj, self.v_proj))
        a = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
        return self.o_proj(a.transpose(1, 2).reshape(b, s, d))


class DecoderLayer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(d), RMSNorm(d)
        self.self_attn = SelfAttention(d, heads)
        self.gate_proj, self.up_proj, self.down_proj = nn.Linear(d, 2 * d), nn.Linear(d, 2 * d), nn.Linear(2 * d, d)

    def forward(self, x: Any) -> Any:
        x = x + self.self_attn(self.input_layernorm(x), causal=True)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


class TinyLlama(nn.Module):
    def __init__(self, vocab: int = 256, d: int = 64, heads: int = 4, layers: int = 4) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([DecoderLayer(d, heads) for _ in range(layers)])
        self.norm = RMSNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids: Any) -> LMOutput:
        x = self.embed_tokens(input_ids)
        for layer in self.layers:
            x = layer(x)
        return LMOutput(logits=self.lm_head(self.norm(x)))


class EncoderLayer(nn.Module):
    def __init__(self, d: int, heads: int) -> None:
        super().__init__()
        self.attention, self.ln1, self.ln2 = SelfAttention(d, heads), nn.LayerNorm(d), nn.LayerNorm(d)
        self.intermediate, self.output = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, x: Any) -> Any:
        x = self.ln1(x + self.attention(x, causal=False))
        return self.ln2(x + self.output(nn.functional.gelu(self.intermediate(x))))


class TinyBert(nn.Module):
    def __init__(self, vocab: int = 256, d: int = 64, heads: int = 4, layers: int = 4, seq: int = 16) -> None:
        super().__init__()
        self.word, self.position, self.ln = nn.Embedding(vocab, d), nn.Embedding(seq, d), nn.LayerNorm(d)
        self.layer = nn.ModuleList([EncoderLayer(d, heads) for _ in range(layers)])
        self.pooler = nn.Linear(d, d)

    def forward(self, input_ids: Any) -> dict[str, Any]:
        x = self.ln(self.word(input_ids) + self.position(torch.arange(input_ids.shape[1])))
        for layer in self.layer:
            x = layer(x)
        return {"last_hidden_state": x, "pooler_output": torch.tanh(self.pooler(x[:, 0]))}


def _model(kind: str) -> tuple[Any, tuple[Any, ...]]:
    torch.manual_seed(0)
    ids = torch.randint(0, 256, (2, 16))
    if transformers is None:
        return (TinyLlama() if kind == "llama" else TinyBert()).eval(), (ids,)
    if kind == "llama":
        cfg = transformers.LlamaConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4,
                                       num_attention_heads=4, num_key_value_heads=2, vocab_size=256, use_cache=False)
        return transformers.LlamaForCausalLM(cfg).eval(), (ids,)
    cfg = transformers.BertConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
                                  vocab_size=256, max_position_embeddings=64)
    return transformers.BertModel(cfg).eval(), (ids,)


# -- running a Pipe's stages in sequence --------------------------------------------------------------

def run_stages(pipe: Any, args: tuple[Any, ...]) -> tuple[Any, list[str]]:
    """Interpret the Pipe's top graph: each stage's submodule is called in turn on the values the
    earlier stages produced (what pipeline-parallel ranks do, minus the sends). Returns the
    output and the stage submodules in call order."""
    env: dict[str, Any] = {}
    inputs = iter(args)
    called: list[str] = []

    def value(a: Any) -> Any:
        return env[a.name]

    for node in pipe.split_gm.graph.nodes:
        if node.op == "placeholder":
            env[node.name] = next(inputs)
        elif node.op == "call_module":
            called.append(str(node.target))
            env[node.name] = getattr(pipe.split_gm, node.target)(*torch.fx.node.map_arg(node.args, value))
        elif node.op == "call_function":
            env[node.name] = node.target(*torch.fx.node.map_arg(node.args, value))
        elif node.op == "output":
            return torch.fx.node.map_arg(node.args[0], value), called
    raise AssertionError("the Pipe's graph has no output")


def stage_ops(stage: Any) -> Counter[str]:
    """The tensor-producing aten ops a stage module runs (its nested module graphs included)."""
    ops: Counter[str] = Counter()
    for sub in stage.modules():
        graph = getattr(sub, "graph", None)
        for node in graph.nodes if graph is not None else []:
            if node.op == "call_function" and node.target is not operator.getitem and node.meta.get("val") is not None:
                ops[str(node.target)] += 1
    return ops


def plan_ops(plan: Any) -> list[Counter[str]]:
    out: list[Counter[str]] = [Counter() for _ in plan.stages]
    for i, op in enumerate(plan.problem.ops):
        if op and op["op"] != "Input":
            out[int(plan.result["blocks"][i])][op["op"]] += 1
    return out


def plan_params(plan: Any) -> list[set[str]]:
    out: list[set[str]] = [set() for _ in plan.stages]
    for i, op in enumerate(plan.problem.ops):
        if op:
            out[int(plan.result["blocks"][i])].update(x["name"] for x in op["inputs"] if x["param"])
    return out


@pytest.fixture(scope="module")
def models() -> dict[str, tuple[Any, tuple[Any, ...]]]:
    return {kind: _model(kind) for kind in ("llama", "bert")}


@pytest.fixture(scope="module")
def plans(models: dict[str, Any]) -> dict[tuple[str, int], Any]:
    # the bounds are not what these tests are about: a loose target ends each solve early
    return {(kind, k): gapstop.plan_pipeline(model, args, k, CHIP, time_limit=20, target_gap=0.5)
            for kind, (model, args) in models.items() for k in (2, 4, 8)}


def _flat(out: Any) -> list[Any]:
    from gapstop.problems.pipeline.api import flatten_tensors

    return flatten_tensors(out)


@pytest.mark.parametrize("kind", ["llama", "bert"])
@pytest.mark.parametrize("k", [2, 4, 8])
def test_the_split_spec_runs_and_matches_the_unsplit_model(models: dict[str, Any], plans: dict[Any, Any],
                                                           kind: str, k: int) -> None:
    from torch.distributed.pipelining import pipeline

    model, args = models[kind]
    plan = plans[kind, k]
    assert plan.split_spec is not None and plan.split_at == "module"
    assert list(plan.split_points) == list(plan.split_spec) and len(plan.stages) == len(plan.split_spec) + 1 <= k
    # certified: a valid bound below the exactly re-scored objective
    ev = evaluate(plan.problem, plan.result["blocks"], plan.result["order"], k=k)
    assert plan.objective == ev.objective == max(s.cost for s in plan.stages)
    assert plan.lower_bound is not None and 0 < plan.lower_bound <= plan.objective
    assert plan.gap == pytest.approx(1 - plan.lower_bound / plan.objective)
    with torch.no_grad():
        want = _flat(model(*args))
        for spec in (plan.split_spec, _titan_split_spec(plan.split_points)):
            pipe = pipeline(copy.deepcopy(model), mb_args=args, split_spec=spec)  # wraps forwards: a copy
            assert pipe.num_stages == len(plan.stages)
            got, called = run_stages(pipe, args)
            assert len(called) == pipe.num_stages  # one call per stage, in order
            got = _flat(got)
            assert len(got) == len(want)
            for g, w in zip(got, want):
                assert torch.allclose(g, w, rtol=1e-5, atol=1e-5)
            mine_ops, mine_params = plan_ops(plan), plan_params(plan)
            for s in range(pipe.num_stages):
                stage = pipe.get_stage_module(s)
                assert stage_ops(stage) == mine_ops[s], s
                assert {n for n, _ in stage.named_parameters()} == mine_params[s] & {n for n, _ in
                                                                                       model.named_parameters()}


def _titan_split_spec(points: Any) -> dict[str, Any]:
    """torchtitan's ``pipeline_parallel_split_points`` as the tracer frontend turns them into a spec."""
    from torch.distributed.pipelining import SplitPoint

    return {fqn: SplitPoint.BEGINNING for fqn in points}


def test_the_plan_is_the_module_split_of_the_imported_graph_and_serialises(plans: dict[Any, Any]) -> None:
    from gapstop.problems.pipeline.plan import module_split

    plan = plans["llama", 4]
    assert module_split(plan.problem, 4).objective == plan.objective
    doc = json.loads(plan.to_json())
    assert doc["split_spec"] == {m: "BEGINNING" for m in plan.split_points}
    assert [s["cost"] for s in doc["stages"]] == [s.cost for s in plan.stages]
    for s in plan.stages:
        assert s.compute + s.communication + s.overflow == s.cost
    # each later stage begins with the module its split point names
    assert [s.modules[0] for s in plan.stages[1:]] == list(plan.split_points)
    # module paths are the user's module's own, without the export wrapper
    assert all(not m.startswith("wrapped") for s in plan.stages for m in s.modules)


def test_op_plans_are_the_unrestricted_search(models: dict[str, Any], plans: dict[Any, Any]) -> None:
    model, args = models["bert"]
    op = gapstop.plan_pipeline(model, args, 4, CHIP, time_limit=10, target_gap=0.5, split_at="op")
    assert op.split_at == "op" and op.lower_bound <= op.objective
    # the module plan's bottleneck is never below a valid bound of the unrestricted problem
    assert op.lower_bound <= plans["bert", 4].objective * (1 + 1e-9)
    assert (op.split_spec is None) == (op.split_points is None)


def test_bad_arguments_are_input_errors(models: dict[str, Any]) -> None:
    from gapstop.engine.errors import InputError

    model, args = models["llama"]
    for kw, msg in (({"split_at": "layer"}, "split_at"), ({"k": 0}, "k: "), ({"chip": "no-such-chip"}, "chip")):
        call = {"k": 2, "chip": CHIP, **kw}
        with pytest.raises(InputError, match=msg):
            gapstop.plan_pipeline(model, args, call.pop("k"), call.pop("chip"), time_limit=5, **call)


def test_a_saved_program_gives_the_same_plan_on_the_command_line(models: dict[str, Any], plans: dict[Any, Any],
                                                                 tmp_path: Path) -> None:
    model, args = models["llama"]
    program, graph, out = tmp_path / "m.pt2", tmp_path / "g.json", tmp_path / "r.json"
    torch.export.save(torch.export.export(model, args), str(program))
    if transformers is not None:
        # a fresh process, where the output class is not registered until its module is imported
        r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "import", "torch", str(program), "--chip", CHIP,
                            "--out", str(graph)], capture_output=True, text=True, timeout=600,
                           env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert r.returncode == 0, r.stderr[-2000:]
    else:
        r = CliRunner().invoke(main, ["import", "torch", str(program), "--chip", CHIP, "--out", str(graph)])
        assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, ["pipeline", "solve", str(graph), "-k", "4", "--split-at", "module", "--time-limit",
                                  "20", "--target-gap", "0.5", "--out", str(out)])
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text())
    plan = plans["llama", 4]
    assert doc["split_spec"] == {m: "BEGINNING" for m in plan.split_points}
    assert doc["objective"] == pytest.approx(plan.objective, rel=1e-12)
    assert load_graph(graph).n == plan.problem.n


def test_outputs_need_no_registration_for_planning() -> None:
    @dataclasses.dataclass
    class Out:  # registered nowhere: torch.export alone refuses it
        main: Any
        extra: dict[str, Any]
        nothing: Any = None

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a, self.b, self.c = nn.Linear(8, 8), nn.Linear(8, 8), nn.Linear(8, 4)

        def forward(self, x: Any) -> Out:
            h = self.b(torch.relu(self.a(x)))
            return Out(main=self.c(h), extra={"h": h, "pair": (h.sum(), 3)})

    x = torch.randn(4, 8)
    with pytest.raises(Exception):  # noqa: B017 - the error type differs across torch versions
        torch.export.export(Net(), (x,))
    plan = gapstop.plan_pipeline(Net(), (x,), 2, CHIP, time_limit=5)
    assert plan.split_spec is not None and set(plan.split_spec) <= {"b", "c"}
    # h.sum(), nested in a dict and a tuple, is an output of the program (else export drops it)
    assert any(op and op["op"].startswith("aten.sum") for op in plan.problem.ops)
