"""Reading and writing pipeline graphs (JSON, optionally gzip-compressed).

Format::

    {"graph": {"name": str,
               "nodes": {"names": [str] (optional), "work": [float],
                         "size_param": [int], "size_out": [int],
                         "ops": [object | null] (optional, per-node op metadata)},
               "edges": [[u, v], ...]},
     "bandwidth": float > 0,
     "memory": int >= 0 | null,
     "meta": {...} (optional)}

Node indices are 0-based; ``[u, v]`` means v consumes u's output tensor.
Duplicate edges denote the same tensor edge and are merged. Every defect is
reported as an :class:`~engine.errors.InputError` naming file, field and index.

Limits (checked here, so that no sum the kernels or the evaluator form can overflow):
the byte sizes (``size_out`` then ``size_param``, all nodes) sum to at most
:data:`MAX_BYTES`, ``memory`` is at most :data:`MAX_BYTES`, and the largest cost a block
can have, ``sum(work) + (2 sum(size_out) + sum(size_param)) / bandwidth``, is at most
:data:`MAX_COST`. :func:`check_stages` limits ``k``.
"""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from gapstop.engine.errors import InputError
from gapstop.engine.persist import read_json_file
from gapstop.problems.pipeline.model import PipelineProblem

#: Largest byte total accepted (sizes, and ``memory``). The kernels sum bytes in int64; every
#: such sum is of distinct tensors and parameters, so it is at most this, half of 2^63: a
#: difference or a sum of two of them (``param + peak - memory``) cannot wrap either.
MAX_BYTES = 2**62
#: Largest possible block cost accepted (time units): float64 sums of k such costs stay finite.
MAX_COST = 1e300
#: Most pipeline stages accepted (``-k``); more than n is allowed (some stages stay empty).
MAX_STAGES = 1024
#: Most cells of the SliceGraph decoder's two tables, ``(k + 1) (n + 1)``: 16 bytes each, so
#: 128 MiB per decoding thread; it also bounds the exact MIP's n k assignment booleans.
MAX_DP_CELLS = 2**23


def _number_list(path: Path, field: str, value: Any, *, integer: bool, n: int | None) -> list[Any]:
    if not isinstance(value, list):
        raise InputError(f"{path}: {field}: expected a list, got {type(value).__name__}")
    if n is not None and len(value) != n:
        raise InputError(f"{path}: {field}: has {len(value)} entries, expected {n} (one per node)")
    for i, x in enumerate(value):
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise InputError(f"{path}: {field}[{i}]: expected a number, got {json.dumps(x)}")
        if isinstance(x, float) and not math.isfinite(x):
            raise InputError(f"{path}: {field}[{i}]: not finite ({x})")
        if integer and not (isinstance(x, int) or float(x).is_integer()):
            raise InputError(f"{path}: {field}[{i}]: expected an integer number of bytes, got {x}")
        if x < 0:
            raise InputError(f"{path}: {field}[{i}]: negative ({x})")
    return value


_OP_KINDS = ("gemm", "conv", "elementwise", "reduction", "norm", "softmax", "pool", "embedding", "view", "other",
             "unknown")


def _ops_list(path: Path, ops: Any, n: int) -> tuple[dict[str, Any] | None, ...] | None:
    """Light check of ``graph.nodes.ops`` (importer metadata): shape, names, modules, kinds, FLOPs and bytes."""
    if ops is None:
        return None
    if not isinstance(ops, list) or len(ops) != n:
        raise InputError(f"{path}: graph.nodes.ops: expected a list of {n} entries (one per node)")
    seen: set[str] = set()
    for i, op in enumerate(ops):
        if op is None:
            continue
        f = f"graph.nodes.ops[{i}]"
        if not isinstance(op, dict):
            raise InputError(f"{path}: {f}: expected an object or null")
        for key in ("name", "op"):
            if not isinstance(op.get(key), str):
                raise InputError(f"{path}: {f}.{key}: expected a string")
        if op["name"] in seen:
            raise InputError(f"{path}: {f}.name: {op['name']!r} is not unique")
        seen.add(op["name"])
        if op.get("module") is not None and not isinstance(op["module"], str):
            raise InputError(f"{path}: {f}.module: expected a string or null, got {json.dumps(op['module'])}")
        stack = op.get("module_stack")
        if stack is not None and not (isinstance(stack, list) and all(isinstance(m, str) for m in stack)):
            raise InputError(f"{path}: {f}.module_stack: expected a list of strings or null")
        if "kind" in op and op["kind"] not in _OP_KINDS:
            raise InputError(f"{path}: {f}.kind: expected one of {', '.join(_OP_KINDS)}, got {json.dumps(op['kind'])}")
        for key in ("inputs", "outputs"):
            if key in op and not isinstance(op[key], list):
                raise InputError(f"{path}: {f}.{key}: expected a list")
        for key in ("flops", "bytes"):
            x = op.get(key, 0)
            if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
                raise InputError(f"{path}: {f}.{key}: expected a finite number >= 0, got {json.dumps(x)}")
    return tuple(ops)


