"""Reading IOPDDL contest instances (JSON, optionally gzip-compressed), with an array cache.

Format (google/iopddl)::

    {"problem": {"name": str,
                 "nodes": {"intervals": [[b, e], ...],      # half-open [b, e)
                           "costs":  [[int, ...], ...],    # one list per node
                           "usages": [[int, ...], ...]},   # same shape as costs
                 "edges": {"nodes": [[u, v], ...],
                           "costs": [[int, ...], ...]},    # k_u * k_v entries, row s_u
                 "usage_limit": int (optional)}}

Every defect is reported as one :class:`~engine.errors.InputError` line naming
the file, the field and the index. Interval ends are at most :data:`MAX_HORIZON`
and the nodes' largest usages sum to less than 2^62.

The converted arrays are cached as an uncompressed ``.npz`` named after the sha256 of
the file's raw bytes, so a second load skips JSON parsing; the cache directory is, in
order of priority, the ``cache_dir`` argument, ``$GAPSTOP_CACHE/intraop``,
``~/.cache/gapstop/intraop``. A cache file is used only if the source digest stored in
it equals the file's and a digest of its arrays matches them, and the arrays then pass
the same checks as a fresh parse; otherwise (damaged, stale, altered) it is rebuilt from
the JSON with one warning line on stderr.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.engine.persist import parse_json_bytes, read_input_bytes
from gapstop.problems.intraop.model import IntraopProblem, interval_sum

#: Bump when the cached array layout changes; old cache files are then ignored.
CACHE_VERSION = 3
#: Largest interval end accepted: per-time-step profiles are dense arrays of this length
#: (an int64 profile is 128 MiB at the limit).
MAX_HORIZON = 2**24
_INT64_MAX = 2**63 - 1
_ARRAYS = ("node_ptr", "node_cost", "node_usage", "start", "end", "edge_u", "edge_v", "edge_ptr", "edge_cost")


def default_cache_dir() -> Path:
    """``$GAPSTOP_CACHE/intraop`` if the variable is set, else ``~/.cache/gapstop/intraop``."""
    root = os.environ.get("GAPSTOP_CACHE")
    return Path(root) / "intraop" if root else Path.home() / ".cache" / "gapstop" / "intraop"


def _lists(path: Path, field: str, value: Any, n: int | None) -> list[list[Any]]:
    """Check ``value`` is a list of ``n`` lists."""
    if not isinstance(value, list):
        raise InputError(f"{path}: {field}: missing or not a list")
    if n is not None and len(value) != n:
        raise InputError(f"{path}: {field}: has {len(value)} entries, expected {n}")
    for i, x in enumerate(value):
        if type(x) is not list:
            raise InputError(f"{path}: {field}[{i}]: expected a list, got {json.dumps(x)[:40]}")
    return value


def _flat_ints(path: Path, field: str, rows: list[list[Any]], total: int) -> NDArray[np.int64]:
    """Concatenate integer rows into int64, naming ``field[i][j]`` of the first bad entry."""
    kinds = set(map(type, chain.from_iterable(rows)))
    if kinds <= {int}:
        try:
            a = np.fromiter(chain.from_iterable(rows), dtype=np.int64, count=total)
        except OverflowError:
            a = None
        if a is not None:
            if a.size and a.min() < 0:
                flat = int(np.argmax(a < 0))
                i, j = _locate(rows, flat)
                raise InputError(f"{path}: {field}[{i}][{j}]: negative ({rows[i][j]})")
            return a
    for i, row in enumerate(rows):
        for j, x in enumerate(row):
            if type(x) is not int:
                raise InputError(f"{path}: {field}[{i}][{j}]: expected a non-negative integer, got {json.dumps(x)}")
            if not 0 <= x <= _INT64_MAX:
                raise InputError(f"{path}: {field}[{i}][{j}]: {x} is outside [0, 2^63)")
    raise AssertionError("unreachable")  # pragma: no cover


def _locate(rows: list[list[Any]], flat: int) -> tuple[int, int]:
    for i, row in enumerate(rows):
        if flat < len(row):
            return i, flat
        flat -= len(row)
    raise IndexError(flat)  # pragma: no cover


def _pairs(path: Path, field: str, rows: list[list[Any]]) -> NDArray[np.int64]:
    """Integer pairs as an int64[len, 2] array (intervals, edge endpoints)."""
    for i, x in enumerate(rows):
        if len(x) != 2 or type(x[0]) is not int or type(x[1]) is not int:
            raise InputError(f"{path}: {field}[{i}]: expected two integers, got {json.dumps(x)[:60]}")
    try:
        return np.array(rows, dtype=np.int64).reshape(-1, 2)
    except OverflowError:
        i = next(i for i, x in enumerate(rows) if not all(-_INT64_MAX <= y <= _INT64_MAX for y in x))
        raise InputError(f"{path}: {field}[{i}]: value out of the 64-bit range") from None


def problem_from_dict(doc: Any, source: str | Path = "<dict>") -> IntraopProblem:
    """Validate a parsed contest document and build the problem; see the module docstring.

    Raises:
        InputError: malformed input, or an instance that is infeasible because even the
            least-memory strategies exceed ``usage_limit`` at some time step.
    """
    path = Path(str(source))
    p = doc.get("problem") if isinstance(doc, dict) else None
    if not isinstance(p, dict):
        raise InputError(f"{path}: problem: missing or not an object")
    nodes, edges = p.get("nodes"), p.get("edges")
    if not isinstance(nodes, dict):
        raise InputError(f"{path}: problem.nodes: missing or not an object")
    if not isinstance(edges, dict):
        raise InputError(f"{path}: problem.edges: missing or not an object")
    intervals = _lists(path, "problem.nodes.intervals", nodes.get("intervals"), None)
    n = len(intervals)
    if n == 0:
        raise InputError(f"{path}: problem.nodes.intervals: the instance has no nodes")
    costs = _lists(path, "problem.nodes.costs", nodes.get("costs"), n)
    usages = _lists(path, "problem.nodes.usages", nodes.get("usages"), n)
    k = np.fromiter(map(len, costs), dtype=np.int64, count=n)
    if np.any(k == 0):
        raise InputError(f"{path}: problem.nodes.costs[{int(np.argmax(k == 0))}]: node has no strategies")
    ku = np.fromiter(map(len, usages), dtype=np.int64, count=n)
    if np.any(ku != k):
        i = int(np.argmax(ku != k))
        raise InputError(f"{path}: problem.nodes.usages[{i}]: has {ku[i]} entries, "
                         f"expected {k[i]} (as problem.nodes.costs[{i}])")
    node_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(k, out=node_ptr[1:])
    node_cost = _flat_ints(path, "problem.nodes.costs", costs, int(node_ptr[-1]))
    node_usage = _flat_ints(path, "problem.nodes.usages", usages, int(node_ptr[-1]))
    iv = _pairs(path, "problem.nodes.intervals", intervals)
    bad = np.nonzero((iv[:, 0] < 0) | (iv[:, 1] < iv[:, 0]))[0]
    if len(bad):
        i = int(bad[0])
        raise InputError(f"{path}: problem.nodes.intervals[{i}]: [{iv[i, 0]}, {iv[i, 1]}] is not "
                         "a half-open interval [b, e) with 0 <= b <= e")

    ends = _lists(path, "problem.edges.nodes", edges.get("nodes"), None)
    m = len(ends)
    ecosts = _lists(path, "problem.edges.costs", edges.get("costs"), m)
    uv = _pairs(path, "problem.edges.nodes", ends)
    bad = np.nonzero((uv < 0) | (uv >= n))[0]
    if len(bad):
        i = int(bad[0])
        raise InputError(f"{path}: problem.edges.nodes[{i}]: node index out of range [0, {n}) in {ends[i]}")
    want = k[uv[:, 0]] * k[uv[:, 1]] if m else np.zeros(0, np.int64)
    got = np.fromiter(map(len, ecosts), dtype=np.int64, count=m)
    bad = np.nonzero(got != want)[0]
    if len(bad):
        i = int(bad[0])
        raise InputError(f"{path}: problem.edges.costs[{i}]: has {got[i]} entries, expected "
                         f"{want[i]} (strategies of node {uv[i, 0]} x node {uv[i, 1]})")
    edge_ptr = np.zeros(m + 1, dtype=np.int64)
    np.cumsum(want, out=edge_ptr[1:])
    edge_cost = _flat_ints(path, "problem.edges.costs", ecosts, int(edge_ptr[-1]))

    limit = p.get("usage_limit")
    if limit is not None and (type(limit) is not int or not 0 <= limit <= _INT64_MAX):
        raise InputError(f"{path}: problem.usage_limit: expected a non-negative integer, got {json.dumps(limit)}")
    name = p.get("name")
    problem = IntraopProblem(
        name=str(name) if name is not None else path.name.split(".")[0],
        node_ptr=node_ptr, node_cost=node_cost, node_usage=node_usage,
        start=iv[:, 0], end=iv[:, 1], edge_u=uv[:, 0], edge_v=uv[:, 1],
        edge_ptr=edge_ptr, edge_cost=edge_cost, usage_limit=limit,
        meta=doc.get("meta") if isinstance(doc.get("meta"), dict) else None)
    check_limits(problem, path)
    return problem


def check_limits(problem: IntraopProblem, path: str | Path) -> None:
    """The checks beyond the model's own shape and sign checks, run on every load (fresh
    parse or cache): interval ends at most :data:`MAX_HORIZON`, total usage below 2^62
    (the int64 usage profiles cannot wrap), and some solution within the usage limit.

    Raises:
        InputError: naming the first offending field and index.
    """
    over = np.nonzero(problem.end > MAX_HORIZON)[0]
    if len(over):
        i = int(over[0])
        raise InputError(f"{path}: problem.nodes.intervals[{i}]: end {int(problem.end[i])} is above the "
                         f"supported horizon of {MAX_HORIZON} time steps")
    max_use = np.maximum.reduceat(problem.node_usage, problem.node_ptr[:-1])
    if sum(max_use.tolist()) >= 2**62:
        raise InputError(f"{path}: problem.nodes.usages: total usage exceeds 2^62; not supported")
    check_some_feasible(problem, path)


def min_usage_profile(problem: IntraopProblem) -> NDArray[np.int64]:
    """int64[T], the usage at each time step if every node took its least-memory strategy."""
    low = np.minimum.reduceat(problem.node_usage, problem.node_ptr[:-1])
    return interval_sum(low, problem.start, problem.end, problem.horizon)


def check_some_feasible(problem: IntraopProblem, path: str | Path) -> None:
    """Raise InputError naming a time step whose least possible usage exceeds the limit."""
    if problem.usage_limit is None or problem.horizon == 0:
        return
    prof = min_usage_profile(problem)
    over = np.nonzero(prof > problem.usage_limit)[0]
    if len(over):
        t = int(over[0])
        raise InputError(f"{path}: problem.usage_limit: no feasible solution: at time step {t} the "
                         f"least possible usage is {int(prof[t])} > usage_limit {problem.usage_limit}")


def _cache_file(cache_dir: Path, digest: str) -> Path:
    return cache_dir / f"{digest}.v{CACHE_VERSION}.npz"


def _arrays_digest(name: str, usage_limit: int, arrays: dict[str, NDArray[Any]]) -> str:
    """sha256 over the name, the limit and every array's dtype, shape and bytes."""
    h = hashlib.sha256(json.dumps([name, usage_limit]).encode())
    for a in _ARRAYS:
        x = np.ascontiguousarray(arrays[a])
        h.update(f"{a}:{x.dtype.str}:{x.shape}".encode())
        h.update(memoryview(x).cast("B"))
    return h.hexdigest()


