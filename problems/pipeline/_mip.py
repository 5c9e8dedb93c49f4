"""CP-SAT models behind :mod:`problems.pipeline.bounds`: integer scaling and one model builder.

Every model here is a partition of the nodes into ``nb`` consecutive blocks
numbered in DAG order (the exact MIP of Archer et al. 2024, Fig. 3, with x
eliminated through ``x_vb = y_vb - y_v,b-1``). The relaxations are the same
model with three blocks (superblocks) and fewer constraints.

Rounding, in one place. CP-SAT needs integers, so every cost is multiplied by
a power of two ``s`` (exact on floats) and rounded so that the image of any true
partition stays feasible and its integer block costs never exceed ``s`` times
its true block costs:

* block-cost coefficients (work, cut bytes / B, parameter bytes / B, peak
  bytes / B) are rounded DOWN, the memory M / B that is subtracted is rounded UP,
  so each integer block cost is <= s * f(block);
* constraint (14) ``sum work * x >= L`` becomes ``sum ceil(s work) x >= floor(s L)``,
  which every true solution of (14) still satisfies;
* an integer ``bottleneck >= block`` costs nothing, but ``cnt * bottleneck >=
  block`` (a superblock of cnt blocks) may force ``bottleneck = ceil(s OPT)``,
  i.e. up to one unit above ``s OPT``: those models subtract one unit (``slack``);
* the bottleneck variable starts at ``floor(s * simple bound)`` <= ``s OPT``.

Hence ``(proven integer bound - slack) / s <= OPT`` in exact arithmetic; the
float value is finally nudged down by a few ulps per node, because the exact
evaluator sums work in floating point and may land a few ulps below the real sum.
All roundings are done with :class:`fractions.Fraction`, never in floats.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Sequence

from gapstop.engine import cancel, cpsat
from gapstop.problems.pipeline.closed_form import nudge_down, working_set_bytes
from gapstop.problems.pipeline.model import PipelineProblem

cp_model = cpsat.load()  # without pandas (see engine.cpsat)

#: Integer scale target: the largest possible block cost maps to about this many units.
SCALE_TARGET = 2 ** 30

@dataclass(frozen=True)
class Scaled:
    """Integer coefficients of one instance at scale ``s`` (see the module docstring)."""

    s: Fraction               # a power of two
    work_lo: list[int]        # floor(s work(v))
    work_hi: list[int]        # ceil(s work(v)), for constraint (14) only
    out_lo: list[int]         # floor(s size_out(u) / B)
    param_lo: list[int]       # floor(s size_param(v) / B)
    ws_lo: list[int]          # floor(s ws(v) / B)
    memory: Fraction | None   # s M / B, exact (None: unlimited)

    def memory_hi(self, count: int) -> int:
        """ceil(count * s * M / B): what ``count`` blocks may hold without overflow."""
        assert self.memory is not None
        return math.ceil(count * self.memory)

    def floor_of(self, x: Fraction) -> int:
        """floor(s x)."""
        return math.floor(x * self.s)


def scale(problem: PipelineProblem, target: int | None = None) -> Scaled:
    """Choose ``s = 2^e`` so the largest conceivable block cost is about ``target`` units.

    ``target`` defaults to :data:`SCALE_TARGET` (read at call time; tests lower it to
    make every rounding coarse and its direction visible).
    """
    target = SCALE_TARGET if target is None else target
    bw = Fraction(problem.bandwidth)
    ws = working_set_bytes(problem)
    total = Fraction(float(problem.work.sum())) + 2 * Fraction(int(problem.size_out.sum())) / bw
    if problem.memory is not None:
        total += Fraction(int(problem.size_param.sum()) + int(ws.max(initial=0))) / bw
    e = 0 if total <= 0 else math.floor(math.log2(target / float(total)))
    s = Fraction(2) ** e
    w = [Fraction(float(x)) * s for x in problem.work]
    return Scaled(
        s=s,
        work_lo=[math.floor(x) for x in w],
        work_hi=[math.ceil(x) for x in w],
        out_lo=[math.floor(Fraction(int(b)) * s / bw) for b in problem.size_out],
        param_lo=[math.floor(Fraction(int(b)) * s / bw) for b in problem.size_param],
        ws_lo=[math.floor(Fraction(int(b)) * s / bw) for b in ws],
        memory=None if problem.memory is None else Fraction(int(problem.memory)) * s / bw,
    )


Lit = Any  # a cp_model BoolVar or the constant 0 / 1


@dataclass
class PartitionModel:
    """A built CP-SAT model: ``y[v][b]`` = "v is in blocks 1..b" (b = 0..nb, constants at the ends)."""

    model: cp_model.CpModel
    nb: int
    y: list[list[Lit]]
    c: dict[tuple[int, int], Any]      # tensor of u crosses (leaves, if cin is used) block b
    cin: dict[tuple[int, int], Any]    # tensor of u enters block b (only with a memory limit)
    block_cost: dict[int, Any]
    objective: Any
    objective_low: int      # domain lower bound of the objective (valid by construction)
    slack: int
    scaled: Scaled

    def x(self, v: int, b: int) -> Any:
        return self.y[v][b] - self.y[v][b - 1]


class _Lin:
    """Accumulates ``sum coef * lit + const`` with constant literals folded in."""

    def __init__(self) -> None:
        self.terms: dict[Any, int] = {}
        self.const = 0

    def add(self, lit: Lit, coef: int) -> None:
        if isinstance(lit, int):
            self.const += coef * lit
        elif coef:
            self.terms[lit] = self.terms.get(lit, 0) + coef

    def add_x(self, row: list[Lit], b: int, coef: int) -> None:
        """Add ``coef * x_vb = coef * (y_vb - y_v,b-1)``."""
        self.add(row[b], coef)
        self.add(row[b - 1], -coef)

    def expr(self) -> Any:
        items = [(v, a) for v, a in self.terms.items() if a]
        if not items:
            return self.const
        return cp_model.LinearExpr.weighted_sum([v for v, _ in items], [a for _, a in items]) + self.const


def _is_const(lit: Lit, value: int) -> bool:
    return isinstance(lit, int) and lit == value


def _ge(model: cp_model.CpModel, lhs: Any, rhs: Any) -> None:
    """``lhs >= rhs`` that tolerates constant sides (checked, not silently dropped)."""
    if isinstance(lhs, int) and isinstance(rhs, int):
        if lhs < rhs:
            raise AssertionError("constant constraint violated while building the model")
        return
    model.add(lhs >= rhs)


def build_partition_model(
    problem: PipelineProblem,
    sc: Scaled,
    nb: int,
    *,
    dag: bool = True,
    io: bool = True,
    empty: Sequence[int] = (),
    costed: Sequence[int] | None = None,
    counts: Sequence[int] | None = None,
    heavy_block: int | None = None,
    heavy_work: Fraction | None = None,
    objective_floor: Fraction | None = None,
    skip: str | None = None,
    no_triangle: bool = False,
    memory_hard: bool = False,
    label_range: Sequence[tuple[int, int]] | None = None,
) -> PartitionModel:
    """Build the partition model.

    Args:
        nb: number of (super)blocks.
        dag: add the DAG constraints (8).
        io: add the tensor cut variables and their costs (9), (10).
        empty: blocks forced empty; only block 1 and block nb are supported.
        costed: blocks whose cost is modelled (default: all).
        counts: number of real blocks each (super)block stands for (default 1 each);
            it scales the memory allowance and the ``bottleneck`` constraint.
        heavy_block, heavy_work: constraint (14), block ``heavy_block`` has work >= heavy_work.
        objective_floor: a known lower bound on OPT (e.g. the simple bound); the bottleneck
            variable starts at ``floor(s floor)``. Still valid: the image of an optimal
            partition may set bottleneck to that value, which is <= s OPT.
        skip, no_triangle, memory_hard: the MCM constraints (:func:`add_mcm_constraints`).
        label_range: per node v, ``(lo, hi)``: v's block label (0-based) is confined to
            ``lo..hi``; its ``y`` outside that range are built as constants, not as variables
            (a neighbourhood model with every other node fixed stays small).
    The objective is ``bottleneck`` with ``counts[b] * bottleneck >= block_b`` for costed b.
    """
    assert set(empty) <= {1, nb}
    costed = list(range(1, nb + 1)) if costed is None else list(costed)
    counts = [1] * nb if counts is None else list(counts)
    model = cp_model.CpModel()
    n = problem.n
    y: list[list[Lit]] = []
    for v in range(n):
        lo, hi = (0, nb - 1) if label_range is None else label_range[v]
        row: list[Lit] = [0]
        for b in range(1, nb):
            if b <= lo:   # v's label >= lo: v is not in blocks 1..b
                row.append(0)
            elif b >= hi + 1:
                row.append(1)
            elif b == 1 and 1 in empty:
                row.append(0)
            elif b == nb - 1 and nb in empty:
                row.append(1)
            else:
                row.append(model.new_bool_var(f"y{v}_{b}"))
        row.append(1)
        for b in range(1, nb + 1):
            if not isinstance(row[b - 1], int) and not isinstance(row[b], int):
                model.add_implication(row[b - 1], row[b])
            elif not (_is_const(row[b], 1) or _is_const(row[b - 1], 0)):
                _ge(model, row[b], row[b - 1])   # not trivially met: constants (checked) or a forced literal
        y.append(row)

    if dag:
        for u, v in problem.edges:
            for b in range(1, nb):
                _ge(model, y[u][b], y[v][b])

    # c[(u, b)]: the tensor of u crosses the boundary of block b. With a memory limit the
    # entering tensors get their own variables cin[(u, b)] (a tensor cannot both enter
    # and leave the same block), because the input bytes appear in the peak bound.
    c: dict[tuple[int, int], Any] = {}
    cin: dict[tuple[int, int], Any] = {}
    split = sc.memory is not None

    def cut(store: dict[tuple[int, int], Any], u: int, b: int, rhs: Any) -> None:
        if isinstance(rhs, int):
            if rhs > 0:   # a fixed crossing: a constant literal
                store[(u, b)] = 1
            return
        if isinstance(store.get((u, b)), int):
            return
        if (u, b) not in store:
            store[(u, b)] = model.new_bool_var(f"{'cin' if store is cin else 'c'}{u}_{b}")
        _ge(model, store[(u, b)], rhs)

    if io:
        for u, v in problem.edges:
            u, v = int(u), int(v)
            for b in costed:
                if b >= 2:   # (9) the tensor of u enters block b
                    cut(cin if split else c, u, b, y[u][b - 1] + y[v][b] - y[v][b - 1] - 1)
                if b <= nb - 1:   # (10) the tensor of u leaves block b
                    cut(c, u, b, y[u][b] - y[u][b - 1] - y[v][b])

    big = sum(sc.work_lo) + 2 * sum(sc.out_lo) + sum(sc.param_lo) + max(sc.ws_lo, default=0) + 1
    block_cost: dict[int, Any] = {}
    low = 0 if objective_floor is None else max(0, min(big, sc.floor_of(objective_floor)))
    bottleneck = model.new_int_var(low, big, "bottleneck")
    slack = 0
    overs: dict[int, Any] = {}
    cuts_of: dict[int, list[tuple[int, Any]]] = {b: [] for b in costed}
    ins_of: dict[int, list[tuple[int, Any]]] = {b: [] for b in costed}
    for (u, b), var in c.items():
        cuts_of[b].append((u, var))
    for (u, b), var in cin.items():
        cuts_of[b].append((u, var))
        ins_of[b].append((u, var))
    for b in costed:
        lin = _Lin()
        for v in range(n):
            lin.add_x(y[v], b, sc.work_lo[v])
        cut_lin = _Lin()
        for u, var in cuts_of[b]:
            cut_lin.add(var, sc.out_lo[u])
            lin.add(var, sc.out_lo[u])
        if sc.memory is not None and counts[b - 1] > 0:
            # Overflow of the (super)block S: sum_i (param_i + peak_i - M)^+ over its member
            # blocks is >= param(S) + peak_lb - count M, where peak_lb is any of
            #  * the boundary cut bytes of S: every input and output tensor is live at the
            #    last step, and the member blocks' cuts cover the cut of S;
            #  * in(S) + size_out(v) + inputs of v from inside S, for v in S: live at v's
            #    step (across member blocks: each input tensor of S enters some member,
            #    and inputs of v from other members are inputs of v's member block);
            #  * ws(v) for v in S (weaker; used when the cut variables are absent).
            param_lin = _Lin()
            for v in range(n):
                param_lin.add_x(y[v], b, sc.param_lo[v])
            param = param_lin.expr()
            over = model.new_int_var(0, big, f"over{b}")
            overs[b] = over
            pk_max = sum(sc.out_lo) + max(sc.ws_lo, default=0)
            # param + peak (or + cut) never exceeds sum(param_lo) + pk_max, so a larger allowance
            # constrains nothing more; capping it there keeps the constants within int64 when
            # M is far above every block's needs (M up to 2^62 bytes)
            mem = min(sc.memory_hi(counts[b - 1]), sum(sc.param_lo) + pk_max)
            pk = model.new_int_var(0, pk_max, f"peak{b}")
            _ge(model, over, param + pk - mem)
            if io:
                _ge(model, over, param + cut_lin.expr() - mem)
                in_lin = _Lin()
                for u, var in ins_of[b]:
                    in_lin.add(var, sc.out_lo[u])
                in_b = model.new_int_var(0, pk_max, f"in{b}")
                _ge(model, in_b, in_lin.expr())
                for v in range(n):
                    # size_out(v) x_v + sum_u size_out(u) (x_u + x_v - 1) <= bytes live at v's step
                    step = _Lin()
                    step.add_x(y[v], b, sc.out_lo[v])
                    for e in range(problem.pred_ptr[v], problem.pred_ptr[v + 1]):
                        u = int(problem.pred[e])
                        step.add_x(y[u], b, sc.out_lo[u])
                        step.add_x(y[v], b, sc.out_lo[u])
                        step.const -= sc.out_lo[u]
                    if step.terms or step.const > 0:   # constant rows (label_range) count too
                        _ge(model, pk, in_b + step.expr())
            else:
                for v in range(n):
                    if sc.ws_lo[v]:
                        _ge(model, pk, sc.ws_lo[v] * (y[v][b] - y[v][b - 1]))
            lin.add(over, 1)
        cost = lin.expr()
        block_cost[b] = cost
        if counts[b - 1] > 1:
            slack = 1   # cnt * bottleneck >= cost may round the bottleneck up by one unit
        _ge(model, counts[b - 1] * bottleneck, cost)

    if memory_hard:
        # param + (a lower bound on the peak) <= M per block (count M per superblock) is
        # implied by the hard limit: still a relaxation
        for over in overs.values():
            model.add(over == 0)
    if skip is not None or no_triangle:
        add_mcm_constraints(model, problem, y, nb, skip=skip, no_triangle=no_triangle)

    if heavy_block is not None:
        assert heavy_work is not None
        heavy = _Lin()
        for v in range(n):
            heavy.add_x(y[v], heavy_block, sc.work_hi[v])
        _ge(model, heavy.expr(), sc.floor_of(heavy_work))
    model.minimize(bottleneck)
    return PartitionModel(model=model, nb=nb, y=y, c=c, cin=cin, block_cost=block_cost,
                          objective=bottleneck, objective_low=low, slack=slack, scaled=sc)


#: the triangle constraint is modelled only up to this many edge x chip-pair terms; beyond
#: it the model leaves it out (a relaxation: its bound stays valid, its partitions may be
#: rejected by the evaluator)
TRIANGLE_MAX_TERMS = 200_000


def add_mcm_constraints(model: cp_model.CpModel, problem: PipelineProblem, y: list[list[Lit]], nb: int, *,
                        skip: str | None, no_triangle: bool) -> bool:
    """The linear MCM constraints on blocks 1..nb in DAG (ring) order.

    * ``skip`` (no skipped chip; the ring order is the DAG constraint (8) the model has
      anyway): ``"prefix"`` (equation 3): block b holds a node when any node lies in a block
      above it. Some sink does then (edges go up), so ``above_b >= 1 - y[s][b]`` for the
      sinks s and ``sum_v x_vb >= above_b``; ``"all-chips"``: every block holds a node.
      None: empty blocks anywhere;
    * ``no_triangle``: ``D[a,b] >= x_ua + x_vb - 1`` for every edge (u, v) and a < b (a chip
      edge), reachability ``R >= D``, ``R[a,c] >= R[a,b] + R[b,c] - 1``, and
      ``D[a,c] + R[a,b] + R[b,c] <= 2`` for a < b < c (no direct edge next to a longer
      path). D and R are only bounded below, so they can take their true values: the
      constraint set is exact. Left out above :data:`TRIANGLE_MAX_TERMS`.
    Returns whether the triangle constraint was added.
    """
    n = problem.n

    def x(v: int, b: int) -> Any:
        return y[v][b] - y[v][b - 1]

    if skip == "all-chips":
        for b in range(1, nb + 1):
            _ge(model, sum(x(v, b) for v in range(n)), 1)
    elif skip == "prefix":
        sinks = [v for v in range(n) if problem.succ_ptr[v] == problem.succ_ptr[v + 1]]
        for b in range(1, nb):
            if all(_is_const(y[s][b], 1) for s in sinks):
                continue  # no node can lie above block b
            above = model.new_bool_var(f"above{b}")
            for s in sinks:
                _ge(model, above, 1 - y[s][b])
            _ge(model, sum(x(v, b) for v in range(n)), above)
    elif skip is not None:
        raise ValueError(f"skip: expected 'prefix', 'all-chips' or None, got {skip!r}")
    if not no_triangle or nb < 3:
        return no_triangle
    if problem.m * nb * (nb - 1) // 2 > TRIANGLE_MAX_TERMS:
        return False
    d = {(a, b): model.new_bool_var(f"D{a}_{b}") for a in range(1, nb + 1) for b in range(a + 1, nb + 1)}
    r = {(a, b): model.new_bool_var(f"R{a}_{b}") for (a, b) in d}
    for u, v in problem.edges:
        u, v = int(u), int(v)
        for (a, b), var in d.items():
            _ge(model, var, x(u, a) + x(v, b) - 1)
    for key, var in d.items():
        model.add(r[key] >= var)
    for a in range(1, nb + 1):
        for b in range(a + 1, nb + 1):
            for c in range(b + 1, nb + 1):
                model.add(r[(a, c)] >= r[(a, b)] + r[(b, c)] - 1)
                model.add(d[(a, c)] + r[(a, b)] + r[(b, c)] <= 2)
    return True


def labels_from(pm: PartitionModel, value: Callable[[Any], int]) -> list[int]:
    """Block label (0-based, DAG order) of every node from a solution's y values."""
    out = []
    for row in pm.y:
        lab = 0
        for b in range(1, pm.nb):
            yb = row[b] if isinstance(row[b], int) else value(row[b])
            if yb:
                break
            lab += 1
        out.append(lab)
    return out


