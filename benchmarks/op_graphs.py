"""Small hand-built model graphs with op metadata (the importers' format) for strategy generation.

``transformer(layers)``: BERT-base-sized encoder layers (batch 8, sequence 128, hidden 768,
12 heads, FFN 3072, float16) with separate q/k/v projections, reshapes and transposes as
view ops. ``resnet_blocks(blocks)``: a ResNet stem convolution, basic blocks (conv-bn-relu-
conv-bn-add-relu) at 64 channels on 56x56, global average pool and a classifier
(batch 32, float16). FLOPs count a multiply-add as 2; bytes are inputs plus outputs.
Not a test; used by ``benchmarks/intraop_elimination.py``.
"""

from __future__ import annotations

import math
from typing import Any

DT = "float16"
ITEM = 2


class _Builder:
    def __init__(self, name: str) -> None:
        self.name = name
        self.ops: list[dict[str, Any]] = []
        self.edges: list[list[int]] = []
        self.producer: dict[str, int] = {}
        self.shapes: dict[str, list[int]] = {}

    def tensor(self, name: str, shape: list[int]) -> str:
        self.shapes[name] = shape
        return name

    def op(self, name: str, op: str, kind: str, inputs: list[str], params: dict[str, list[int]],
           out_shape: list[int], flops: float, attrs: dict[str, Any] | None = None) -> str:
        ins = [{"name": x, "shape": self.shapes[x], "dtype": DT, "param": False} for x in inputs]
        ins += [{"name": f"{name}.{p}", "shape": s, "dtype": DT, "param": True} for p, s in params.items()]
        out = self.tensor(f"{name}:out", out_shape)
        nbytes = sum(math.prod(t["shape"]) for t in ins) * ITEM + math.prod(out_shape) * ITEM
        i = len(self.ops)
        self.ops.append({"name": name, "op": op, "kind": kind, "module": name, "inputs": ins,
                         "outputs": [{"name": out, "shape": out_shape, "dtype": DT}], "attrs": attrs or {},
                         "flops": float(flops), "bytes": int(nbytes)})
        for x in inputs:
            if x in self.producer:
                self.edges.append([self.producer[x], i])
        self.producer[out] = i
        return out

    def linear(self, name: str, x: str, n: int) -> str:
        s = self.shapes[x]
        k = s[-1]
        return self.op(name, "MatMul", "gemm", [x], {"weight": [k, n]}, s[:-1] + [n], 2 * math.prod(s) * n)

    def elementwise(self, name: str, op: str, inputs: list[str], per_elem: float = 1.0,
                    params: dict[str, list[int]] | None = None) -> str:
        s = self.shapes[inputs[0]]
        return self.op(name, op, "elementwise", inputs, params or {}, s, per_elem * math.prod(s))

    def view(self, name: str, op: str, x: str, shape: list[int], attrs: dict[str, Any] | None = None) -> str:
        return self.op(name, op, "view", [x], {}, shape, 0.0, attrs)

    def doc(self) -> dict[str, Any]:
        n = len(self.ops)
        return {"graph": {"name": self.name, "nodes": {"work": [1.0] * n, "size_param": [0] * n,
                                                        "size_out": [0] * n, "ops": self.ops},
                          "edges": self.edges}, "bandwidth": 1.0}


