"""Greedy single-node strategy swaps on the true (constrained) problem.

* :func:`improve`: swap a node to a cheaper strategy when the usage limit
  still holds; repeated over all nodes until no swap helps. Only the node's
  own cost, its pair tables with its neighbours and the usage over its own
  interval matter, so each candidate is priced in ``O(k_v deg_v + log T)``.
  With ``pairs``, both endpoints of a pair table may also move together (the
  usage check then covers the two intervals and their overlap).
* :func:`repair`: while some time step is over the limit, make the swap at a
  node live at the most loaded step that frees memory at the least extra cost
  per unit of memory freed.

Usage per time step lives in a segment tree with range add / range max
(int64[2 * size] values plus int64[size] pending adds; ``size`` a power of two
>= T). Costs are compared in float64 (exact below 2^53); the caller re-scores
every result with the exact evaluator.
"""

from __future__ import annotations

import time

import numpy as np
from numba import njit
from numpy.typing import NDArray

from gapstop.engine import cancel
from gapstop.problems.intraop._kernels import local_costs
from gapstop.problems.intraop.evaluate import usage_profile
from gapstop.problems.intraop.relaxed import Prepared


@njit(nogil=True, cache=True)
def _apply(t, d, size, p, x):  # pragma: no cover - jitted
    t[p] += x
    if p < size:
        d[p] += x


@njit(nogil=True, cache=True)
def _pull(t, d, size, p):  # pragma: no cover - jitted
    while p > 1:
        p >>= 1
        t[p] = max(t[2 * p], t[2 * p + 1]) + d[p]


@njit(nogil=True, cache=True)
def _push(t, d, size, p):  # pragma: no cover - jitted
    h = 0
    while (1 << h) < size:
        h += 1
    for s in range(h, 0, -1):
        i = p >> s
        if d[i] != 0:
            _apply(t, d, size, 2 * i, d[i])
            _apply(t, d, size, 2 * i + 1, d[i])
            d[i] = 0


@njit(nogil=True, cache=True)
def seg_add(t, d, size, lo, hi, x):  # pragma: no cover - jitted
    """Add ``x`` to every step in ``[lo, hi)``."""
    if lo >= hi:
        return
    l, r = lo + size, hi + size
    l0, r0 = l, r - 1
    while l < r:
        if l & 1:
            _apply(t, d, size, l, x)
            l += 1
        if r & 1:
            r -= 1
            _apply(t, d, size, r, x)
        l >>= 1
        r >>= 1
    _pull(t, d, size, l0)
    _pull(t, d, size, r0)


@njit(nogil=True, cache=True)
def seg_max(t, d, size, lo, hi):  # pragma: no cover - jitted
    """Maximum over ``[lo, hi)`` (a very negative number if empty)."""
    res = -(2**62)
    if lo >= hi:
        return res
    l, r = lo + size, hi + size
    _push(t, d, size, l)
    _push(t, d, size, r - 1)
    while l < r:
        if l & 1:
            res = max(res, t[l])
            l += 1
        if r & 1:
            r -= 1
            res = max(res, t[r])
        l >>= 1
        r >>= 1
    return res


@njit(nogil=True, cache=True)
def seg_argmax(t, d, size):  # pragma: no cover - jitted
    """Position of a maximum over all steps."""
    p = 1
    while p < size:
        p = 2 * p if t[2 * p] >= t[2 * p + 1] else 2 * p + 1
    return p - size


@njit(nogil=True, cache=True)
def seg_build(t, d, size, profile):  # pragma: no cover - jitted
    """Fill the tree from a usage profile (steps beyond it count as very negative)."""
    for i in range(size):
        t[size + i] = profile[i] if i < len(profile) else -(2**62)
        d[i] = 0
    for p in range(size - 1, 0, -1):
        t[p] = max(t[2 * p], t[2 * p + 1])


