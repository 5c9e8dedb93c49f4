"""Seeded intra-operator sharding instances for tests and benchmarks: random ones, and
variants of a given instance (denser graphs, many strategies per node) priced like its own."""

from __future__ import annotations

import numpy as np

from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem


def random_instance(n: int, seed: int, *, max_k: int = 3, edge_p: float | None = None,
                    limit_quantile: float | None = 0.5, horizon: int = 12,
                    forbidden_p: float = 0.0, duplicates: bool = True, self_loops: bool = False) -> IntraopProblem:
    """A random instance with small integer costs (so exhaustive checks are exact).

    Args:
        n: number of nodes.
        seed: RNG seed; equal seeds give equal instances.
        max_k: strategies per node are drawn from ``1..max_k``.
        edge_p: probability of an edge between each ordered pair (default about 2.5/n).
        limit_quantile: the usage limit is placed this far between the least and the
            largest possible peak usage (0: tightest, 1: loosest); None: no limit.
        horizon: number of time steps.
        forbidden_p: share of node and edge costs set to ``FORBIDDEN``.
        duplicates: allow repeated and opposite edges between the same pair.
        self_loops: allow edges (v, v).
    """
    rng = np.random.default_rng(seed)
    if edge_p is None:
        edge_p = min(0.7, 2.5 / max(n, 1))
    k = rng.integers(1, max_k + 1, size=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(k, out=ptr[1:])
    cost = rng.integers(0, 100, size=ptr[-1])
    usage = rng.integers(0, 20, size=ptr[-1])
    cost[rng.random(ptr[-1]) < forbidden_p] = FORBIDDEN
    start = rng.integers(0, horizon, size=n)
    end = np.minimum(horizon, start + rng.integers(0, horizon // 2 + 1, size=n))
    pairs = [(u, v) for u in range(n) for v in range(n)
             if (u < v or (duplicates and u != v) or (self_loops and u == v)) and rng.random() < edge_p]
    eptr = np.zeros(len(pairs) + 1, dtype=np.int64)
    np.cumsum([k[u] * k[v] for u, v in pairs], out=eptr[1:])
    ecost = rng.integers(0, 100, size=eptr[-1])
    ecost[rng.random(eptr[-1]) < forbidden_p] = FORBIDDEN
    limit = None
    if limit_quantile is not None:
        lo = _peak(start, end, np.minimum.reduceat(usage, ptr[:-1]), horizon)
        hi = _peak(start, end, np.maximum.reduceat(usage, ptr[:-1]), horizon)
        limit = int(lo + limit_quantile * (hi - lo))
    uv = np.array(pairs, dtype=np.int64).reshape(-1, 2)
    return IntraopProblem(name=f"random-n{n}-s{seed}", node_ptr=ptr, node_cost=cost, node_usage=usage,
                          start=start, end=end, edge_u=uv[:, 0], edge_v=uv[:, 1], edge_ptr=eptr,
                          edge_cost=ecost, usage_limit=limit)


def _peak(start: np.ndarray, end: np.ndarray, use: np.ndarray, horizon: int) -> int:
    prof = np.zeros(horizon + 1, dtype=np.int64)
    np.add.at(prof, start, use)
    np.add.at(prof, end, -use)
    return int(np.cumsum(prof).max())


def least_usage_strategies(problem: IntraopProblem) -> np.ndarray:
    """int64[n], each node's strategy of least usage among those not FORBIDDEN (ties: the
    cheapest, then the lowest index; a node with only forbidden ones takes its least-usage one).

    A default anchor for :func:`densify`: a feasible point of many instances, but not of
    every one (its edges may be forbidden, and skipping forbidden strategies may cost memory).
    """
    out = np.empty(problem.n, dtype=np.int64)
    ptr, use, cost = problem.node_ptr, problem.node_usage, problem.node_cost
    for v in range(problem.n):
        lo, hi = int(ptr[v]), int(ptr[v + 1])
        out[v] = int(np.lexsort((cost[lo:hi], use[lo:hi], cost[lo:hi] >= FORBIDDEN))[0])
    return out


def densify(problem: IntraopProblem, seed: int, *, extra: float = 0.11, kind: str = "resample",
            anchor: np.ndarray | None = None) -> IntraopProblem:
    """``problem`` with ``round(extra * m)`` more edges, placed and priced like its own.

    Every added edge ``(u, v)`` joins a uniformly drawn ``u`` to the node nearest to
    ``u ± d`` (in node order), ``d`` drawn from the instance's own ``|u - v|`` over its edges,
    so added edges span the same distances in the schedule as the existing ones.

    Args:
        problem: the instance to make denser (left unchanged).
        seed: RNG seed; equal arguments give equal instances.
        extra: added edges as a share of ``problem.m``.
        kind: ``"resample"``: the cost table is a copy of a uniformly drawn existing table
            of the same shape ``k_u x k_v`` (or its transpose); without one, its entries are
            drawn from all the instance's table entries. ``"crosscut"``: ``v`` has as many
            strategies as ``u`` and the same anchor strategy, and the table forces equal
            strategies (0 on the diagonal, FORBIDDEN elsewhere), the kind of edge instance C
            adds to M's graph (there, 19,179 such edges, every one between nodes of equal
            strategy counts).
        anchor: int64[n] strategies whose entry in every added table is made finite
            (default :func:`least_usage_strategies`): the added edges never forbid it, so the
            result stays feasible when the anchor was feasible.

    Edges are appended after the instance's own, which keep their order and tables.
    """
    if kind not in ("resample", "crosscut"):
        raise ValueError(f"kind must be 'resample' or 'crosscut', got {kind!r}")
    rng = np.random.default_rng(seed)
    n, k = problem.n, problem.num_strategies
    eu, ev = problem.edge_u.astype(np.int64), problem.edge_v.astype(np.int64)
    add = int(round(extra * problem.m))
    anchor = least_usage_strategies(problem) if anchor is None else np.asarray(anchor, dtype=np.int64)
    dist = np.abs(eu - ev)
    dist = dist[dist > 0] if np.any(dist > 0) else np.arange(1, max(2, n))
    # crosscut partners: same strategy count and same anchor strategy (the anchor stays feasible)
    cls = k * (int(k.max()) + 1) + anchor
    by_cls = {int(c): np.nonzero(cls == c)[0] for c in np.unique(cls)}
    if kind == "crosscut":
        pool = np.nonzero((k > 1) & np.array([len(by_cls[int(c)]) > 1 for c in cls]))[0]
        if len(pool) == 0:
            raise ValueError("crosscut: no two nodes with the same strategy count (> 1) and anchor strategy")
    else:
        pool = np.arange(n)
    us = pool[rng.integers(0, len(pool), size=add)]
    targets = np.clip(us + rng.choice(dist, size=add) * rng.choice([-1, 1], size=add), 0, n - 1)
    shapes: dict[tuple[int, int], np.ndarray] = {}
    if kind == "resample" and problem.m:
        key = k[eu] * (int(k.max()) + 1) + k[ev]
        order = np.argsort(key, kind="stable")
        cut = np.flatnonzero(np.diff(key[order])) + 1
        for grp in np.split(order, cut):
            shapes[(int(k[eu[grp[0]]]), int(k[ev[grp[0]]]))] = grp
    finite = problem.edge_cost[problem.edge_cost < FORBIDDEN]
    new_u, new_v, tables = [], [], []
    for u, t in zip(us.tolist(), targets.tolist()):
        if kind == "crosscut":
            same = by_cls[int(cls[u])]
            i = int(np.searchsorted(same, t))
            cand = [int(x) for x in same[max(0, i - 2):i + 2] if x != u]
            v = min(cand, key=lambda x: (abs(x - t), x))
            kk = int(k[u])
            table = np.full((kk, kk), FORBIDDEN, dtype=np.int64)
            np.fill_diagonal(table, 0)
            fix = 0
        else:
            v = t if t != u else (u + 1) % n
            ku, kv = int(k[u]), int(k[v])
            if (ku, kv) in shapes:
                e = int(rng.choice(shapes[(ku, kv)]))
                table = problem.edge_cost[problem.edge_ptr[e]:problem.edge_ptr[e + 1]].reshape(ku, kv).copy()
            elif (kv, ku) in shapes:
                e = int(rng.choice(shapes[(kv, ku)]))
                table = problem.edge_cost[problem.edge_ptr[e]:problem.edge_ptr[e + 1]].reshape(kv, ku).T.copy()
            else:
                table = rng.choice(problem.edge_cost, size=(ku, kv)) if problem.m else np.zeros((ku, kv), np.int64)
            fix = int(rng.choice(finite)) if len(finite) else 0
        if table[anchor[u], anchor[v]] >= FORBIDDEN:
            table[anchor[u], anchor[v]] = fix
        new_u.append(u)
        new_v.append(v)
        tables.append(table.ravel())
    sizes = np.array([len(t) for t in tables], dtype=np.int64)
    eptr = np.concatenate([problem.edge_ptr, problem.edge_ptr[-1] + np.cumsum(sizes)])
    ecost = np.concatenate([problem.edge_cost, *tables]) if tables else problem.edge_cost
    return IntraopProblem(
        name=f"{problem.name}-{kind}{extra:g}-s{seed}", node_ptr=problem.node_ptr, node_cost=problem.node_cost,
        node_usage=problem.node_usage, start=problem.start, end=problem.end,
        edge_u=np.concatenate([eu, np.array(new_u, dtype=np.int64)]),
        edge_v=np.concatenate([ev, np.array(new_v, dtype=np.int64)]),
        edge_ptr=eptr, edge_cost=ecost, usage_limit=problem.usage_limit)


def _jitter(values: np.ndarray, keep: np.ndarray, rng: np.random.Generator, sigma: float) -> np.ndarray:
    """``values`` times lognormal noise, rounded, where not ``keep``; FORBIDDEN entries stay so."""
    noisy = np.rint(values * np.exp(rng.normal(0.0, sigma, size=values.shape)))
    out = np.where(keep | (values >= FORBIDDEN), values, np.minimum(noisy, 9e17).astype(np.int64))
    return out.astype(np.int64)


def many_strategies(problem: IntraopProblem, seed: int, *, lo: int = 30, hi: int = 180,
                    sigma: float = 0.1) -> tuple[IntraopProblem, np.ndarray]:
    """``problem``'s graph, intervals and limit with ``lo``-``hi`` strategies on every node that has several.

    Each node ``v`` with ``k_v > 1`` gets ``K_v = max(k_v, round(x))`` strategies, ``x`` log-uniform
    in ``[lo, hi]``: its own ``k_v`` unchanged, plus copies of uniformly drawn ones whose cost,
    usage and edge-table entries are multiplied by lognormal noise (``sigma``; FORBIDDEN stays
    FORBIDDEN), in a random order. Costs are thus drawn like the node's own, and since every
    original strategy is kept with its exact cost, usage and tables, every solution of
    ``problem`` has a counterpart of the same cost and feasibility (the optimum cannot rise).

    Returns:
        ``(instance, position)``: ``position`` (int64[problem.node_ptr[-1]]) is the new index of
        each original strategy in its node, so ``position[problem.node_ptr[:-1] + s]`` maps a
        solution ``s`` of ``problem`` to its counterpart.
    """
    rng = np.random.default_rng(seed)
    k = problem.num_strategies
    parents, keep, position = [], [], np.empty(int(problem.node_ptr[-1]), dtype=np.int64)
    for v in range(problem.n):
        kv = int(k[v])
        big = kv if kv == 1 else max(kv, int(round(float(np.exp(rng.uniform(np.log(lo), np.log(hi)))))))
        par = np.concatenate([np.arange(kv), rng.integers(0, kv, size=big - kv)])
        perm = rng.permutation(big)  # new index i holds par[perm[i]]
        par, orig = par[perm], perm < kv
        position[problem.node_ptr[v] + par[orig]] = np.flatnonzero(orig)
        parents.append(par)
        keep.append(orig)
    kn = np.array([len(p) for p in parents], dtype=np.int64)
    ptr = np.zeros(problem.n + 1, dtype=np.int64)
    np.cumsum(kn, out=ptr[1:])
    gpar = np.concatenate([problem.node_ptr[v] + parents[v] for v in range(problem.n)])
    gkeep = np.concatenate(keep)
    cost = _jitter(problem.node_cost[gpar], gkeep, rng, sigma)
    usage = _jitter(problem.node_usage[gpar], gkeep, rng, sigma)
    tables = []
    for e in range(problem.m):
        u, v = int(problem.edge_u[e]), int(problem.edge_v[e])
        t = problem.edge_cost[problem.edge_ptr[e]:problem.edge_ptr[e + 1]].reshape(int(k[u]), int(k[v]))
        tables.append(_jitter(t[np.ix_(parents[u], parents[v])], np.logical_and.outer(keep[u], keep[v]),
                              rng, sigma).ravel())
    eptr = np.zeros(problem.m + 1, dtype=np.int64)
    np.cumsum([len(t) for t in tables], out=eptr[1:])
    inst = IntraopProblem(
        name=f"{problem.name}-k{lo}-{hi}-s{seed}", node_ptr=ptr, node_cost=cost, node_usage=usage,
        start=problem.start, end=problem.end, edge_u=problem.edge_u, edge_v=problem.edge_v, edge_ptr=eptr,
        edge_cost=np.concatenate(tables) if tables else np.zeros(0, np.int64), usage_limit=problem.usage_limit)
    return inst, position
