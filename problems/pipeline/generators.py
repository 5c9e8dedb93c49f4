"""Seeded, deterministic generators of pipeline graphs for tests and benchmarks.

* :func:`random_dag`: a random DAG on n nodes (edges from a random topological
  order with probability p), random work/sizes, optionally a memory limit.
* :func:`regal_like`: REGAL-style synthetic graphs (Archer et al. 2024, App. C.2;
  Paliwal et al. 2020): an undirected base graph (Erdős–Rényi, Barabási–Albert,
  Watts–Strogatz, random-regular or a stochastic block model) oriented by a random
  topological order; tensor sizes ~ N(50, 10); node cost = its input and output
  tensor sizes plus r * (total tensor size) with r ~ N(0, 0.1)^+; B = 1, no memory limit.
"""

from __future__ import annotations

import numpy as np

from gapstop.problems.pipeline.model import PipelineProblem


def random_dag(n: int, seed: int, *, p: float | None = None, k_hint: int = 4,
               memory: bool = False, bandwidth: float = 1.0) -> PipelineProblem:
    """A random DAG with integer-valued weights (so brute-force checks are exact).

    Args:
        n: number of nodes.
        seed: RNG seed; the same seed gives the same graph.
        p: edge probability between each ordered pair (default 2/n-ish, at least 0.2).
        k_hint: used to scale the memory limit so that overflow matters for about k_hint blocks.
        memory: if True, parameters are large and a memory limit is set so overflow matters.
        bandwidth: B.
    """
    rng = np.random.default_rng(seed)
    if p is None:
        p = max(0.2, min(0.6, 2.5 / max(n, 1)))
    perm = rng.permutation(n)
    edges = [(int(perm[i]), int(perm[j])) for i in range(n) for j in range(i + 1, n) if rng.random() < p]
    work = rng.integers(1, 20, size=n).astype(np.float64)
    size_out = rng.integers(0, 12, size=n)
    if memory:
        size_param = rng.integers(0, 30, size=n) * (rng.random(n) < 0.6)
        mem = int(max(1, size_param.sum() // max(1, k_hint)))
    else:
        size_param = np.zeros(n, dtype=np.int64)
        mem = None
    return PipelineProblem(name=f"random-dag-n{n}-s{seed}", work=work, size_param=size_param,
                           size_out=size_out, edges=np.array(edges, dtype=np.int64).reshape(-1, 2),
                           bandwidth=bandwidth, memory=mem, meta={"generator": "random_dag", "seed": seed})


def _base_graph(rng: np.random.Generator, family: str, n: int) -> set[tuple[int, int]]:
    e: set[tuple[int, int]] = set()

    def add(a: int, b: int) -> None:
        if a != b:
            e.add((min(a, b), max(a, b)))

    if family == "er":
        p = rng.uniform(2.0, 4.0) / n
        for i in range(n):
            for j in range(i + 1, n):
                if rng.random() < p:
                    add(i, j)
    elif family == "ba":
        m = int(rng.integers(1, 4))
        targets = list(range(m))
        repeated: list[int] = []
        for v in range(m, n):
            for t in set(targets):
                add(v, t)
            repeated.extend(targets)
            repeated.extend([v] * m)
            targets = [repeated[int(rng.integers(len(repeated)))] for _ in range(m)]
    elif family == "ws":
        kk = int(rng.choice([2, 4]))
        beta = rng.uniform(0.1, 0.5)
        for i in range(n):
            for d in range(1, kk // 2 + 1):
                j = (i + d) % n
                if rng.random() < beta:
                    j = int(rng.integers(n))
                add(i, j)
    elif family == "rr":
        d = int(rng.choice([2, 3, 4]))
        stubs = np.repeat(np.arange(n), d)
        rng.shuffle(stubs)
        for a, b in zip(stubs[0::2], stubs[1::2]):
            add(int(a), int(b))
    elif family == "sbm":
        c = int(rng.integers(2, 5))
        comm = rng.integers(0, c, size=n)
        p_in, p_out = rng.uniform(4, 8) / n, rng.uniform(0.2, 1.0) / n
        for i in range(n):
            for j in range(i + 1, n):
                if rng.random() < (p_in if comm[i] == comm[j] else p_out):
                    add(i, j)
    else:
        raise ValueError(f"unknown family {family!r}")
    return e


FAMILIES = ("er", "ba", "ws", "rr", "sbm")


def regal_like(seed: int, *, n: int | None = None, family: str | None = None) -> PipelineProblem:
    """A REGAL-style synthetic graph (see the module docstring)."""
    rng = np.random.default_rng(seed)
    n = int(n if n is not None else rng.integers(50, 201))
    family = family or str(rng.choice(FAMILIES))
    und = _base_graph(rng, family, n)
    perm = rng.permutation(n)  # random topological order: orient each edge forward in it
    rank = np.empty(n, dtype=np.int64)
    rank[perm] = np.arange(n)
    edges = np.array([(a, b) if rank[a] < rank[b] else (b, a) for a, b in sorted(und)],
                     dtype=np.int64).reshape(-1, 2)
    size_out = np.maximum(0, np.rint(rng.normal(50, 10, size=n))).astype(np.int64)
    total = float(size_out.sum())
    in_sizes = np.zeros(n)
    for u, v in edges:
        in_sizes[v] += size_out[u]
    r = np.maximum(0.0, rng.normal(0.0, 0.1, size=n))
    work = in_sizes + size_out + r * total
    return PipelineProblem(name=f"regal-like-{family}-n{n}-s{seed}", work=work,
                           size_param=np.zeros(n, dtype=np.int64), size_out=size_out, edges=edges,
                           bandwidth=1.0, memory=None,
                           meta={"generator": "regal_like", "family": family, "seed": seed})


def model_like(n: int, seed: int, *, memory: bool = True) -> PipelineProblem:
    """A layered, model-like DAG: a main chain with residual/skip edges of random reach.

    Work in µs-like floats, tensors 10 KB–1 MB, parameters up to 8 MB on 60 % of the
    ops, B = 25 000 bytes/µs, and (if ``memory``) 32 MiB per stage: shaped like the
    exported real models, at any size, for decode-speed benchmarks.
    """
    rng = np.random.default_rng(seed)
    edges = [(i, i + 1) for i in range(n - 1)]
    for i in range(n):
        if rng.random() < 0.4:
            j = i + int(rng.integers(2, 30))
            if j < n:
                edges.append((i, j))
    size_param = rng.integers(0, 8 << 20, size=n) * (rng.random(n) < 0.6)
    return PipelineProblem(name=f"model-like-n{n}-s{seed}", work=rng.random(n) * 20.0,
                           size_param=size_param.astype(np.int64),
                           size_out=rng.integers(10_000, 1_000_000, size=n), edges=np.array(edges),
                           bandwidth=25_000.0, memory=(32 << 20) if memory else None,
                           meta={"generator": "model_like", "seed": seed})


def chained(problem: PipelineProblem, copies: int, *, memory: int | None = None) -> PipelineProblem:
    """``copies`` copies of ``problem`` end to end: the last sink of copy r (the sink with the
    largest index) feeds every source of copy r + 1. Deep graphs of real shape at any size,
    for scale benchmarks and tests; ``memory`` replaces the graph's limit (None: unlimited)."""
    if copies < 1:
        raise ValueError("copies must be >= 1")
    n = problem.n
    sinks = np.flatnonzero(np.diff(problem.succ_ptr) == 0)
    sources = np.flatnonzero(np.diff(problem.pred_ptr) == 0)
    last = int(sinks.max())
    base = np.arange(copies, dtype=np.int64)[:, None, None] * n
    inner = (problem.edges.astype(np.int64)[None, :, :] + base).reshape(-1, 2)
    offs = np.arange(copies - 1, dtype=np.int64)[:, None] * n
    links = np.stack([np.broadcast_to(offs + last, (copies - 1, len(sources))),
                      offs + n + sources[None, :]], axis=-1).reshape(-1, 2)
    return PipelineProblem(name=f"{problem.name}-x{copies}", work=np.tile(problem.work, copies),
                           size_param=np.tile(problem.size_param, copies),
                           size_out=np.tile(problem.size_out, copies),
                           edges=np.concatenate([inner, links]), bandwidth=problem.bandwidth, memory=memory,
                           meta={"generator": "chained", "base": problem.name, "copies": copies})
