"""Dominance contraction: same optimum as the original graph (brute force), projections that never
cost more, expansions that cost exactly the same, and bound jobs that report original nodes."""

from __future__ import annotations

import numpy as np
import pytest

from gapstop.problems.pipeline.contract import contract
from gapstop.problems.pipeline.evaluate import canonical_order, evaluate
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline import reference
from tests.problems.pipeline.runs import FakeJobContext, poor_split


def _with_mergeables(base: PipelineProblem, seed: int, extra: int) -> PipelineProblem:
    """``base`` plus ``extra`` nodes of the shapes the rules look for, each on either side of
    its rule's inequality (equal included): sources with one consumer, nodes spliced in
    after a node as its only consumer (views), sinks with one producer."""
    rng = np.random.default_rng(seed)
    work = base.work.tolist()
    size = base.size_out.tolist()
    edges = [tuple(e) for e in base.edges.tolist()]
    bw = base.bandwidth
    for _ in range(extra):
        n = len(work)
        kind = rng.integers(3)
        if kind == 0:    # a source feeding one node
            s = int(rng.integers(1, 8))
            work.append(float(s / bw * rng.choice([0.0, 0.5, 1.0, 1.5])))
            size.append(s)
            edges.append((n, int(rng.integers(n))))
        elif kind == 1:  # a view after u: u's consumers now read it
            u = int(rng.integers(n))
            outs = [e for e in edges if e[0] == u]
            edges = [e for e in edges if e[0] != u] + [(n, v) for _, v in outs] + [(u, n)]
            size.append(int(max(0, size[u] + rng.choice([-2, 0, 0, 1]))))
            work.append(float(rng.choice([0.0, 0.0, 1.0])))
        else:            # a sink reading one node
            work.append(float(rng.choice([0.0, 0.0, 2.0])))
            size.append(int(rng.integers(0, 5)))
            edges.append((int(rng.integers(n)), n))
    return PipelineProblem(name=f"{base.name}+{extra}", work=np.array(work), size_param=np.zeros(len(work), np.int64),
                           size_out=np.array(size, dtype=np.int64), edges=np.array(edges, dtype=np.int64),
                           bandwidth=bw, memory=None)


def _cases() -> list[tuple[int, PipelineProblem]]:
    out = []
    for i in range(60):
        base = random_dag(3 + i % 3, 9100 + i, bandwidth=(1.0, 0.5, 2.0)[i % 3])
        out.append((i, _with_mergeables(base, i, 2 + i % 3)))
    return out


CASES = _cases()


def test_the_cases_exercise_every_rule_and_leave_some_pairs_unmerged() -> None:
    merged = [contract(p).merged for _, p in CASES]
    assert sum(merged) >= 60 and min(merged) == 0
    # each rule on its own: a source, a view and a sink that qualify, and three that do not
    p = PipelineProblem(name="rules", work=np.array([5.0, 0.0, 1.0, 0.0, 3.0, 2.0, 6.0, 4.0]),
                        size_param=np.zeros(8, np.int64), size_out=np.array([4, 4, 4, 0, 4, 1, 2, 3]),
                        edges=np.array([[0, 1], [1, 4], [2, 0], [4, 3], [4, 5], [6, 4], [4, 7]]),
                        bandwidth=1.0, memory=None)
    c = contract(p)
    # 2 (source, work 1 <= 4 bytes) joins 0; 1 (view of 0, same size) joins 0; 3 (zero-work sink)
    # joins 4; 5 (sink with work) and 6 (source, work 6 > 2 bytes) stay; 7 (sink, work 4 = 4
    # bytes of 4 but 4 has other consumers) stays
    groups = {frozenset(np.nonzero(c.group == g)[0].tolist()) for g in range(c.problem.n)}
    assert groups == {frozenset({0, 1, 2}), frozenset({3, 4}), frozenset({5}), frozenset({6}), frozenset({7})}


@pytest.mark.parametrize("i", range(0, 60, 3))
def test_contracted_optimum_equals_the_original_by_brute_force(i: int) -> None:
    _, p = CASES[i]
    c = contract(p)
    for k in (2, 3):
        assert reference.brute_force(c.problem, k) == pytest.approx(reference.brute_force(p, k), rel=1e-12)


