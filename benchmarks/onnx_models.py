"""Build the bundled real-architecture ONNX files from their configs (a script, not a test).

    python benchmarks/onnx_models.py [--out examples/onnx] [--with-weights] [--models bert_base,gpt2,resnet50]

Needs only the ``onnx`` package (no torch). Each model is written with ``onnx.helper``:

* ``bert_base``: BERT-base encoder (Devlin et al. 2019; HF ``BertModel`` layout): 12 layers,
  hidden 768, 12 heads, FFN 3072, vocab 30522, sequence 128, no attention mask, with pooler.
* ``gpt2``: GPT-2 small (Radford et al. 2019; HF ``GPT2LMHeadModel`` layout): 12 layers, hidden
  768, 12 heads, FFN 3072, vocab 50257, sequence 128, causal mask, LM head (its tied weight
  stored as its own transposed initializer, as constant-folded exports do).
* ``resnet50``: ResNet-50 v1.5 (He et al. 2016; torchvision layout: stride on the 3x3 conv),
  224x224 input, 1000 classes, BatchNormalization unfused.

The batch dim is symbolic (``batch``): import with ``--batch N``. Weights larger than 1 KiB
are external data in ``<model>.onnx.data``, which is written (random normal values) only with
``--with-weights``; without it the files hold shapes only and weigh tens of KB. Node names
are the module path, ``/``-separated, then the op (``/encoder/layer/0/attention/self/query/MatMul``),
so the importer recovers module paths from them.
"""

from __future__ import annotations

import argparse
import math
import zlib
from pathlib import Path
from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 20  # Gelu is an ONNX op from opset 20
INLINE_MAX_BYTES = 1024
ROOT = Path(__file__).resolve().parents[1]


class ModelBuilder:
    """Nodes, initializers and external-data bookkeeping for one model."""

    def __init__(self, name: str, out_dir: Path, with_weights: bool, seed: int = 0) -> None:
        self.name = name
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.location = f"{name}.onnx.data"
        self.offset = 0
        self.used: dict[str, int] = {}
        self.consts: set[str] = set()
        self.seed = seed
        self.data = (out_dir / self.location).open("wb") if with_weights else None

    def _random(self, name: str, shape: list[int], std: float) -> np.ndarray:
        # seeded by name: the shapes-only file and the one with weights hold the same inline values
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def param(self, name: str, shape: list[int], std: float = 0.02) -> str:
        """A float32 weight; external data (random normal when weights are written)."""
        t = TensorProto()
        t.name, t.data_type = name, TensorProto.FLOAT
        t.dims.extend(shape)
        nbytes = 4 * math.prod(shape)
        if nbytes <= INLINE_MAX_BYTES:
            arr = self._random(name, shape, std)
            self.inits.append(numpy_helper.from_array(arr, name))
            return name
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", str(self.offset)), ("length", str(nbytes))):
            entry = t.external_data.add()
            entry.key, entry.value = key, value
        if self.data is not None:
            self.data.write(self._random(name, shape, std).tobytes())
        self.offset += nbytes
        self.inits.append(t)
        return name

    def const(self, name: str, value: Any, dtype: Any = np.int64) -> str:
        """An inline constant, shared by name (the first definition wins)."""
        if name not in self.consts:
            self.consts.add(name)
            self.inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def op(self, op_type: str, inputs: list[str], scope: str, n_out: int = 1, **attrs: Any) -> Any:
        """Add a node named ``/scope/parts/OpType[_i]``; returns its output name (or names)."""
        base = "/" + scope.replace(".", "/") + "/" + op_type if scope else "/" + op_type
        i = self.used.get(base, 0)
        self.used[base] = i + 1
        name = base if i == 0 else f"{base}_{i}"
        outs = [f"{name}_output_{j}" for j in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=name, **attrs))
        return outs[0] if n_out == 1 else outs

    def linear(self, x: str, scope: str, d_in: int, d_out: int) -> str:
        w = self.param(f"{scope}.weight", [d_in, d_out])
        b = self.param(f"{scope}.bias", [d_out])
        return self.op("Add", [self.op("MatMul", [x, w], scope), b], scope)

    def layer_norm(self, x: str, scope: str, d: int) -> str:
        return self.op("LayerNormalization", [x, self.param(f"{scope}.weight", [d]), self.param(f"{scope}.bias", [d])],
                       scope, axis=-1, epsilon=1e-5)

    def save(self, out_dir: Path, inputs: list[Any], outputs: list[Any]) -> Path:
        if self.data is not None:
            self.data.close()
        graph = helper.make_graph(self.nodes, self.name, inputs, outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="gapstop benchmarks/onnx_models.py")
        path = out_dir / f"{self.name}.onnx"
        onnx.save(model, str(path))
        return path


