"""Multi-chip-module (MCM) constraints on pipeline partitions (Xie et al. 2022, §3-4).

A partition into chips ``0..C-1`` is *valid* when every active constraint holds:

* ``ring`` (eq. 2 and 3): chips sit on a uni-directional ring, so every edge ``(u, v)``
  has ``chip(u) <= chip(v)`` (acyclic dataflow), and no chip is skipped. Equation 3,
  ``d <= f(u)  =>  exists v: f(v) = d`` for every node u and chip d, says that the used
  chips are a prefix ``0..m`` of the ring (no empty chip *below* a used one); how many
  chips pay off is the search's choice. This is the paper's reading and ``ring``'s;
  ``all_chips`` is the strict one: every chip ``0..C-1`` holds a node. Without ``ring``
  the labels are free and renumbered in DAG order, as in the unconstrained problem (at
  most C blocks);
* ``no_triangle`` (eq. 4): in the chip graph (an edge ``a -> b`` when some graph edge
  goes from chip a to chip b != a), no direct dependency ``a -> b`` coexists with a
  path of two or more chip edges from a to b (the longest path between any directly
  dependent pair is 1);
* ``memory_hard`` (eq. 5, dynamic): every chip's ``param + peak <= M`` under the
  schedule (the problem's ``memory``), instead of paying the overflow as a cost;
* ``check`` (eq. 5, dynamic): a user callback ``MODULE:FUNCTION`` called as
  ``fn(problem, chips) -> bool`` with the :class:`~problems.pipeline.model.PipelineProblem`
  and an int64[n] chip per node (without ``ring``: the blocks numbered in DAG order);
  False, or an exception, rejects the partition.

On a valid partition the cost of every chip is the unconstrained cost (a hard memory
limit leaves no overflow to pay), so every lower bound of the unconstrained problem
is a lower bound of the constrained one.

:func:`violation` is the checker the exact evaluator calls; :class:`ConstraintSolver`
turns proposals into valid partitions (SAMPLE and FIX, Algorithms 1 and 2).
"""

from __future__ import annotations

import importlib
import math
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.problems.pipeline.model import PipelineProblem

if TYPE_CHECKING:
    from gapstop.problems.pipeline.evaluate import Evaluation

#: names of the constraints, in the order they are checked (the first violated one is named)
NAMES = ("ring-order", "no-skip", "triangle", "memory", "check")

CheckFn = Callable[[PipelineProblem, NDArray[np.int64]], bool]


