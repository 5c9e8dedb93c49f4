"""The relaxed problem as a pairwise cost function network (CFN).

Dropping the usage limit leaves ``min sum_v theta_v(s_v) + sum_{u,v} f_uv(s_u, s_v)``.
This module merges the file's edges into one table per unordered node pair
(parallel and opposite edges summed, self-loops folded into the node's unary
term) and stores them in CSR adjacency form, the layout every search kernel
reads. Costs become float64 (exact for integers below 2^53; forbidden costs
stay >= 1e18 and dominate any sum they enter).

Table access convention (see :func:`problems.intraop._kernels.pair_cost`): table
``t`` is row-major ``k[tab_x[t]] x k[tab_y[t]]`` at ``tabs[tab_off[t]:]``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.intraop import _kernels
from gapstop.problems.intraop.model import IntraopProblem, _frozen


def _ro(a: NDArray) -> NDArray:
    return _frozen(a, a.dtype)


@dataclass(frozen=True, eq=False)
class PairNetwork:
    """Merged pairwise network of a problem; read-only, shared by all searches.

    Attributes:
        k: int64[n], strategies per node.
        ptr: int64[n + 1], node ``v``'s unary entries are ``ptr[v]:ptr[v+1]``.
        unary: float64[K], node costs plus self-loop diagonals.
        usage: int64[K], node usages (as in the problem).
        tab_x, tab_y: int32[P], row and column node of each pair table (``tab_x < tab_y``).
        tab_off: int64[P], offset of each table in ``tabs``.
        tabs: float64[sum k_x k_y], merged edge costs.
        adj_ptr: int64[n + 1]; ``adj_nbr``/``adj_tab``: int32[2P], neighbour and table of
            each adjacency entry, sorted by node then neighbour.
    """

    k: NDArray[np.int64]
    ptr: NDArray[np.int64]
    unary: NDArray[np.float64]
    usage: NDArray[np.int64]
    tab_x: NDArray[np.int32]
    tab_y: NDArray[np.int32]
    tab_off: NDArray[np.int64]
    tabs: NDArray[np.float64]
    adj_ptr: NDArray[np.int64]
    adj_nbr: NDArray[np.int32]
    adj_tab: NDArray[np.int32]

    @property
    def n(self) -> int:
        return len(self.k)

    @property
    def num_tables(self) -> int:
        return len(self.tab_x)


def build_network(problem: IntraopProblem) -> PairNetwork:
    """Merge the problem's edges into one cost table per unordered pair of distinct nodes."""
    n, k = problem.n, problem.num_strategies
    eu = problem.edge_u.astype(np.int64)
    ev = problem.edge_v.astype(np.int64)
    loop = eu == ev
    lo, hi = np.minimum(eu, ev), np.maximum(eu, ev)
    key = lo * n + hi
    keys, pair_of_edge = np.unique(key[~loop], return_inverse=True)
    tab_x = (keys // n).astype(np.int32)
    tab_y = (keys % n).astype(np.int32)
    sizes = k[tab_x] * k[tab_y]
    tab_off = np.zeros(len(keys) + 1, dtype=np.int64)
    np.cumsum(sizes, out=tab_off[1:])
    pair = np.full(problem.m, -1, dtype=np.int64)
    pair[~loop] = pair_of_edge
    unary = problem.node_cost.astype(np.float64)
    tabs = np.zeros(int(tab_off[-1]), dtype=np.float64)
    _kernels.merge_edge_tables(problem.edge_u, problem.edge_v, problem.edge_ptr, problem.edge_cost,
                               pair, tab_off, tab_x, k, problem.node_ptr, unary, tabs)
    adj_ptr, adj_nbr, adj_tab = table_adjacency(tab_x, tab_y, n)
    return PairNetwork(k=_ro(k.astype(np.int64)), ptr=_ro(problem.node_ptr), unary=_ro(unary),
                       usage=_ro(problem.node_usage), tab_x=_ro(tab_x), tab_y=_ro(tab_y),
                       tab_off=_ro(tab_off[:-1]), tabs=_ro(tabs), adj_ptr=_ro(adj_ptr),
                       adj_nbr=_ro(adj_nbr), adj_tab=_ro(adj_tab))


def table_adjacency(tab_x: NDArray[np.integer], tab_y: NDArray[np.integer], n: int
                    ) -> tuple[NDArray[np.int64], NDArray[np.int32], NDArray[np.int32]]:
    """Tables ``t`` joining ``tab_x[t]`` and ``tab_y[t]`` as adjacency lists over ``n`` nodes, each
    table listed under both endpoints: ``adj_ptr`` (int64[n + 1]), then per entry the neighbour
    ``adj_nbr`` and the table ``adj_tab`` (int32), by neighbour within a node."""
    P = len(tab_x)
    src = np.concatenate([tab_x, tab_y]).astype(np.int64)
    dst = np.concatenate([tab_y, tab_x]).astype(np.int32)
    tid = np.concatenate([np.arange(P), np.arange(P)]).astype(np.int32)
    order = np.lexsort((dst, src))
    adj_ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(src, minlength=n), out=adj_ptr[1:])
    return adj_ptr, dst[order], tid[order]