def _check_magnitudes(path: Path, work: list[Any], size_out: list[Any], size_param: list[Any],
                      bandwidth: float) -> None:
    """Refuse sizes whose int64 sums could wrap and costs whose float64 sums could overflow,
    naming the entry at which the running total passes the limit (see the module docstring)."""
    total = 0
    for field, values in (("size_out", size_out), ("size_param", size_param)):
        for i, x in enumerate(values):
            total += int(x)
            if total > MAX_BYTES:
                raise InputError(f"{path}: graph.nodes.{field}[{i}]: the byte sizes (size_out, then size_param) "
                                 "sum past 2^62 here, above the supported total")
    work_total = 0.0
    for i, x in enumerate(work):
        work_total += float(x)
        if not work_total <= MAX_COST:
            raise InputError(f"{path}: graph.nodes.work[{i}]: the total work passes {MAX_COST:g} here, "
                             "above the supported total")
    comm = (2 * sum(int(x) for x in size_out) + sum(int(x) for x in size_param)) / bandwidth
    if not work_total + comm <= MAX_COST:
        raise InputError(f"{path}: bandwidth: {bandwidth:g} makes the largest possible stage cost "
                         f"{work_total + comm:.6g} exceed the supported {MAX_COST:g} time units")


def check_stages(problem: PipelineProblem, k: int, field: str = "-k") -> None:
    """Refuse a stage count outside ``1 <= k <= MAX_STAGES`` or with ``(k + 1) (n + 1) >
    MAX_DP_CELLS`` (the decoder's tables would not fit), naming ``field``."""
    if k < 1:
        raise InputError(f"{field}: must be >= 1, got {k}")
    if k > MAX_STAGES:
        raise InputError(f"{field}: {k} stages is above the supported maximum {MAX_STAGES}")
    if (k + 1) * (problem.n + 1) > MAX_DP_CELLS:
        most = MAX_DP_CELLS // (problem.n + 1) - 1
        if most < 1:
            raise InputError(f"{field}: the graph's {problem.n} nodes are too many for the decoder's tables "
                             "((k + 1)(n + 1) <= 2^23)")
        raise InputError(f"{field}: {k} stages on {problem.n} nodes exceed the decoder's table limit "
                         f"(k + 1)(n + 1) <= 2^23; at most {most} stages on this graph")


def find_cycle(n: int, edges: np.ndarray) -> list[int] | None:
    """Return one directed cycle as a node list ``[v0, v1, ..., v0]``, or None if acyclic."""
    succ: list[list[int]] = [[] for _ in range(n)]
    for u, v in edges:
        succ[int(u)].append(int(v))
    color = [0] * n  # 0 new, 1 on stack, 2 done
    parent = [-1] * n
    for root in range(n):
        if color[root]:
            continue
        stack = [(root, 0)]
        color[root] = 1
        while stack:
            u, i = stack[-1]
            if i < len(succ[u]):
                stack[-1] = (u, i + 1)
                v = succ[u][i]
                if color[v] == 0:
                    color[v] = 1
                    parent[v] = u
                    stack.append((v, 0))
                elif color[v] == 1:
                    cycle = [v]
                    w = u
                    while w != v:
                        cycle.append(w)
                        w = parent[w]
                    cycle.append(v)
                    return cycle[::-1]
            else:
                color[u] = 2
                stack.pop()
    return None