@pytest.mark.parametrize("i", range(60))
def test_projection_never_costs_more_and_expansion_costs_the_same(i: int) -> None:
    _, p = CASES[i]
    c = contract(p)
    rng = np.random.default_rng(i)
    order = canonical_order(p, np.zeros(p.n, dtype=np.int64))   # a topological order of the original graph
    for _ in range(20):
        k = int(rng.integers(2, 5))
        cuts = np.sort(rng.choice(np.arange(1, p.n), size=min(k - 1, p.n - 1), replace=False))
        blocks = np.empty(p.n, dtype=np.int64)
        blocks[order] = np.searchsorted(cuts, np.arange(p.n), side="right")
        blocks = rng.permutation(k)[blocks] if rng.random() < 0.3 else blocks  # labels need not be in order
        before = evaluate(p, blocks).objective
        projected = c.project(blocks)
        after = evaluate(c.problem, projected).objective
        assert after <= before * (1 + 1e-12)
        assert evaluate(p, c.expand(projected)).objective == pytest.approx(after, rel=1e-12)


def test_nothing_is_merged_with_a_memory_limit() -> None:
    _, p = CASES[4]
    import dataclasses
    mem = dataclasses.replace(p, memory=10)
    assert contract(p).merged > 0 and contract(mem).merged == 0 and contract(mem).problem is mem


@pytest.mark.parametrize("i", [i for i, p in CASES if contract(p).merged][1::10])
def test_bound_jobs_on_a_contracted_graph_report_original_partitions_and_valid_bounds(i: int) -> None:
    from gapstop.problems.pipeline.run import run_bound_job

    _, p = CASES[i]
    assert contract(p).merged > 0
    k = 3
    opt = reference.brute_force(p, k)
    start = np.zeros(p.n, dtype=np.int64)   # one stage: a valid (poor) incumbent in original nodes
    ctx = FakeJobContext(evaluate(p, start).objective, {"blocks": start.tolist()}, 10.0)
    for spec in ({"kind": "exact"}, {"kind": "bottleneck"}):
        run_bound_job(p, k, spec, ctx, seed=0, num_workers=1)
    assert ctx.solutions and ctx.bounds
    for sol, _ in ctx.solutions:
        assert len(sol["blocks"]) == p.n
        assert evaluate(p, sol["blocks"], sol.get("order"), k=k).objective >= opt * (1 - 1e-12)
    assert all(b.value <= opt for b in ctx.bounds)
    exact = [b for b in ctx.bounds if b.method == "exact" and b.status == "optimal"]
    assert exact and exact[-1].value == pytest.approx(opt, rel=1e-6)
    assert min(evaluate(p, s["blocks"], k=k).objective for s, _ in ctx.solutions) == pytest.approx(opt, rel=1e-12)


def test_the_exact_jobs_lns_searches_the_original_graph_after_a_contracted_mip() -> None:
    """On a REGAL-style graph with mergeable nodes the MIP runs contracted and hands over to the
    LNS, which reports partitions of the original nodes (with their schedule) that beat the start."""
    from gapstop.problems.pipeline.generators import regal_like
    from gapstop.problems.pipeline.run import run_bound_job

    p = _with_mergeables(regal_like(31, n=60), 5, 6)
    assert contract(p).merged >= 3
    k = 8
    start = poor_split(p, k, 2)
    start_cost = evaluate(p, start.blocks, start.order, k=k).objective
    ctx = FakeJobContext(start_cost, {"blocks": start.blocks.tolist(), "order": start.order.tolist()}, 6.0,
                         done=lambda c: any(s == "mip-lns" for _, s in c.solutions))
    run_bound_job(p, k, {"kind": "exact"}, ctx, seed=0, num_workers=1)
    sources = {s for _, s in ctx.solutions}
    assert "mip-lns" in sources
    for sol, source in ctx.solutions:
        assert len(sol["blocks"]) == p.n
        if source == "mip-lns":
            assert evaluate(p, sol["blocks"], sol["order"], k=k).objective < start_cost
