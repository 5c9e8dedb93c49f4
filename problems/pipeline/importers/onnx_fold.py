"""Computations that do not depend on the graph inputs' values, folded into constants.

Exporters with dynamic axes compute reshape targets at run time (``Shape -> Gather -> Div ->
Concat -> Reshape``); ONNX's data propagation covers only part of those ops, which leaves the
shapes after the first such ``Reshape`` unknown. Once the input dims are fixed these values are
static: :func:`fold_shape_computations` evaluates them with numpy and hands them to their
consumers as initializers, then infers again, until nothing new folds.

Other files build their weights in the graph (``ConstantOfShape`` of an initializer shape, a
``Transpose`` or ``Unsqueeze`` of a weight): :func:`input_free_nodes` finds every node whose
outputs are fixed once the input shapes are, so that the importer charges those outputs as
parameters, as it does initializers, instead of making the nodes stages must run.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

#: largest value (elements) folded: shape tensors are tiny, activations are not
MAX_ELEMENTS = 1024
MAX_ROUNDS = 500


def _axes(node: Any, args: list[Any], attrs: dict[str, Any], pos: int) -> list[int] | None:
    if len(args) > pos and args[pos] is not None:
        return [int(a) for a in np.asarray(args[pos]).ravel()]
    return attrs.get("axes")


def _unsqueeze(node: Any, args: list[Any], attrs: dict[str, Any]) -> Any:
    x = args[0]
    axes = _axes(node, args, attrs, 1) or []
    rank = x.ndim + len(axes)
    for a in sorted(a % rank for a in axes):
        x = np.expand_dims(x, a)
    return x


def _squeeze(node: Any, args: list[Any], attrs: dict[str, Any]) -> Any:
    axes = _axes(node, args, attrs, 1)
    return np.squeeze(args[0]) if axes is None else np.squeeze(args[0], axis=tuple(a % args[0].ndim for a in axes))


def _slice(node: Any, args: list[Any], attrs: dict[str, Any]) -> Any:
    data, starts, ends = args[0], np.asarray(args[1]).ravel(), np.asarray(args[2]).ravel()
    axes = np.asarray(args[3]).ravel() if len(args) > 3 and args[3] is not None else np.arange(len(starts))
    steps = np.asarray(args[4]).ravel() if len(args) > 4 and args[4] is not None else np.ones(len(starts), int)
    index = [slice(None)] * data.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        index[int(a) % data.ndim] = slice(int(s), int(e), int(st))
    return data[tuple(index)]


def _div(a: Any, b: Any) -> Any:
    if np.issubdtype(np.result_type(a, b), np.integer):
        return np.trunc(np.true_divide(a, b)).astype(np.result_type(a, b))  # ONNX integer Div truncates
    return np.true_divide(a, b)


def _constant_of_shape(node: Any, args: list[Any], attrs: dict[str, Any]) -> Any:
    from onnx import numpy_helper

    value = attrs.get("value")
    fill = numpy_helper.to_array(value).ravel() if value is not None else np.zeros(1, np.float32)
    shape = [int(d) for d in np.asarray(args[0]).ravel()]
    # shape computations are integers; a float fill is a weight built in the graph, whose value
    # the importer never needs (folding it would only copy it into an initializer)
    if fill.dtype.kind not in "iub" or int(np.prod(shape)) > MAX_ELEMENTS:
        raise ValueError("not a shape computation")
    return np.full(shape, fill[0], dtype=fill.dtype)


_FOLD: dict[str, Callable[[Any, list[Any], dict[str, Any]], Any]] = {
    "Gather": lambda n, a, t: np.take(a[0], a[1], axis=t.get("axis", 0)),
    "Concat": lambda n, a, t: np.concatenate([np.atleast_1d(x) for x in a], axis=t.get("axis", 0)),
    "Unsqueeze": _unsqueeze,
    "Squeeze": _squeeze,
    "Slice": _slice,
    "Add": lambda n, a, t: np.add(a[0], a[1]),
    "Sub": lambda n, a, t: np.subtract(a[0], a[1]),
    "Mul": lambda n, a, t: np.multiply(a[0], a[1]),
    "Div": lambda n, a, t: _div(a[0], a[1]),
    "Equal": lambda n, a, t: np.equal(a[0], a[1]),
    "Where": lambda n, a, t: np.where(a[0], a[1], a[2]),
    "Max": lambda n, a, t: np.maximum.reduce(a),
    "Min": lambda n, a, t: np.minimum.reduce(a),
    "Neg": lambda n, a, t: np.negative(a[0]),
    "Identity": lambda n, a, t: a[0],
    "Reshape": lambda n, a, t: np.reshape(a[0], [int(d) if d != 0 else a[0].shape[i]
                                                 for i, d in enumerate(np.asarray(a[1]).ravel())]),
    "ReduceProd": lambda n, a, t: np.prod(a[0], keepdims=bool(t.get("keepdims", 1))),
    "Range": lambda n, a, t: np.arange(a[0], a[1], a[2]).astype(np.result_type(a[0])),
    "ConstantOfShape": _constant_of_shape,
}


def _static_shapes(graph: Any) -> dict[str, list[int]]:
    out = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        tt = vi.type.tensor_type
        if vi.type.HasField("tensor_type") and tt.HasField("shape") \
                and all(d.HasField("dim_value") for d in tt.shape.dim):
            out[vi.name] = [int(d.dim_value) for d in tt.shape.dim]
    for t in graph.initializer:
        out[t.name] = [int(d) for d in t.dims]
    return out


def known_values(graph: Any, onnx: Any) -> tuple[dict[str, Any], set[str]]:
    """Known small values (initializers, Constants, and what folds from them); the names folded."""
    from onnx import numpy_helper

    shapes = _static_shapes(graph)
    values: dict[str, Any] = {}
    for t in graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL and int(np.prod(t.dims)) <= MAX_ELEMENTS:
            values[t.name] = numpy_helper.to_array(t)
    folded: set[str] = set()
    for node in graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Constant":
            v = attrs.get("value")
            if v is not None and not isinstance(v, (int, float, list)):
                values[node.output[0]] = numpy_helper.to_array(v)
            elif "value_int" in attrs or "value_ints" in attrs:
                values[node.output[0]] = np.asarray(attrs.get("value_int", attrs.get("value_ints")), np.int64)
            continue
        if node.op_type in ("Shape", "Size"):
            shape = shapes.get(node.input[0])
            if shape is not None:
                s = np.asarray(shape, np.int64)
                if node.op_type == "Shape":
                    s = s[attrs.get("start", 0): attrs.get("end", len(s))]
                values[node.output[0]] = s if node.op_type == "Shape" else np.int64(np.prod(shape))
                folded.add(node.output[0])
            continue
        fold = _FOLD.get(node.op_type)
        if fold is None or not all(i in values for i in node.input if i):
            continue
        try:
            v = np.asarray(fold(node, [values[i] if i else None for i in node.input], attrs))
        except (ValueError, TypeError, IndexError):
            continue
        if v.size <= MAX_ELEMENTS:
            values[node.output[0]] = v
            folded.add(node.output[0])
    return values, folded


#: ops whose outputs are not fixed by their inputs (random draws), or a quantized weight's
#: dequantization, which runtimes run next to the op that reads it so the weight stays quantized
_NEVER_FOLDED = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial",
                 "Bernoulli", "DequantizeLinear"}


def input_free_nodes(graph: Any, onnx: Any) -> tuple[set[int], dict[str, frozenset[str]]]:
    """The nodes (indices in ``graph.node``) whose outputs are fixed once the input shapes are, and
    every tensor so fixed (initializers included), mapped to the initializers it is computed from.

    A node is input-free when every input it reads is, or when it is a ``Shape`` or ``Size`` of a
    tensor whose shape is fully known (``Constant`` has no inputs: input-free). Random ops,
    ``DequantizeLinear``, ops of other domains (their semantics are unknown) and ops holding
    subgraphs (a body may read outer tensors that are not among the node's inputs) never are.
    """
    shapes = _static_shapes(graph)
    graph_attr = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)
    fixed: dict[str, frozenset[str]] = {t.name: frozenset((t.name,)) for t in graph.initializer}
    nodes: set[int] = set()
    for idx, node in enumerate(graph.node):
        if node.domain not in ("", "ai.onnx") or node.op_type in _NEVER_FOLDED \
                or any(a.type in graph_attr for a in node.attribute):
            continue
        ins = [i for i in node.input if i]
        if node.op_type in ("Shape", "Size"):
            if not ins or ins[0] not in shapes:
                continue
            sources: frozenset[str] = frozenset()  # the value is the shape, not the data
        elif all(i in fixed for i in ins):
            sources = frozenset().union(*(fixed[i] for i in ins))
        else:
            continue
        nodes.add(idx)
        fixed.update((o, sources) for o in node.output if o)
    return nodes, fixed


def fold_shape_computations(model: Any, onnx: Any) -> Any:
    """Infer shapes (not strict), fold the static shape computations into initializers read by
    the ops that cannot fold, and repeat until nothing new folds. Returns the rewired model;
    the folded nodes stay in the graph, no longer read by those ops (:func:`input_free_nodes`
    finds them)."""
    from onnx import numpy_helper

    for _ in range(MAX_ROUNDS):
        model = onnx.shape_inference.infer_shapes(model, strict_mode=False, data_prop=True)
        g = model.graph
        values, folded = known_values(g, onnx)
        inits = {t.name for t in g.initializer}
        changed = False
        for node in g.node:
            if node.op_type == "Constant" or any(o in values for o in node.output):
                continue  # folded itself: its inputs stay as they are
            for j, name in enumerate(node.input):
                if name in folded:
                    new = f"{name}:folded"
                    if new not in inits:
                        g.initializer.append(numpy_helper.from_array(np.asarray(values[name]), new))
                        inits.add(new)
                    node.input[j] = new
                    changed = True
        if not changed:
            return model
    return model
