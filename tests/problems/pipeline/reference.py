"""Independent, deliberately naive reference implementations for cross-checks.

Written from the definitions with Python sets and integers/fractions, sharing no
code with the numba kernels: block cost, all topological orders, all splits of an
order, and exhaustive search over all acyclic partitions.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import json
import os
from pathlib import Path
from typing import Iterator

from gapstop.problems.pipeline.model import PipelineProblem


def succs(p: PipelineProblem) -> list[set[int]]:
    s: list[set[int]] = [set() for _ in range(p.n)]
    for u, v in p.edges:
        s[int(u)].add(int(v))
    return s


def scaled_cost(p: PipelineProblem, S: set[int]) -> int:
    """Cost of the node set S in the CP-SAT models' integer units, naively: the floor-scaled work
    of its nodes plus the floor-scaled bytes / B of every tensor crossing its boundary (once)."""
    from gapstop.problems.pipeline import _mip

    sc = _mip.scale(p)
    succ = succs(p)
    c = sum(sc.work_lo[v] for v in S)
    for u in range(p.n):
        if (u in S and succ[u] - S) or (u not in S and succ[u] & S):
            c += sc.out_lo[u]
    return c


def block_cost(p: PipelineProblem, sched: list[int]) -> float:
    """f(S) for S = set(sched) run in the order ``sched`` (see _kernels docstring)."""
    S = set(sched)
    sc = succs(p)
    preds_in = {u for v in S for u in range(p.n) if v in sc[u] and u not in S}
    in_b = sum(int(p.size_out[u]) for u in preds_in)
    out_b = sum(int(p.size_out[u]) for u in S if sc[u] - S)
    work = 0.0
    for v in sched:
        work += float(p.work[v])
    param = sum(int(p.size_param[v]) for v in S)
    step = {v: t for t, v in enumerate(sched)}
    peak = 0
    for t, v in enumerate(sched):
        live = in_b
        for u in sched[: t + 1]:
            if u == v or not sc[u] or (sc[u] - S) or max(step[w] for w in sc[u]) >= t:
                live += int(p.size_out[u])
        peak = max(peak, live)
    c = work + (in_b + out_b) / p.bandwidth
    if p.memory is not None:
        over = param + peak - p.memory
        if over > 0:
            c = c + over / p.bandwidth
    return c


def topological_orders(p: PipelineProblem, nodes: set[int] | None = None) -> Iterator[list[int]]:
    """All topological orders of the subgraph induced by ``nodes`` (default: all)."""
    nodes = set(range(p.n)) if nodes is None else set(nodes)
    sc = succs(p)
    indeg = {v: sum(1 for u in nodes if v in sc[u]) for v in nodes}

    def rec(prefix: list[int]) -> Iterator[list[int]]:
        if len(prefix) == len(nodes):
            yield list(prefix)
            return
        for v in sorted(nodes):
            if indeg[v] == 0 and v not in prefix:
                prefix.append(v)
                for w in sc[v]:
                    if w in nodes:
                        indeg[w] -= 1
                yield from rec(prefix)
                for w in sc[v]:
                    if w in nodes:
                        indeg[w] += 1
                prefix.pop()

    yield from rec([])


def best_split(p: PipelineProblem, order: list[int], k: int) -> float:
    """Minimum bottleneck over all splits of ``order`` into at most k contiguous blocks."""
    n = len(order)
    best = float("inf")
    for parts in range(1, min(k, n) + 1):
        for cuts in itertools.combinations(range(1, n), parts - 1):
            bounds = (0, *cuts, n)
            val = max(block_cost(p, order[bounds[i]:bounds[i + 1]]) for i in range(parts))
            best = min(best, val)
    return best


def quotient_acyclic(p: PipelineProblem, labels: tuple[int, ...]) -> bool:
    q = max(labels) + 1
    adj = {b: set() for b in range(q)}
    for u, v in p.edges:
        if labels[u] != labels[v]:
            adj[labels[u]].add(labels[v])
    seen: dict[int, int] = {}

    def dfs(b: int) -> bool:
        seen[b] = 1
        for c in adj[b]:
            if seen.get(c) == 1 or (c not in seen and not dfs(c)):
                return False
        seen[b] = 2
        return True

    return all(dfs(b) for b in range(q) if b not in seen)


#: per problem (by content): each block's best cost, and OPT by k. Tests check many bounds at
#: several k on the same graphs; the block costs dominate the search and do not depend on k.
_BLOCK_COSTS: dict[tuple[object, ...], dict[frozenset[int], float]] = {}
_OPTIMA: dict[tuple[tuple[object, ...], int], float] = {}

#: OPT of every (graph, k) the test suite (slow tests included) asks :func:`brute_force` for,
#: keyed by :func:`optimum_key`, computed once by ``python -m tests.problems.pipeline.make_optima``.
#: A graph that is not in it (a new test, or a generator that changed) is searched as before;
#: ``test_reference.py`` searches a sample again and compares.
OPTIMA_FILE = Path(__file__).resolve().parent / "data" / "optima.json"
#: set by make_optima: search every case, and write what was searched to this file at exit
RECORD_ENV = "GAPSTOP_RECORD_OPTIMA"
_BUNDLED: dict[str, float] = json.loads(OPTIMA_FILE.read_text()) if OPTIMA_FILE.exists() else {}
_RECORDED: dict[str, float] = {}


def _fingerprint(p: PipelineProblem) -> tuple[object, ...]:
    """Everything :func:`block_cost` reads, as a hashable key."""
    arrays = (p.work, p.size_param, p.size_out, p.edges)
    return (p.n, p.bandwidth, p.memory, *((a.dtype.str, a.shape, a.tobytes()) for a in arrays))


def optimum_key(p: PipelineProblem, k: int) -> str:
    """A stable digest of everything :func:`block_cost` reads, and k (the bundled table's key)."""
    h = hashlib.sha256()
    scalars = (p.n, p.bandwidth, p.memory, k)
    h.update(repr(tuple(x.item() if hasattr(x, "item") else x for x in scalars)).encode())
    for a in (p.work, p.size_param, p.size_out, p.edges):
        h.update(f"{a.dtype.str}{a.shape}".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:24]


def brute_force(p: PipelineProblem, k: int) -> float:
    """OPT by exhaustive search over all acyclic partitions into at most k blocks,
    each block scheduled optimally (minimum over its topological orders).

    Read from the bundled table when it holds the case (see :data:`OPTIMA_FILE`)."""
    if not os.environ.get(RECORD_ENV):
        known = _BUNDLED.get(optimum_key(p, k))
        if known is not None:
            return known
    opt = search(p, k)
    if os.environ.get(RECORD_ENV):
        _RECORDED[optimum_key(p, k)] = opt
    return opt


def search(p: PipelineProblem, k: int) -> float:
    """:func:`brute_force` without the bundled table: always the exhaustive search."""
    fp = _fingerprint(p)
    if (fp, k) in _OPTIMA:
        return _OPTIMA[(fp, k)]
    costs = _BLOCK_COSTS.setdefault(fp, {})

    def best_block(S: frozenset[int]) -> float:
        if S not in costs:
            costs[S] = min(block_cost(p, o) for o in topological_orders(p, set(S)))
        return costs[S]

    best = float("inf")
    n = p.n
    # restricted growth strings enumerate each set partition once
    def rgs(i: int, labels: list[int], mx: int) -> Iterator[tuple[int, ...]]:
        if i == n:
            yield tuple(labels)
            return
        for b in range(min(mx + 2, k)):
            labels.append(b)
            yield from rgs(i + 1, labels, max(mx, b))
            labels.pop()

    for labels in rgs(0, [], -1):
        if not quotient_acyclic(p, labels):
            continue
        blocks = [frozenset(v for v in range(n) if labels[v] == b) for b in range(max(labels) + 1)]
        val = max(best_block(S) for S in blocks)
        best = min(best, val)
    _OPTIMA[(fp, k)] = best
    return best


@atexit.register
def _write_recorded() -> None:
    out = os.environ.get(RECORD_ENV)
    if out and _RECORDED:
        path = Path(out)
        table = json.loads(path.read_text()) if path.exists() else {}
        table.update(_RECORDED)
        path.write_text("{\n" + ",\n".join(f"{json.dumps(key)}: {json.dumps(v)}" for key, v in sorted(table.items()))
                        + "\n}\n")