def _attention(b: ModelBuilder, x: str, scope: str, seq: int, d: int, heads: int,
               qkv: tuple[str, str, str], mask: str | None) -> str:
    dh = d // heads
    split_heads = b.const("shape.split_heads", [0, seq, heads, dh])
    merge_heads = b.const("shape.merge_heads", [0, seq, d])
    q, k, v = (b.op("Reshape", [t, split_heads], scope) for t in qkv)
    q = b.op("Transpose", [q], scope, perm=[0, 2, 1, 3])
    k = b.op("Transpose", [k], scope, perm=[0, 2, 3, 1])
    v = b.op("Transpose", [v], scope, perm=[0, 2, 1, 3])
    s = b.op("Div", [b.op("MatMul", [q, k], scope), b.const("scalar.sqrt_head_dim", math.sqrt(dh), np.float32)],
             scope)
    if mask is not None:
        s = b.op("Where", [mask, s, b.const("scalar.min_float", -3.0e38, np.float32)], scope)
    p = b.op("Softmax", [s], scope, axis=-1)
    ctx = b.op("Transpose", [b.op("MatMul", [p, v], scope)], scope, perm=[0, 2, 1, 3])
    return b.op("Reshape", [ctx, merge_heads], scope)


def bert_base(out_dir: Path, with_weights: bool, *, layers: int = 12, d: int = 768, heads: int = 12,
              ffn: int = 3072, vocab: int = 30522, seq: int = 128) -> Path:
    b = ModelBuilder("bert_base", out_dir, with_weights)
    e = "embeddings"
    words = b.op("Gather", [b.param(f"{e}.word_embeddings.weight", [vocab, d]), "input_ids"], f"{e}.word_embeddings")
    pos = b.op("Gather", [b.param(f"{e}.position_embeddings.weight", [512, d]),
                          b.const("position_ids", [list(range(seq))])], f"{e}.position_embeddings")
    types = b.op("Gather", [b.param(f"{e}.token_type_embeddings.weight", [2, d]),
                            b.const("token_type_ids", [[0] * seq])], f"{e}.token_type_embeddings")
    x = b.layer_norm(b.op("Add", [b.op("Add", [words, pos], e), types], e), f"{e}.LayerNorm", d)
    for i in range(layers):
        L = f"encoder.layer.{i}"
        qkv = tuple(b.linear(x, f"{L}.attention.self.{n}", d, d) for n in ("query", "key", "value"))
        ctx = _attention(b, x, f"{L}.attention.self", seq, d, heads, qkv, None)  # type: ignore[arg-type]
        h = b.linear(ctx, f"{L}.attention.output.dense", d, d)
        x = b.layer_norm(b.op("Add", [h, x], f"{L}.attention.output"), f"{L}.attention.output.LayerNorm", d)
        h = b.op("Gelu", [b.linear(x, f"{L}.intermediate.dense", d, ffn)], f"{L}.intermediate.intermediate_act_fn")
        h = b.linear(h, f"{L}.output.dense", ffn, d)
        x = b.layer_norm(b.op("Add", [h, x], f"{L}.output"), f"{L}.output.LayerNorm", d)
    first = b.op("Gather", [x, b.const("scalar.zero", 0)], "pooler", axis=1)
    pooled = b.op("Tanh", [b.linear(first, "pooler.dense", d, d)], "pooler.activation")
    b.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/Identity"))
    b.nodes.append(helper.make_node("Identity", [pooled], ["pooler_output"], name="/Identity_1"))
    return b.save(out_dir, [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq])],
                  [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", seq, d]),
                   helper.make_tensor_value_info("pooler_output", TensorProto.FLOAT, ["batch", d])])


