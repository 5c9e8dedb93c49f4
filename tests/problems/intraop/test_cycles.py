"""Cycle tightening of the TRW-S certificate (problems/intraop/cycles.tighten)."""

from __future__ import annotations

import itertools
import time

import numpy as np

from gapstop.problems.intraop._dual import CoreDual, prepare_bounds
from gapstop.problems.intraop.cycles import tighten
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem


def _brute_min(p) -> int | None:
    """Least node + edge cost over all assignments without forbidden choices (no usage limit)."""
    k = p.num_strategies
    best = None
    for sol in itertools.product(*[range(int(x)) for x in k]):
        c = 0
        for v, s in enumerate(sol):
            x = int(p.node_cost[p.node_ptr[v] + s])
            if x >= FORBIDDEN:
                break
            c += x
        else:
            for e in range(p.m):
                u, v = int(p.edge_u[e]), int(p.edge_v[e])
                x = int(p.edge_cost[p.edge_ptr[e] + sol[u] * k[v] + sol[v]])
                if x >= FORBIDDEN:
                    break
                c += x
            else:
                best = c if best is None else min(best, c)
    return best


def test_tightened_bound_never_exceeds_the_brute_force_optimum_and_often_gains() -> None:
    """On dense random networks whose core TRW-S must bound (no exact elimination), the
    cycle-tightened value stays at or below the brute-force minimum on every seed, is never
    below the certificate it starts from, and is strictly above it on some seeds."""
    gains = checked = 0
    for seed in range(120):
        p = random_instance(8, seed, max_k=3, edge_p=0.45, limit_quantile=None,
                            forbidden_p=0.05 if seed % 3 == 0 else 0.0)
        want = _brute_min(p)
        prep = prepare_bounds(p)
        if len(prep.plan.core) == 0 or want is None:
            continue
        dual = CoreDual(prep, exact_table_limit=0)
        value, exact = dual.bound(prep.unary.copy(), iterations=200, patience=10**9)
        assert not exact
        cert = dual.certificate()
        res = tighten(dual, deadline=time.perf_counter() + 5.0, max_len=6, max_sweeps=200)
        if res is None:
            continue
        total = dual.last_base + res.value
        assert res.value >= cert and res.gain == res.value - cert
        assert total <= want, (seed, total, want)
        assert value <= want
        checked += 1
        gains += res.gain > 0
    assert checked >= 60
    assert gains >= 5, gains


def test_a_frustrated_cycle_is_closed_exactly() -> None:
    """Four nodes on a cycle plus chords to a hub (so nothing is eliminated): three tables
    reward equal labels, one rewards different labels. The local polytope pays 0 (all labels
    at 1/2); every labelling pays 1 on the cycle. The tightened bound reaches the optimum."""
    n = 5
    ptr = np.arange(0, 2 * n + 1, 2, dtype=np.int64)
    eq = [0, 1, 1, 0]
    ne = [1, 0, 0, 1]
    zero = [0, 0, 0, 0]
    pairs = [(0, 1, eq), (1, 2, eq), (2, 3, eq), (3, 0, ne)] + [(4, v, zero) for v in range(4)]
    p = IntraopProblem(name="frustrated", node_ptr=ptr, node_cost=np.zeros(2 * n, np.int64),
                       node_usage=np.zeros(2 * n, np.int64), start=np.zeros(n, np.int64),
                       end=np.ones(n, np.int64), edge_u=np.array([a for a, _, _ in pairs], np.int32),
                       edge_v=np.array([b for _, b, _ in pairs], np.int32),
                       edge_ptr=np.arange(0, 4 * len(pairs) + 1, 4, dtype=np.int64),
                       edge_cost=np.array([x for _, _, c in pairs for x in c], np.int64), usage_limit=None)
    assert _brute_min(p) == 1
    prep = prepare_bounds(p)
    assert len(prep.plan.core) >= 4
    dual = CoreDual(prep, exact_table_limit=0)
    value, _ = dual.bound(prep.unary.copy(), iterations=100, patience=10**9)
    assert value <= 0
    res = tighten(dual, deadline=time.perf_counter() + 5.0, max_sweeps=100, tol=0.5)
    assert res is not None and res.cycles >= 1
    assert dual.last_base + res.value == 1
