"""torch.export program (``torch.export.save``) -> pipeline graph, from the recorded shapes.

Rules (docs/importing.md; the same cost rules as the ONNX importer):

* One graph node per ``call_function`` node that yields tensors, in the program's order, plus
  one free source node per tensor user input. Parameters, buffers and lifted constants are not
  nodes: they are charged to every op that reads them (``size_param`` and ``bytes``); their
  input entries are named by their fully qualified names (``layers.0.attn.in_proj_weight``).
* ``operator.getitem`` on a tuple output is not a node: the consumer reads the producer, whose
  ``size_out`` is the sum of the tuple elements something reads (or the program returns).
* Views (``view``, ``reshape``, ``transpose``, ``permute``, ``expand``, ``select``, ``slice``,
  ``split``, ...: torch views share storage) cost nothing; ``contiguous``/``clone``/``cat`` and
  other copies are charged their bytes.
* FLOPs: mm/addmm/bmm/baddbmm/matmul/linear ``2 * numel(out) * K``; convolutions
  ``2 * numel(out) * (C_in / groups) * prod(kernel)`` (transposed: by the input); scaled dot
  product attention ``2 * b * h * Sq * Sk * (D + Dv)`` -- the formulas of
  ``torch.utils.flop_counter``; elementwise, reduction, norm and softmax as in the ONNX importer.
* Module paths from each node's ``nn_module_stack`` (innermost module).

Dynamic (symbolic) shapes are not resolved: export with static shapes. Imports torch lazily.
"""

from __future__ import annotations

import importlib
import logging
import math
import operator
import re
from pathlib import Path
from typing import Any

from gapstop.engine.errors import InputError
from gapstop.problems.chip import ChipProfile
from gapstop.problems.pipeline.importers.onnx_graph import _FLOP_RULES, _einsum_flops
from gapstop.problems.pipeline.importers.roofline import GraphBuilder, classify, optional_import

INSTALL_HINT = "the torch importer needs PyTorch: pip install 'gapstop[torch]' (or pip install torch)"

_GEMM = {"mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "einsum"}
_CONV = {"convolution", "_convolution", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
         "conv_transpose3d"}
_ATTENTION = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention",
              "_scaled_dot_product_flash_attention_for_cpu", "_scaled_dot_product_efficient_attention",
              "_scaled_dot_product_cudnn_attention"}
_ELEMENTWISE = {
    "add", "sub", "rsub", "mul", "div", "pow", "neg", "abs", "sqrt", "rsqrt", "exp", "log", "reciprocal", "relu",
    "gelu", "silu", "sigmoid", "tanh", "erf", "hardtanh", "hardswish", "hardsigmoid", "leaky_relu", "elu", "mish",
    "softplus", "clamp", "clamp_min", "clamp_max", "maximum", "minimum", "where", "masked_fill", "eq", "ne", "lt",
    "le", "gt", "ge", "logical_not", "logical_and", "logical_or", "sin", "cos", "floor", "ceil", "round", "sign",
    "square", "addcmul", "addcdiv", "lerp", "fmod", "remainder", "bitwise_and", "bitwise_or", "bitwise_not",
}
_REDUCTION = {"sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "prod", "var", "std", "var_mean",
              "cumsum", "logsumexp", "linalg_vector_norm", "norm", "any", "all"}
_NORM = {"layer_norm", "native_layer_norm", "group_norm", "native_group_norm", "instance_norm", "rms_norm",
         "_fused_rms_norm"}
_BATCHNORM = {"batch_norm", "_native_batch_norm_legit_no_training", "_native_batch_norm_legit", "native_batch_norm",
              "_batch_norm_with_update", "_batch_norm_no_update"}
_SOFTMAX = {"softmax", "_softmax", "log_softmax", "_log_softmax", "_safe_softmax"}
_POOL = {"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "max_pool3d_with_indices",
         "avg_pool1d", "avg_pool2d", "avg_pool3d", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
         "adaptive_avg_pool3d", "_adaptive_avg_pool2d", "adaptive_max_pool2d", "mean_pool"}
_VIEW = {"view", "_unsafe_view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten", "expand", "expand_as",
         "permute", "transpose", "t", "select", "slice", "alias", "detach", "as_strided", "split", "split_with_sizes",
         "chunk", "unbind", "narrow", "view_as", "dropout", "feature_dropout", "lift_fresh_copy", "movedim",
         "squeeze_copy", "_assert_tensor_metadata", "numpy_T", "diagonal"}
_MOVE = {"cat", "stack", "clone", "contiguous", "copy", "_to_copy", "to", "index", "index_select", "gather",
         "scatter", "scatter_add", "constant_pad_nd", "pad", "repeat", "tile", "arange", "zeros", "ones", "full",
         "zeros_like", "ones_like", "full_like", "empty", "empty_like", "new_zeros", "new_ones", "new_full",
         "new_empty", "triu", "tril", "roll", "flip", "type_as", "embedding_dense_backward", "upsample_nearest2d",
         "upsample_bilinear2d", "pixel_shuffle", "scalar_tensor", "index_put", "masked_select", "topk", "sort"}