def _save_cache(file: Path, problem: IntraopProblem, source_digest: str) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_name(f"{file.name}.{os.getpid()}.tmp.npz")
        limit = -1 if problem.usage_limit is None else problem.usage_limit
        arrays = {a: getattr(problem, a) for a in _ARRAYS}
        np.savez(tmp, name=np.array(problem.name), usage_limit=np.array(limit, dtype=np.int64),
                 source_sha256=np.array(source_digest),
                 arrays_sha256=np.array(_arrays_digest(problem.name, limit, arrays)),
                 meta=np.array(json.dumps(problem.meta)), **arrays)
        tmp.replace(file)
    except OSError:
        pass  # a read-only or full cache only costs speed


def _load_cache(file: Path, source: Path, source_digest: str) -> IntraopProblem:
    """The cached problem, if ``file`` belongs to ``source_digest`` and passes every check.

    Raises:
        Exception: any failure (unreadable or damaged file, other source, altered arrays,
            failed checks); the caller rebuilds the cache.
    """
    with np.load(file, allow_pickle=False) as z:
        if str(z["source_sha256"]) != source_digest:
            raise ValueError("made from other content than the file's")
        name, limit = str(z["name"]), int(z["usage_limit"])
        arrays = {a: z[a] for a in _ARRAYS}
        meta = json.loads(str(z["meta"]))
        if str(z["arrays_sha256"]) != _arrays_digest(name, limit, arrays):
            raise ValueError("its arrays do not match their digest")
    for a in _ARRAYS:
        want = np.int32 if a in ("edge_u", "edge_v") else np.int64
        if arrays[a].dtype != want or arrays[a].ndim != 1:
            raise ValueError(f"array {a} is not a vector of {np.dtype(want)}")
    problem = IntraopProblem(name=name, usage_limit=None if limit < 0 else limit,
                             meta=meta if isinstance(meta, dict) else None, **arrays)
    check_limits(problem, source)
    return problem