def gpt2(out_dir: Path, with_weights: bool, *, layers: int = 12, d: int = 768, heads: int = 12,
         ffn: int = 3072, vocab: int = 50257, seq: int = 128, n_positions: int = 1024) -> Path:
    b = ModelBuilder("gpt2", out_dir, with_weights)
    tok = b.op("Gather", [b.param("transformer.wte.weight", [vocab, d]), "input_ids"], "transformer.wte")
    pos = b.op("Gather", [b.param("transformer.wpe.weight", [n_positions, d]),
                          b.const("position_ids", [list(range(seq))])], "transformer.wpe")
    x = b.op("Add", [tok, pos], "transformer")
    causal = b.const("causal_mask", np.tril(np.ones((1, 1, seq, seq), dtype=bool)), np.bool_)
    for i in range(layers):
        L = f"transformer.h.{i}"
        h = b.layer_norm(x, f"{L}.ln_1", d)
        qkv = b.linear(h, f"{L}.attn.c_attn", d, 3 * d)
        q, k, v = b.op("Split", [qkv, b.const("split.qkv", [d, d, d])], f"{L}.attn", n_out=3, axis=2)
        ctx = _attention(b, h, f"{L}.attn", seq, d, heads, (q, k, v), causal)
        x = b.op("Add", [x, b.linear(ctx, f"{L}.attn.c_proj", d, d)], L)
        h = b.layer_norm(x, f"{L}.ln_2", d)
        h = b.op("Gelu", [b.linear(h, f"{L}.mlp.c_fc", d, ffn)], f"{L}.mlp.act", approximate="tanh")
        x = b.op("Add", [x, b.linear(h, f"{L}.mlp.c_proj", ffn, d)], L)
    x = b.layer_norm(x, "transformer.ln_f", d)
    logits = b.op("MatMul", [x, b.param("lm_head.weight_T", [d, vocab])], "lm_head")
    b.nodes.append(helper.make_node("Identity", [logits], ["logits"], name="/Identity"))
    return b.save(out_dir, [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", seq])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", seq, vocab])])


def resnet50(out_dir: Path, with_weights: bool, *, blocks: tuple[int, ...] = (3, 4, 6, 3), classes: int = 1000,
             image: int = 224) -> Path:
    b = ModelBuilder("resnet50", out_dir, with_weights)

    def conv_bn(x: str, scope: str, bn_scope: str, c_in: int, c_out: int, kernel: int, stride: int) -> str:
        w = b.param(f"{scope}.weight", [c_out, c_in, kernel, kernel])
        pad = kernel // 2
        y = b.op("Conv", [x, w], scope, kernel_shape=[kernel, kernel], strides=[stride, stride],
                 pads=[pad] * 4)
        bn = [b.param(f"{bn_scope}.{n}", [c_out]) for n in ("weight", "bias", "running_mean", "running_var")]
        return b.op("BatchNormalization", [y, *bn], bn_scope, epsilon=1e-5)

    x = b.op("Relu", [conv_bn("input", "conv1", "bn1", 3, 64, 7, 2)], "relu")
    x = b.op("MaxPool", [x], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    c_in = 64
    for li, (n, width) in enumerate(zip(blocks, (64, 128, 256, 512))):
        for j in range(n):
            s = f"layer{li + 1}.{j}"
            stride = 2 if j == 0 and li > 0 else 1
            h = b.op("Relu", [conv_bn(x, f"{s}.conv1", f"{s}.bn1", c_in, width, 1, 1)], f"{s}.relu")
            h = b.op("Relu", [conv_bn(h, f"{s}.conv2", f"{s}.bn2", width, width, 3, stride)], f"{s}.relu")
            h = conv_bn(h, f"{s}.conv3", f"{s}.bn3", width, 4 * width, 1, 1)
            if j == 0:
                x = conv_bn(x, f"{s}.downsample.0", f"{s}.downsample.1", c_in, 4 * width, 1, stride)
            x = b.op("Relu", [b.op("Add", [h, x], s)], f"{s}.relu")
            c_in = 4 * width
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x], "avgpool")], "", axis=1)
    fc = b.op("Gemm", [x, b.param("fc.weight", [classes, c_in]), b.param("fc.bias", [classes])], "fc", transB=1)
    b.nodes.append(helper.make_node("Identity", [fc], ["logits"], name="/Identity"))
    return b.save(out_dir, [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["batch", 3, image, image])],
                  [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])])


MODELS: dict[str, Callable[..., Path]] = {"bert_base": bert_base, "gpt2": gpt2, "resnet50": resnet50}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(ROOT / "examples" / "onnx"))
    ap.add_argument("--with-weights", action="store_true", help="also write random weights as external data")
    ap.add_argument("--models", default=",".join(MODELS))
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for name in args.models.split(","):
        path = MODELS[name](out, args.with_weights)
        print(f"{path}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