def _torch() -> Any:
    return optional_import("torch", INSTALL_HINT)


def _base(target: Any) -> str:
    """``aten.linear.default`` -> ``linear``; in-place ``add_`` -> ``add``."""
    name = getattr(target, "__name__", str(target)).split(".")[0]
    packet = getattr(target, "_overloadpacket", None)
    if packet is not None:
        name = getattr(packet, "__name__", name)
    return name[:-1] if name.endswith("_") and not name.startswith("_") else name


def _kind(base: str) -> str:
    if base == "embedding":
        return "embedding"
    return classify(base, ((_GEMM, "gemm"), (_CONV, "conv"), (_ATTENTION, "other"), (_ELEMENTWISE, "elementwise"),
                           (_REDUCTION, "reduction"), (_NORM | _BATCHNORM, "norm"), (_SOFTMAX, "softmax"),
                           (_POOL, "pool"), (_VIEW, "view"), (_MOVE, "other")))


def _numel(shape: list[int]) -> int:
    return int(math.prod(shape))


def _shape(path: Path, node_name: str, t: Any) -> list[int]:
    try:
        return [int(d) for d in t.shape]
    except (TypeError, ValueError):  # a SymInt without a value
        raise InputError(f"{path}: node {node_name!r}: symbolic shape {list(t.shape)}; export with static "
                         f"shapes") from None


def _tensors(val: Any) -> list[Any]:
    """The tensors of a node's ``meta['val']`` (a tensor, or a tuple/list with None entries)."""
    torch = _torch()
    if isinstance(val, torch.Tensor):
        return [val]
    if isinstance(val, (tuple, list)):
        return [v for v in val if isinstance(v, torch.Tensor)]
    return []


def _dtype(t: Any) -> tuple[str, int]:
    return str(t.dtype).removeprefix("torch."), t.element_size()


def op_flops(base: str, kind: str, args: list[Any], shapes: dict[int, list[int]], out: list[int]) -> float:
    """FLOPs of one aten op; ``shapes[i]`` is the shape of positional tensor argument i."""
    if kind == "gemm":
        if base == "einsum":
            return _einsum_flops(str(args[0]), [s for i, s in sorted(shapes.items()) if i >= 1] or
                                 list(shapes.values()))
        if base == "linear":
            return 2.0 * _numel(out) * shapes[1][-1]
        a = shapes[1] if base in ("addmm", "baddbmm") else shapes[0]
        return 2.0 * _numel(out) * a[-1]
    if kind == "conv":
        w = shapes[1]
        transposed = base.startswith("conv_transpose") or (base in ("convolution", "_convolution")
                                                           and len(args) > 6 and bool(args[6]))
        if transposed:
            return 2.0 * _numel(shapes[0]) * w[1] * _numel(w[2:])
        return 2.0 * _numel(out) * w[1] * _numel(w[2:])
    if base in _ATTENTION:
        q, k, v = shapes[0], shapes[1], shapes[2]
        return 2.0 * _numel(q[:-1]) * k[-2] * (q[-1] + v[-1])
    if kind == "pool":
        if base.startswith("adaptive") or base == "_adaptive_avg_pool2d":
            return float(_numel(shapes[0]))
        kernel = args[1] if len(args) > 1 else [1]
        kernel = list(kernel) if isinstance(kernel, (list, tuple)) else [kernel]
        nsp = max(1, len(out) - 2)
        if len(kernel) == 1:
            kernel = kernel * nsp
        return float(_numel(out) * _numel(kernel))
    rule = "batchnorm" if base in _BATCHNORM else kind
    if rule in _FLOP_RULES and shapes:
        per, which = _FLOP_RULES[rule]
        return float(per * _numel(out if which == "output" else shapes[min(shapes)]))
    return 0.0