def load_problem(path: str | Path, *, cache_dir: str | Path | None = None, cache: bool = True) -> IntraopProblem:
    """Load and validate a contest instance (``.json`` or ``.json.gz``).

    Args:
        path: instance file.
        cache_dir: where converted arrays are kept; see the module docstring for the default.
        cache: False to neither read nor write the cache.

    Raises:
        InputError: unreadable, malformed or provably infeasible instance.
    """
    p = Path(path)
    raw = read_input_bytes(p)
    digest = hashlib.sha256(raw).hexdigest()
    file = _cache_file(Path(cache_dir) if cache_dir is not None else default_cache_dir(), digest)
    if cache and file.exists():
        try:
            return _load_cache(file, p, digest)
        except Exception as e:  # noqa: BLE001 - whatever is wrong with the cache, the JSON decides
            reason = type(e).__name__ + (f": {str(e).splitlines()[0]}" if str(e).strip() else "")
            print(f"warning: {file}: cache not usable ({reason}); rebuilding it from {p}", file=sys.stderr)
    problem = problem_from_dict(parse_json_bytes(p, raw), p)
    if cache:
        _save_cache(file, problem, digest)
    return problem


def problem_to_dict(problem: IntraopProblem) -> dict[str, Any]:
    """The inverse of :func:`problem_from_dict` (for fixtures and round-trip tests)."""
    ptr, eptr = problem.node_ptr.tolist(), problem.edge_ptr.tolist()
    cost, use, ecost = problem.node_cost.tolist(), problem.node_usage.tolist(), problem.edge_cost.tolist()
    doc: dict[str, Any] = {"name": problem.name, "nodes": {
        "intervals": [[b, e] for b, e in zip(problem.start.tolist(), problem.end.tolist())],
        "costs": [cost[ptr[v]:ptr[v + 1]] for v in range(problem.n)],
        "usages": [use[ptr[v]:ptr[v + 1]] for v in range(problem.n)]},
        "edges": {"nodes": [[u, v] for u, v in zip(problem.edge_u.tolist(), problem.edge_v.tolist())],
                  "costs": [ecost[eptr[e]:eptr[e + 1]] for e in range(problem.m)]}}
    if problem.usage_limit is not None:
        doc["usage_limit"] = problem.usage_limit
    return {"problem": doc}