def problem_from_dict(doc: Any, source: str | Path = "<dict>") -> PipelineProblem:
    """Validate a parsed graph document and build the problem; see the module docstring."""
    path = Path(str(source))
    if not isinstance(doc, dict):
        raise InputError(f"{path}: top level: expected a JSON object")
    g = doc.get("graph")
    if not isinstance(g, dict):
        raise InputError(f"{path}: graph: missing or not an object")
    nodes = g.get("nodes")
    if not isinstance(nodes, dict):
        raise InputError(f"{path}: graph.nodes: missing or not an object")
    for key in ("work", "size_param", "size_out"):
        if key not in nodes:
            raise InputError(f"{path}: graph.nodes.{key}: missing")
    work = _number_list(path, "graph.nodes.work", nodes["work"], integer=False, n=None)
    n = len(work)
    if n == 0:
        raise InputError(f"{path}: graph.nodes.work: the graph has no nodes")
    size_param = _number_list(path, "graph.nodes.size_param", nodes["size_param"], integer=True, n=n)
    size_out = _number_list(path, "graph.nodes.size_out", nodes["size_out"], integer=True, n=n)
    names = nodes.get("names")
    if names is not None:
        if not isinstance(names, list) or len(names) != n:
            raise InputError(f"{path}: graph.nodes.names: expected a list of {n} names")
        names = tuple(str(x) for x in names)
    ops = _ops_list(path, nodes.get("ops"), n)
    raw_edges = g.get("edges")
    if not isinstance(raw_edges, list):
        raise InputError(f"{path}: graph.edges: missing or not a list")
    edges = np.zeros((len(raw_edges), 2), dtype=np.int64)
    for i, e in enumerate(raw_edges):
        if (not isinstance(e, list) or len(e) != 2
                or not all(isinstance(x, int) and not isinstance(x, bool) for x in e)):
            raise InputError(f"{path}: graph.edges[{i}]: expected [u, v] with integer node indices, got {json.dumps(e)}")
        u, v = e
        for x in (u, v):
            if not 0 <= x < n:
                raise InputError(f"{path}: graph.edges[{i}]: node index {x} out of range [0, {n})")
        if u == v:
            raise InputError(f"{path}: graph.edges[{i}]: self-loop on node {u}")
        edges[i] = (u, v)
    cycle = find_cycle(n, edges)
    if cycle is not None:
        shown = " -> ".join(str(c) for c in cycle[:12]) + (" -> ..." if len(cycle) > 12 else "")
        raise InputError(f"{path}: graph.edges: the graph has a cycle: {shown}")
    if "bandwidth" not in doc:
        raise InputError(f"{path}: bandwidth: missing")
    bw = doc["bandwidth"]
    if isinstance(bw, bool) or not isinstance(bw, (int, float)) or not math.isfinite(bw) or bw <= 0:
        raise InputError(f"{path}: bandwidth: must be a finite number > 0, got {json.dumps(bw)}")
    mem = doc.get("memory")
    if mem is not None:
        if isinstance(mem, bool) or not isinstance(mem, (int, float)) or not math.isfinite(mem) \
                or mem < 0 or not float(mem).is_integer():
            raise InputError(f"{path}: memory: must be a non-negative integer number of bytes or null, got {json.dumps(mem)}")
        mem = int(mem)
        if mem > MAX_BYTES:
            raise InputError(f"{path}: memory: {mem} bytes is above the supported maximum 2^62 "
                             "(use null for unlimited memory)")
    _check_magnitudes(path, work, size_out, size_param, float(bw))
    meta = doc.get("meta") or {}
    name = g.get("name") or path.name.split(".")[0]
    return PipelineProblem(
        name=str(name), work=np.array(work, dtype=np.float64),
        size_param=np.array([int(x) for x in size_param], dtype=np.int64),
        size_out=np.array([int(x) for x in size_out], dtype=np.int64),
        edges=edges, bandwidth=float(bw), memory=mem, names=names,
        meta=meta if isinstance(meta, dict) else {"meta": meta}, ops=ops)


def load_graph(path: str | Path) -> PipelineProblem:
    """Load and validate a graph file (``.json`` or ``.json.gz``)."""
    p = Path(path)
    return problem_from_dict(read_json_file(p), p)


def problem_to_dict(problem: PipelineProblem) -> dict[str, Any]:
    """The inverse of :func:`problem_from_dict` (edges deduplicated)."""
    nodes: dict[str, Any] = {"work": problem.work.tolist(), "size_param": problem.size_param.tolist(),
                             "size_out": problem.size_out.tolist()}
    if problem.names is not None:
        nodes = {"names": list(problem.names), **nodes}
    if problem.ops is not None:
        nodes["ops"] = list(problem.ops)
    return {"graph": {"name": problem.name, "nodes": nodes, "edges": problem.edges.tolist()},
            "bandwidth": problem.bandwidth, "memory": problem.memory, "meta": dict(problem.meta)}


def save_graph(problem: PipelineProblem, path: str | Path) -> None:
    """Write a graph file; gzip-compressed if the name ends in ``.gz``."""
    p = Path(path)
    data = json.dumps(problem_to_dict(problem)).encode()
    p.write_bytes(gzip.compress(data) if p.name.endswith(".gz") else data)