@njit(nogil=True, cache=True)
def _improve(sol, unary, usage, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x,
             start, end, limit, t, d, size, scratch, max_rounds):  # pragma: no cover - jitted
    """Rounds over all nodes in index order, each node to its cheapest strategy that fits, until a
    round moves none (or ``max_rounds``). Returns the moves made.

    A node is looked at again only if it may move: a neighbour has moved since (its costs
    changed), or a strategy it wanted did not fit and some move has lowered usage since (more
    room). Any other node would keep its strategy, so the result is the same as looking at
    every node in every round, at a fraction of the work: the first round moves a few hundred
    of instance M's 32,894 nodes, the second almost none.
    """
    moves = 0
    n = len(sol)
    dirty = np.ones(n, dtype=np.bool_)
    blocked = np.zeros(n, dtype=np.int64)  # nodes that wanted more room since the last release
    listed = np.zeros(n, dtype=np.bool_)
    n_blocked = 0
    for _ in range(max_rounds):
        moved = 0
        for v in range(n):
            if not dirty[v]:
                continue
            dirty[v] = False
            local_costs(v, sol, unary, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, scratch)
            cur = sol[v]
            best = scratch[cur]
            best_s = -1
            room = -1
            wanted = False
            for s in range(k[v]):
                if scratch[s] < best:
                    du = usage[ptr[v] + s] - usage[ptr[v] + cur]
                    if limit >= 0 and du > 0 and start[v] < end[v]:
                        if room < 0:
                            room = limit - seg_max(t, d, size, start[v], end[v])
                        if du > room:
                            wanted = True
                            continue
                    best = scratch[s]
                    best_s = s
            if wanted and not listed[v]:
                listed[v] = True
                blocked[n_blocked] = v
                n_blocked += 1
            if best_s >= 0:
                du = usage[ptr[v] + best_s] - usage[ptr[v] + cur]
                seg_add(t, d, size, start[v], end[v], du)
                sol[v] = best_s
                moved += 1
                for i in range(adj_ptr[v], adj_ptr[v + 1]):
                    dirty[adj_nbr[i]] = True
                if du < 0 and start[v] < end[v]:
                    for j in range(n_blocked):
                        dirty[blocked[j]] = True
                        listed[blocked[j]] = False
                    n_blocked = 0
        moves += moved
        if moved == 0:
            break
    return moves


@njit(nogil=True, cache=True)
def _fits(t, d, size, limit, lo_u, hi_u, du, lo_v, hi_v, dv):  # pragma: no cover - jitted
    """Whether adding ``du`` on ``[lo_u, hi_u)`` and ``dv`` on ``[lo_v, hi_v)`` keeps every step within the limit."""
    if limit < 0:
        return True
    # the two intervals cut time into at most three pieces with a constant added amount
    a, b = max(lo_u, lo_v), min(hi_u, hi_v)
    if du > 0 and seg_max(t, d, size, lo_u, min(hi_u, a) if a < b else hi_u) + du > limit:
        return False
    if dv > 0 and seg_max(t, d, size, lo_v, min(hi_v, a) if a < b else hi_v) + dv > limit:
        return False
    if a < b:
        if du + dv > 0 and seg_max(t, d, size, a, b) + du + dv > limit:
            return False
        if du > 0 and seg_max(t, d, size, b, hi_u) + du > limit:
            return False
        if dv > 0 and seg_max(t, d, size, b, hi_v) + dv > limit:
            return False
    return True


@njit(nogil=True, cache=True)
def _improve_pairs(sol, unary, usage, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, tab_y,
                   start, end, limit, t, d, size, lu, lv):  # pragma: no cover - jitted
    """One pass over all pair tables: move both endpoints at once when that is cheaper and fits."""
    moves = 0
    for e in range(len(tab_x)):
        u, v = tab_x[e], tab_y[e]
        ku, kv = k[u], k[v]
        # each endpoint's costs without the u-v table, which is added once for the pair below
        local_costs(u, sol, unary, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, lu, v)
        local_costs(v, sol, unary, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, lv, u)
        su, sv = sol[u], sol[v]
        off = tab_off[e]
        cur = lu[su] + lv[sv] + tabs[off + su * kv + sv]
        # integer costs in float64: demand a real gain so rounding near 1e18 cannot cycle
        best, ba, bb = cur - max(0.5, 1e-12 * abs(cur)), su, sv
        uu, uv = usage[ptr[u] + su], usage[ptr[v] + sv]
        for a in range(ku):
            if a == su:
                continue
            for b in range(kv):
                if b == sv:
                    continue
                c = lu[a] + lv[b] + tabs[off + a * kv + b]
                if c < best:
                    if _fits(t, d, size, limit, start[u], end[u], usage[ptr[u] + a] - uu,
                             start[v], end[v], usage[ptr[v] + b] - uv):
                        best, ba, bb = c, a, b
        if ba != su:
            seg_add(t, d, size, start[u], end[u], usage[ptr[u] + ba] - uu)
            seg_add(t, d, size, start[v], end[v], usage[ptr[v] + bb] - uv)
            sol[u], sol[v] = ba, bb
            moves += 1
    return moves