def add_hint(pm: PartitionModel, problem: PipelineProblem, labels: Sequence[int]) -> None:
    """Warm start from block labels (0-based, DAG order, < nb): hints every y and c."""
    for v, row in enumerate(pm.y):
        for b in range(1, pm.nb):
            if not isinstance(row[b], int):
                pm.model.add_hint(row[b], int(labels[v] <= b - 1))
    for store, leaves, enters in ((pm.c, True, not pm.cin), (pm.cin, False, True)):
        for (u, b), var in store.items():
            if isinstance(var, int):
                continue
            lu, here = labels[u], b - 1
            cons = [labels[int(w)] for w in problem.succ[problem.succ_ptr[u]:problem.succ_ptr[u + 1]]]
            val = (leaves and lu == here and any(lc > here for lc in cons)) or (
                enters and lu < here and here in cons)
            pm.model.add_hint(var, int(val))


STATUS = {
    cp_model.OPTIMAL: "optimal",
    cp_model.FEASIBLE: "feasible",
    cp_model.INFEASIBLE: "infeasible",
    cp_model.MODEL_INVALID: "error: model invalid",
    cp_model.UNKNOWN: "timeout",
}


def to_value(pm: PartitionModel, bound: float, n: int) -> float:
    """A proven integer objective bound -> a valid lower bound on OPT (module docstring)."""
    if not math.isfinite(bound):
        return -math.inf
    units = math.ceil(bound - 1e-6) - pm.slack   # the objective is integral
    return nudge_down(float(Fraction(units) / pm.scaled.s), n)


