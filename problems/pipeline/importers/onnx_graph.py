"""ONNX model -> pipeline graph, from shapes alone (weights are never read).

Rules (also in docs/importing.md):

* One graph node per ONNX node, in the file's node order (ONNX requires it topological), plus
  one free source node per graph input. Nodes whose outputs do not depend on the inputs' values
  once their shapes are fixed (``Constant``, ``ConstantOfShape`` of a constant shape, arithmetic
  on constants, ``Shape`` of a known shape, ...; see
  :func:`~problems.pipeline.importers.onnx_fold.input_free_nodes`) are folded: their outputs are
  parameters, like initializers, and they are not nodes.
* Parameters (initializers, folded outputs) are charged to every node that reads them (a folded
  output smaller than the initializers it is computed from, such as rows of a constant table at
  constant positions, in ``size_param`` as those initializers: the table is still held):
  ``size_param`` and ``bytes`` include them; a stage running two consumers of one shared
  parameter is charged twice (a stage never looks smaller than it is).
* ``size_out`` is the sum of a node's output tensors that are read by another node or are graph
  outputs (all its outputs if none is): a multi-output (tuple) node is one producer whose
  outputs travel together. An output nothing reads needs no shape (opset 9's ``Dropout`` mask):
  left out of the op's ``outputs`` when shape inference gives it none.
* FLOPs count a multiply-add as 2; see :data:`_FLOP_RULES` and :func:`op_flops`. ``bytes`` is
  every input (activations and parameters) plus every output, except views (0) and Gather on
  a parameter (an embedding lookup: indices + the rows read + the output).
* Unknown op types get 0 FLOPs, so the roofline charges them their bytes at memory bandwidth.

Symbolic input dims are resolved from ``input_shapes`` (whole shapes by input name) and
``batch`` (the leading dim of every input whose leading dim is symbolic); any other symbolic
dim is an error naming the input. The ``onnx`` package is imported lazily.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from gapstop.engine.errors import InputError
from gapstop.problems.chip import ChipProfile
from gapstop.problems.pipeline.importers.onnx_fold import fold_shape_computations, input_free_nodes, known_values
from gapstop.problems.pipeline.importers.roofline import GraphBuilder, classify, optional_import

INSTALL_HINT = "the ONNX importer needs the onnx package: pip install 'gapstop[onnx]' (or pip install onnx)"

_GEMM = {"MatMul", "Gemm", "MatMulInteger", "QLinearMatMul", "Einsum"}
_CONV = {"Conv", "ConvTranspose", "ConvInteger", "QLinearConv"}
_ELEMENTWISE = {
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Neg", "Abs", "Sqrt", "Exp", "Log", "Reciprocal", "Floor", "Ceil",
    "Round", "Sign", "Sin", "Cos", "Tan", "Tanh", "Sigmoid", "Relu", "LeakyRelu", "PRelu", "Elu", "Selu",
    "Celu", "Gelu", "Erf", "HardSigmoid", "HardSwish", "Softplus", "Softsign", "Mish", "Clip", "Max", "Min",
    "Sum", "Mean", "Where", "Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual", "Not", "And", "Or",
    "Xor", "IsNaN", "IsInf", "BitShift", "ThresholdedRelu", "Swish", "QuickGelu", "FastGelu",
}
_REDUCTION = {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
              "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ArgMax", "ArgMin", "CumSum"}
_NORM = {"LayerNormalization", "BatchNormalization", "InstanceNormalization", "GroupNormalization",
         "RMSNormalization", "SimplifiedLayerNormalization", "LpNormalization", "LRN", "MeanVarianceNormalization"}
_SOFTMAX = {"Softmax", "LogSoftmax", "Hardmax"}
_POOL = {"MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"}
#: free: no data moves (metadata or aliasing only)
_VIEW = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Shape", "Size", "Dropout"}
#: data movement: 0 FLOPs, charged their bytes
_MOVE = {"Transpose", "Concat", "Split", "Slice", "Expand", "Tile", "Pad", "Gather", "GatherElements",
         "GatherND", "ScatterND", "ScatterElements", "Resize", "DepthToSpace", "SpaceToDepth", "Cast",
         "CastLike", "ConstantOfShape", "Range", "OneHot", "Trilu", "ReverseSequence", "QuantizeLinear",
         "DequantizeLinear", "EyeLike", "NonZero", "TopK", "Compress"}

#: FLOPs per element of the named tensor, for the per-element kinds
_FLOP_RULES = {"elementwise": (1, "output"), "reduction": (1, "input"), "softmax": (5, "input"),
               "norm": (5, "input"), "batchnorm": (2, "input")}


def _kind(op_type: str, param_inputs: list[bool]) -> str:
    if op_type == "Gather" and param_inputs and param_inputs[0]:
        return "embedding"
    return classify(op_type, ((_GEMM, "gemm"), (_CONV, "conv"), (_ELEMENTWISE, "elementwise"),
                              (_REDUCTION, "reduction"), (_NORM, "norm"), (_SOFTMAX, "softmax"), (_POOL, "pool"),
                              (_VIEW, "view"), (_MOVE, "other")))


def _numel(shape: list[int]) -> int:
    return int(math.prod(shape))


def op_flops(op_type: str, kind: str, ins: list[dict[str, Any]], outs: list[dict[str, Any]],
             attrs: dict[str, Any]) -> float:
    """FLOPs of one execution (multiply-add = 2). ``ins``/``outs``: present tensors with shapes.

    gemm: ``2 * numel(out) * K`` (K the contracted length); Einsum: ``2 * prod(all index sizes)``;
    conv: ``2 * numel(out) * (C_in / group) * prod(kernel)`` (ConvTranspose: ``2 * numel(X) *
    (C_out / group) * prod(kernel)``); a bias fused into a gemm or conv is not counted, as in
    ``torch.utils.flop_counter``;
    pool: ``numel(out) * prod(kernel)`` (global pools: ``numel(X)``); elementwise: 1 per output
    element; reduction: 1 per input element; softmax and norms: 5 per input element;
    BatchNormalization: 2 per input element (a folded scale and shift); everything else 0.
    """
    out = outs[0]["shape"] if outs else []
    if kind == "gemm":
        if op_type == "Einsum":
            return _einsum_flops(attrs.get("equation", ""), [t["shape"] for t in ins])
        a = ins[0]["shape"]
        if op_type == "Gemm":
            k = a[0] if attrs.get("transA", 0) else a[-1]
            return 2.0 * _numel(out) * k
        k = a[-1] if a else 1
        return 2.0 * _numel(out) * k
    if kind == "conv":
        w = ins[1]["shape"]
        kernel = _numel(w[2:])
        if op_type == "ConvTranspose":
            return 2.0 * _numel(ins[0]["shape"]) * w[1] * kernel
        return 2.0 * _numel(out) * w[1] * kernel
    if kind == "pool":
        if op_type.startswith("Global"):
            return float(_numel(ins[0]["shape"]))
        return float(_numel(out) * _numel(attrs.get("kernel_shape", [1])))
    rule = "batchnorm" if op_type == "BatchNormalization" else kind
    if rule in _FLOP_RULES:
        per, which = _FLOP_RULES[rule]
        return float(per * _numel(out if which == "output" else ins[0]["shape"]))
    return 0.0


def _einsum_flops(equation: str, shapes: list[list[int]]) -> float:
    lhs = equation.replace(" ", "").split("->")[0]
    sizes: dict[str, int] = {}
    for term, shape in zip(lhs.split(","), shapes):
        letters = [c for c in term if c.isalpha()]
        if "..." in term:  # broadcast dims: fold them into one pseudo-index of their product
            n_ell = len(shape) - len(letters)
            sizes["..."] = max(sizes.get("...", 1), _numel(shape[term.index("..."):][:n_ell]))
            shape = shape[:term.index("...")] + shape[term.index("...") + n_ell:]
        for c, d in zip(letters, shape):
            sizes[c] = max(sizes.get(c, 1), d)
    total = float(math.prod(sizes.values()))
    return 2.0 * total if len(shapes) > 1 else total


def _parse_input_shapes(specs: list[str] | dict[str, list[int]] | None) -> dict[str, list[int]]:
    if specs is None:
        return {}
    if isinstance(specs, dict):
        return {k: list(v) for k, v in specs.items()}
    out: dict[str, list[int]] = {}
    for s in specs:
        name, eq, dims = s.rpartition("=")[0], "=" in s, s.rpartition("=")[2]
        try:
            shape = [int(d) for d in dims.split(",")] if dims.strip() else []
        except ValueError:
            shape = None
        if not eq or not name or shape is None or any(d < 1 for d in shape):
            raise InputError(f"--input-shape: expected NAME=d0,d1,... with positive integers, got {s!r}")
        out[name] = shape
    return out


def _onnx() -> Any:
    return optional_import("onnx", INSTALL_HINT)


def _load(path: Path) -> Any:
    onnx = _onnx()
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as e:  # protobuf raises several types for truncated or foreign bytes
        first = (str(e).splitlines() or [type(e).__name__])[0]
        raise InputError(f"{path}: not a readable ONNX model ({type(e).__name__}: {first})") from None
    if model.ir_version <= 0 or not model.graph.node:
        raise InputError(f"{path}: not an ONNX model (no ir_version or no graph nodes)")
    return model


def _resolve_inputs(path: Path, model: Any, shapes: dict[str, list[int]], batch: int | None) -> dict[str, list[int]]:
    """Fix every graph input's dims in place; return the resolved shapes by input name."""
    inits = {t.name for t in model.graph.initializer}
    inputs = [i for i in model.graph.input if i.name not in inits]
    names = [i.name for i in inputs]
    for n in shapes:
        if n not in names:
            raise InputError(f"--input-shape: the model has no input {n!r} (inputs: {', '.join(names)})")
    if batch is not None and batch < 1:
        raise InputError(f"--batch: must be >= 1, got {batch}")
    resolved: dict[str, list[int]] = {}
    batch_used = False
    for inp in inputs:
        if not inp.type.HasField("tensor_type"):
            raise InputError(f"{path}: input {inp.name!r}: not a tensor input (sequences and maps are not supported)")
        tt = inp.type.tensor_type
        dims = tt.shape.dim if tt.HasField("shape") else None
        if inp.name in shapes:
            want = shapes[inp.name]
            if dims is not None and len(dims) != len(want):
                raise InputError(f"--input-shape: input {inp.name!r} has rank {len(dims)}, got {len(want)} dims")
            for i, d in enumerate(dims or []):
                if d.HasField("dim_value") and d.dim_value != want[i]:
                    raise InputError(f"--input-shape: input {inp.name!r}: dim {i} is fixed at {d.dim_value} in "
                                     f"the model, got {want[i]}")
            tt.shape.Clear()
            for w in want:
                tt.shape.dim.add().dim_value = w
            resolved[inp.name] = list(want)
            continue
        if dims is None:
            raise InputError(f"{path}: input {inp.name!r}: shape unknown; give --input-shape {inp.name}=d0,d1,...")
        shape: list[int] = []
        for i, d in enumerate(dims):
            if d.HasField("dim_value") and d.dim_value > 0:
                shape.append(d.dim_value)
            elif i == 0 and batch is not None:
                d.dim_value = batch
                shape.append(batch)
                batch_used = True
            else:
                label = repr(d.dim_param) if d.dim_param else "unknown"
                hint = "--batch N or " if i == 0 else ""
                raise InputError(f"{path}: input {inp.name!r}: dim {i} ({label}) is symbolic; give {hint}"
                                 f"--input-shape {inp.name}=d0,d1,...")
        resolved[inp.name] = shape
    if batch is not None and not batch_used:
        raise InputError(f"--batch: no input left with a symbolic leading dim (the model's inputs: "
                         f"{', '.join(f'{n} {resolved[n]}' for n in names)}); use --input-shape")
    return resolved