def _attrs(base: str, kind: str, args: list[Any], kwargs: dict[str, Any]) -> dict[str, Any]:
    def plain(x: Any) -> Any:
        if isinstance(x, (bool, int, float, str)) or x is None:
            return x
        if isinstance(x, (list, tuple)) and all(isinstance(y, (bool, int, float)) for y in x):
            return list(x)
        return None

    out: dict[str, Any] = {}
    if kind == "conv" and base in ("convolution", "_convolution"):
        names = ["stride", "padding", "dilation", "transposed", "output_padding", "groups"]
        out = {n: plain(a) for n, a in zip(names, args[3:9])}
    elif kind == "conv":
        names = ["stride", "padding", "dilation", "groups"]
        out = {n: plain(a) for n, a in zip(names, args[3:7])}
    elif kind == "reduction" and len(args) > 1:  # the contract's names: reductions "axes", softmax/norm "axis"
        dims = plain(args[1])
        out = {"axes": dims if isinstance(dims, list) or dims is None else [dims]}
    elif kind == "softmax" and len(args) > 1:
        out = {"axis": plain(args[1])}
    elif base in ("layer_norm", "native_layer_norm", "rms_norm") and len(args) > 1:
        out = {"axis": -len(list(args[1]))}
    elif kind == "pool":
        out = {"kernel_size": plain(args[1]) if len(args) > 1 else None}
    if base == "einsum":
        out = {"equation": str(args[0])}
    out.update({k: plain(v) for k, v in kwargs.items() if plain(v) is not None})
    return {k: v for k, v in out.items() if v is not None}


def _module_stack(node: Any) -> list[str]:
    """The paths of the modules whose forward runs the node, outermost first (root excluded)."""
    stack = node.meta.get("nn_module_stack") or {}
    return [str(v[0]) for v in stack.values() if v and str(v[0])]


#: torch.export.load's log line when a program's inputs or outputs use a pytree type (a
#: dataclass such as transformers' ModelOutput classes) not registered in this process
_UNREGISTERED = re.compile(r"Deserializing ([\w.]+) in pytree is not registered")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def _register_by_import(type_name: str) -> bool:
    """Import the module that defines ``type_name`` (as unpickling would): libraries such as
    transformers register their output classes as pytree nodes when the module is imported."""
    module = type_name.rpartition(".")[0]
    if not module:
        return False
    try:
        importlib.import_module(module)
    except Exception:  # not installed, or fails to import: the load error stands
        return False
    return True


def load_program(path: str | Path) -> Any:
    """``torch.export.load`` of a saved program; InputError in one line if it cannot be read.

    A program whose inputs or outputs are pytree types registered by a library (the output
    classes of HF transformers) can only be loaded where they are registered: such a type's
    module is imported once, if installed, and the load tried again.
    """
    torch = _torch()
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file")
    # torch.export.load logs a failed archive read with its traceback (a warning) before it
    # raises: the failure is reported below in one line, so its log stays quiet meanwhile
    log = logging.getLogger("torch.export")
    level, propagate, handlers = log.level, log.propagate, log.handlers[:]
    tried: set[str] = set()
    while True:
        collect = _Collect()
        log.setLevel(logging.WARNING)
        log.propagate = False
        log.handlers[:] = [collect]  # torch's own handlers print it otherwise
        try:
            return torch.export.load(str(p))
        except Exception as e:  # zip, pickle and schema errors of several types
            found = _UNREGISTERED.search("\n".join(collect.lines))
            if found and found.group(1) not in tried:
                tried.add(found.group(1))
                if _register_by_import(found.group(1)):
                    continue
            if found:
                raise InputError(f"{p}: its inputs or outputs use the pytree type {found.group(1)}, which is not "
                                 "registered in this process (install the library that defines it, or export a "
                                 "module that returns plain tensors)") from None
            first = (str(e).strip().splitlines() or [type(e).__name__])[0]
            raise InputError(f"{p}: not a readable torch.export program ({type(e).__name__}: {first})") from None
        finally:
            log.handlers[:] = handlers
            log.setLevel(level)
            log.propagate = propagate


def import_torch(path: str | Path, chip: ChipProfile) -> tuple[dict[str, Any], str | None]:
    """Import a saved ``torch.export`` program as a pipeline graph document; see the module
    docstring. Returns ``(document, warning)`` like :func:`..onnx_graph.import_onnx`."""
    p = Path(path)
    return import_program(load_program(p), chip, p.stem, p.name, str(p))