def run(model: cp_model.CpModel, *, time_limit_s: float, num_workers: int, random_seed: int,
        callback: cp_model.CpSolverSolutionCallback | None = None,
        best_bound_callback: Callable[[float], None] | None = None,
        should_stop: Callable[[], bool] | None = None,
        cp_params: dict[str, Any] | None = None,
        work_limit: float | None = None) -> tuple[int, cp_model.CpSolver, float]:
    """Solve any CP-SAT model with the parameters every model here uses; returns (CP-SAT's
    status code, solver, wall seconds). The arguments are :func:`solve`'s."""
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(0.01, float(time_limit_s))
    solver.parameters.num_workers = int(num_workers)
    solver.parameters.random_seed = int(random_seed)
    if work_limit is not None:
        solver.parameters.max_deterministic_time = max(0.01, float(work_limit))
    # Ctrl-C is the caller's: CP-SAT's own SIGINT handler aborts the process when the solve runs
    # in a thread (std::bad_function_call), losing the run's best result
    solver.parameters.catch_sigint_signal = False
    # The LP of this formulation is weak (fractional y zero out the cut costs); the
    # extra cuts of level 2 visibly raise the proven bound of the exact model.
    solver.parameters.linearization_level = 2
    for name, val in (cp_params or {}).items():
        setattr(solver.parameters, name, val)
    if best_bound_callback is not None:
        solver.best_bound_callback = best_bound_callback
    stop = cancel.current()
    if should_stop is not None:
        scope = stop
        stop = lambda: should_stop() or scope()  # noqa: E731
    t0 = time.perf_counter()
    with cancel.cpsat_stop_watch(solver, stop):
        st = solver.solve(model, callback)
    return st, solver, time.perf_counter() - t0