@dataclass(frozen=True)
class Constraints:
    """Which MCM constraints are active (a JSON-friendly spec; crosses process boundaries).

    Attributes:
        chips: C >= 1, the number of chips (the ``k`` of the pipeline problem).
        ring: constraints 1 and 2 as equation 3 states them: edges go up the ring, and the
            used chips are a prefix ``0..m`` (m < C) of it.
        all_chips: the strict reading of constraint 2: every one of the C chips is used
            (implies ``ring``; a restriction of the prefix reading, so its optimum is never
            lower, and a lower bound of the prefix reading is one of it, not the reverse).
        no_triangle: constraint 3.
        memory_hard: the problem's memory as a hard per-chip limit (needs ``memory``).
        check: ``"MODULE:FUNCTION"`` of a user callback, or None.
    """

    chips: int
    ring: bool = False
    no_triangle: bool = False
    memory_hard: bool = False
    check: str | None = None
    all_chips: bool = False

    def __post_init__(self) -> None:
        if self.all_chips and not self.ring:  # the strict reading is a ring reading
            object.__setattr__(self, "ring", True)

    @property
    def reading(self) -> str | None:
        """Which reading of equation 3 is active: ``"prefix"`` (``ring``: the used chips are
        ``0..m``), ``"all-chips"`` (every chip used), or None (no ring)."""
        return None if not self.ring else "all-chips" if self.all_chips else "prefix"

    @property
    def any(self) -> bool:
        """True if anything beyond the unconstrained problem is asked for."""
        return self.ring or self.no_triangle or self.memory_hard or self.check is not None

    def active(self) -> list[str]:
        """Names of the active constraints, as in :data:`NAMES` (``ring`` gives two)."""
        out = ["ring-order", "no-skip"] if self.ring else []
        out += ["triangle"] * self.no_triangle + ["memory"] * self.memory_hard
        return out + (["check"] if self.check is not None else [])

    def to_dict(self) -> dict[str, Any]:
        return {"chips": self.chips, "ring": self.ring, "all_chips": self.all_chips, "reading": self.reading,
                "no_triangle": self.no_triangle, "memory_hard": self.memory_hard, "check": self.check}

    @classmethod
    def from_dict(cls, d: dict[str, Any] | None, chips: int) -> Constraints:
        d = d or {}
        return cls(chips=chips, ring=bool(d.get("ring")), no_triangle=bool(d.get("no_triangle")),
                   memory_hard=bool(d.get("memory_hard")), check=d.get("check"),
                   all_chips=bool(d.get("all_chips")))

    def validate(self, problem: PipelineProblem) -> None:
        """Reject impossible options (InputError, one line): C < 1, C > n with ``all_chips``,
        C > :data:`MAX_CHIPS` with any constraint,
        ``memory_hard`` without a memory limit, a ``check`` that cannot be imported."""
        if self.chips < 1:
            raise InputError(f"--chips: must be >= 1, got {self.chips}")
        if self.any and self.chips > MAX_CHIPS:
            raise InputError(f"--chips: the constrained searches support at most {MAX_CHIPS} chips, got {self.chips}")
        if self.all_chips and self.chips > problem.n:
            raise InputError(f"--chips: {self.chips} chips but only {problem.n} nodes; "
                             "--all-chips needs every chip non-empty")
        if self.memory_hard and problem.memory is None:
            raise InputError(f"{problem.name}: memory: --memory-hard needs a memory limit, the graph has none")
        if self.check is not None:
            load_check(self.check)


