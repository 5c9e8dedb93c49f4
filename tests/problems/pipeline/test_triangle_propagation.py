"""Triangle propagation of the MCM constraint solver against brute force.

The kernel (:mod:`problems.pipeline._propagate`) prunes chip domains and detects dead ends
for the chip triangle constraint. Soundness: it must never remove a value that some valid
completion of the current partial assignment uses, nor reject a partial assignment that
extends to a valid partition. Both are checked on every valid completion of tiny DAGs
(n <= 7, C <= 4), enumerated exhaustively with the independent checker of
``mcm_reference``; the solver must still find a valid partition exactly when one exists,
including graphs where the triangle constraint alone makes the problem infeasible.
"""

from __future__ import annotations

import numpy as np
import pytest

from gapstop.problems.pipeline._propagate import BUDGET, FOUND, RING_ALL, RING_NONE, RING_PREFIX, constrained_dfs
from gapstop.problems.pipeline.constraints import Constraints, ConstraintSolver
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline.mcm_reference import all_labellings, first_violation


def _valid_monotone(p: PipelineProblem, c: int, ring: int) -> np.ndarray:
    """Every valid labelling (ring order / no skip if ``ring``: the used chips a prefix with
    RING_PREFIX, all chips with RING_ALL; triangle) that is monotone along edges (the
    kernel's labels; without ``ring`` every valid partition has one)."""
    out = []
    for labels in all_labellings(p.n, c):
        if p.m and any(labels[u] > labels[v] for u, v in p.edges.tolist()):
            continue
        if first_violation(p, labels, c, ring=ring != RING_NONE, all_chips=ring == RING_ALL, triangle=True,
                           memory=False) is None:
            out.append(labels)
    return np.array(out, dtype=np.int64).reshape(-1, p.n)


def _probe(p: PipelineProblem, c: int, ring: int, prefix: np.ndarray, values: np.ndarray, tri_prop: bool
           ) -> tuple[bool, np.ndarray]:
    """Decide ``prefix`` on ``values`` in order with no backtracking allowed. Returns whether
    every decision passed propagation as given, and the domains (int64[2, n]) afterwards."""
    first = np.full(p.n, -1, np.int64)
    first[prefix] = values
    dom = np.zeros((2, p.n), np.int64)
    status, chips, fails = constrained_dfs(prefix, first, np.zeros((0, c)), False, 0, c, ring, True, -1,
                                           p.succ_ptr, p.succ, p.pred_ptr, p.pred, p.size_param, p.size_out,
                                           0, tri_prop, dom)
    accepted = status == FOUND and fails == 0 and bool(np.array_equal(chips[prefix], values))
    return accepted, dom