def solve(pm: PartitionModel, n: int, *, time_limit_s: float, num_workers: int, random_seed: int,
          callback: cp_model.CpSolverSolutionCallback | None = None,
          on_bound: Callable[[float], None] | None = None,
          should_stop: Callable[[], bool] | None = None,
          cp_params: dict[str, Any] | None = None,
          work_limit: float | None = None) -> tuple[str, float, cp_model.CpSolver, float]:
    """Solve; returns (status, valid lower bound, solver, wall seconds).

    ``work_limit``: stop also after this much of CP-SAT's deterministic time (its measure of
    work done, ``solver.deterministic_time``), which unlike ``time_limit_s`` does not shrink
    when other threads take the cores; with one worker the solve is then reproducible.

    ``should_stop`` (and the thread's :mod:`engine.cancel` scope) is polled every
    :data:`engine.cancel.WATCH_S` from a watcher thread; when it returns True
    the search stops and the bound proven so far is returned (still valid).
    ``cp_params`` overrides CP-SAT parameters by name (e.g. ``{"cp_model_presolve": False}``).
    """
    report = None if on_bound is None else (lambda b: on_bound(to_value(pm, max(b, pm.objective_low), n)))
    st, solver, wall = run(pm.model, time_limit_s=time_limit_s, num_workers=num_workers, random_seed=random_seed,
                           callback=callback, best_bound_callback=report, should_stop=should_stop,
                           cp_params=cp_params, work_limit=work_limit)
    status = STATUS.get(st, f"error: status {st}")
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE, cp_model.UNKNOWN):
        # A solve stopped in presolve reports 0; the objective's domain bound holds anyway.
        value = to_value(pm, max(solver.best_objective_bound, pm.objective_low), n)
        if st == cp_model.UNKNOWN and math.isfinite(value):
            status = "bound-only"
    else:
        value = -math.inf
    return status, value, solver, wall
