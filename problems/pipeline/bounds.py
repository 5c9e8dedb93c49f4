"""Lower bounds on the MTPP optimum (Archer et al. 2024, §3), with CP-SAT.

Every function returns an :class:`engine.records.Bound` whose ``value`` is a
proven lower bound on OPT, the minimum bottleneck cost over all acyclic
partitions into at most k blocks, with the cost of :mod:`problems.pipeline._kernels`
(overflow included when the memory is limited). MIP values always come from
the solver's proven objective bound, never from an incumbent, and are scaled
and rounded conservatively (see :mod:`problems.pipeline._mip`).

Methods, from cheap to strong:

* ``simple``: closed form (Lemma 3.3 plus two memory-overflow bounds);
* ``spectral``: the communication any k-way split must pay, from eigenvalues of a
  graph Laplacian (:mod:`problems.pipeline.spectral`); no MIP, strong where
  communication is comparable to work, where the MIPs' LP relaxations are weakest;
* ``heaviest-block``: some block holds a k-th of a node weighting and pays its own
  boundary (:mod:`problems.pipeline.heaviest_block`); one small CP-SAT model per weighting,
  strong at k = 8-16 on communication-heavy graphs;
* ``end-blocks``: a partition's first block is a down-set and its last an up-set, each paying
  its boundary on one side only; whatever share of a weighting they cannot hold, some middle
  block must (:mod:`problems.pipeline.end_blocks`); the heaviest-block test with a larger share
  (at k = 2 the two end blocks alone), up to 4 % above it on REGAL-style graphs at k = 4;
* ``block-cover``: the blocks partition the nodes and there are at most k of them: a
  partitioning LP over convex blocks within a cap, by column generation, its duals certified by CP-SAT
  (:mod:`problems.pipeline.block_cover`); it dominates ``heaviest-block`` and was up to 6.8 %
  above it on REGAL-style graphs at k = 4, 8 and 16 in 40 s;
* ``bottleneck-no-dag`` / ``bottleneck-no-io`` / ``bottleneck``: the three-superblock
  MIP (size independent of k) without the DAG constraints, without tensor cut
  costs, and complete;
* ``guess-the-bottleneck``: ``min_j LB_j`` over k independent three-superblock models,
  one per guessed position j of the bottleneck block (see :func:`guess_jobs`);
* ``exact``: the exact MIP with k blocks (Fig. 3); it also finds partitions, which
  callers must re-score with :func:`problems.pipeline.evaluate.evaluate`.

Memory: when M is set, a (super)block S of ``cnt`` blocks pays at least
``(param(S) + peak_lb - cnt M)^+ / B``, where ``peak_lb`` is the bytes of the tensors
cut by its boundary (all live at the last step), or its input bytes plus the bytes
live while one node v runs (v's output and its inputs from inside S), or, in the
no-io variant, one node's working set ``ws(v) = size_out(v) + sum of its inputs``.
The exact MIP is therefore exact without a memory limit and a relaxation with one,
since the true peak depends on the schedule.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Callable, Sequence

from gapstop.engine import cpsat
from gapstop.engine.records import Bound
from gapstop.problems.pipeline import _mip
from gapstop.problems.pipeline.block_cover import block_cover_bound
from gapstop.problems.pipeline.closed_form import check_k, lemma33_work, simple_bound, simple_parts
from gapstop.problems.pipeline.end_blocks import end_blocks_bound
from gapstop.problems.pipeline.heaviest_block import heaviest_block_bound
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.spectral import SPECTRAL_MAX_N, spectral_bound_value

cp_model = cpsat.load()  # without pandas (see engine.cpsat)

__all__ = [
    "BOTTLENECK_VARIANTS",
    "METHODS",
    "BoundJob",
    "SolveEvent",
    "block_cover_bound",
    "bottleneck_bound",
    "combine_guesses",
    "end_blocks_bound",
    "exact_bound",
    "guess_jobs",
    "guess_the_bottleneck",
    "heaviest_block_bound",
    "lower_bound",
    "simple_bound",
    "spectral_bound",
]

BOTTLENECK_VARIANTS = ("bottleneck", "bottleneck-no-dag", "bottleneck-no-io")
METHODS = ("simple", "spectral", "heaviest-block", "end-blocks", "block-cover", *BOTTLENECK_VARIANTS,
           "guess-the-bottleneck", "exact")
GUESS = "guess-the-bottleneck"
SOLVER = "cp-sat"


def spectral_bound(problem: PipelineProblem, k: int, time_limit_s: float = 5.0, *,
                   should_stop: Callable[[], bool] | None = None,
                   on_improve: Callable[[float], None] | None = None, max_iters: int = 2000,
                   **_: Any) -> Bound:
    """The spectral bound (:mod:`problems.pipeline.spectral`), improved for up to
    ``time_limit_s`` seconds or ``max_iters`` ascent steps; ``on_improve(value)`` reports every rise. Other keyword
    arguments (the MIP methods' solver options) are accepted and ignored. Graphs of more
    than :data:`~problems.pipeline.spectral.SPECTRAL_MAX_N` nodes get value ``-inf`` and
    status ``"skipped"`` at once."""
    t0 = time.perf_counter()
    check_k(problem, k)
    if problem.n > SPECTRAL_MAX_N:
        return Bound("spectral", -math.inf, "skipped", time.perf_counter() - t0, "eigenvalues",
                     {"k": k, "reason": f"{problem.n} nodes > {SPECTRAL_MAX_N}"})
    value, detail = spectral_bound_value(problem, k, time_limit_s, should_stop=should_stop,
                                         on_improve=on_improve, max_iters=max_iters)
    return Bound("spectral", value, "bound-only", time.perf_counter() - t0, "eigenvalues", {"k": k, **detail})


#: Largest partition model a bound builds, in (nodes + edges) x blocks. CP-SAT's memory grows with
#: the model and with the time it searches: gpt2 chained 16 times (5,257 nodes and 6,834 edges
#: after the contraction, k = 16: 193,456 terms) took 3.4 s of Python to build and 0.9 GB after
#: a 20 s solve; chained 64 times (4x larger) runs reached 9.4 GB. A larger model is not built:
#: its bound is reported as skipped, with the reason, at once. The largest shared real graph,
#: lstm_lm_unrolled, needs 267,264 at k = 64 (its MIP still runs there).
MODEL_MAX_TERMS = 300_000


def model_too_large(problem: PipelineProblem, blocks: int) -> str | None:
    """Why a partition model with ``blocks`` (super)blocks is not built, or None if it fits."""
    terms = (problem.n + problem.m) * blocks
    if terms <= MODEL_MAX_TERMS:
        return None
    return (f"model too large: ({problem.n} nodes + {problem.m} edges) x {blocks} blocks = {terms} terms "
            f"> {MODEL_MAX_TERMS}")


def _skipped(method: str, t0: float, detail: dict[str, Any], reason: str) -> Bound:
    return Bound(method, -math.inf, "skipped", time.perf_counter() - t0, SOLVER, {**detail, "reason": reason})


def _floor(problem: PipelineProblem, k: int) -> Fraction:
    """The simple bound, exactly: every MIP's bottleneck variable starts there."""
    return max(simple_parts(problem, k).values())


def _bound(method: str, status: str, value: float, wall: float, detail: dict[str, Any]) -> Bound:
    if status == "infeasible":
        # Every model here admits the image of any partition, so this is a modelling bug.
        detail["error"] = "relaxation reported infeasible: this is a bug, the value proves nothing"
        value = -math.inf
    return Bound(method, value, status, wall, SOLVER, detail)


def bottleneck_bound(problem: PipelineProblem, k: int, time_limit_s: float = 60.0, *,
                     variant: str = "bottleneck", num_workers: int = 1, random_seed: int = 0,
                     should_stop: Callable[[], bool] | None = None,
                     cp_params: dict[str, Any] | None = None) -> Bound:
    """The three-superblock relaxation (Corollary 3.4) or one of its two relaxations.

    Minimises the cost of the middle superblock subject to (14): it holds at least the
    Lemma 3.3 work. ``bottleneck-no-dag`` drops the DAG constraints (8),
    ``bottleneck-no-io`` the tensor cut costs (and the cut part of the peak bound).

    Args:
        variant: one of :data:`BOTTLENECK_VARIANTS`.
        time_limit_s: CP-SAT time limit; on timeout the best proven bound is returned.
        num_workers, random_seed: CP-SAT parameters.
        should_stop: polled every 0.1 s; True stops the solve early (the bound stays valid).
        cp_params: CP-SAT parameter overrides by name.
    """
    t0 = time.perf_counter()
    check_k(problem, k)
    if variant not in BOTTLENECK_VARIANTS:
        raise ValueError(f"unknown bottleneck variant {variant!r}")
    if (why := model_too_large(problem, 3)) is not None:
        return _skipped(variant, t0, {"k": k}, why)
    sc = _mip.scale(problem)
    pm = _mip.build_partition_model(problem, sc, 3, dag=variant != "bottleneck-no-dag",
                                    io=variant != "bottleneck-no-io", costed=[2],
                                    heavy_block=2, heavy_work=lemma33_work(problem, k),
                                    objective_floor=_floor(problem, k))
    status, value, _, _ = _mip.solve(pm, problem.n, time_limit_s=time_limit_s, num_workers=num_workers,
                                     random_seed=random_seed, should_stop=should_stop, cp_params=cp_params)
    return _bound(variant, status, value, time.perf_counter() - t0, {"k": k, "scale": float(sc.s)})


@dataclass(frozen=True)
class BoundJob:
    """One independent, picklable bound computation (e.g. one guess j of guess-the-bottleneck).

    ``run`` builds the model in the calling process, so only the problem and a few
    integers cross the wire.
    """

    problem: PipelineProblem
    k: int
    j: int

    def run(self, time_limit_s: float, *, num_workers: int = 1, random_seed: int = 0,
            should_stop: Callable[[], bool] | None = None, cp_params: dict[str, Any] | None = None) -> Bound:
        """LB_j: the bottleneck is block j, with j-1 blocks before it and k-j after it."""
        t0 = time.perf_counter()
        p, k, j = self.problem, self.k, self.j
        if (why := model_too_large(p, 3)) is not None:
            return _skipped(GUESS, t0, {"k": k, "j": j}, why)
        sc = _mip.scale(p)
        empty = ([1] if j == 1 else []) + ([3] if j == k else [])
        pm = _mip.build_partition_model(
            p, sc, 3, empty=empty, costed=[b for b in (1, 2, 3) if b not in empty],
            counts=[j - 1, 1, k - j], heavy_block=2, heavy_work=lemma33_work(p, k),
            objective_floor=_floor(p, k))
        status, value, _, _ = _mip.solve(pm, p.n, time_limit_s=time_limit_s, num_workers=num_workers,
                                         random_seed=random_seed, should_stop=should_stop, cp_params=cp_params)
        return _bound(GUESS, status, value, time.perf_counter() - t0,
                      {"k": k, "j": j, "scale": float(sc.s)})


def guess_jobs(problem: PipelineProblem, k: int) -> list[BoundJob]:
    """The k jobs LB_1..LB_k of guess-the-bottleneck; combine them with :func:`combine_guesses`.

    LB_j and LB_{k+1-j} differ (edges point from superblock 1 to 3), so all k are needed.
    """
    check_k(problem, k)
    return [BoundJob(problem, k, j) for j in range(1, k + 1)]


def combine_guesses(bounds: Sequence[Bound], k: int) -> Bound:
    """``min_j LB_j`` over the results of all k :func:`guess_jobs`.

    Raises:
        ValueError: a guess is missing or duplicated (the minimum over a subset is not a bound).
    """
    js = sorted(int(b.detail["j"]) for b in bounds)
    if js != list(range(1, k + 1)):
        raise ValueError(f"guess-the-bottleneck needs exactly one bound per j = 1..{k}, got {js}")
    worst = min(bounds, key=lambda b: b.value)
    statuses = {b.status for b in bounds}
    status = "optimal" if statuses == {"optimal"} else (
        "timeout" if worst.value == -math.inf else "feasible")
    bad = [b.status for b in bounds if b.status.startswith("error") or b.status == "infeasible"]
    if bad:
        status = bad[0]
    detail = {"k": k, "per_j": [b.value for b in sorted(bounds, key=lambda b: b.detail["j"])],
              "per_j_status": [b.status for b in sorted(bounds, key=lambda b: b.detail["j"])],
              "argmin_j": worst.detail["j"]}
    return Bound(GUESS, worst.value, status, sum(b.wall_s for b in bounds), SOLVER, detail)


def guess_the_bottleneck(problem: PipelineProblem, k: int, time_limit_s: float = 60.0, *,
                         num_workers: int = 1, random_seed: int = 0,
                         should_stop: Callable[[], bool] | None = None,
                         cp_params: dict[str, Any] | None = None) -> Bound:
    """Run all :func:`guess_jobs` one after the other within ``time_limit_s`` in total.

    Each guess gets an equal share of the time that is left, so time saved by an
    early proof goes to the later guesses.
    """
    jobs = guess_jobs(problem, k)
    deadline = time.perf_counter() + time_limit_s
    out = []
    for i, job in enumerate(jobs):
        share = max(0.01, (deadline - time.perf_counter()) / (len(jobs) - i))
        out.append(job.run(share, num_workers=num_workers, random_seed=random_seed, should_stop=should_stop,
                           cp_params=cp_params))
    return combine_guesses(out, k)


@dataclass(frozen=True)
class SolveEvent:
    """Progress of an exact solve, for a distributed layer.

    Attributes:
        kind: ``"bound"`` (a better proven lower bound) or ``"incumbent"`` (a new partition).
        bound: the best proven lower bound so far (valid, already converted and nudged).
        blocks: for incumbents, block label per node (0-based, DAG order); re-score it
            with the exact evaluator, never trust ``mip_value``.
        mip_value: the model's objective for the incumbent (descaled, approximate).
        wall_s: seconds since the solve started.
    """

    kind: str
    bound: float
    blocks: tuple[int, ...] | None = None
    mip_value: float | None = None
    wall_s: float = 0.0


class _Incumbents(cp_model.CpSolverSolutionCallback):
    """Keeps the last incumbent (CP-SAT reports improving ones) and forwards events."""

    def __init__(self, pm: _mip.PartitionModel, n: int, t0: float,
                 on_event: Callable[[SolveEvent], None] | None) -> None:
        super().__init__()
        self.pm, self.n, self.t0, self.on_event = pm, n, t0, on_event
        self.best: list[int] | None = None
        self.best_mip_value: float | None = None

    def on_solution_callback(self) -> None:
        labels = _mip.labels_from(self.pm, self.boolean_value)
        self.best = labels
        self.best_mip_value = float(Fraction(int(self.objective_value)) / self.pm.scaled.s)
        if self.on_event is not None:
            bound = _mip.to_value(self.pm, max(self.best_objective_bound, self.pm.objective_low), self.n)
            self.on_event(SolveEvent("incumbent", bound, tuple(labels), self.best_mip_value,
                                     time.perf_counter() - self.t0))


def exact_bound(problem: PipelineProblem, k: int, time_limit_s: float = 60.0, *,
                hint: Sequence[int] | None = None,
                on_event: Callable[[SolveEvent], None] | None = None,
                num_workers: int = 1, random_seed: int = 0,
                should_stop: Callable[[], bool] | None = None,
                cp_params: dict[str, Any] | None = None, floor: float | None = None,
                constraints: Any = None, on_solving: Callable[[], None] | None = None) -> Bound:
    """The exact MIP with k blocks (Fig. 3): a lower bound, and partitions on the way.

    Without a memory limit its optimum is OPT (up to the conservative rounding);
    with one it is a relaxation (the peak is bounded, not scheduled).

    Args:
        hint: optional warm start, a block label per node of a feasible partition
            (any labels; renumbered in DAG order; at most k blocks).
        on_event: called from solver threads with :class:`SolveEvent` on every new
            incumbent and every improvement of the proven bound; keep it cheap.
        should_stop: polled every 0.1 s; True stops the solve early (the bound stays valid).
        on_solving: called once the model is built, just before CP-SAT starts.
        cp_params: CP-SAT parameter overrides by name (e.g. ``{"cp_model_presolve": False}``,
            which helps large models under short limits).
        floor: a proven lower bound on OPT from elsewhere (e.g. ``spectral``); the
            model's bottleneck starts there.
        constraints: MCM constraints (:class:`~problems.pipeline.constraints.Constraints`):
            the bound is then on the constrained optimum under the active reading of
            equation 3. The model adds no skipped chip (``ring``: no empty block below a used
            one; ``all_chips``: no empty block; the strict model's bound is not one of the
            prefix reading, whose optimum may be lower), the triangle constraint (up to :data:`_mip.TRIANGLE_MAX_TERMS`) and
            ``param + peak <= M`` (``memory_hard``, a relaxation); ``detail["mcm"]`` lists
            what was modelled. Without a memory limit and with every constraint modelled
            (no user check), its optimum is the constrained optimum.
    Returns:
        A bound whose ``detail["blocks"]`` is the last partition found (the best by the
        model's cost, which with a memory limit underestimates the true cost), block per
        node in DAG order, or None; ``detail["mip_value"]`` its approximate model cost.
        With ``constraints``, a model CP-SAT proves infeasible gives the value +inf (status
        ``"infeasible"``, ``detail["proof"]``): no partition meets the constraints.
    Raises:
        InputError: the hint is not an acyclic partition into at most k blocks.
    """
    t0 = time.perf_counter()
    check_k(problem, k)
    if (why := model_too_large(problem, k)) is not None:
        return _skipped("exact", t0, {"k": k, "blocks": None}, why)
    sc = _mip.scale(problem)
    low = _floor(problem, k)
    if floor is not None and math.isfinite(floor):
        low = max(low, Fraction(floor))
    cons = constraints if constraints is not None and constraints.any else None
    skip = None if cons is None else cons.reading
    tri = bool(cons and cons.no_triangle)
    mem = bool(cons and cons.memory_hard and problem.memory is not None)
    pm = _mip.build_partition_model(problem, sc, k, objective_floor=low, skip=skip, no_triangle=tri,
                                    memory_hard=mem)
    if hint is not None:
        from gapstop.problems.pipeline.evaluate import evaluate  # numba: 0.2 s to import, needed for hints only

        labels = evaluate(problem, hint, k=k).blocks.tolist()
        _mip.add_hint(pm, problem, labels)
    cb = _Incumbents(pm, problem.n, t0, on_event)
    on_bound: Callable[[float], None] | None = None
    if on_event is not None:
        report = on_event
        on_bound = lambda value: report(SolveEvent("bound", value, wall_s=time.perf_counter() - t0))  # noqa: E731
    if on_solving is not None:
        on_solving()
    status, value, _, _ = _mip.solve(pm, problem.n, time_limit_s=time_limit_s, num_workers=num_workers,
                                     random_seed=random_seed, callback=cb, on_bound=on_bound,
                                     should_stop=should_stop, cp_params=cp_params)
    detail = {"k": k, "scale": float(sc.s), "blocks": cb.best, "mip_value": cb.best_mip_value}
    if cons is not None:
        detail["mcm"] = {"no_skip": skip, "memory_hard": mem,
                         "triangle": tri and (k < 3 or problem.m * k * (k - 1) // 2 <= _mip.TRIANGLE_MAX_TERMS)}
        if status == "infeasible":
            # the model relaxes the constrained problem (the memory rows bound the peak, the
            # triangle may be left out): no partition of it, none of the constrained problem
            detail["proof"] = "no partition meets the constraints (CP-SAT proved the model infeasible)"
            return Bound("exact", math.inf, status, time.perf_counter() - t0, SOLVER, detail)
    return _bound("exact", status, value, time.perf_counter() - t0, detail)


def lower_bound(problem: PipelineProblem, k: int, method: str, time_limit_s: float = 60.0,
                **kwargs: Any) -> Bound:
    """Dispatch to a method of :data:`METHODS` by name (``kwargs`` go to the method)."""
    if method == "simple":
        return simple_bound(problem, k)
    if method == "spectral":
        return spectral_bound(problem, k, time_limit_s, **kwargs)
    if method == "heaviest-block":
        return heaviest_block_bound(problem, k, time_limit_s, **kwargs)
    if method == "end-blocks":
        return end_blocks_bound(problem, k, time_limit_s, **kwargs)
    if method == "block-cover":
        return block_cover_bound(problem, k, time_limit_s, **kwargs)
    if method in BOTTLENECK_VARIANTS:
        return bottleneck_bound(problem, k, time_limit_s, variant=method, **kwargs)
    if method == GUESS:
        return guess_the_bottleneck(problem, k, time_limit_s, **kwargs)
    if method == "exact":
        return exact_bound(problem, k, time_limit_s, **kwargs)
    raise ValueError(f"unknown bound method {method!r}; expected one of {METHODS}")
