"""FindOptStrategy: exact vertex elimination of the unconstrained problem, or a mini-bucket lower bound.

The objective is ``sum_v node_cost(v, s_v) + sum_(u,v) edge_cost(u, v, s_u, s_v)``
without the usage limit (the model of the FindOptStrategy paper). Steps:

1. the exact integer network of :func:`problems.intraop._dual.prepare_bounds`
   (edges merged per node pair, forbidden choices excluded);
2. the degree <= 2 eliminations of :mod:`problems.intraop.reduce`, replayed on
   integers (the width-2 special case of the same algorithm);
3. the remaining core eliminated in min-degree order by
   :func:`problems.intraop._factors.eliminate`, with factor tables of at most
   ``table_limit`` entries; a larger bucket is split into mini-buckets.
4. If nothing was split (and no deadline hit), the value is the proven
   unconstrained optimum, and the strategy is rebuilt by back-substitution:
   core nodes from the argmin tables, then the degree <= 2 nodes in reverse.
   The exact evaluator re-scores it, and its cost must equal the value.

With a usage limit the unconstrained optimum is a lower bound on the constrained
one; it *is* the constrained optimum exactly when its strategy fits the limit
(``optimal``). With a split bucket the value is only a lower bound, and no
strategy is returned.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from gapstop.problems.intraop import _bound_kernels as BK
from gapstop.problems.intraop._dual import prepare_bounds
from gapstop.problems.intraop._factors import Factor, eliminate, network_factors
from gapstop.problems.intraop.evaluate import Evaluation, evaluate
from gapstop.problems.intraop.model import IntraopProblem

CAP, EXCL = BK.CAP, BK.EXCL
#: Default cap on one factor table (entries, int64): 2^24 entries = 128 MiB, plus its argmin table.
DEFAULT_TABLE_LIMIT = 1 << 24
#: After a split bucket, the buckets' factors are kept for a decoded solution while they hold
#: at most this many entries in all (int64: 256 MiB).
DECODE_ENTRIES = 1 << 25


@dataclass(frozen=True)
class EliminationResult:
    """Outcome of :func:`find_opt_strategy`.

    Attributes:
        value: a lower bound on every feasible solution's cost (Python int); the unconstrained
            optimum when ``exact``; ``math.inf`` when every assignment uses a forbidden choice.
        exact: ``value`` is the unconstrained optimum (no bucket split, no timeout, no capped sum;
            with ``prune_memory``: the optimum over the strategies left).
        optimal: ``solution`` fits the usage limit and costs ``value``: it is a proven optimum.
        solution: when ``exact``, the unconstrained optimum's strategy per node; after a split
            bucket, a strategy decoded greedily from the mini-buckets (a heuristic, optimal only
            if ``optimal``); None after a timeout, or when the buckets were too large to keep.
        evaluation: the exact evaluator's verdict on ``solution`` (None without one).
        width: induced width met (largest number of other nodes in one bucket; the degree
            <= 2 eliminations count as width <= 2).
        max_table: entries of the largest factor table built.
        core_nodes: nodes left after the degree <= 2 eliminations.
        split_buckets: buckets split into mini-buckets (0 when exact).
        timed_out: the time limit stopped the elimination (the value is then a bound only).
        elapsed_s: wall-clock seconds.
    """

    value: int | float
    exact: bool
    optimal: bool
    solution: list[int] | None
    evaluation: Evaluation | None
    width: int
    max_table: int
    core_nodes: int
    split_buckets: int
    timed_out: bool
    elapsed_s: float

    def detail(self) -> dict[str, Any]:
        """JSON-ready summary (without the solution)."""
        return {"exact": self.exact, "optimal": self.optimal, "width": self.width, "max_table": self.max_table,
                "core_nodes": self.core_nodes, "split_buckets": self.split_buckets, "timed_out": self.timed_out}


def find_opt_strategy(problem: IntraopProblem, *, table_limit: int = DEFAULT_TABLE_LIMIT,
                      time_limit_s: float = math.inf, reduce: bool = True, prune_memory: bool = False,
                      decode: bool = True,
                      trace: Callable[[list[Factor], int], None] | None = None) -> EliminationResult:
    """Eliminate all nodes of ``problem`` (Algorithm 1 with factor tables); see the module docstring.

    Args:
        problem: the instance (its usage limit only decides ``optimal``).
        table_limit: largest factor table (entries) built exactly, >= 1.
        time_limit_s: after this many seconds the remaining factors are minimised separately.
        prune_memory: first exclude the strategies that cannot fit the usage limit even with
            every other live node at its least usage
            (:func:`problems.intraop.bounds.memory_pruned_unary`). The value is then the optimum
            over the remaining strategies: still a lower bound on every feasible solution, at
            least the unconstrained optimum, and the optimum when its strategy fits.
        decode: after a split bucket, keep the buckets (up to :data:`DECODE_ENTRIES` entries)
            and decode a strategy from them (False: the bound only, less memory).
        reduce: first apply the degree <= 2 eliminations of :mod:`problems.intraop.reduce`
            (False: every node goes through the factor elimination, e.g. to trace it).
        trace: passed to :func:`problems.intraop._factors.eliminate` (called after every step
            of the factor elimination with the factors and the constant so far; the constant
            excludes the degree-0 minima of the reduction).
    """
    if table_limit < 1:
        raise ValueError(f"table_limit must be >= 1, got {table_limit}")
    t0 = time.perf_counter()
    prep = prepare_bounds(problem)
    net, plan = prep.net, prep.plan
    k, ptr = net.k, net.ptr
    if prune_memory:
        from gapstop.problems.intraop.bounds import memory_pruned_unary  # bounds imports this module lazily
        theta = memory_pruned_unary(problem)[0]
    else:
        theta = prep.unary.copy()
    work = prep.work.copy()
    base = 0
    width = 0
    if reduce:
        elim0 = np.zeros(plan.num_ops, dtype=np.int64)
        tmp = np.zeros(int(k.max()), dtype=np.int64)
        BK.replay_int(plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2, plan.op_t3,
                      plan.op_out, plan.tab_x, plan.tab_off, k, ptr, theta, work, tmp, elim0)
        mins = elim0[plan.op_kind == 0].tolist()
        base = EXCL if any(m >= EXCL for m in mins) else sum(mins)
        width = int(plan.op_kind.max()) if plan.num_ops else 0
        nodes, graph = plan.core, plan
    else:
        nodes, graph = np.arange(problem.n), net
    fe = eliminate(network_factors(nodes, theta, work, graph, k, ptr), k, table_limit=table_limit,
                   keep_argmin=True, keep_buckets=DECODE_ENTRIES if decode else 0, deadline=t0 + time_limit_s,
                   trace=trace)
    width = max(width, fe.width)
    common = dict(width=width, max_table=fe.max_table, core_nodes=len(nodes), split_buckets=fe.split_buckets,
                  timed_out=fe.timed_out)
    if base >= EXCL or fe.excluded:
        # every assignment (of the relaxation, if split) uses an excluded choice: none is admissible
        return EliminationResult(math.inf, fe.exact, False, None, None, elapsed_s=time.perf_counter() - t0, **common)
    value = base + fe.value
    exact = fe.exact and value < CAP  # below CAP no partial sum was capped (all entries >= 0)
    sol = np.zeros(problem.n, dtype=np.int64)
    if exact:
        fe.back_substitute(sol)
    elif not fe.decode(sol):
        return EliminationResult(value, False, False, None, None, elapsed_s=time.perf_counter() - t0, **common)
    if reduce:
        BK.reconstruct_int(plan.op_kind, plan.op_v, plan.op_u, plan.op_w, plan.op_t1, plan.op_t2, plan.tab_x,
                           plan.tab_off, k, ptr, theta, work, sol)
    ev = evaluate(problem, sol)
    if not exact:
        # a decoded heuristic: optimal only when it fits and its cost meets the bound
        optimal = ev.feasible and ev.cost == value
        return EliminationResult(value, False, optimal, sol.tolist(), ev, elapsed_s=time.perf_counter() - t0,
                                 **common)
    if ev.cost != value:
        raise AssertionError(f"elimination value {value} != evaluated cost {ev.cost}; please file a bug")
    return EliminationResult(value, True, ev.feasible, sol.tolist(), ev, elapsed_s=time.perf_counter() - t0,
                             **common)