def _tensor_infos(path: Path, model: Any) -> dict[str, tuple[list[int] | None, int]]:
    """Tensor name -> (shape or None if not fully known, ONNX elem type)."""
    infos: dict[str, tuple[list[int] | None, int]] = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        if not vi.type.HasField("tensor_type"):
            continue
        tt = vi.type.tensor_type
        shape = None
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shape = [int(d.dim_value) for d in tt.shape.dim]
        prev = infos.get(vi.name)
        if prev is None or prev[0] is None:
            infos[vi.name] = (shape, tt.elem_type)
    for t in model.graph.initializer:
        infos[t.name] = ([int(d) for d in t.dims], t.data_type)
    return infos


def _dtype(elem_type: int) -> tuple[str, int]:
    """numpy-style dtype name and item size of an ONNX element type."""
    onnx = _onnx()
    try:
        dt = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
        return dt.name, max(1, dt.itemsize)
    except (KeyError, TypeError, ValueError):
        return onnx.TensorProto.DataType.Name(elem_type).lower(), 1


def _attrs(node: Any, ins: list[dict[str, Any]], consts: dict[str, Any]) -> dict[str, Any]:
    """The node's scalar and list attributes, with the defaults that shape the iteration domain
    filled in; ``axes`` given as a constant input (reductions from opset 18) become an attribute."""
    onnx = _onnx()
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS, onnx.AttributeProto.TENSOR,
                      onnx.AttributeProto.TENSORS, onnx.AttributeProto.SPARSE_TENSOR,
                      onnx.AttributeProto.SPARSE_TENSORS, onnx.AttributeProto.TYPE_PROTO,
                      onnx.AttributeProto.TYPE_PROTOS):
            continue
        v = onnx.helper.get_attribute_value(a)
        out[a.name] = v.decode() if isinstance(v, bytes) else (list(v) if isinstance(v, (list, tuple)) else v)
        if isinstance(out[a.name], list):
            out[a.name] = [x.decode() if isinstance(x, bytes) else x for x in out[a.name]]
    if node.op_type in _CONV and len(ins) > 1:
        w = ins[1]["shape"]
        out.setdefault("kernel_shape", list(w[2:]))
        nsp = len(w) - 2
        out.setdefault("strides", [1] * nsp)
        out.setdefault("dilations", [1] * nsp)
        out.setdefault("pads", [0] * (2 * nsp))
        out.setdefault("group", 1)
    if node.op_type == "Gemm":
        out.setdefault("transA", 0)
        out.setdefault("transB", 0)
    if node.op_type in _REDUCTION and "axes" not in out and len(node.input) > 1 and node.input[1] in consts:
        out["axes"] = [int(a) for a in np.asarray(consts[node.input[1]]).ravel()]
    if node.op_type in _SOFTMAX:
        out.setdefault("axis", -1)
    if node.op_type == "LayerNormalization":
        out.setdefault("axis", -1)
    return out


