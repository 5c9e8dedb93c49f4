"""Sharding strategies from a model's iteration domains: a pipeline graph with op metadata -> a contest instance.

Input: a pipeline graph JSON whose ``graph.nodes.ops`` carries, per node, the op kind,
input/output shapes and dtypes, attributes, FLOPs and bytes (see docs/intraop.md,
"Strategy generation"), a processor count ``p`` (optionally a mesh shape such as
2x4) and a :class:`~problems.chip.ChipProfile`.

Every op gets an *iteration domain* (named dimensions with sizes, see
:func:`op_domain`); a *configuration* ``c`` splits dimension ``i`` into ``c_i``
parts with ``c_i | size_i`` and ``prod c = P <= p`` (on a mesh: every mesh axis is
given to one dimension or left unused). The ``P`` processors used each compute one
block; the ``p / P`` groups of processors left over compute the same blocks again,
so every tensor is held as the blocks of its *layout* (per tensor dimension, the
split of the domain dimension it follows), replicated over the rest.
Without a mesh ``P`` need not divide ``p``; the replica counts ``p / P`` in the costs
are then fractions (an approximation of groups of unequal size).

Costs (seconds, then integer nanoseconds rounded to the nearest, per table entry):

* ``t_V(v, c) = max(flops / (P F), bytes / (P Bm)) + overhead``, times 3 in training
  (forward + backward), plus ``2 (R-1)/R * S_out / Bl`` when the reduction dimensions are
  split ``R = prod c_red`` ways (all-reduce of the output block of ``S_out`` bytes), plus in
  training, per parameter, ``2 (r-1)/r * S_w / Bl`` with ``r = p / prod(layout)`` replicas
  of its block of ``S_w`` bytes (gradient all-reduce). ``F`` = peak FLOP/s of the output
  dtype, ``Bm`` memory and ``Bl`` link bandwidth of the profile.
* ``t_E(u->v, c_u, c_v) = (S / prod b - S / prod lcm(a_i, b_i)) / Bl`` for the tensor
  of ``S`` bytes produced in layout ``a`` and needed in layout ``b``: each processor
  receives its needed block less the part of it it already holds (0: none; ``a``
  finer everywhere: all-gather; else all-to-all). If ``a`` cannot be carried through
  the view ops between them (or it is not the producer's first output), the whole needed
  block is received (unless the producer runs replicated).
* usage (bytes per processor) = parameter blocks (twice in training: gradients) + the
  output block + any further output whole. Time steps are the ops in node order; an op's
  interval runs from its step to its last consumer's (inclusive), or over all steps when it
  holds parameters (a conservative over-count of its activation). The usage limit is the
  profile's memory.

View ops (reshape, transpose, ...: kind ``view``, and transposes/permutes of kind
``other`` or ``unknown``) are free and pass layouts through; they get no node. Ops of
kind ``embedding``, ``other``, ``unknown`` (and ops whose shapes do not fit their kind)
get one configuration: computed whole, replicated.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from gapstop.engine.errors import InputError
from gapstop.engine.persist import read_json_file
from gapstop.problems.chip import ChipProfile
from gapstop.problems.intraop.model import FORBIDDEN, interval_sum

#: Default cap on configurations per op; see :func:`enumerate_configs` for which are kept.
DEFAULT_MAX_CONFIGS = 32
#: Largest ``--nprocs`` and number of ``--mesh`` axes: every op's configurations are enumerated
#: (divisors up to p per dimension; (dimensions + 1)^axes assignments on a mesh), and beyond
#: these the enumeration would not finish.
MAX_NPROCS = 1 << 16
MAX_MESH_AXES = 4
KINDS = ("gemm", "conv", "elementwise", "reduction", "norm", "softmax", "pool", "embedding", "view", "other",
         "unknown")
_ITEMSIZE = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2,
             "int8": 1, "uint8": 1, "bool": 1, "complex64": 8, "complex128": 16}
NS = 1e9


@dataclass(frozen=True)
class Tensor:
    name: str
    shape: tuple[int, ...]
    dtype: str
    param: bool = False

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _ITEMSIZE.get(self.dtype, 4)


@dataclass(frozen=True)
class Op:
    """One node's op metadata (see the contract in docs/formats.md, "Per-op metadata")."""

    index: int
    name: str
    op: str
    kind: str
    inputs: tuple[Tensor, ...]
    outputs: tuple[Tensor, ...]
    attrs: dict[str, Any]
    flops: float
    bytes: float
    module: str | None = None


