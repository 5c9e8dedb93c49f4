"""CP-SAT model of the whole intra-operator problem, for its proven bound (and optimum on small instances).

One Boolean per admissible (node, strategy) with exactly one per node; one
Boolean per admissible entry of each merged pair table, linked to both
endpoints (row and column sums equal the endpoint Booleans); one linear
constraint per time step at which the usage limit can bind. Only the usage at
interval starts matters (between two starts the live set only shrinks).

Costs are integers, but CP-SAT works best (and its double-valued bound is only
exact) below about 2^50. When the sum of the largest cost of every term
exceeds that, each coefficient is divided by ``10^p`` and rounded *down*: the
scaled problem's optimum times ``10^p`` is then a lower bound of the original.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.intraop._bound_kernels import EXCL
from gapstop.problems.intraop._dual import BoundPrep
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.model import interval_sum

#: Objective magnitude below which CP-SAT's double-valued bound is exact and its search comfortable.
SAFE_OBJECTIVE = 1 << 50
#: Models with more admissible table entries, or memory-constraint terms, than this are not built:
#: building them in Python alone would take minutes and the bound would be useless anyway.
MAX_PAIR_VARS = 500_000
MAX_MEMORY_TERMS = 2_000_000


def scale_power(unary: NDArray[np.int64], work: NDArray[np.int64], prep: BoundPrep) -> int:
    """Smallest ``p`` such that the summed largest admissible costs, divided by ``10^p``, stay below SAFE_OBJECTIVE."""
    net = prep.net
    total = 0
    for v in range(net.n):
        row = unary[net.ptr[v]:net.ptr[v + 1]]
        row = row[row < EXCL]
        total += int(row.max()) if len(row) else 0
    ends = np.append(net.tab_off, len(prep.work)).tolist()
    for t in range(net.num_tables):
        tab = work[ends[t]:ends[t + 1]]
        tab = tab[tab < EXCL]
        total += int(tab.max()) if len(tab) else 0
    p = 0
    while total // 10**p >= SAFE_OBJECTIVE:
        p += 1
    return p


def binding_steps(prep: BoundPrep, unary: NDArray[np.int64]) -> NDArray[np.int64]:
    """Interval starts at which the largest admissible usages of the live nodes exceed the limit (sorted)."""
    problem = prep.problem
    if problem.usage_limit is None or problem.horizon == 0:
        return np.zeros(0, dtype=np.int64)
    use = np.where(unary < EXCL, problem.node_usage, 0)
    hi = np.maximum.reduceat(use, problem.node_ptr[:-1])
    prof = interval_sum(hi, problem.start, problem.end, problem.horizon)
    live = problem.end > problem.start
    starts = np.unique(problem.start[live])
    return starts[prof[starts] > problem.usage_limit]


def solve_cpsat(prep: BoundPrep, unary: NDArray[np.int64], time_limit_s: float, *, num_workers: int = 2,
                seed: int = 0, params: dict[str, Any] | None = None) -> tuple[float, str, dict[str, Any]]:
    """Build and solve the model; unary entries equal to EXCL are excluded strategies.

    Returns:
        ``(value, status, detail)``: the proven bound (``10^p`` times CP-SAT's best
        objective bound, rounded down; ``-inf`` if none; ``inf`` if infeasible),
        a status string, and the detail dict (scale power, model size, solution and
        its exact cost when one was found).
    """
    from gapstop.engine import cancel, cpsat
    cp_model = cpsat.load()

    t0 = time.perf_counter()
    problem, net = prep.problem, prep.net
    work = prep.work
    entries = int(np.count_nonzero(work < EXCL))
    steps = binding_steps(prep, unary)
    starts, ends = problem.start, problem.end
    live_at = [np.nonzero((starts <= t) & (ends > t))[0] for t in steps.tolist()]
    mem_terms = sum(int(net.k[lv].sum()) for lv in live_at)
    if entries > MAX_PAIR_VARS or mem_terms > MAX_MEMORY_TERMS:
        return -math.inf, "skipped: model too large", {"pair_entries": entries, "memory_terms": mem_terms}
    deadline = t0 + time_limit_s
    p = scale_power(unary, work, prep)
    div = 10**p
    m = cp_model.CpModel()
    k, ptr = net.k.tolist(), net.ptr.tolist()
    x: list[dict[int, Any]] = []
    obj: list[tuple[Any, int]] = []
    for v in range(net.n):
        row = unary[ptr[v]:ptr[v] + k[v]].tolist()
        xv = {s: m.NewBoolVar(f"x{v}_{s}") for s in range(k[v]) if row[s] < EXCL}
        if not xv:
            return math.inf, "infeasible", {"reason": f"node {v} has no admissible strategy"}
        m.AddExactlyOne(xv.values())
        obj += [(b, row[s] // div) for s, b in xv.items()]
        x.append(xv)
    for t in range(net.num_tables):
        if cancel.expired(deadline):
            return -math.inf, "timeout", {"reason": "time limit or the run's stop reached while building the model"}
        u, v = int(net.tab_x[t]), int(net.tab_y[t])
        off = int(net.tab_off[t])
        tab = work[off:off + k[u] * k[v]].reshape(k[u], k[v])
        rows: dict[int, list[Any]] = {a: [] for a in x[u]}
        cols: dict[int, list[Any]] = {b: [] for b in x[v]}
        for a in x[u]:
            for b in x[v]:
                c = int(tab[a, b])
                if c >= EXCL:
                    continue
                y = m.NewBoolVar("")
                rows[a].append(y)
                cols[b].append(y)
                if c // div:
                    obj.append((y, c // div))
        for a, ys in rows.items():
            m.Add(sum(ys) == x[u][a])
        for b, ys in cols.items():
            m.Add(sum(ys) == x[v][b])
    use = problem.node_usage.tolist()
    for live in live_at:
        terms = [(b, use[ptr[v] + s]) for v in live.tolist() for s, b in x[v].items() if use[ptr[v] + s]]
        if terms:
            m.Add(sum(c * b for b, c in terms) <= problem.usage_limit)
    m.Minimize(sum(c * b for b, c in obj if c))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, time_limit_s - (time.perf_counter() - t0))
    solver.parameters.num_workers = num_workers
    solver.parameters.random_seed = seed
    # Ctrl-C is the caller's: CP-SAT's own SIGINT handler aborts the process when the solve runs
    # in a thread (std::bad_function_call), losing the run's best result
    solver.parameters.catch_sigint_signal = False
    for key, val in (params or {}).items():
        setattr(solver.parameters, key, val)
    with cancel.cpsat_stop_watch(solver):
        code = solver.Solve(m)
    detail: dict[str, Any] = {"scale_pow10": p, "memory_constraints": len(steps), "bool_vars": len(m.Proto().variables),
                              "cpsat_status": solver.StatusName(code)}
    if code == cp_model.INFEASIBLE:
        return math.inf, "infeasible", detail
    if code not in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        return -math.inf, f"error: {solver.StatusName(code)}", detail
    raw = solver.BestObjectiveBound()
    value: float = -math.inf
    if math.isfinite(raw):
        b = math.floor(raw)
        if abs(raw) >= 2**53:  # the double may have been rounded up
            b = math.floor(raw - math.ulp(raw))
        value = b * div
    status = "timeout"
    if code in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        sol = [next(s for s, b in x[v].items() if solver.BooleanValue(b)) for v in range(net.n)]
        ev = evaluate(problem, sol)
        detail.update(solution=sol, solution_cost=ev.cost, solution_feasible=ev.feasible)
        status = "feasible"
        if code == cp_model.OPTIMAL:
            # unscaled, the bound is the optimum; scaled, only if the solution attains it
            status = "optimal" if p == 0 or (ev.feasible and ev.cost == value) else "bound-only"
    return value, status, detail