def _cases(count: int, seed: int) -> list[tuple[PipelineProblem, int, int]]:
    """Tiny DAGs with C and a ring mode: none (a quarter), else each reading of equation 3 in turn."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        c = int(rng.integers(2, 5))
        n = int(rng.integers(c + 1, {2: 7, 3: 7, 4: 6}[c] + 1))
        ring = (RING_PREFIX, RING_ALL)[i % 2] if rng.random() < 0.75 else RING_NONE
        out.append((random_dag(n, 3000 + i, p=float(rng.uniform(0.25, 0.7))), c, ring))
    return out


def test_pruning_never_removes_a_value_of_a_valid_completion() -> None:
    """Every prefix of random decision orders (topological or not), on the values of a valid
    partition (must be accepted, domains must hold every agreeing valid partition) and on
    random monotone values (dead ends: counted, propagation must find more than the
    forward check)."""
    rng = np.random.default_rng(5)
    checked = detected_prop = detected_fwd = dead = narrower = 0
    for p, c, ring in _cases(110, 1):
        valid = _valid_monotone(p, c, ring)
        for _ in range(4):
            order = rng.permutation(p.n).astype(np.int64)
            for k in range(1, p.n):
                prefix = order[:k]
                trials = [valid[rng.integers(len(valid))][prefix]] if len(valid) else []
                trials.append(_random_monotone(p, c, rng)[prefix])
                for values in trials:
                    agree = valid[(valid[:, prefix] == values).all(axis=1)] if len(valid) else valid
                    ok, dom = _probe(p, c, ring, prefix, values, True)
                    ok_fwd, dom_fwd = _probe(p, c, ring, prefix, values, False)
                    if len(agree):
                        checked += 1
                        assert ok and ok_fwd, (p.edges.tolist(), c, ring, prefix, values)
                        assert (dom[0] <= agree.min(axis=0)).all() and (agree.max(axis=0) <= dom[1]).all(), (
                            p.edges.tolist(), c, ring, prefix.tolist(), values.tolist(), dom.tolist(),
                            agree.tolist())
                        narrower += int((dom[1] - dom[0]).sum() < (dom_fwd[1] - dom_fwd[0]).sum())
                    else:
                        dead += 1
                        detected_prop += not ok
                        detected_fwd += not ok_fwd
                        assert ok_fwd or not ok, "propagation accepted what the forward check rejects"
    assert checked > 1500, checked
    # the propagation is not vacuous: it finds dead ends the forward check misses, and
    # narrows domains the forward check leaves wide
    assert detected_prop > detected_fwd and narrower > 20, (dead, detected_prop, detected_fwd, narrower)


def _random_monotone(p: PipelineProblem, c: int, rng: np.random.Generator) -> np.ndarray:
    """A random labelling that is monotone along edges (chips pushed up along a topological order)."""
    lab = rng.integers(0, c, p.n)
    for _ in range(p.n):
        for u, v in p.edges.tolist():
            lab[v] = max(lab[v], lab[u])
    return lab.astype(np.int64)


def _triangle_infeasible_cases() -> list[tuple[PipelineProblem, int]]:
    """Tiny DAGs where ring order + every chip used admit partitions but the triangle
    constraint admits none (brute force), plus feasible ones for contrast. (Under the prefix
    reading of equation 3 everything on chip 0 is always valid.)"""
    out = []
    for p, c, _ in _cases(160, 2):
        ring_ok = any(first_violation(p, lab, c, ring=True, all_chips=True, triangle=False, memory=False) is None
                      for lab in all_labellings(p.n, c))
        if ring_ok:
            out.append((p, c))
    return out


@pytest.mark.parametrize("mode", ["sample", "fix"])
def test_solver_decides_triangle_feasibility_like_brute_force(mode: str) -> None:
    rng = np.random.default_rng(9)
    kinds = {"valid": 0, "infeasible": 0}
    for p, c in _triangle_infeasible_cases():
        feasible = len(_valid_monotone(p, c, RING_ALL)) > 0
        solver = ConstraintSolver(p, Constraints(chips=c, no_triangle=True, all_chips=True))
        for _ in range(2):
            out = (solver.sample(rng.random((p.n, c)), rng.permutation(p.n), rng) if mode == "sample"
                   else solver.fix(rng.integers(0, c, p.n), rng.permutation(p.n), rng))
            assert out.status == ("valid" if feasible else "infeasible"), (p.edges.tolist(), c, out)
            assert out.via == "propagation"  # decided by the search, not by CP-SAT
            if out.valid:
                assert out.chips is not None
                assert first_violation(p, tuple(out.chips.tolist()), c, ring=True, all_chips=True, triangle=True,
                                       memory=False) is None
            kinds[out.status] += 1
    # both verdicts occur, and the infeasible ones are infeasible because of the triangle
    assert kinds["valid"] > 20 and kinds["infeasible"] >= 6, kinds


def residual_blocks(blocks: int, length: int) -> PipelineProblem:
    """A chain of residual blocks: x -> m_1 -> ... -> m_length -> add, plus x -> add; add is
    the next block's x. A triangle-free ring partition puts at most one chip boundary inside
    each block (a second one makes x -> add parallel to a longer chip path)."""
    edges = []
    x = 0
    nxt = 1
    for _ in range(blocks):
        prev = x
        for _ in range(length):
            edges.append((prev, nxt))
            prev = nxt
            nxt += 1
        edges.append((prev, nxt))
        edges.append((x, nxt))
        x = nxt
        nxt += 1
    n = nxt
    return PipelineProblem(name="residual-blocks", work=np.ones(n), size_param=np.zeros(n, np.int64),
                           size_out=np.ones(n, np.int64), edges=edges, bandwidth=1.0, memory=None)


def test_propagation_solves_what_the_forward_check_could_not() -> None:
    """Long residual blocks on every chip (``all_chips``): after a second chip boundary inside a block the forward check
    sees the triangle only when the block's ``add`` is decided, eight decisions later, and
    chronological backtracking runs out of its budget (200) in every call. Propagation
    bounds the rest of the block as soon as its first boundary is placed."""
    p = residual_blocks(12, 8)
    c = 9
    args = (c, RING_ALL, True, -1, p.succ_ptr, p.succ, p.pred_ptr, p.pred, p.size_param, p.size_out)
    solver = ConstraintSolver(p, Constraints(chips=c, no_triangle=True, all_chips=True))
    rng = np.random.default_rng(0)
    wins = {True: 0, False: 0}
    for _ in range(20):
        seq = solver._order(None, rng)
        seed = int(rng.integers(1 << 30))
        for prop in (True, False):
            status, chips, _ = constrained_dfs(seq, np.full(p.n, -1, np.int64), np.zeros((0, c)), False, seed,
                                               *args, 200, prop)
            if status == FOUND:
                assert first_violation(p, tuple(chips.tolist()), c, ring=True, all_chips=True, triangle=True,
                                       memory=False) is None
                wins[prop] += 1
            else:
                assert status == BUDGET
    assert wins[True] == 20 and wins[False] <= 2, wins


def test_fix_repairs_a_node_to_the_nearest_chip_of_its_domain() -> None:
    """A chain a0 -> a1 -> a2 -> a3 on chips 0..3 and five nodes a0 -> x -> a1 proposed on
    chip 3: no x can stay there (a1 and everything after it would leave chips 1 and 2
    empty), each x's domain becomes {0, 1} once a1 is kept, and FIX moves every x to 1,
    the chip nearest to its proposal (a uniform repair would pick 0 half of the time)."""
    m = 5
    edges = [(0, 1), (1, 2), (2, 3)] + [(0, 4 + i) for i in range(m)] + [(4 + i, 1) for i in range(m)]
    n = 4 + m
    p = PipelineProblem(name="fan", work=np.ones(n), size_param=np.zeros(n, np.int64),
                        size_out=np.ones(n, np.int64), edges=edges, bandwidth=1.0, memory=None)
    y = np.array([0, 1, 2, 3] + [3] * m)
    solver = ConstraintSolver(p, Constraints(chips=4, ring=True, no_triangle=True))
    rng = np.random.default_rng(4)
    for _ in range(5):
        out = solver.fix(y, rng=rng)
        assert out.valid and out.chips is not None
        assert out.chips.tolist() == [0, 1, 2, 3] + [1] * m, out.chips
        assert first_violation(p, tuple(out.chips.tolist()), 4, ring=True, triangle=True, memory=False) is None