def _module_of(name: str) -> str | None:
    """The module path in an exporter's scoped node name: ``/encoder/layer.0/attn/MatMul`` -> ``encoder.layer.0.attn``."""
    parts = [p for p in name.split("/") if p]
    if not name.startswith("/") or len(parts) < 2:
        return None
    return ".".join(parts[:-1])


def import_onnx(path: str | Path, chip: ChipProfile, *, batch: int | None = None,
                input_shapes: list[str] | dict[str, list[int]] | None = None) -> tuple[dict[str, Any], str | None]:
    """Import an ONNX file as a pipeline graph document (see :mod:`problems.pipeline.io`).

    Returns ``(document, warning)``: ``warning`` is one line listing unknown op types with
    their counts, or None. ``work`` is in µs on ``chip``; ``graph.nodes.ops`` holds the
    per-op metadata. Raises :class:`InputError` (one line) for an unreadable or non-ONNX file,
    unresolved symbolic input dims, failed shape inference, a tensor whose shape stays unknown or
    has a negative dim, or a tensor written twice.
    """
    onnx = _onnx()
    p = Path(path)
    model = _load(p)
    written = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    for node in model.graph.node:
        for o in node.output:
            if o in written:  # ONNX graphs are single-assignment; a second writer would rewire the edges
                raise InputError(f"{p}: tensor {o!r} (output of node {node.name or node.op_type!r}) is already "
                                 "written by a graph input, an initializer or another node")
            if o:
                written.add(o)
    shapes = _resolve_inputs(p, model, _parse_input_shapes(input_shapes), batch)
    # symbolic intermediate shapes must not survive into inference; concrete ones stay (they are
    # the only shapes an op unknown to ONNX has), and a conflict with inference is an error
    keep = [vi for vi in model.graph.value_info
            if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")
            and all(d.HasField("dim_value") for d in vi.type.tensor_type.shape.dim)]
    del model.graph.value_info[:]
    model.graph.value_info.extend(keep)
    try:
        model = fold_shape_computations(model, onnx)
        model = onnx.shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as e:  # InferenceError, ValidationError
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise InputError(f"{p}: shape inference failed: {first}") from None
    infos = _tensor_infos(p, model)
    g = model.graph
    consts, _ = known_values(g, onnx)
    folded, params = input_free_nodes(g, onnx)

    not_tensors = {vi.name: vi.type.WhichOneof("value") for vi in list(g.value_info) + list(g.output)
                   if not vi.type.HasField("tensor_type")}

    def tensor(t: str, where: str) -> dict[str, Any]:
        info = infos.get(t)
        if info is None and t in not_tensors:
            kind = (not_tensors[t] or "untyped value").removesuffix("_type")
            raise InputError(f"{p}: {t!r} ({where}) is a {kind}, not a tensor (sequences, maps and optionals "
                             "are not supported)")
        if info is None or info[0] is None:
            raise InputError(f"{p}: tensor {t!r} ({where}): shape unknown after shape inference "
                             f"(ops unknown to ONNX need value_info for their outputs)")
        if any(d < 0 for d in info[0]):
            raise InputError(f"{p}: tensor {t!r} ({where}): shape {info[0]} after shape inference has a negative "
                             "dim (the model's shapes are inconsistent)")
        name, _ = _dtype(info[1])
        return {"name": t, "shape": info[0], "dtype": name}

    def nbytes(t: dict[str, Any]) -> int:
        return _numel(t["shape"]) * _dtype(infos[t["name"]][1])[1]

    def held(t: str, nb: int) -> int:
        """Memory a reader of parameter ``t`` (``nb`` bytes) holds: a folded tensor smaller than the
        initializers it is computed from (rows looked up in a constant table) still needs them."""
        src = sum(nbytes({"name": s, "shape": infos[s][0]}) for s in params[t] if s != t)
        return max(nb, src)

    consumed: set[str] = {i for n in g.node for i in n.input if i}
    consumed.update(o.name for o in g.output)
    b = GraphBuilder(chip)
    producer: dict[str, int] = {}
    taken: set[str] = set()

    def unique(name: str, fallback: str) -> str:
        name = name or fallback
        if name in taken:
            name = f"{name}#{fallback}"
        taken.add(name)
        return name

    for inp in g.input:
        if inp.name in params:
            continue
        t = {"name": inp.name, "shape": shapes[inp.name], "dtype": _dtype(inp.type.tensor_type.elem_type)[0]}
        nb = nbytes(t)
        op = {"name": unique(inp.name, f"input:{inp.name}"), "op": "Input", "kind": "view", "module": None,
              "inputs": [], "outputs": [t], "attrs": {}, "flops": 0.0, "bytes": 0}
        producer[inp.name] = b.add(op, 0, nb, t["dtype"])
    for idx, node in enumerate(g.node):
        if idx in folded:
            continue
        name = unique(node.name, f"{node.op_type}_{idx}")
        where = f"input of node {name!r}"
        ins = [{**tensor(t, where), "param": t in params} for t in node.input if t]
        # an output nothing reads (Dropout's mask) needs no shape: left out when inference has none
        outs = [tensor(t, f"output of node {name!r}") for t in node.output
                if t and (t in consumed or infos.get(t, (None,))[0] is not None)]
        kind = _kind(node.op_type, [t["param"] for t in ins])
        attrs = _attrs(node, ins, consts)
        flops = op_flops(node.op_type, kind, ins, outs, attrs)
        in_b = [nbytes(t) for t in ins]
        out_b = [nbytes(t) for t in outs]
        if kind == "view":
            moved = 0
        elif kind == "embedding":  # rows read, not the whole table
            moved = sum(in_b[1:]) + 2 * sum(out_b)
        else:
            moved = sum(in_b) + sum(out_b)
        used = [nb for t, nb in zip(outs, out_b) if t["name"] in consumed]
        size_param = sum(held(t["name"], nb) for t, nb in zip(ins, in_b) if t["param"])
        compute_dtype = (ins[0] if ins else outs[0])["dtype"] if (ins or outs) else "float32"
        op = {"name": name, "op": node.op_type, "kind": kind, "module": _module_of(node.name), "inputs": ins,
              "outputs": outs, "attrs": attrs, "flops": float(flops), "bytes": int(moved)}
        v = b.add(op, size_param, sum(used) if used else sum(out_b), compute_dtype)
        for t in node.input:
            if t in producer:
                b.edge(producer[t], v)
        for t in node.output:
            if t:
                producer[t] = v
    meta = {"source": "onnx", "model": p.name, "batch": batch, "input_shapes": shapes,
            "onnx_nodes": len(g.node), "folded_nodes": len(folded)}
    return b.document(g.name or p.stem, meta), b.warning(str(p))