class ConstraintViolation(InputError):
    """A partition breaks a constraint; ``name`` is one of :data:`NAMES`."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"partition violates {name}: {message}")
        self.name = name


_CHECKS: dict[str, CheckFn] = {}


def load_check(spec: str) -> CheckFn:
    """Import ``MODULE:FUNCTION`` (once per process). Raises InputError if impossible."""
    if spec in _CHECKS:
        return _CHECKS[spec]
    mod_name, sep, fn_name = spec.partition(":")
    if not sep or not mod_name or not fn_name:
        raise InputError(f"--check: expected MODULE:FUNCTION, got {spec!r}")
    try:
        fn = getattr(importlib.import_module(mod_name), fn_name)
    except Exception as e:  # ImportError, AttributeError, or the module's own failure
        raise InputError(f"--check: cannot import {spec!r}: {type(e).__name__}: {e}") from None
    if not callable(fn):
        raise InputError(f"--check: {spec!r} is not callable")
    _CHECKS[spec] = fn
    return fn


# ----------------------------------------------------------------------------- checker
def chip_graph(problem: PipelineProblem, chips: NDArray[np.int64], c: int) -> NDArray[np.bool_]:
    """bool[c, c]: ``D[a, b]`` when some edge goes from chip a to chip b != a."""
    d = np.zeros((c, c), dtype=np.bool_)
    if problem.m:
        a, b = chips[problem.edges[:, 0]], chips[problem.edges[:, 1]]
        keep = a != b
        d[a[keep], b[keep]] = True
    return d


def triangle_pair(d: NDArray[np.bool_]) -> tuple[int, int] | None:
    """A direct chip edge ``(a, b)`` that also has a path of >= 2 edges, or None.

    ``d`` must be acyclic (checked before). Reachability by repeated squaring.
    """
    c = len(d)
    reach = d.copy()
    for _ in range(max(1, math.ceil(math.log2(max(c, 2))))):
        reach = reach | ((reach.astype(np.int64) @ reach.astype(np.int64)) > 0)
    two = (d.astype(np.int64) @ reach.astype(np.int64)) > 0   # a path of >= 2 edges
    bad = np.argwhere(d & two)
    return None if not len(bad) else (int(bad[0, 0]), int(bad[0, 1]))


def static_violation(problem: PipelineProblem, cons: Constraints,
                     chips: NDArray[np.int64]) -> tuple[str, str] | None:
    """The first violated static constraint (ring-order, no-skip, triangle) as (name, message).

    ``chips`` are the raw labels; with ``ring`` they must be chip ids ``0..C-1``, the used
    ones a prefix (``all_chips``: all of them). Without
    ``ring`` the triangle test runs on the quotient graph (labels are free); the caller
    has checked that it is acyclic.
    """
    c = cons.chips
    if cons.ring:
        if len(chips) and (chips.min() < 0 or chips.max() >= c):
            i = int(np.argmax((chips < 0) | (chips >= c)))
            return "ring-order", f"node {i} on chip {int(chips[i])}, outside 0..{c - 1}"
        if problem.m:
            back = np.flatnonzero(chips[problem.edges[:, 0]] > chips[problem.edges[:, 1]])
            if len(back):
                u, v = problem.edges[back[0]]
                return "ring-order", (f"edge {u}->{v} goes from chip {int(chips[u])} back to chip "
                                      f"{int(chips[v])}")
        used = np.bincount(chips, minlength=c)
        top = int(chips.max()) if len(chips) else -1
        if cons.all_chips and (used == 0).any():
            return "no-skip", f"chip {int(np.argmin(used))} is empty (--all-chips: every chip 0..{c - 1} is used)"
        if (used[:top] == 0).any():
            return "no-skip", (f"chip {int(np.argmin(used[:top]))} is empty below chip {top}, which is used "
                               f"(the used chips must be 0..{top})")
    if cons.no_triangle:
        labels, lab = np.unique(chips, return_inverse=True)
        pair = triangle_pair(chip_graph(problem, lab.astype(np.int64), len(labels)))
        if pair is not None:
            a, b = int(labels[pair[0]]), int(labels[pair[1]])
            return "triangle", f"chip {a} -> chip {b} is direct and also through another chip"
    return None


def dynamic_violation(problem: PipelineProblem, cons: Constraints, ev: Evaluation,
                      chips: NDArray[np.int64]) -> tuple[str, str] | None:
    """Memory (under the evaluation's schedule) and the user check, as (name, message)."""
    if cons.memory_hard and problem.memory is not None:
        used = ev.param_bytes + ev.peak_bytes
        over = np.flatnonzero(used > problem.memory)
        if len(over):
            b = int(over[0])
            return "memory", f"chip {b} needs {int(used[b])} bytes, more than {problem.memory}"
    if cons.check is not None:
        fn = load_check(cons.check)
        try:
            ok = fn(problem, chips.copy())
        except Exception as e:  # the backend's failure rejects this partition, not the run
            return "check", f"{cons.check} raised {type(e).__name__}: {e}"
        if not ok:
            return "check", f"{cons.check} returned {ok!r}"
    return None


# ----------------------------------------------------------------------------- solver
#: chips the solver supports (a tried-values bit set per decision)
MAX_CHIPS = 62


@dataclass(frozen=True)
class Outcome:
    """What :meth:`ConstraintSolver.sample` and :meth:`ConstraintSolver.fix` return.

    Attributes:
        status: ``"valid"`` (``chips`` meets every active constraint), ``"rejected"``
            (the static constraints hold but a dynamic one, ``violated``, does not),
            ``"infeasible"`` (no partition meets the static constraints: proven by
            exhausting the search) or ``"unknown"`` (the failure budget ran out).
        chips: int64[n] chip per node (monotone along edges), or None.
        objective: exact bottleneck cost of ``chips`` (canonical schedule), or None.
        violated, message: the dynamic constraint that rejected ``chips``.
        kept: FIX: how many proposed chips were kept (SAMPLE: 0).
        via: ``"propagation"``; ``"cp-sat"`` when the backtracking budget ran out and
            CP-SAT found the partition (closest to the proposal within its time limit); or
            ``"witness"`` when that partition is the last valid one seen again (CP-SAT
            found no other in time).
        fails: backtracks (returns to an earlier decision; values rejected by propagation
            are not counted).
    """

    status: str
    chips: NDArray[np.int64] | None
    objective: float | None = None
    violated: str | None = None
    message: str = ""
    kept: int = 0
    fails: int = 0
    via: str = "propagation"

    @property
    def valid(self) -> bool:
        return self.status == "valid"

    @property
    def fresh(self) -> bool:
        """Valid, and found by this call (not the last valid partition given back)."""
        return self.valid and self.via != "witness"


@dataclass
class ConstraintSolver:
    """Turns proposals into valid partitions (Xie et al. 2022, Algorithms 1 and 2).

    The static constraints (ring order, no skipped chip in either reading, triangle, and a necessary
    memory condition) are propagated in :mod:`problems.pipeline._propagate`; the
    dynamic ones (the exact memory peak under the canonical schedule, the user check)
    are tested on the finished partition, which is rejected (and counted) if they fail.
    Propagation is exact for constraints 1 and 2 (no backtracking needed); the triangle
    constraint is propagated soundly but not exactly (dead ends through undecided nodes,
    bounds of the nodes next to decided ones), so the search still backtracks (complete:
    without a budget it finds a valid partition whenever one exists, or proves that none
    does). When the
    backtracking budget runs out, CP-SAT (:meth:`prove`) decides: it proves infeasibility
    or returns the valid partition closest to the proposal it finds in its time limit.

    Args:
        problem: the instance.
        constraints: the active constraints; ``chips`` is C (at most :data:`MAX_CHIPS`).
        max_fails: backtracks per call before ``"unknown"`` (default ``4 n + 200``).
        prove_s: when a call runs out of backtracks, CP-SAT decides (within this many
            seconds, the first time) whether any partition meets the static constraints;
            if none does, this and every later call return ``"infeasible"`` at once.
        fallback_s: later CP-SAT fallbacks (feasibility known) get this many seconds to
            find the valid partition closest to the proposal.
        propagate_triangle: propagate the triangle constraint (prune chip domains and detect
            dead ends through undecided nodes); False forward-checks it only (the earlier
            solver, kept for comparison).
    Attributes:
        counts: calls per outcome (``"valid"``, ``"infeasible"``, ``"unknown"``,
            ``"rejected:<constraint>"``).
        repeats: the ``"valid"`` calls that gave back the last valid partition
            (``via == "witness"``: not :attr:`Outcome.fresh`).
    """

    problem: PipelineProblem
    constraints: Constraints
    max_fails: int | None = None
    prove_s: float = 10.0
    fallback_s: float = 1.0
    propagate_triangle: bool = True
    #: short attempts (fresh random choices) before the one with the rest of the budget
    RESTARTS = 8
    #: SAMPLE's short attempts: each is an independent draw, and on graphs where most draws
    #: end deep in a dead end, more of them find more valid partitions within the same
    #: backtracks (30 uniform calls: bert_base C = 36 22 valid against 17 with 8 attempts,
    #: lstm_lm_unrolled C = 16 13 against 2); FIX keeps 8, its long attempt in the proposal's
    #: order repairs BRKGA splits more often (docs/decisions/0007-mcm-solver-attempts.md)
    SAMPLE_RESTARTS = 40
    counts: dict[str, int] = field(default_factory=dict)
    repeats: int = 0

    def __post_init__(self) -> None:
        c = self.constraints.chips
        if not 1 <= c <= MAX_CHIPS:
            raise InputError(f"--chips: the constraint solver supports 1..{MAX_CHIPS} chips, got {c}")
        if self.max_fails is None:
            self.max_fails = 4 * self.problem.n + 200
        self.proof: str | None = None  # CP-SAT's verdict once asked: "feasible", "infeasible", "unknown"
        self.proof_s = 0.0  # seconds CP-SAT ran, in all
        self._cp_cache: tuple[Any, list[list[Any]], bool] | None = None
        self._witness: NDArray[np.int64] | None = None  # the last partition CP-SAT found
        from gapstop.problems.pipeline import _propagate  # numba: compiled on first use
        self._kernel = _propagate.constrained_dfs
        p = self.problem
        mem = p.memory if (self.constraints.memory_hard and p.memory is not None) else -1
        cons = self.constraints
        ring = _propagate.RING_NONE if not cons.ring else _propagate.RING_ALL if cons.all_chips else \
            _propagate.RING_PREFIX
        self._args = (c, ring, cons.no_triangle, int(mem), p.succ_ptr, p.succ,
                      p.pred_ptr, p.pred, p.size_param, p.size_out)
        self._no_weights = np.zeros((0, c), np.float64)

    # -- public API ---------------------------------------------------------------------
    def sample(self, probabilities: Any, order: Any = None, rng: np.random.Generator | None = None) -> Outcome:
        """SAMPLE (Algorithm 1): decide nodes in ``order``, each sampled from its row of
        ``probabilities`` restricted to its current domain; propagate after every decision
        and backtrack on failure.

        Args:
            probabilities: float64[n, C] non-negative weights per node (rows need not sum
                to 1; a row with no weight inside the domain samples uniformly), or None
                for uniform (random search).
            order: the node order (a permutation of 0..n-1); default a random topological
                order from ``rng`` (the paper uses random permutations; any order works, but
                with the triangle constraint topological ones need far less backtracking).
            rng: the random stream (default: a fresh unseeded one).
        """
        rng = rng if rng is not None else np.random.default_rng()
        n, c = self.problem.n, self.constraints.chips
        if self.proof == "infeasible":
            return self._finish(1, np.full(n, -1, np.int64), 0, 0)
        if probabilities is None:
            w = self._no_weights
        else:
            w = np.ascontiguousarray(probabilities, dtype=np.float64)
            if w.shape != (n, c) or not np.isfinite(w).all() or (w < 0).any():
                raise ValueError(f"probabilities: expected finite non-negative float64[{n}, {c}]")
        from gapstop.problems.pipeline._propagate import BUDGET

        seq = self._order(order, rng)
        status, chips, fails = self._run(seq, np.full(n, -1, np.int64), w, rng, restarts=self.SAMPLE_RESTARTS)
        if status == BUDGET:  # CP-SAT keeps what it can of one draw from the distribution
            draw = np.array([rng.choice(c, p=row / row.sum()) if row.sum() > 0 else rng.integers(c)
                             for row in w]) if len(w) else rng.integers(0, c, n)
            return self._fallback(draw, fails, rng, count_kept=False)
        return self._finish(status, chips, fails, 0)

    def fix(self, assignment: Any, order: Any = None, rng: np.random.Generator | None = None) -> Outcome:
        """FIX (Algorithm 2): keep every proposed chip that is still in its node's domain
        when the node is visited in ``order``, then repair the rest, each taking the chip
        of its domain nearest to its proposed one (ties at random; with backtracking, which
        may also revise a kept chip if the kept ones admit no completion). If one short
        attempt at that runs out of backtracks, the nodes are decided in ``order``, each
        trying its proposed chip (then the nearest one) first; then CP-SAT.

        Args:
            assignment: int[n] proposed chip per node (values outside 0..C-1 are never kept).
            order, rng: as in :meth:`sample`.
        """
        rng = rng if rng is not None else np.random.default_rng()
        n, c = self.problem.n, self.constraints.chips
        if self.proof == "infeasible":
            return self._finish(1, np.full(n, -1, np.int64), 0, 0)
        y = np.asarray(assignment, dtype=np.int64)
        if y.shape != (n,):
            raise ValueError(f"assignment: expected {n} chips")
        y = np.where((y >= 0) & (y < c), y, -1)
        seq = self._order(order, rng)
        seed = self._seed(rng)
        _, kept_chips, _ = self._kernel(seq, y, self._no_weights, True, seed, *self._args, int(self.max_fails),
                                     self.propagate_triangle)
        kept = kept_chips >= 0
        # pass 2: the kept decisions first (they succeed again as they did), then the rest
        seq2 = np.concatenate([seq[kept[seq]], seq[~kept[seq]]])
        from gapstop.problems.pipeline._propagate import BUDGET

        # (one short attempt: random proposals often admit no completion, and then the whole
        # budget spent here would be lost; pass 3 below is the complete search)
        status, chips, fails = self._kernel(seq2, y, self._no_weights, False, self._seed(rng), *self._args,
                                            self._short(), self.propagate_triangle, nearest=True)
        if status == BUDGET:
            # the kept chips admit no completion the budget could find: decide in the given
            # order instead, each node trying its proposed chip first (kept chips may go)
            status, chips, more = self._run(seq, y, self._no_weights, rng, nearest=True)
            fails += more
            if status == BUDGET:
                return self._fallback(np.where(y >= 0, y, rng.integers(0, c, n)), fails, rng)
        return self._finish(status, chips, fails, int((chips == y).sum()))

    def _fallback(self, target: NDArray[np.int64], fails: int, rng: np.random.Generator,
                  count_kept: bool = True, time_limit_s: float | None = None) -> Outcome:
        """The backtracking budget ran out: CP-SAT decides (feasible: the valid partition
        closest to ``target`` it finds in ``time_limit_s``, default :attr:`fallback_s`;
        infeasible: a proof, within :attr:`prove_s` or ``time_limit_s`` if longer)."""
        from gapstop.problems.pipeline._propagate import BUDGET, FOUND, INFEASIBLE

        if self.proof == "infeasible":
            return self._finish(INFEASIBLE, target, fails, 0)
        if self.proof == "unknown":  # CP-SAT could not decide once: do not stall every call on it
            return self._finish(BUDGET, target, fails, 0)
        if self.proof == "feasible":
            limit = self.fallback_s if time_limit_s is None else time_limit_s
        else:
            limit = self.prove_s if time_limit_s is None else max(time_limit_s, self.prove_s)
        chips, fresh = self._cp_solve(target, rng, limit)
        if chips is None:
            return self._finish(INFEASIBLE if self.proof == "infeasible" else BUDGET, target, fails, 0)
        return self._finish(FOUND, chips, fails, int((chips == target).sum()) if count_kept else 0,
                            via="cp-sat" if fresh else "witness")

    def score(self, chips: NDArray[np.int64]) -> tuple[float, tuple[str, str] | None]:
        """Exact cost of a monotone chip labelling (canonical schedule) and the first
        violated dynamic constraint, if any. Static constraints are not re-checked."""
        from gapstop.problems.pipeline import _kernels
        from gapstop.problems.pipeline.evaluate import Evaluation, canonical_order

        p = self.problem
        c = self.constraints.chips
        order = canonical_order(p, chips)
        cost, wk, inb, outb, prm, pk = _kernels.block_costs(
            order, chips, c, p.work, p.size_param, p.size_out, p.succ_ptr, p.succ, p.pred_ptr, p.pred,
            p.bandwidth, p.memory_or_minus1)
        used = np.bincount(chips, minlength=c) > 0
        ev = Evaluation(objective=float(cost[used].max()), blocks=chips, order=order, block_costs=cost[used],
                        work=wk[used], in_bytes=inb[used], out_bytes=outb[used], param_bytes=prm[used],
                        peak_bytes=pk[used])
        return ev.objective, dynamic_violation(p, self.constraints, ev, chips)

    # -- internals -------------------------------------------------------------------------
    def _order(self, order: Any, rng: np.random.Generator) -> NDArray[np.int64]:
        n = self.problem.n
        if order is None:
            # a random topological order: a random permutation makes the triangle
            # constraint surface late (a node between two chips is decided after both),
            # and chronological backtracking then rarely recovers (docs/decisions/0007-mcm-solver-attempts.md)
            from gapstop.problems.pipeline import _kernels
            p = self.problem
            return _kernels.kahn_order(rng.random(n), p.succ_ptr, p.succ, p.pred_ptr).astype(np.int64)
        seq = np.asarray(order, dtype=np.int64)
        if seq.shape != (n,) or not np.array_equal(np.sort(seq), np.arange(n)):
            raise ValueError(f"order: expected a permutation of 0..{n - 1}")
        return np.ascontiguousarray(seq)

    def _run(self, seq: NDArray[np.int64], first: NDArray[np.int64], weights: NDArray[np.float64],
             rng: np.random.Generator, nearest: bool = False, restarts: int | None = None
             ) -> tuple[int, NDArray[np.int64], int]:
        """The search with randomized restarts: chronological backtracking has heavy tails
        (a triangle conflict found late is undone decision by decision), so up to
        ``restarts`` (default :attr:`RESTARTS`) short attempts with fresh random choices come
        first; the last attempt has the rest of the budget (a search space it exhausts is
        proven empty; otherwise CP-SAT decides)."""
        from gapstop.problems.pipeline._propagate import BUDGET

        total = 0
        short = self._short()
        for _ in range(self.RESTARTS if restarts is None else restarts):
            if total + short >= int(self.max_fails):
                break
            status, chips, fails = self._kernel(seq, first, weights, False, self._seed(rng), *self._args, short,
                                                self.propagate_triangle, nearest=nearest)
            total += fails
            if status != BUDGET:
                return status, chips, total
        status, chips, fails = self._kernel(seq, first, weights, False, self._seed(rng), *self._args,
                                            max(0, int(self.max_fails) - total), self.propagate_triangle,
                                            nearest=nearest)
        return status, chips, total + fails

    def _short(self) -> int:
        """Backtracks of one short attempt."""
        return max(20, self.problem.n // 10)

    @staticmethod
    def _seed(rng: np.random.Generator) -> int:
        return int(rng.integers(0, 2 ** 31 - 1))

    def _cp(self) -> tuple[Any, list[list[Any]], bool]:
        """The static constraints as a CP-SAT model, built once: ``y[v][b]`` = v is on chips
        0..b-1 (b = 0..C, monotone in b; edges go up the ring), plus the linear MCM
        constraints of :func:`problems.pipeline._mip.add_mcm_constraints` and ``param <= M``
        per chip (necessary for the hard memory limit). Also returns whether the triangle
        constraint is in the model (it is left out of very large models)."""
        if self._cp_cache is not None:
            return self._cp_cache
        from gapstop.engine import cpsat
        cp_model = cpsat.load()

        from gapstop.problems.pipeline._mip import add_mcm_constraints

        p, cons = self.problem, self.constraints
        c = cons.chips
        model = cp_model.CpModel()
        y: list[list[Any]] = []
        for v in range(p.n):
            row: list[Any] = [0] + [model.new_bool_var(f"y{v}_{b}") for b in range(1, c)] + [1]
            for b in range(2, c):
                model.add_implication(row[b - 1], row[b])
            y.append(row)
        for u, v in p.edges:
            for b in range(1, c):
                model.add_implication(y[int(v)][b], y[int(u)][b])
        modelled = add_mcm_constraints(model, p, y, c, skip=cons.reading, no_triangle=cons.no_triangle)
        if cons.memory_hard and p.memory is not None:
            for b in range(1, c + 1):
                model.add(sum(int(p.size_param[v]) * (y[v][b] - y[v][b - 1]) for v in range(p.n)) <= p.memory)
        self._cp_cache = (model, y, modelled or not cons.no_triangle)
        return self._cp_cache

    def _cp_solve(self, target: NDArray[np.int64] | None, rng: np.random.Generator,
                  time_limit_s: float) -> tuple[NDArray[np.int64] | None, bool]:
        """CP-SAT on :meth:`_cp`, keeping as many nodes on their ``target`` chip as it can
        within the limit (no objective if None). Updates :attr:`proof`; returns ``(chips, True)``
        for a partition found now that meets the static constraints (a model without the
        triangle constraint is a relaxation: its partition is checked, and kept only if it
        meets it), else ``(the last valid partition seen, False)``, else ``(None, False)``;
        a partition equal to the last valid one counts as not new (False)."""
        from gapstop.engine import cpsat
        cp_model = cpsat.load()

        model, y, modelled = self._cp()
        model.clear_objective()
        model.clear_hints()
        if target is not None:
            keep = [y[v][t + 1] - y[v][t] for v, t in enumerate(target.tolist())]
            model.maximize(sum(keep))
        if self._witness is not None:  # start from a known valid partition, move toward the target
            for v, t in enumerate(self._witness.tolist()):
                for b in range(1, self.constraints.chips):
                    model.add_hint(y[v][b], int(t <= b - 1))
        from gapstop.engine import cancel

        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = time_limit_s
        solver.parameters.num_workers = 2
        solver.parameters.random_seed = self._seed(rng)
        solver.parameters.catch_sigint_signal = False
        t0 = time.perf_counter()
        with cancel.cpsat_stop_watch(solver):  # the run's stop ends the solve (as its time limit would)
            st = solver.solve(model)
        self.proof_s += time.perf_counter() - t0
        if st == cp_model.INFEASIBLE:
            self.proof = "infeasible"
            return None, False
        chips = None
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            chips = np.array([sum(1 - int(solver.value(x)) for x in row[1:-1]) for row in y], dtype=np.int64)
            # a model without the triangle is a relaxation: its partition may still meet it
            if not modelled and static_violation(self.problem, self.constraints, chips) is not None:
                chips = None
        if chips is None:
            if self._witness is not None:
                return self._witness.copy(), False  # nothing closer in time: the last valid partition
            self.proof = self.proof or "unknown"
            return None, False
        self.proof = "feasible"
        # CP-SAT starts from the witness (its hint) and may end on it: nothing new then
        fresh = self._witness is None or not np.array_equal(chips, self._witness)
        self._witness = chips
        return chips, fresh

    def closest(self, target: Any, rng: np.random.Generator, time_limit_s: float | None = None) -> Outcome:
        """The valid partition CP-SAT finds closest to ``target`` (most nodes kept on their
        target chip) in ``time_limit_s`` (default :attr:`fallback_s`), scored like every
        other outcome; ``"infeasible"`` or ``"unknown"`` when it has none. Slower than
        :meth:`fix` (a solve, not a propagation), but it keeps a proposal's structure where
        FIX's greedy repair scatters it. The same repair as FIX's fallback."""
        return self._fallback(np.asarray(target, dtype=np.int64), 0, rng, time_limit_s=time_limit_s)

    @property
    def witness(self) -> NDArray[np.int64] | None:
        """A copy of the last partition found that meets the static constraints, or None."""
        return None if self._witness is None else self._witness.copy()

    def prove(self, time_limit_s: float | None = None) -> str:
        """Ask CP-SAT whether some partition meets the static constraints (ring order, no
        empty chip, triangle; ``param <= M`` per chip). Returns and caches ``"feasible"``,
        ``"infeasible"`` or ``"unknown"`` (asked once: an unknown verdict is not retried, and
        later calls that run out of backtracks return ``"unknown"`` without CP-SAT)."""
        if self.proof is None:
            self._cp_solve(None, np.random.default_rng(0), self.prove_s if time_limit_s is None else time_limit_s)
        assert self.proof is not None
        return self.proof

    def _finish(self, status: int, chips: NDArray[np.int64], fails: int, kept: int, via: str = "propagation"
                ) -> Outcome:
        from gapstop.problems.pipeline._propagate import FOUND, INFEASIBLE

        if status == FOUND:
            if self._witness is None:  # a partition meeting the static constraints proves them feasible
                self._witness, self.proof = chips.copy(), "feasible"
            cost, bad = self.score(chips)
            if bad is None:
                out = Outcome("valid", chips, cost, kept=kept, fails=fails, via=via)
            else:
                out = Outcome("rejected", chips, cost, bad[0], bad[1], kept=kept, fails=fails, via=via)
        else:
            out = Outcome("infeasible" if status == INFEASIBLE else "unknown", None, kept=kept, fails=fails)
        key = out.status if out.violated is None else f"rejected:{out.violated}"
        self.counts[key] = self.counts.get(key, 0) + 1
        self.repeats += out.valid and not out.fresh
        return out