def import_program(ep: Any, chip: ChipProfile, name: str, model: str, where: str) -> tuple[dict[str, Any], str | None]:
    """Import an ``ExportedProgram`` in memory (see :func:`import_torch`): ``name`` is the graph's
    name, ``model`` goes to ``meta.model``, ``where`` starts error messages."""
    torch = _torch()
    p = Path(where)
    sig = ep.graph_signature
    fqn: dict[str, str] = {**sig.inputs_to_parameters, **sig.inputs_to_buffers,
                           **getattr(sig, "inputs_to_lifted_tensor_constants", {})}
    user_inputs = set(sig.user_inputs)
    b = GraphBuilder(chip)
    params: dict[str, dict[str, Any]] = {}      # fx node name -> tensor entry
    producer: dict[str, tuple[int, int]] = {}   # fx node name -> (graph node, tuple element or -1)
    out_sizes: dict[int, list[int]] = {}        # graph node -> bytes of each output
    used: dict[int, set[int]] = {}              # graph node -> outputs read downstream

    def read(name: str) -> tuple[int, int] | None:
        src = producer.get(name)
        if src is not None:  # element -1: the value itself (the whole tuple of a multi-output op)
            used.setdefault(src[0], set()).update(range(len(out_sizes[src[0]])) if src[1] < 0 else [src[1]])
        return src

    for node in ep.graph.nodes:
        val = node.meta.get("val")
        tensors = _tensors(val)
        if node.op in ("placeholder", "get_attr"):
            if not tensors:
                continue
            t = tensors[0]
            dt, size = _dtype(t)
            entry = {"name": fqn.get(node.name, str(node.target)), "shape": _shape(p, node.name, t), "dtype": dt}
            if node.op == "get_attr" or node.name not in user_inputs:
                params[node.name] = {**entry, "bytes": _numel(entry["shape"]) * size}
                continue
            op = {"name": node.name, "op": "Input", "kind": "view", "module": None, "inputs": [],
                  "outputs": [entry], "attrs": {}, "flops": 0.0, "bytes": 0}
            v = b.add(op, 0, 0, dt)
            producer[node.name] = (v, -1)
            out_sizes[v] = [_numel(entry["shape"]) * size]
            continue
        if node.op == "output":
            flat: list[Any] = []
            torch.fx.node.map_arg(node.args, flat.append)
            for a in flat:
                read(a.name)
            continue
        if node.op != "call_function":
            continue
        if node.target is operator.getitem:
            src = producer.get(node.args[0].name) if hasattr(node.args[0], "name") else None
            if src is not None and tensors:
                producer[node.name] = (src[0], int(node.args[1]))
            continue
        if not tensors:
            continue  # symbolic-size arithmetic and assertions: no tensor flows
        base = _base(node.target)
        ins: list[dict[str, Any]] = []
        shapes: dict[int, list[int]] = {}
        in_bytes: list[int] = []
        preds: list[int] = []
        # positional tensor arguments by position (the FLOP formulas read them), then keyword ones
        for i, a in [*enumerate(node.args), *((-1, kw) for kw in node.kwargs.values())]:
            flat = []
            torch.fx.node.map_arg(a, flat.append)
            for x in flat:
                if x.name in params:
                    e = params[x.name]
                    ins.append({"name": e["name"], "shape": e["shape"], "dtype": e["dtype"], "param": True})
                    in_bytes.append(e["bytes"])
                    if i >= 0:
                        shapes.setdefault(i, e["shape"])
                    continue
                xt = _tensors(x.meta.get("val"))
                src = read(x.name)
                if not xt or src is None:
                    continue
                elem = xt[0]  # a getitem node's value is its tuple element
                dt, size = _dtype(elem)
                shp = _shape(p, x.name, elem)
                ins.append({"name": x.name, "shape": shp, "dtype": dt, "param": False})
                in_bytes.append(_numel(shp) * size)
                if i >= 0:
                    shapes.setdefault(i, shp)
                preds.append(src[0])
        outs = []
        sizes = []  # bytes per tuple position (0 for a None element), as getitem indexes them
        elements = list(val) if isinstance(val, (tuple, list)) else [val]
        for j, t in enumerate(elements):
            if not isinstance(t, torch.Tensor):
                sizes.append(0)
                continue
            dt, size = _dtype(t)
            shp = _shape(p, node.name, t)
            outs.append({"name": node.name if len(elements) == 1 else f"{node.name}[{j}]", "shape": shp,
                         "dtype": dt})
            sizes.append(_numel(shp) * size)
        kind = _kind(base)
        flops = op_flops(base, kind, list(node.args), shapes, outs[0]["shape"])
        if kind == "view":
            moved = 0
        elif kind == "embedding":
            moved = sum(bb for e, bb in zip(ins, in_bytes) if not e["param"]) + 2 * sum(sizes)
        else:
            moved = sum(in_bytes) + sum(sizes)
        stack = _module_stack(node)
        op = {"name": node.name, "op": str(node.target), "kind": kind, "module": stack[-1] if stack else None,
              "module_stack": stack, "inputs": ins,
              "outputs": outs, "attrs": _attrs(base, kind, list(node.args), dict(node.kwargs)),
              "flops": float(flops), "bytes": int(moved)}
        dtype = next((e["dtype"] for e in ins if not e["param"]), outs[0]["dtype"])
        v = b.add(op, sum(bb for e, bb in zip(ins, in_bytes) if e["param"]), 0, dtype)
        out_sizes[v] = sizes
        producer[node.name] = (v, -1)
        for u in preds:
            b.edge(u, v)
    for v, sizes in out_sizes.items():  # tuple outputs travel together: the elements read downstream
        read_ = sorted(used.get(v, set()))
        b.size_out[v] = sum(sizes[j] for j in read_) if read_ else sum(sizes)
    meta = {"source": "torch", "model": model}
    return b.document(name, meta), b.warning(where)