@dataclass(frozen=True)
class Domain:
    """An op's iteration domain.

    Attributes:
        dims: dimension names (gemm ``b0.. m n k``; conv ``n f c``; others ``d0 d1 ...``).
        sizes: their sizes.
        splittable: whether each may be split.
        reduce: whether splitting it leaves partial sums (all-reduce of the output).
        in_maps: per input, per input dimension: the domain dimension it follows, or None (whole).
        out_map: the same for the output.
    """

    dims: tuple[str, ...]
    sizes: tuple[int, ...]
    splittable: tuple[bool, ...]
    reduce: tuple[bool, ...]
    in_maps: tuple[tuple[int | None, ...], ...]
    out_map: tuple[int | None, ...]


def _whole(op: Op) -> Domain:
    return Domain((), (), (), (), tuple(tuple(None for _ in t.shape) for t in op.inputs),
                  tuple(None for _ in op.outputs[0].shape))


def _broadcast_map(shape: tuple[int, ...], out: tuple[int, ...], dims: Sequence[int | None]) -> tuple[int | None, ...]:
    """Right-aligned broadcasting: input dim ``i`` follows output dim ``j`` when their sizes agree."""
    off = len(out) - len(shape)
    return tuple(dims[i + off] if i + off >= 0 and shape[i] == out[i + off] else None for i in range(len(shape)))


def _axes(attrs: dict[str, Any], rank: int, default: list[int]) -> list[int]:
    ax = attrs.get("axes", attrs.get("axis", attrs.get("dim")))
    if ax is None:
        return default
    ax = [ax] if isinstance(ax, int) else list(ax)
    return sorted({int(a) % rank for a in ax}) if rank else []


def op_domain(op: Op) -> Domain:
    """The iteration domain of ``op`` (``_whole`` when its shapes do not fit its kind)."""
    try:
        d = _domain(op)
    except (IndexError, ValueError, TypeError, KeyError, ZeroDivisionError):
        return _whole(op)
    tensors = op.inputs + op.outputs[:1]
    if d is None or not all(_follows(t.shape, m, d) for t, m in zip(tensors, d.in_maps + (d.out_map,))):
        return _whole(op)
    return d


def _follows(shape: tuple[int, ...], m: tuple[int | None, ...], d: Domain) -> bool:
    """Whether every tensor dimension ``m`` maps is a domain dimension of the same size (the
    costs split a tensor dimension by its domain dimension's divisor)."""
    return len(m) == len(shape) and all(j is None or (0 <= j < len(d.sizes) and d.sizes[j] == x)
                                        for j, x in zip(m, shape))