@njit(nogil=True, cache=True)
def _repair(sol, unary, usage, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x,
            start, end, limit, t, d, size, scratch, max_steps):  # pragma: no cover - jitted
    n = len(sol)
    for _ in range(max_steps):
        peak = t[1]
        if peak <= limit:
            return True
        step = seg_argmax(t, d, size)
        excess = peak - limit
        best_score = np.inf
        bv, bs = -1, -1
        for v in range(n):
            if not (start[v] <= step < end[v]):
                continue
            cur = sol[v]
            cu = usage[ptr[v] + cur]
            freeable = False
            for s in range(k[v]):
                if usage[ptr[v] + s] < cu:
                    freeable = True
                    break
            if not freeable:
                continue
            local_costs(v, sol, unary, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, scratch)
            for s in range(k[v]):
                r = cu - usage[ptr[v] + s]
                if r > 0:
                    score = (scratch[s] - scratch[cur]) / min(r, excess)
                    if score < best_score:
                        best_score = score
                        bv, bs = v, s
        if bv < 0:
            return False
        seg_add(t, d, size, start[bv], end[bv], usage[ptr[bv] + bs] - usage[ptr[bv] + sol[bv]])
        sol[bv] = bs
    return t[1] <= limit


class UsageTracker:
    """Segment tree buffers for one search (not thread-safe)."""

    def __init__(self, prep: Prepared) -> None:
        self.prep = prep
        T = max(2, prep.problem.horizon)
        self.size = 1 << (T - 1).bit_length()  # a power of two >= T
        self.t = np.zeros(2 * self.size, dtype=np.int64)
        self.d = np.zeros(self.size, dtype=np.int64)
        self.scratch = np.empty(int(prep.net.k.max()), dtype=np.float64)

    def load(self, profile: NDArray[np.int64]) -> None:
        seg_build(self.t, self.d, self.size, profile)

    def _args(self, sol: NDArray[np.int64]) -> tuple:
        net, p = self.prep.net, self.prep.problem
        return (sol, net.unary, net.usage, net.ptr, net.k, net.adj_ptr, net.adj_nbr, net.adj_tab, net.tabs,
                net.tab_off, net.tab_x, p.start, p.end, p.limit_or_minus1, self.t, self.d, self.size, self.scratch)


def improve(tracker: UsageTracker, sol: NDArray[np.int64], *, max_rounds: int = 20, pairs: int = 0,
            deadline: float | None = None) -> int:
    """Greedy feasible-preserving swaps on ``sol`` (in place; must be within the limit). Returns swaps made.

    With ``pairs > 0``, also moves both endpoints of a pair table together: up to ``pairs``
    passes over all tables, each followed by single swaps, while they find anything and,
    given a ``deadline`` (``time.perf_counter()`` value), while the last pass would still fit.
    """
    tracker.load(usage_profile(tracker.prep.problem, sol))
    moves = int(_improve(*tracker._args(sol), max_rounds))
    net, p = tracker.prep.net, tracker.prep.problem
    lv = np.empty_like(tracker.scratch)
    last_s = 0.0
    for _ in range(pairs):
        t0 = time.perf_counter()
        if (deadline is not None and t0 + last_s > deadline) or cancel.stop_requested():
            break
        got = int(_improve_pairs(sol, net.unary, net.usage, net.ptr, net.k, net.adj_ptr, net.adj_nbr, net.adj_tab,
                                 net.tabs, net.tab_off, net.tab_x, net.tab_y, p.start, p.end, p.limit_or_minus1,
                                 tracker.t, tracker.d, tracker.size, tracker.scratch, lv))
        if got == 0:
            break
        moves += got + int(_improve(*tracker._args(sol), max_rounds))
        last_s = time.perf_counter() - t0
    return moves


def repair(tracker: UsageTracker, sol: NDArray[np.int64], *, max_steps: int = 100_000) -> bool:
    """Greedy usage-lowering swaps on ``sol`` (in place) until within the limit; False if stuck."""
    if tracker.prep.problem.usage_limit is None:
        return True
    tracker.load(usage_profile(tracker.prep.problem, sol))
    return bool(_repair(*tracker._args(sol), max_steps))
