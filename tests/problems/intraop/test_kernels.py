"""The relaxed problem's message kernels against plain numpy re-implementations, bit for bit.

The search's TRW-S and forest descent are heuristics, so a wrong minimum there only shows as
worse solutions; these tests pin the arithmetic itself, with strategy counts on both sides of
the kernels' four-way unrolling and with excluded (+inf) entries as the certified bounds use."""

from __future__ import annotations

import numpy as np
import pytest

from gapstop.problems.intraop import _kernels as K
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.relaxed import RelaxedSolver, prepare


def _min_plus_ref(table: np.ndarray, vec: np.ndarray) -> np.ndarray:
    """min_a vec[a] + table[a, b]; NaN terms (inf - inf) lose, all lost: +inf."""
    with np.errstate(invalid="ignore"):
        terms = vec[:, None] + table
    terms = np.where(np.isnan(terms), np.inf, terms)
    return terms.min(axis=0) if len(vec) else np.full(table.shape[1], np.inf)


@pytest.mark.parametrize("excluded", [False, True])
def test_min_plus_matches_numpy_in_both_orientations(excluded):
    rng = np.random.default_rng(7)
    for ki in range(1, 10):
        for kj in range(1, 10):
            table = rng.normal(size=(ki, kj)) * 100
            vec = rng.normal(size=ki) * 50
            if excluded:
                table[rng.random(table.shape) < 0.3] = np.inf
                vec[rng.random(ki) < 0.2] = np.inf
            want = _min_plus_ref(table, vec)
            pad = 3  # the table sits inside a larger array, as in the pair-table store
            row_major = np.concatenate([rng.normal(size=pad), table.ravel()])
            col_major = np.concatenate([rng.normal(size=pad), table.T.ravel()])
            for store, i_is_row in ((row_major, True), (col_major, False)):
                out = np.full(kj + 2, -7.0)
                K.min_plus(store, pad, i_is_row, ki, kj, vec, out)
                assert np.array_equal(out[:kj], want), (ki, kj, i_is_row)
                assert np.all(out[kj:] == -7.0)  # nothing written past kj


def _table(tabs, tab_off, tab_x, k, t, i, j):
    """Table t as a k[i] x k[j] matrix from i's point of view."""
    if tab_x[t] == i:
        return tabs[tab_off[t]:tab_off[t] + k[i] * k[j]].reshape(k[i], k[j])
    return tabs[tab_off[t]:tab_off[t] + k[i] * k[j]].reshape(k[j], k[i]).T


def _trws_pass_ref(order, rank, gamma, theta, ptr, k, adj_ptr, adj_nbr, adj_tab, tabs, tab_off, tab_x, msg,
                   msg_off, rev, sol):
    """One sequential TRW-S pass as the kernel documents it, in numpy (same summation order)."""
    for idx, i in enumerate(order):
        ki = k[i]
        th = theta[ptr[i]:ptr[i] + ki]
        hat = th.copy()
        for e in range(adj_ptr[i], adj_ptr[i + 1]):
            j = adj_nbr[e]
            if rank[j] < idx:
                hat += _table(tabs, tab_off, tab_x, k, adj_tab[e], i, j)[:, sol[j]]
            else:
                hat += msg[msg_off[e]:msg_off[e] + ki]
        if np.any(hat < np.inf):
            sol[i] = int(np.argmin(hat))
        belief = th.copy()
        for e in range(adj_ptr[i], adj_ptr[i + 1]):
            belief += msg[msg_off[e]:msg_off[e] + ki]
        for e in range(adj_ptr[i], adj_ptr[i + 1]):
            j = adj_nbr[e]
            if rank[j] <= idx:
                continue
            with np.errstate(invalid="ignore"):  # inf - inf where both are excluded
                vec = gamma[i] * belief - msg[msg_off[e]:msg_off[e] + ki]
            new = _min_plus_ref(_table(tabs, tab_off, tab_x, k, adj_tab[e], i, j), vec)
            mn = new.min()
            if mn < np.inf:
                new = new - mn
            msg[msg_off[rev[e]]:msg_off[rev[e]] + k[j]] = new


@pytest.mark.parametrize("seed", range(6))
def test_trws_pass_matches_numpy(seed):
    p = random_instance(40, seed, max_k=9, edge_p=0.15, limit_quantile=None)
    rs = RelaxedSolver(prepare(p, contract=False, fold=False))
    net, plan = rs.prep.net, rs.prep.plan
    assert len(plan.core) > 5 and int(net.k[plan.core].max()) >= 5  # the unrolled paths run
    rng = np.random.default_rng(seed)
    theta = np.array(net.unary, dtype=np.float64) + rng.random(len(net.unary))
    work = np.array(rs.work)
    if seed % 2:  # excluded entries, as in the certified bounds' tables
        work[rng.random(len(work)) < 0.2] = np.inf
    msg_k = np.zeros(len(rs.msg))
    msg_r = msg_k.copy()
    sol_k = np.zeros(net.n, dtype=np.int64)
    sol_r = sol_k.copy()
    hat = np.empty(int(net.k.max()))
    for _ in range(3):
        for order, rank in ((rs._fwd, rs._rank_f), (rs._bwd, rs._rank_b)):
            args = (order, rank, rs._gamma, theta, net.ptr, net.k, plan.adj_ptr, plan.adj_nbr, plan.adj_tab,
                    work, plan.tab_off, plan.tab_x)
            K.trws_pass(*args, msg_k, rs._msg_off, rs._rev, sol_k, hat)
            _trws_pass_ref(*args, msg_r, rs._msg_off, rs._rev, sol_r)
            assert np.array_equal(msg_k, msg_r)
            assert np.array_equal(sol_k, sol_r)