def _domain(op: Op) -> Domain | None:
    out = op.outputs[0].shape
    kind = op.kind
    if kind == "gemm":
        ins = list(op.inputs)
        name = op.op.lower()
        a_i, b_i = (1, 2) if "addmm" in name or "baddbmm" in name else (0, 1)
        A, B = ins[a_i].shape, ins[b_i].shape
        ta = bool(op.attrs.get("transA", 0))
        tb = bool(op.attrs.get("transB", 0)) or "linear" in name
        if len(out) < 2 or len(A) < 2 or len(B) < 2:
            return None
        nb = len(out) - 2
        k = A[-2] if ta else A[-1]
        if (B[-1] if tb else B[-2]) != k or (A[-1] if ta else A[-2]) != out[-2] or (B[-2] if tb else B[-1]) != out[-1]:
            return None
        dims = tuple(f"b{i}" for i in range(nb)) + ("m", "n", "k")
        sizes = tuple(out[:-2]) + (out[-2], out[-1], k)
        M, N, K = nb, nb + 1, nb + 2
        bdims = list(range(nb))

        def mat(shape: tuple[int, ...], t: bool, rows: int, cols: int) -> tuple[int | None, ...]:
            bmap = _broadcast_map(shape[:-2], out[:-2], bdims) if nb else (None,) * (len(shape) - 2)
            return bmap + ((cols, rows) if t else (rows, cols))

        in_maps: list[tuple[int | None, ...]] = []
        for i, t in enumerate(ins):
            if i == a_i:
                in_maps.append(mat(t.shape, ta, M, K))
            elif i == b_i:
                in_maps.append(mat(t.shape, tb, K, N))
            else:  # bias: broadcast against the output
                in_maps.append(_broadcast_map(t.shape, out, bdims + [M, N]))
        return Domain(dims, sizes, (True,) * len(dims), (False,) * (nb + 2) + (True,), tuple(in_maps),
                      tuple(bdims) + (M, N))
    if kind == "conv":
        X, W = op.inputs[0].shape, op.inputs[1].shape
        group = int(op.attrs.get("group", op.attrs.get("groups", 1)))
        if len(X) < 3 or len(W) != len(X) or len(out) != len(X) or out[1] != W[0]:
            return None
        sp = len(X) - 2
        grouped = group != 1
        dims, sizes = ("n", "f", "c"), (X[0], W[0], W[1])
        in_maps = [(0, None if grouped else 2) + (None,) * sp, (1, None if grouped else 2) + (None,) * sp]
        in_maps += [(1,) if t.shape == (W[0],) else (None,) * len(t.shape) for t in op.inputs[2:]]
        return Domain(dims, sizes, (True, True, not grouped), (False, False, True), tuple(in_maps),
                      (0, 1) + (None,) * sp)
    if kind == "reduction":
        X = op.inputs[0].shape
        r = len(X)
        if len(out) == r:
            default = [i for i in range(r) if out[i] == 1 and X[i] != 1]
        else:
            default = list(range(r))
        red = set(_axes(op.attrs, r, default))
        if len(out) == r:
            out_map = tuple(None if i in red else i for i in range(r))
        else:
            out_map = tuple(i for i in range(r) if i not in red)
            if len(out_map) != len(out):
                return None
        dims = tuple(f"d{i}" for i in range(r))
        in_maps = [tuple(range(r))] + [(None,) * len(t.shape) for t in op.inputs[1:]]
        return Domain(dims, tuple(X), (True,) * r, tuple(i in red for i in range(r)), tuple(in_maps), out_map)
    if kind in ("elementwise", "norm", "softmax", "pool"):
        r = len(out)
        fixed: set[int] = set()
        if kind == "softmax":
            fixed = set(_axes({"axis": op.attrs.get("axis", -1)}, r, [r - 1]))
        elif kind == "norm":
            if "batch" in op.op.lower():
                fixed = set()  # per-channel statistics (inference): element-wise
            elif "axes" in op.attrs:
                fixed = set(_axes(op.attrs, r, [r - 1]))
            else:
                ax = int(op.attrs.get("axis", -1)) % r
                fixed = set(range(ax, r))
        elif kind == "pool":
            fixed = set(range(2, r))
        dims = tuple(f"d{i}" for i in range(r))
        in_maps = []
        for i, t in enumerate(op.inputs):
            if kind == "norm" and "batch" in op.op.lower() and i > 0 and len(t.shape) == 1 and r > 1:
                in_maps.append((1,) if t.shape[0] == out[1] else (None,))
            elif kind == "pool" and i == 0:
                in_maps.append(tuple(j if j < 2 else None for j in range(len(t.shape))))
            else:
                in_maps.append(_broadcast_map(t.shape, out, list(range(r))))
        return Domain(dims, tuple(out), tuple(i not in fixed for i in range(r)), (False,) * r, tuple(in_maps),
                      tuple(range(r)))
    return None


def _divisors(x: int, limit: int) -> list[int]:
    # a dimension of size 0 has nothing to split: it stays whole
    return [d for d in range(1, min(x, limit) + 1) if x % d == 0] or [1]