def transformer(layers: int = 1, batch: int = 8, seq: int = 128, hidden: int = 768, heads: int = 12,
                ffn: int = 3072) -> dict[str, Any]:
    b = _Builder(f"transformer-{layers}")
    d = hidden // heads
    x = b.tensor("input", [batch, seq, hidden])
    for li in range(layers):
        p = f"layer{li}"
        h = b.op(f"{p}.ln1", "LayerNormalization", "norm", [x], {"scale": [hidden], "bias": [hidden]},
                 [batch, seq, hidden], 8 * batch * seq * hidden, {"axis": -1})
        q = b.linear(f"{p}.attention.q", h, hidden)
        k = b.linear(f"{p}.attention.k", h, hidden)
        v = b.linear(f"{p}.attention.v", h, hidden)
        q = b.view(f"{p}.attention.q_heads", "Reshape", q, [batch, seq, heads, d])
        q = b.view(f"{p}.attention.q_t", "Transpose", q, [batch, heads, seq, d], {"perm": [0, 2, 1, 3]})
        k = b.view(f"{p}.attention.k_heads", "Reshape", k, [batch, seq, heads, d])
        k = b.view(f"{p}.attention.k_t", "Transpose", k, [batch, heads, d, seq], {"perm": [0, 2, 3, 1]})
        v = b.view(f"{p}.attention.v_heads", "Reshape", v, [batch, seq, heads, d])
        v = b.view(f"{p}.attention.v_t", "Transpose", v, [batch, heads, seq, d], {"perm": [0, 2, 1, 3]})
        s = b.op(f"{p}.attention.scores", "MatMul", "gemm", [q, k], {}, [batch, heads, seq, seq],
                 2 * batch * heads * seq * seq * d)
        s = b.op(f"{p}.attention.softmax", "Softmax", "softmax", [s], {}, [batch, heads, seq, seq],
                 5 * batch * heads * seq * seq, {"axis": -1})
        c = b.op(f"{p}.attention.context", "MatMul", "gemm", [s, v], {}, [batch, heads, seq, d],
                 2 * batch * heads * seq * seq * d)
        c = b.view(f"{p}.attention.context_t", "Transpose", c, [batch, seq, heads, d], {"perm": [0, 2, 1, 3]})
        c = b.view(f"{p}.attention.merge", "Reshape", c, [batch, seq, hidden])
        o = b.linear(f"{p}.attention.out", c, hidden)
        x = b.elementwise(f"{p}.residual1", "Add", [o, x])
        h = b.op(f"{p}.ln2", "LayerNormalization", "norm", [x], {"scale": [hidden], "bias": [hidden]},
                 [batch, seq, hidden], 8 * batch * seq * hidden, {"axis": -1})
        h = b.linear(f"{p}.ffn.fc1", h, ffn)
        h = b.elementwise(f"{p}.ffn.gelu", "Gelu", [h], 8.0)
        h = b.linear(f"{p}.ffn.fc2", h, hidden)
        x = b.elementwise(f"{p}.residual2", "Add", [h, x])
    return b.doc()


def resnet_blocks(blocks: int = 2, batch: int = 32, channels: int = 64, size: int = 56,
                  classes: int = 1000) -> dict[str, Any]:
    b = _Builder(f"resnet-{blocks}")
    x = b.tensor("image", [batch, 3, size, size])
    conv_attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "group": 1}

    def conv(name: str, x: str, cin: int, cout: int) -> str:
        flops = 2 * batch * cout * cin * 9 * size * size
        return b.op(name, "Conv", "conv", [x], {"weight": [cout, cin, 3, 3]}, [batch, cout, size, size], flops,
                    conv_attrs)

    def bn(name: str, x: str) -> str:
        return b.op(name, "BatchNormalization", "norm", [x], {"scale": [channels], "bias": [channels]},
                    b.shapes[x], 4 * math.prod(b.shapes[x]))

    x = b.elementwise("stem.relu", "Relu", [bn("stem.bn", conv("stem.conv", x, 3, channels))])
    for i in range(blocks):
        p = f"block{i}"
        h = b.elementwise(f"{p}.relu1", "Relu", [bn(f"{p}.bn1", conv(f"{p}.conv1", x, channels, channels))])
        h = bn(f"{p}.bn2", conv(f"{p}.conv2", h, channels, channels))
        x = b.elementwise(f"{p}.relu2", "Relu", [b.elementwise(f"{p}.add", "Add", [h, x])])
    pooled = b.op("pool", "GlobalAveragePool", "pool", [x], {}, [batch, channels, 1, 1],
                  batch * channels * size * size)
    flat = b.view("flatten", "Flatten", pooled, [batch, channels])
    b.linear("fc", flat, classes)
    return b.doc()


def dense_block(layers: int = 4, batch: int = 32, channels: int = 32, size: int = 28) -> dict[str, Any]:
    """A DenseNet-style block with summed (not concatenated) features: layer i convolves the sum
    of every earlier layer's output, so the graph's treewidth grows with ``layers``."""
    b = _Builder(f"dense-{layers}")
    x = b.tensor("image", [batch, channels, size, size])
    attrs = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "strides": [1, 1], "group": 1}
    flops = 2 * batch * channels * channels * 9 * size * size
    feats = [b.op("stem", "Conv", "conv", [x], {"weight": [channels, channels, 3, 3]},
                  [batch, channels, size, size], flops, attrs)]
    for i in range(1, layers + 1):
        s = feats[0] if len(feats) == 1 else b.elementwise(f"sum{i}", "Sum", list(feats), float(len(feats) - 1))
        feats.append(b.op(f"conv{i}", "Conv", "conv", [s], {"weight": [channels, channels, 3, 3]},
                          [batch, channels, size, size], flops, attrs))
    return b.doc()
