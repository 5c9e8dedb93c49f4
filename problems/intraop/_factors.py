"""Bucket (variable) elimination on exact integer factor tables, with mini-buckets beyond a size cap.

A *factor* is ``(scope, table)``: ``scope`` a tuple of node ids in increasing
order, ``table`` an int64 array with one axis per scope node (axis length ``k``
of that node), entries in ``[0, EXCL]`` with the conventions of
:mod:`problems.intraop._bound_kernels` (EXCL: excluded, finite sums capped at
CAP). The objective is the saturated sum of all factors.

Eliminating node ``v`` (Algorithm 1 of the FindOptStrategy paper, generalised
from pair to higher-order factors) replaces the factors that mention ``v`` (its
*bucket*) by ``g(x) = min_v sum(bucket)(x, v)`` over the union ``x`` of their
other nodes. By Theorem 1 the minimum of the remaining sum over the remaining
nodes is unchanged, so after the last node the sum of the constants is the
optimum. Keeping ``argmin_v`` per step lets the optimum be rebuilt by
back-substitution in reverse order.

When the bucket's table (``prod k`` over ``x`` and ``v``) would exceed
``table_limit`` entries, the bucket is split into *mini-buckets* that each fit
and ``v`` is minimised out of each separately. Since ``min_v (f + g) >= min_v f
+ min_v g``, the result is then a lower bound on the optimum, never the optimum
(and no argmin is kept). The same holds when the deadline stops the
elimination early: every remaining factor is minimised on its own.

Nodes are chosen in min-degree order (degree: number of other nodes sharing a
factor with it), ties broken by the bucket's table size, then by node id, so the
order is deterministic. Without splitting this is the min-degree order on the
elimination graph, as in the paper.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import numpy as np
from numpy.typing import NDArray

from gapstop.engine import cancel
from gapstop.problems.intraop._bound_kernels import CAP, EXCL

Scope = tuple[int, ...]
Factor = tuple[Scope, NDArray[np.int64]]


def sat(a: NDArray[np.int64], b: NDArray[np.int64]) -> NDArray[np.int64]:
    """Saturated sum of integer tables (broadcasting): EXCL if either entry is, else capped at CAP."""
    s = a + b
    return np.where(s >= EXCL, EXCL, np.minimum(s, CAP))


@dataclass
class FactorElimination:
    """Outcome of :func:`eliminate`.

    Attributes:
        value: sum of the constants, an exact Python int of any size (each constant is one
            table entry, capped at CAP); the exact minimum when ``exact``, else a lower bound on
            it. Meaningless when ``excluded``.
        excluded: every assignment uses an excluded (EXCL) entry. A flag, not a value, so that
            no finite sum is ever mistaken for the marker.
        exact: no bucket was split and the deadline did not stop the elimination.
        order: nodes in the order they were eliminated.
        width: induced width met: the largest number of other nodes in one bucket (split or not).
        max_table: entries of the largest table built.
        split_buckets: how many buckets were split into mini-buckets.
        timed_out: the deadline stopped the elimination (remaining factors minimised separately).
        argmins: per eliminated node (while exact), ``(scope, table)`` giving its best strategy
            for each assignment of the other nodes of its bucket.
        buckets: per eliminated node, the factors of its bucket (with ``keep_buckets``, after a
            split, while their entries stay within the budget), for :meth:`decode`.
    """

    value: int
    exact: bool
    order: list[int]
    excluded: bool = False
    width: int = 0
    max_table: int = 0
    split_buckets: int = 0
    timed_out: bool = False
    argmins: dict[int, tuple[Scope, NDArray[np.intp]]] = field(default_factory=dict)
    buckets: dict[int, list[Factor]] | None = None

    def decode(self, sol: NDArray[np.int64]) -> bool:
        """Greedy mini-bucket decoding after a split bucket: in reverse order, each node takes the
        strategy minimising the sum of the factors of its bucket given the nodes set so far.

        A heuristic assignment, never claimed optimal. Returns False (``sol`` untouched)
        when the buckets were not kept or the elimination timed out.
        """
        if self.buckets is None or self.timed_out:
            return False
        for v in reversed(self.order):
            total: NDArray[np.int64] | None = None
            for scope, arr in self.buckets[v]:
                vec = arr[tuple(slice(None) if x == v else int(sol[x]) for x in scope)]
                total = vec if total is None else sat(total, vec)
            assert total is not None
            sol[v] = int(np.argmin(total))
        return True

    def back_substitute(self, sol: NDArray[np.int64]) -> None:
        """Set ``sol[v]`` for every eliminated node, in reverse order (only when ``exact``)."""
        if not self.exact:
            raise ValueError("no back-substitution after a split bucket or a timeout")
        for v in reversed(self.order):
            scope, arg = self.argmins[v]
            sol[v] = int(arg[tuple(int(sol[x]) for x in scope)])


def _size(k: NDArray[np.int64], scope: Iterable[int]) -> int:
    return math.prod(int(k[x]) for x in scope)


def combine(factors: list[Factor], k: NDArray[np.int64]) -> Factor:
    """The saturated sum of ``factors`` as one table over the union of their scopes."""
    full = tuple(sorted({x for s, _ in factors for x in s}))
    acc = np.zeros([int(k[x]) for x in full], dtype=np.int64)
    for s, arr in factors:
        acc = sat(acc, arr.reshape([int(k[x]) if x in s else 1 for x in full]))
    return full, acc


def _split(bucket: list[Factor], k: NDArray[np.int64], limit: int) -> list[list[Factor]]:
    """First-fit partition of a bucket (largest factors first) into groups whose joint table fits ``limit``.

    A factor that alone exceeds the limit gets a group of its own.
    """
    groups: list[tuple[set[int], list[Factor]]] = []
    for f in sorted(bucket, key=lambda f: (-f[1].size, f[0])):
        for scope, members in groups:
            if _size(k, scope | set(f[0])) <= limit:
                scope.update(f[0])
                members.append(f)
                break
        else:
            groups.append((set(f[0]), [f]))
    return [m for _, m in groups]


def eliminate(factors: Iterable[Factor], k: NDArray[np.int64], *, order: list[int] | None = None,
              table_limit: int | None = None, keep_argmin: bool = False, keep_buckets: int = 0,
              deadline: float = math.inf,
              trace: Callable[[list[Factor], int], None] | None = None) -> FactorElimination:
    """Eliminate every node of ``factors`` and return the (bound on the) minimum of their sum.

    Args:
        factors: the factor set; factors with equal scopes are summed first.
        k: int64[n], strategies per node (indexed by node id).
        order: elimination order (must list every node in a scope); None: dynamic min-degree.
        table_limit: largest bucket table (entries) built exactly; beyond it the bucket is
            split into mini-buckets (the result is then a lower bound). None: no limit.
        keep_argmin: keep the per-node argmin tables for :meth:`FactorElimination.back_substitute`.
        keep_buckets: keep every bucket's factors for :meth:`FactorElimination.decode` while
            they hold at most this many entries in all (0: never).
        deadline: ``time.perf_counter()`` value after which the remaining factors are
            minimised separately (a lower bound).
        trace: called after every elimination step with the current factors and the
            sum of the constants so far (EXCL once excluded) (for checking Theorem 1's invariant).
    """
    tab: dict[Scope, NDArray[np.int64]] = {}
    const = 0
    excluded = False
    var_f: dict[int, set[Scope]] = {}
    # per node: how many factors it shares with each other node, and the log of its bucket's
    # size without itself; kept up to date so a min-degree choice never rescans a bucket
    nbr: dict[int, dict[int, int]] = {}
    logsz: dict[int, float] = {}
    logk = np.log(np.maximum(np.asarray(k, dtype=np.float64), 1.0))

    def link(scope: Scope, step: int) -> None:
        for x in scope:
            cnt = nbr.setdefault(x, {})
            for y in scope:
                if y != x:
                    c = cnt.get(y, 0) + step
                    if c:
                        if c == 1 and step == 1:
                            logsz[x] = logsz.get(x, 0.0) + logk[y]
                        cnt[y] = c
                    else:
                        del cnt[y]
                        logsz[x] -= logk[y]

    def add(scope: Scope, arr: NDArray[np.int64]) -> None:
        nonlocal const, excluded
        if not scope:
            c = int(arr.reshape(-1)[0])
            if c >= EXCL:
                excluded = True
            else:
                const += c
            return
        old = tab.get(scope)
        tab[scope] = arr if old is None else sat(old, arr)
        if old is None:
            link(scope, 1)
            for x in scope:
                var_f.setdefault(x, set()).add(scope)

    for s, arr in factors:
        add(tuple(s), np.asarray(arr, dtype=np.int64))
    res = FactorElimination(value=0, exact=True, order=[])
    kept: dict[int, list[Factor]] | None = {} if keep_buckets > 0 else None
    kept_entries = 0

    def key(v: int) -> tuple[int, float, int]:
        return len(nbr[v]), round(logsz.get(v, 0.0), 6), v

    heap = [key(v) for v in var_f] if order is None else []
    heapq.heapify(heap)
    todo = list(reversed(order)) if order is not None else []
    while var_f:
        if cancel.expired(deadline):
            res.timed_out, res.exact = True, False
            break
        if order is not None:
            v = todo.pop()
            if v not in var_f:
                continue
        else:
            top = heapq.heappop(heap)
            v = top[2]
            if v not in var_f:
                continue
            if key(v) != top:
                heapq.heappush(heap, key(v))  # stale entry
                continue
        scopes = var_f.pop(v)
        bucket = [(s, tab.pop(s)) for s in sorted(scopes)]
        for s, _ in bucket:
            link(s, -1)
            for x in s:
                if x != v:
                    var_f[x].discard(s)
        if kept is not None:
            kept_entries += sum(a.size for _, a in bucket)
            if kept_entries > keep_buckets:
                kept = None  # over budget: no decoding
            else:
                kept[v] = bucket
        full = {x for s, _ in bucket for x in s}
        res.width = max(res.width, len(full) - 1)
        res.order.append(v)
        if table_limit is not None and _size(k, full) > table_limit:
            res.exact = False
            res.split_buckets += 1
            groups = _split(bucket, k, table_limit)
        else:
            groups = [bucket]
        for g in groups:
            scope, acc = combine(g, k)
            res.max_table = max(res.max_table, acc.size)
            ax = scope.index(v)
            if keep_argmin and res.exact:
                res.argmins[v] = (scope[:ax] + scope[ax + 1:], np.argmin(acc, axis=ax))
            add(scope[:ax] + scope[ax + 1:], acc.min(axis=ax))
        if order is None:
            for x in full:
                if x != v and x in var_f:
                    heapq.heappush(heap, key(x))
        if trace is not None:
            trace([(s, a) for s, a in tab.items()], EXCL if excluded else const)
    for arr in list(tab.values()):  # left by a timeout: each minimised on its own
        add((), np.asarray(arr.min()))
    res.value, res.excluded = const, excluded
    if not res.exact:
        res.argmins.clear()
        res.buckets = kept
    return res


def network_factors(nodes: NDArray[np.int64] | list[int], theta: NDArray[np.int64], work: NDArray[np.int64],
                    graph: Any, k: NDArray[np.int64], ptr: NDArray[np.int64]) -> list[Factor]:
    """The unary and pair factors of ``nodes`` in an integer pairwise network.

    ``graph`` has the adjacency layout of :class:`~problems.intraop.network.PairNetwork`
    (``adj_ptr``, ``adj_nbr``, ``adj_tab``, ``tab_off``, ``tab_x``; a
    :class:`~problems.intraop.reduce.ReductionPlan` for the core), tables in ``work``.
    Each pair table is listed once, oriented so that its axes follow node ids.
    """
    out: list[Factor] = []
    for v in (int(x) for x in nodes):
        kv = int(k[v])
        out.append(((v,), theta[ptr[v]:ptr[v] + kv].copy()))
        for e in range(int(graph.adj_ptr[v]), int(graph.adj_ptr[v + 1])):
            j = int(graph.adj_nbr[e])
            if j < v:
                continue
            t = int(graph.adj_tab[e])
            off = int(graph.tab_off[t])
            kj = int(k[j])
            if int(graph.tab_x[t]) == v:
                tab = work[off:off + kv * kj].reshape(kv, kj)
            else:
                tab = work[off:off + kv * kj].reshape(kj, kv).T
            out.append(((v, j), np.ascontiguousarray(tab)))
    return out