def all_configs(dom: Domain, nprocs: int, mesh: Sequence[int] | None = None) -> list[tuple[int, ...]]:
    """Every configuration: ``c_i | size_i``, ``c_i = 1`` on unsplittable dims, ``prod c <= nprocs``;
    on a mesh, every axis given to one dimension or unused. Sorted, without repeats."""
    n = len(dom.dims)
    if mesh is not None:
        found: set[tuple[int, ...]] = set()
        for assign in itertools.product(range(n + 1), repeat=len(mesh)):
            c = [1] * n
            for axis, d in zip(mesh, assign):
                if d < n:
                    c[d] *= axis
            if all(c[i] == 1 or (dom.splittable[i] and dom.sizes[i] % c[i] == 0) for i in range(n)):
                found.add(tuple(c))
        return sorted(found)
    out: list[tuple[int, ...]] = []

    def rec(i: int, left: int, acc: list[int]) -> None:
        if i == n:
            out.append(tuple(acc))
            return
        for d in (_divisors(dom.sizes[i], left) if dom.splittable[i] else [1]):
            rec(i + 1, left // d, acc + [d])

    rec(0, nprocs, [])
    return sorted(out)


def _layout(c: tuple[int, ...], m: tuple[int | None, ...]) -> tuple[int, ...]:
    return tuple(1 if j is None else c[j] for j in m)


def config_label(dom: Domain, c: tuple[int, ...]) -> str:
    """``"split m by 2, k by 2"``, or ``"replicated"``."""
    parts = [f"{d} by {x}" for d, x in zip(dom.dims, c) if x > 1]
    return "split " + ", ".join(parts) if parts else "replicated"


def placement(dom: Domain, c: tuple[int, ...], nprocs: int, mesh: Sequence[int] | None = None) -> list[str] | None:
    """The DTensor placements of an op's output under configuration ``c``, one per mesh axis (a
    1-D mesh of ``nprocs`` devices without ``mesh``), where they describe its layout exactly.

    Each axis goes to one domain dimension or to none, so that the products per dimension are
    ``c`` (the first such assignment, an unused axis first): an unused axis, or one splitting a
    reduction dimension (whose partial sums the costs all-reduce), is ``Replicate()``; one
    splitting the dimension that output dimension d follows is ``Shard(d)`` (two axes on one
    dimension shard it in mesh-axis order, as DTensor does). None when no assignment gives
    ``c`` (without a mesh: more than one dimension split, or fewer than all ``nprocs`` ways, which
    leaves replica groups a 1-D mesh cannot express) or an axis splits a dimension the output
    does not have.
    """
    axes = list(mesh) if mesh else [nprocs]
    n = len(c)
    for assign in itertools.product([n, *range(n)], repeat=len(axes)):
        prod = [1] * n
        for a, d in zip(axes, assign):
            if d < n:
                prod[d] *= a
        if tuple(prod) == tuple(c):
            break
    else:
        return None
    out = []
    for d in assign:
        if d == n or dom.reduce[d]:
            out.append("Replicate()")
        elif d in dom.out_map:
            out.append(f"Shard({dom.out_map.index(d)})")
        else:
            return None
    return out


def named_plan(meta: Any, solution: Sequence[int]) -> list[dict[str, Any]] | None:
    """Per instance node of a generated instance: ``op`` (its name), ``module``, ``configuration``
    (its label) and ``placement`` (:func:`placement`, None where not exact) of the chosen
    strategy. None when ``meta`` does not describe the instance's nodes (not from ``generate``)."""
    if not isinstance(meta, dict):
        return None
    ops, configs = meta.get("ops"), meta.get("configs")
    if not isinstance(ops, list) or not isinstance(configs, list) or not len(ops) == len(solution) == len(configs):
        return None
    modules = meta.get("modules") or [None] * len(ops)
    places = meta.get("placements") or [None] * len(ops)
    out = []
    for i, s in enumerate(solution):
        if not 0 <= s < len(configs[i]):
            return None
        out.append({"op": ops[i], "module": modules[i], "configuration": configs[i][s],
                    "placement": places[i][s] if places[i] is not None else None})
    return out


def node_time_s(op: Op, dom: Domain, c: tuple[int, ...], chip: ChipProfile, nprocs: int, training: bool) -> float:
    """``t_V`` in seconds (module docstring)."""
    P = math.prod(c)
    out = op.outputs[0]
    t = max(op.flops / (P * chip.flops_per_s(out.dtype)), op.bytes / (P * chip.memory_bandwidth)) + chip.op_overhead
    if training:
        t *= 3.0
    R = math.prod(x for x, r in zip(c, dom.reduce) if r)
    if R > 1:
        shard = out.nbytes / math.prod(_layout(c, dom.out_map))
        t += 2.0 * (R - 1) / R * shard / chip.link_bandwidth
    if training:
        for tensor, m in zip(op.inputs, dom.in_maps):
            if tensor.param:
                split = math.prod(_layout(c, m))
                r = nprocs / split
                if r > 1:
                    t += 2.0 * (r - 1) / r * (tensor.nbytes / split) / chip.link_bandwidth
    return t


def node_usage(op: Op, dom: Domain, c: tuple[int, ...], training: bool) -> int:
    """Bytes per processor: parameter blocks (twice in training) plus the output block (rounded up),
    plus every further output whole (their layouts are not tracked: whole is the most a processor holds)."""
    par = sum(math.ceil(t.nbytes / math.prod(_layout(c, m))) for t, m in zip(op.inputs, dom.in_maps) if t.param)
    out = op.outputs[0]
    rest = sum(t.nbytes for t in op.outputs[1:])
    return (2 if training else 1) * par + math.ceil(out.nbytes / math.prod(_layout(c, dom.out_map))) + rest


def redistribution_bytes(nbytes: int, a: tuple[int, ...] | None, b: tuple[int, ...]) -> float:
    """Bytes each processor receives to go from layout ``a`` (None: unknown) to ``b`` of a ``nbytes`` tensor."""
    need = nbytes / math.prod(b)
    if a is None:
        return need
    if len(a) != len(b):
        raise ValueError("layouts of different ranks")
    have = nbytes / math.prod(math.lcm(x, y) for x, y in zip(a, b))
    return need - have


def view_layout(a: tuple[int, ...] | None, src: tuple[int, ...], dst: tuple[int, ...],
                view: Op) -> tuple[int, ...] | None:
    """Carry layout ``a`` of a ``src``-shaped tensor through a view op to its ``dst``-shaped output.

    Transposes permute it (``perm`` / ``dims`` attribute, or ``dim0``/``dim1``); reshapes keep a
    split of the leading non-unit dimension of each group of dimensions whose sizes multiply
    to the same number on both sides, when it divides the leading output dimension of the
    group. None when the layout cannot be carried (or is unknown).
    """
    if a is None:
        return None
    if all(x == 1 for x in a):
        return (1,) * len(dst)
    name = view.op.lower()
    if "transpose" in name or "permute" in name:
        perm = view.attrs.get("perm", view.attrs.get("dims"))
        try:  # malformed attributes: the layout cannot be carried, like shapes that do not fit
            if perm is None and "dim0" in view.attrs:
                perm = list(range(len(src)))
                i, j = int(view.attrs["dim0"]) % len(src), int(view.attrs["dim1"]) % len(src)
                perm[i], perm[j] = perm[j], perm[i]
            if perm is None:
                perm = list(range(len(src)))[::-1]
            perm = [int(p) % len(src) for p in perm]
        except (TypeError, ValueError, KeyError, ZeroDivisionError):
            return None
        if len(perm) != len(dst) or any(src[p] != d for p, d in zip(perm, dst)):
            return None
        return tuple(a[p] for p in perm)
    if math.prod(src) != math.prod(dst) or math.prod(src) == 0:  # an empty tensor has no layout to carry
        return None
    si = [i for i, s in enumerate(src) if s != 1]
    di = [i for i, s in enumerate(dst) if s != 1]
    res = [1] * len(dst)
    i = j = 0
    while i < len(si) or j < len(di):
        gi, gj = [si[i]], [di[j]]
        ps, pd = src[si[i]], dst[di[j]]
        i, j = i + 1, j + 1
        while ps != pd:
            if ps < pd:
                gi.append(si[i])
                ps *= src[si[i]]
                i += 1
            else:
                gj.append(di[j])
                pd *= dst[di[j]]
                j += 1
        if any(a[x] != 1 for x in gi[1:]):
            return None
        s = a[gi[0]]
        if dst[gj[0]] % s:
            return None
        res[gj[0]] = s
    return tuple(res)


def _tensor(path: Path, where: str, t: Any, with_param: bool) -> Tensor:
    if not isinstance(t, dict):
        raise InputError(f"{path}: {where}: expected an object with name, shape, dtype")
    shape = t.get("shape")
    if not isinstance(shape, list) or not all(type(x) is int and x >= 0 for x in shape):
        raise InputError(f"{path}: {where}.shape: expected a list of non-negative integers")
    if not isinstance(t.get("name"), str) or not isinstance(t.get("dtype"), str):
        raise InputError(f"{path}: {where}: name and dtype must be strings")
    return Tensor(t["name"], tuple(shape), t["dtype"], bool(t.get("param", False)) if with_param else False)


def read_ops(doc: Any, path: str | Path) -> tuple[str, list[Op | None], list[tuple[int, int]]]:
    """``(name, ops, edges)`` of a pipeline graph document with ``graph.nodes.ops``.

    Raises:
        InputError: no op metadata, or a malformed entry (one line naming the field).
    """
    path = Path(str(path))
    g = doc.get("graph") if isinstance(doc, dict) else None
    nodes = g.get("nodes") if isinstance(g, dict) else None
    if not isinstance(nodes, dict):
        raise InputError(f"{path}: graph.nodes: missing or not an object")
    ops = nodes.get("ops")
    if not isinstance(ops, list) or not any(isinstance(o, dict) for o in ops):
        raise InputError(f"{path}: graph.nodes.ops: missing (strategy generation needs per-op metadata: "
                         "kind, shapes, dtypes; import the model with its op metadata)")
    out: list[Op | None] = []
    for i, o in enumerate(ops):
        if o is None:
            out.append(None)
            continue
        where = f"graph.nodes.ops[{i}]"
        if not isinstance(o, dict):
            raise InputError(f"{path}: {where}: expected an object or null")
        kind = o.get("kind")
        if kind not in KINDS:
            raise InputError(f"{path}: {where}.kind: expected one of {', '.join(KINDS)}, got {kind!r}")
        ins, outs = o.get("inputs"), o.get("outputs")
        if not isinstance(ins, list) or not isinstance(outs, list) or not outs:
            raise InputError(f"{path}: {where}: inputs must be a list and outputs a non-empty list")
        flops, nbytes = o.get("flops", 0.0), o.get("bytes", 0)
        for fld, x in (("flops", flops), ("bytes", nbytes)):
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                raise InputError(f"{path}: {where}.{fld}: expected a finite number >= 0, got {x!r}")
        attrs = o.get("attrs") or {}
        if not isinstance(attrs, dict):
            raise InputError(f"{path}: {where}.attrs: expected an object")
        opname = str(o.get("op", ""))
        if kind in ("other", "unknown") and ("transpose" in opname.lower() or "permute" in opname.lower()):
            kind = "view"  # a transpose only renames dimensions: its layout is carried through
        out.append(Op(i, str(o.get("name") or f"node{i}"), opname, kind,
                      tuple(_tensor(path, f"{where}.inputs[{j}]", t, True) for j, t in enumerate(ins)),
                      tuple(_tensor(path, f"{where}.outputs[{j}]", t, False) for j, t in enumerate(outs)),
                      attrs, float(flops), float(nbytes),
                      o.get("module") if isinstance(o.get("module"), str) else None))
    edges = g.get("edges", [])
    if not isinstance(edges, list) or not all(isinstance(e, list) and len(e) == 2 and all(type(x) is int and
                                                  0 <= x < len(ops) for x in e) for e in edges):
        raise InputError(f"{path}: graph.edges: expected a list of [u, v] node index pairs")
    return str(g.get("name", path.name.split(".")[0])), out, [(u, v) for u, v in edges]


def parse_mesh(spec: str | None, nprocs: int) -> tuple[int, ...] | None:
    """``"2x4"`` -> (2, 4); its product must equal ``nprocs``."""
    if not 1 <= nprocs <= MAX_NPROCS:
        raise InputError(f"--nprocs: must be in [1, {MAX_NPROCS}], got {nprocs}")
    if spec is None:
        return None
    try:
        mesh = tuple(int(x) for x in spec.lower().split("x"))
    except ValueError:
        raise InputError(f"--mesh: expected sizes like 2x4, got {spec!r}") from None
    if len(mesh) > MAX_MESH_AXES:
        raise InputError(f"--mesh: at most {MAX_MESH_AXES} axes, got {len(mesh)} in {spec!r}")
    if not mesh or any(x < 1 for x in mesh) or math.prod(mesh) != nprocs:
        raise InputError(f"--mesh: {spec!r} must be positive sizes whose product is --nprocs {nprocs}")
    return mesh


def _ns(t: float) -> int:
    return int(math.floor(t * NS + 0.5))


def generate(doc: Any, path: str | Path, nprocs: int, chip: ChipProfile, *, mesh: Sequence[int] | None = None,
             training: bool = False, max_configs: int = DEFAULT_MAX_CONFIGS) -> dict[str, Any]:
    """The contest-format instance document (``{"problem": ..., "meta": ...}``); see the module docstring.

    ``meta`` names the ops of the instance nodes (``ops``) and their modules (``modules``), the
    label of each configuration (``configs``) and its DTensor placements (``placements``, see
    :func:`placement`), the configurations dropped by the cap (``dropped``) and the units.

    Raises:
        InputError: bad ``nprocs``/``mesh``/``max_configs``, or a graph without usable op metadata.
    """
    mesh = parse_mesh(None if mesh is None else "x".join(map(str, mesh)), nprocs)
    if max_configs < 1:
        raise InputError(f"--max-configs: must be >= 1, got {max_configs}")
    name, ops, graph_edges = read_ops(doc, path)
    views = {op.index for op in ops if op is not None and op.kind == "view"}
    real = [op for op in ops if op is not None and op.kind != "view"]
    if not real:
        raise InputError(f"{path}: graph.nodes.ops: no op other than views; nothing to shard")
    step = {op.index: s for s, op in enumerate(real)}
    producer: dict[str, Op] = {}
    for op in ops:
        if op is not None:
            for t in op.outputs:
                producer[t.name] = op
    # configurations
    doms, configs, costs, usages, labels, places, dropped = [], [], [], [], [], [], {}
    total_use = 0
    for op in real:
        dom = op_domain(op)
        cs = all_configs(dom, nprocs, mesh)
        tv = {c: node_time_s(op, dom, c, chip, nprocs, training) for c in cs}
        if len(cs) > max_configs:
            # keep the replicated one, then the fastest alone (ties: more processors, then lexicographic)
            ones = (1,) * len(dom.dims)
            rest = sorted((c for c in cs if c != ones), key=lambda c: (tv[c], -math.prod(c), c))
            keep = set(rest[:max_configs - 1]) | {ones}
            dropped[op.name] = len(cs) - len(keep)
            cs = [c for c in cs if c in keep]
        doms.append(dom)
        configs.append(cs)
        costs.append([_ns(tv[c]) for c in cs])
        usages.append([node_usage(op, dom, c, training) for c in cs])
        # the instance format reads a cost of 10^18 or more as "forbidden", and its usages as int64
        if max(costs[-1]) >= FORBIDDEN:
            raise InputError(f"{path}: graph.nodes.ops[{op.index}]: t_V of {max(costs[-1])} ns reaches 10^18 ns, "
                             "the instance format's marker of a forbidden strategy")
        total_use += max(usages[-1])
        if total_use >= 2**62:
            raise InputError(f"{path}: graph.nodes.ops[{op.index}]: usages (bytes per processor) summed over the "
                             "ops reach 2^62, above what the instance format supports")
        labels.append([config_label(dom, c) for c in cs])
        places.append([placement(dom, c, nprocs, mesh) for c in cs])
    # edges: each input of a real op, traced back through views to the real op producing it
    edges: dict[tuple[int, int], list[list[int]]] = {}
    last_use = {op.index: step[op.index] for op in real}
    for op in real:
        v = step[op.index]
        for j, t in enumerate(op.inputs):
            chain: list[Op] = []
            src = producer.get(t.name)
            # layouts are known for an op's first output only; any other output is charged whole
            first = src is not None and src.outputs[0].name == t.name
            while src is not None and src.index in views and src.inputs:
                if src in chain:
                    raise InputError(f"{path}: graph.nodes.ops[{src.index}]: view ops whose tensors feed each other "
                                     "form a cycle")
                chain.append(src)
                through = src.inputs[0].name
                src = producer.get(through)
                first = first and src is not None and src.outputs[0].name == through
            if src is None or src.index in views or src.index == op.index:
                continue
            u = step[src.index]
            last_use[src.index] = max(last_use[src.index], v)
            du, dv = doms[u], doms[v]
            table = edges.setdefault((u, v), [[0] * len(configs[v]) for _ in configs[u]])
            for a_i, cu in enumerate(configs[u]):
                a: tuple[int, ...] | None = _layout(cu, du.out_map)
                shape = src.outputs[0].shape
                for view in reversed(chain):
                    a = view_layout(a, shape, view.outputs[0].shape, view)
                    shape = view.outputs[0].shape
                if all(x == 1 for x in cu):
                    a = (1,) * len(t.shape)  # computed whole on every processor: nothing to move
                elif not first or (a is not None and len(a) != len(t.shape)):
                    a = None
                for b_i, cv in enumerate(configs[v]):
                    b = _layout(cv, dv.in_maps[j])
                    table[a_i][b_i] += _ns(redistribution_bytes(t.nbytes, a, b) / chip.link_bandwidth)
            if max(max(row) for row in table) >= FORBIDDEN:
                raise InputError(f"{path}: graph.nodes.ops[{op.index}].inputs[{j}]: a redistribution takes 10^18 ns "
                                 "or more, the instance format's marker of a forbidden strategy pair")
    T = len(real)
    intervals = []
    for op in real:
        holds = any(t.param for t in op.inputs)
        intervals.append([0, T] if holds else [step[op.index], last_use[op.index] + 1])
    low = np.array([min(u) for u in usages], dtype=np.int64)
    prof = interval_sum(low, np.array([b for b, _ in intervals]), np.array([e for _, e in intervals]), T)
    if prof.max() > chip.memory:
        t = int(np.argmax(prof))
        raise InputError(f"{path}: memory: at op {real[t].name!r} even the least-memory configurations need "
                         f"{int(prof[t])} bytes per processor > {chip.memory} of {chip.name}")
    explained = {(u, v) for u, v in graph_edges if u in step and v in step}
    problem = {"name": name, "nodes": {"intervals": intervals, "costs": costs, "usages": usages},
               "edges": {"nodes": [[u, v] for (u, v) in edges],
                         "costs": [[x for row in tab for x in row] for tab in edges.values()]},
               "usage_limit": int(chip.memory)}
    meta = {"generator": "gapstop intraop generate", "nprocs": nprocs, "mesh": list(mesh) if mesh else None,
            "chip": chip.name, "training": training, "units": {"cost": "ns (each entry rounded to nearest)",
                                                               "usage": "bytes per processor"},
            "ops": [op.name for op in real], "modules": [op.module for op in real], "configs": labels,
            "placements": places, "max_configs": max_configs,
            "dropped": dropped, "dropped_total": sum(dropped.values()),
            "view_ops": len(views), "ops_without_metadata": sum(op is None for op in ops),
            "graph_edges_between_ops_without_tensor_match": len(explained - set(edges))}
    return {"problem": problem, "meta": meta}


def generate_file(graph: str | Path, nprocs: int, chip: ChipProfile, **kw: Any) -> dict[str, Any]:
    """:func:`generate` on a graph file (``.json`` or ``.json.gz``)."""
    return generate(read_json_file(graph), graph, nprocs, chip, **kw)


def describe_solution(meta: dict[str, Any], solution: Sequence[int]) -> list[str]:
    """``"op name: configuration label"`` for each instance node."""
    return [f"{name}: {labels[s]}" for name, labels, s in zip(meta["ops"], meta["configs"], solution)]
