"""An independent checker of the MCM constraints (Xie et al. 2022, eqs. 2-5), for tests only.

Written from the paper's definitions with Python sets and loops; it shares no code with
:mod:`problems.pipeline.constraints`: the chip graph's longest paths come from a plain
dynamic program over all chip pairs (delta(a, b) of eq. 4), the memory peak from a
direct simulation of the schedule.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterator

from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline.reference import block_cost, succs


def _edges(p: PipelineProblem) -> list[tuple[int, int]]:
    return [(int(u), int(v)) for u, v in p.edges]


def _rank_labels(p: PipelineProblem, labels: tuple[int, ...]) -> dict[int, int] | None:
    """Topological rank of each used label in the quotient graph (smallest label first), or
    None if the quotient graph has a cycle."""
    used = sorted(set(labels))
    out: dict[int, set[int]] = {a: set() for a in used}
    for u, v in _edges(p):
        if labels[u] != labels[v]:
            out[labels[u]].add(labels[v])
    indeg = {a: 0 for a in used}
    for a in used:
        for b in out[a]:
            indeg[b] += 1
    rank: dict[int, int] = {}
    while len(rank) < len(used):
        ready = [a for a in used if a not in rank and indeg[a] == 0]
        if not ready:
            return None
        a = min(ready)
        rank[a] = len(rank)
        for b in out[a]:
            indeg[b] -= 1
    return rank


def longest_paths(nodes: list[int], arcs: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """delta(a, b): number of arcs on the longest a -> b path (absent: no path). Acyclic input."""
    delta = {(a, b): 1 for a, b in arcs}
    changed = True
    while changed:  # Bellman-Ford style relaxation for longest paths on a DAG
        changed = False
        for (a, m), d1 in list(delta.items()):
            for b in nodes:
                d2 = delta.get((m, b))
                if d2 is not None and delta.get((a, b), 0) < d1 + d2:
                    delta[(a, b)] = d1 + d2
                    changed = True
    return delta


def schedule(p: PipelineProblem, rank: dict[int, int], labels: tuple[int, ...]) -> list[int]:
    """Kahn's order taking the ready node with the smallest (block rank, index)."""
    sc = succs(p)
    indeg = [0] * p.n
    for _, v in _edges(p):
        indeg[v] += 1
    done: list[int] = []
    while len(done) < p.n:
        v = min((v for v in range(p.n) if indeg[v] == 0 and v not in done),
                key=lambda v: (rank[labels[v]], v))
        done.append(v)
        for w in sc[v]:
            indeg[w] -= 1
    return done


def peak_bytes(p: PipelineProblem, sched: list[int], block: set[int]) -> int:
    """Input tensors plus the outputs still needed, at the worst step of ``sched`` in ``block``."""
    sc = succs(p)
    in_b = sum(int(p.size_out[u]) for u in range(p.n) if u not in block and sc[u] & block)
    steps = [v for v in sched if v in block]
    pos = {v: t for t, v in enumerate(steps)}
    peak = 0
    for t, v in enumerate(steps):
        live = in_b
        for u in steps[: t + 1]:
            needed_later = any(w in block and pos[w] >= t for w in sc[u]) or bool(sc[u] - block) or not sc[u]
            if u == v or needed_later:
                live += int(p.size_out[u])
        peak = max(peak, live)
    return peak


def first_violation(p: PipelineProblem, labels: tuple[int, ...], c: int, *, ring: bool, triangle: bool,
                    memory: bool, check: Callable[[PipelineProblem, list[int]], bool] | None = None,
                    all_chips: bool = False) -> str | None:
    """The first violated constraint: ring-order, no-skip, cycle, too-many, triangle, memory,
    check; None if the labelling is valid. ``ring``: equations 2 and 3 as written;
    ``all_chips``: equation 2 and every chip of D used (implies ``ring``)."""
    if ring or all_chips:
        if any(not 0 <= x < c for x in labels) or any(labels[u] > labels[v] for u, v in _edges(p)):
            return "ring-order"
        if all_chips and set(labels) != set(range(c)):
            return "no-skip"
        # equation 3: d <= f(u)  =>  exists v in V with f(v) = d, for all u in V, d in D
        if not all(any(labels[v] == d for v in range(p.n)) for u in range(p.n) for d in range(c)
                   if d <= labels[u]):
            return "no-skip"
    rank = _rank_labels(p, labels)
    if rank is None:
        return "cycle"
    if len(rank) > c:
        return "too-many"
    if triangle:
        arcs = {(labels[u], labels[v]) for u, v in _edges(p) if labels[u] != labels[v]}
        delta = longest_paths(sorted(set(labels)), arcs)
        if any(delta[a] != 1 for a in arcs):
            return "triangle"
    if memory and p.memory is not None:
        sched = schedule(p, rank, labels)
        for lab in set(labels):
            block = {v for v in range(p.n) if labels[v] == lab}
            if sum(int(p.size_param[v]) for v in block) + peak_bytes(p, sched, block) > p.memory:
                return "memory"
    if check is not None:  # the callback sees chip ids in DAG order (the labels themselves with ring)
        try:
            if not check(p, [rank[x] for x in labels]):
                return "check"
        except Exception:
            return "check"
    return None


def all_labellings(n: int, c: int) -> Iterator[tuple[int, ...]]:
    return itertools.product(range(c), repeat=n)


def constrained_optimum(p: PipelineProblem, c: int, *, ring: bool, triangle: bool,
                        all_chips: bool = False) -> float | None:
    """min bottleneck over all valid labellings (canonical schedule), None if none is valid."""
    best = None
    for labels in all_labellings(p.n, c):
        if first_violation(p, labels, c, ring=ring, triangle=triangle, memory=False,
                           all_chips=all_chips) is not None:
            continue
        rank = _rank_labels(p, labels)
        assert rank is not None
        sched = schedule(p, rank, labels)
        cost = max(block_cost(p, [v for v in sched if labels[v] == lab]) for lab in set(labels))
        best = cost if best is None or cost < best else best
    return best
