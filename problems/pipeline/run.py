"""What a pipeline partitioning run is made of: evaluator, search islands, bound jobs, result.

What the pipeline adapter (:mod:`problems.registry`) declares, implemented: the
problem-agnostic solve loop (:mod:`engine.solve_loop`, in threads or on Ray) runs these
islands and bound jobs. Bound jobs are small picklable specs (``{"kind": ..., ...}``)
resolved by :func:`run_bound_job` in whatever process holds the problem, so the
problem crosses the wire once.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

import numpy as np
from threadpoolctl import threadpool_limits

from gapstop.engine.coordinator import Coordinator
from gapstop.engine.workers import job_budget, live_bound
from gapstop.engine.records import Bound
from gapstop.problems.pipeline.closed_form import nudge_down
from gapstop.problems.pipeline.constraints import Constraints
from gapstop.problems.pipeline.contract import Contraction, contract
from gapstop.problems.pipeline.model import PipelineProblem

if TYPE_CHECKING:
    from gapstop.problems.pipeline.decoder import Split

# The decoder, evaluator and search modules load numba (0.2 s) and are imported where
# used: a bound worker needs none of them.

GUESS_GROUP = "guess-the-bottleneck"
#: threads of the exact MIP's CP-SAT solve, whatever its worker slot's CPU count
EXACT_MIN_THREADS = 2
#: the spectral bound's ascent usually settles within seconds; this caps it
SPECTRAL_MAX_S = 30.0
#: the heaviest-block bound, run after the spectral one where communication matters, stops by
#: itself after its weightings (3-30 s on the REGAL-style graphs); this caps it
HEAVIEST_MAX_S = 40.0
#: the end-blocks bound stops by itself after its weightings too; at k = 4 on 80-200-node graphs it
#: was still rising after 40 s in runs, where the block-cover bound after it refuted nothing
END_BLOCKS_MAX_S = 120.0
#: from k = 3 to this k the end-blocks bound takes the heaviest-block bound's place: at the same
#: weighting and cap it asks a middle block for at least the share heaviest-block asks any block
#: for, and more where the end blocks cannot hold theirs. Alone for 30-45 s from the spectral
#: bound it was 2-4 % above heaviest-block at k = 4 and 0.1-1.2 % at k = 8 (docs/decisions/0009-end-blocks-bound.md)
END_BLOCKS_MAX_K = 8


class PipelineEvaluator:
    """Coordinator-side exact re-scoring of reported solutions.

    A solution is ``{"blocks": [block per node], "order": [schedule] (optional)}``.
    Before scoring, the blocks' own schedule is split optimally again by SliceGraph,
    which can only lower the cost (the reported split is one of the candidates);
    the better of the two is kept (with ``constraints``, only if the re-split is valid
    too). Returns ``(cost, canonical solution)``; a partition that violates an active
    constraint raises :class:`~problems.pipeline.constraints.ConstraintViolation`.
    """

    def __init__(self, problem: PipelineProblem, k: int, constraints: Constraints | None = None) -> None:
        self.problem = problem
        self.k = k
        self.constraints = constraints if constraints is not None and constraints.any else None
        # built at the first solution: its numba import (0.2 s) would otherwise delay the
        # session's start, and with it the exact MIP's head start
        self.decoder: Any = None

    def __call__(self, solution: Any) -> tuple[float, dict[str, Any]]:
        from gapstop.problems.pipeline.constraints import ConstraintViolation
        from gapstop.problems.pipeline.decoder import SliceDecoder
        from gapstop.problems.pipeline.evaluate import evaluate

        if self.decoder is None:
            self.decoder = SliceDecoder(self.problem, self.k)
        cons = self.constraints
        ev = evaluate(self.problem, solution["blocks"], solution.get("order"), k=self.k, constraints=cons)
        resplit = self.decoder.slice(ev.order)
        if resplit.value < ev.objective:
            try:
                ev = evaluate(self.problem, resplit.blocks, resplit.order, k=self.k, constraints=cons)
            except ConstraintViolation:
                pass  # the reported partition stands
        return ev.objective, {"blocks": ev.blocks.tolist(), "order": ev.order.tolist(),
                              "block_costs": ev.block_costs.tolist()}


def split_to_solution(split: Split) -> dict[str, Any]:
    return {"blocks": split.blocks.tolist(), "order": split.order.tolist()}


def make_search(problem: PipelineProblem, k: int, seed: int, index: int, *, population: int = 100,
                constraints: Constraints | None = None, policy: dict[str, Any] | None = None,
                generation: int = 0) -> Any:
    """Island ``index`` of a run seeded with ``seed``: its own stream from one SeedSequence
    (a restart, ``generation`` >= 1, another one), its first generation seeded with the MLA
    and MLA-weighted orders.

    With active ``constraints`` the islands cycle through BRKGA + FIX, random search
    (uniform + SAMPLE) and simulated annealing (:mod:`problems.pipeline.mcm_search`).

    With ``policy`` (``{"path", "finetune", "mode"}``) island 0 samples the learned policy
    (:mod:`problems.pipeline.rl.island`) and island i >= 1 is what island i - 1 would be."""
    from gapstop.problems.pipeline.search import PipelineSearch, mla_seeds

    if policy is not None:
        if index == 0:
            from gapstop.problems.pipeline.rl import require_torch
            require_torch()
            from gapstop.problems.pipeline.rl.island import PolicySearch

            rng = np.random.default_rng(np.random.SeedSequence([seed, generation, 7]))
            return PolicySearch(problem, constraints if constraints is not None else Constraints(k), rng,
                                policy_path=policy["path"], finetune=bool(policy.get("finetune")),
                                mode=policy.get("mode", "fix"))
        index -= 1
    root = np.random.SeedSequence(seed if generation == 0 else [seed, index, generation])
    mla_stream, *islands = root.spawn(index + 2)
    if constraints is not None and constraints.any:
        from gapstop.problems.pipeline.mcm_search import make_constrained_search

        def build() -> Any:
            return make_constrained_search(problem, constraints, np.random.default_rng(islands[index]), index,
                                           population=population,
                                           seeds=lambda: mla_seeds(problem, np.random.default_rng(mla_stream)))
    else:
        def build() -> Any:
            seeds = mla_seeds(problem, np.random.default_rng(mla_stream))
            return PipelineSearch(problem, k, np.random.default_rng(islands[index]), population=population,
                                  seeds=seeds)
    if index != 0:
        return build()
    # the first island of a run (a restarted one too) reports a linear-time plan before its seeds
    # and first generation, which take minutes on graphs of 10^4-10^5 nodes
    from gapstop.problems.pipeline.first_plan import FirstPlanFirst

    return FirstPlanFirst(problem, k, build, constraints=constraints, population=population)


def result_doc(problem: PipelineProblem, k: int, coord: Coordinator, stopped_because: str,
               elapsed_s: float, constraints: Constraints | None = None) -> dict[str, Any]:
    """The ``result.json`` document (schema in docs/formats.md)."""
    from gapstop.problems.pipeline.definition import result_document
    from gapstop.problems.pipeline.evaluate import evaluate

    inc = coord.incumbent
    bounds = sorted(coord.bounds.values(), key=lambda b: -b.value if math.isfinite(b.value) else math.inf)
    # the incumbent re-scored by the exact evaluator (under the run's constraints it is what the
    # coordinator accepted; the stages' terms need the evaluation itself)
    ev = None if inc is None else evaluate(problem, inc.solution["blocks"], inc.solution["order"], k=k)
    doc = result_document(problem, k, ev, lower_bound=coord.lb,
                          lower_bound_method=None if coord.bound is None else coord.bound.method, gap=coord.gap,
                          bounds=[b.to_dict() for b in bounds], found_by=None if inc is None else inc.source,
                          elapsed_s=elapsed_s, stopped_because=stopped_because)
    if constraints is not None and constraints.any:
        doc["constraints"] = constraints_doc(constraints, coord)
        exists = doc["constraints"].get("existence")
        if inc is None and exists:  # what is known without a partition (engine.guard.running_doc)
            doc["answer_note"] = exists["message"]
    return doc


def constraints_doc(constraints: Constraints, coord: Coordinator) -> dict[str, Any]:
    """``result.json``'s ``constraints``: the options (``reading``: which reading of equation 3,
    ``"prefix"`` or ``"all-chips"``), the active constraints, how many chips the plan uses
    (``chips_used``, None without a plan), and how many reported partitions the coordinator
    rejected, per violated constraint."""
    from gapstop.problems.pipeline.constraints import NAMES

    rejected = {name: 0 for name in constraints.active()}
    for _, message in coord.rejected:
        for name in NAMES:
            if message.startswith(f"ConstraintViolation: partition violates {name}:"):
                rejected[name] = rejected.get(name, 0) + 1
    inc = coord.incumbent
    used = None if inc is None else len(set(inc.solution["blocks"]))
    doc = {**constraints.to_dict(), "active": constraints.active(), "chips_used": used, "rejected": rejected}
    if constraints.all_chips:
        doc["existence"] = existence_doc(coord)
    return doc


def existence_doc(coord: Coordinator) -> dict[str, Any]:
    """Under ``all_chips``: whether a valid partition exists, and how that is known. ``verdict``:
    ``"feasible"`` (the run has one), ``"infeasible"`` (CP-SAT proved that none exists: ``by``
    the existence proof or the exact MIP, ``wall_s``), ``"static-feasible"`` (some partition
    meets the static constraints, none found meets the dynamic ones), ``"unknown"`` (CP-SAT ran
    ``wall_s`` without deciding) or ``"not-run"`` (no bound jobs); ``message`` says it in a line."""
    if coord.incumbent is not None:
        return {"verdict": "feasible", "by": coord.incumbent.source, "message": "a valid partition was found"}
    for method in ("existence", "exact"):
        b = coord.bounds.get(method)
        if b is not None and b.status == "infeasible" and b.value == math.inf:
            return {"verdict": "infeasible", "by": method, "wall_s": round(b.wall_s, 3),
                    "message": f"no valid partition exists: CP-SAT proved --all-chips infeasible in {b.wall_s:.2f} s "
                               "(--ring allows fewer chips)"}
    b = coord.bounds.get("existence")
    if b is None:
        return {"verdict": "not-run",
                "message": "existence not decided: the proof did not run (--no-bounds, or the run ended first)"}
    d = b.detail or {}
    if d.get("verdict") == "feasible":
        return {"verdict": "static-feasible", "by": "existence", "wall_s": d.get("wall_s"),
                "message": f"CP-SAT found a partition meeting {d.get('model')} in {d.get('wall_s')} s, "
                           "but none found meets the dynamic constraints"}
    return {"verdict": "unknown", "by": "existence", "wall_s": d.get("wall_s"),
            "message": f"existence undecided after {d.get('wall_s')} s of CP-SAT on {d.get('model')} "
                       f"(its limit: {d.get('time_limit_s')} s; a longer --time-limit gives it more)"}


# ---------------------------------------------------------------------------------- bounds
#: Largest k at which the exact job's slot also runs ``bottleneck`` (:func:`bound_job_specs`).
#: Solved, the model's bound over the spectral one on regal_008 (55 nodes): k = 2 +5.9 %,
#: 4 +3.3 %, 6 +0.9 %, 8 -0.1 %; at k = 8 and 16 it stayed below it on every REGAL-style graph
#: tried (docs/decisions/0013-bottleneck-in-exact-slot.md).
BOTTLENECK_TURN_MAX_K = 6


def bound_job_specs(problem: PipelineProblem, k: int) -> list[dict[str, Any]]:
    """The bound hierarchy beyond ``simple``, cheapest first (see :class:`engine.plan.BoundPlan`).

    ``share`` is the fraction of the remaining time a queued job takes. guess-the-bottleneck
    is one job per guessed stage j (members of a group the coordinator combines as
    min_j, each run in time slices); it is skipped for k > 8, where it adds little over
    ``bottleneck`` (Archer et al. 2024, Table 1) and costs k models.
    """
    from gapstop.problems.pipeline.bounds import model_too_large

    merged = _contraction(problem)
    graph = merged.problem if merged.merged else problem   # what the jobs build their models on
    specs: list[dict[str, Any]] = []
    if model_too_large(graph, 3) is None:   # else they would skip themselves, the members over and over
        specs.append({"kind": "bottleneck", "share": 0.10})
        if 2 <= k <= 8:
            specs += [{"kind": "guess", "j": j, "group": GUESS_GROUP} for j in range(1, k + 1)]
    # the exact MIP proves many real-model instances optimal within seconds when it has
    # the cores to itself: it asks for a head start (see engine/solve_loop.py)
    exact: dict[str, Any] = {"kind": "exact", "share": 1.0, "dedicated": True, "head_start": True}
    if model_too_large(graph, k) is not None:
        # the MIP will skip itself: no head start for it (the islands would wait for nothing)
        del exact["head_start"]
    if 2 <= k and problem.memory is None:
        # Where the exact job becomes the LNS (communication-heavy graphs), a stalled LNS's two
        # CP-SAT threads take CPU from the island and from the bound climbs beside them: once it
        # stalls the job ends (at k > 6 when its block-cover climb does; see
        # docs/decisions/0006-lns-windows.md).
        exact["yield_when_stalled"] = True
        if k <= BOTTLENECK_TURN_MAX_K:
            # Its slot is the only bound slot of a 2-CPU run, where nothing else ever ran
            # ``bottleneck``: the slot runs it next, and the LNS comes back as the plan's
            # fallback (engine/plan.py). regal_008 at k = 4: ``bottleneck`` proves 5260 in 27 s
            # (2 threads) where the spectral bound gives 5090 and the exact MIP does not pass it
            # in 10 min. Above k = 6 no model pays for the slot after the LNS
            # (docs/decisions/0013-bottleneck-in-exact-slot.md).
            specs.append({"kind": "lns", "fallback": True})
    specs.append(exact)
    return specs


#: The head start is extended when the spectral bound, computed as it ends, lies within this
#: share of the other bounds: the split need not pay for communication, which is what the exact
#: MIP's relaxation misses, so the MIP is the member most likely to settle the run.
SPECTRAL_MARGIN = 0.01
#: longest wait, after the head start, for the spectral bound's final value; without it the
#: head start is not extended. The spectral bound runs next to the MIP then (0.2-3 s on the
#: REGAL-style graphs, whose live values decide at once; 4-6 s on lstm_lm_unrolled), and
#: it stops within SPECTRAL_MAX_S.
SPECTRAL_WAIT_S = SPECTRAL_MAX_S + 5.0


def extend_head_start(job_bounds: dict[str, Bound], lb: float | None, waited_s: float) -> bool | None:
    """Whether the exact MIP's head start should go on to the end of the run, once it is over.

    ``job_bounds``: the last bound of each method reported (the spectral bound
    runs in that job from the head start's end: live values, then its final record, which
    carries ``detail["iterations"]``); ``lb``: the best bound from elsewhere (the closed
    forms, the MIP's own); ``waited_s``: seconds since the head start ended.

    False as soon as the spectral bound exceeds ``lb`` by more than :data:`SPECTRAL_MARGIN`
    (communication matters: the islands and the spectral bound carry such runs, e.g. the
    REGAL-style graphs), when it was skipped (graph too large for it), or after
    :data:`SPECTRAL_WAIT_S` without its final value; True once
    its final value does not (on the real-model graphs the MIP then proves optimality alone in
    10-60 s, 1.3-1.8x sooner than next to an island and Ray's start-up: docs/decisions/0001-exact-mip-head-start.md);
    None while undecided.
    """
    sp = job_bounds.get("spectral")
    if sp is not None and sp.status == "skipped":
        return False   # too large a graph to tell; the islands get their share as without a head start
    if sp is not None and lb is not None and sp.value > (1.0 + SPECTRAL_MARGIN) * lb:
        return False
    if sp is not None and "iterations" in sp.detail:
        return True
    return None if waited_s < SPECTRAL_WAIT_S else False


def run_bound_job(problem: PipelineProblem, k: int, spec: dict[str, Any], ctx: Any, seed: int = 0,
                  num_workers: int = 1, constraints: Constraints | None = None) -> None:
    """Run one bound job, reporting through ``ctx`` (``bound``, ``solution``, ``incumbent``,
    ``time_left``, ``should_stop``, ``ready``: see :class:`engine.workers.JobContext`). Every
    bound of the unconstrained problem bounds the constrained one; only the exact MIP adds
    ``constraints`` (the linear ones). Without constraints every job but the LNS runs on the
    graph's dominance contraction (:mod:`problems.pipeline.contract`), which has the same optimum:
    torchvision's Swin-T (783 nodes, 339 after merging) at k = 16 is proven optimal in 23 s,
    where without it the run ended its 60 s at a certified ratio of 1.44
    (docs/decisions/0014-dominance-contraction.md)."""
    from gapstop.problems.pipeline import bounds

    budget = job_budget(ctx)
    if budget is None:
        return
    kind = spec["kind"]
    if kind in ("exact", "bottleneck", "guess") and problem.n >= AT_ONCE_MIN_NODES:
        _await_first_plan(ctx)
        budget = job_budget(ctx)
        if budget is None:
            return
    # searches (the LNS, here and in the islands) keep the original graph: only bounds and the
    # exact MIP gain from the contraction, and the LNS's moves are tuned on the full graphs
    searcher = (problem, ctx)
    if kind != "lns" and (constraints is None or not constraints.any):
        merged = _contraction(problem)
        if merged.merged:
            problem, ctx = merged.problem, _Expanded(ctx, merged)
    common: dict[str, Any] = {"random_seed": seed, "num_workers": num_workers, "should_stop": ctx.should_stop}
    if kind == "bottleneck":
        ctx.bound(bounds.bottleneck_bound(problem, k, budget, **common))
    elif kind == "guess":
        j = int(spec["j"])
        job = bounds.guess_jobs(problem, k)[j - 1]
        b = job.run(budget, **common)
        ctx.bound(Bound(f"{GUESS_GROUP}[{j}]", b.value, b.status, b.wall_s, b.solver,
                        {**b.detail, "group": GUESS_GROUP, "member": j, "members": k}))
    elif kind == "exact":
        _exact_job(problem, k, spec, ctx, budget, common, num_workers, constraints, searcher)
    elif kind == "lns":
        _lns_job(problem, k, spec, ctx, seed, num_workers, constraints)
    else:
        raise ValueError(f"unknown bound job kind {kind!r}")


#: share of the exact job's budget that CP-SAT may take to decide, under ``all_chips``, whether any
#: partition meets the static constraints (:func:`prove_existence`) before the exact MIP starts
EXISTENCE_SHARE = 0.5


def prove_existence(problem: PipelineProblem, constraints: Constraints, ctx: Any, time_limit_s: float) -> str:
    """Under the strict reading (``all_chips``) a graph may have no valid partition at all; CP-SAT
    decides on the static constraints (:meth:`ConstraintSolver.prove`: ring order, every chip
    used, triangle, ``param <= M`` per chip), within ``time_limit_s`` or the run's stop.

    Reports an ``existence`` bound: +inf and ``"infeasible"`` (no partition exists: the run stops,
    see :class:`engine.stopping.Optimal`), or -inf (proves nothing) with ``"feasible"`` (its
    partition goes to the coordinator as a solution, where the dynamic constraints are checked)
    or ``"timeout"``; ``detail`` has the ``verdict`` and CP-SAT's ``wall_s``. Returns the verdict."""
    from gapstop.problems.pipeline.bounds import SOLVER
    from gapstop.problems.pipeline.constraints import ConstraintSolver

    static = Constraints(constraints.chips, ring=True, no_triangle=constraints.no_triangle,
                         memory_hard=constraints.memory_hard, all_chips=True)
    solver = ConstraintSolver(problem, static, prove_s=max(0.1, time_limit_s))
    verdict = solver.prove()
    witness = solver.witness
    if verdict == "feasible" and witness is not None:
        ctx.solution({"blocks": witness.tolist()}, "existence")
    value = math.inf if verdict == "infeasible" else -math.inf
    status = {"feasible": "feasible", "infeasible": "infeasible"}.get(verdict, "timeout")
    detail = {"verdict": verdict, "wall_s": round(solver.proof_s, 3), "time_limit_s": round(time_limit_s, 3),
              "model": "ring order, every chip used" + (", triangle" if static.no_triangle else "")
                       + (", param <= M per chip" if static.memory_hard else "")}
    ctx.bound(Bound("existence", value, status, solver.proof_s, SOLVER, detail))
    return verdict


#: From this many nodes the first island reports its first plan on its own (its seeds and first
#: generation would hold it back by seconds: gpt2 chained 64 times, 3.2 s; see
#: :class:`problems.pipeline.first_plan.FirstPlanFirst`), and a model-building bound job waits
#: for that plan (at most :data:`PLAN_FIRST_WAIT_S`): its model takes seconds of Python that the
#: plan would otherwise share the interpreter with (the same graph at k = 4: a 194,000-term MIP)
AT_ONCE_MIN_NODES = 5000
PLAN_FIRST_WAIT_S = 10.0


def _await_first_plan(ctx: Any) -> None:
    """Let the islands set up (:meth:`engine.workers.JobContext.ready`), then wait until the run has
    an incumbent, the run stops, or :data:`PLAN_FIRST_WAIT_S` pass."""
    ctx.ready()
    t_end = time.monotonic() + PLAN_FIRST_WAIT_S
    while time.monotonic() < t_end and not ctx.should_stop() and ctx.incumbent()[1] is None:
        time.sleep(0.05)


#: the exact MIP job hands its CPU to the LNS (:func:`_lns_loop`) once the spectral bound exceeds
#: the MIP's own bound by more than :data:`SPECTRAL_MARGIN` (communication matters: the MIP's
#: bound is not the one that certifies such runs, and its search is beaten by the LNS), but not
#: before this share of the job's budget (a full-MIP incumbent to start from; a head start)
LNS_AFTER_SHARE = 0.2
#: every window tried from the incumbent: the full MIP, hinted with it, runs for this long (doubling
#: while it finds nothing better), then the LNS goes on from what it found
HINTED_MIP_S = 4.0
#: the LNS counts as stalled, when asked to yield, after this many hinted-MIP slices in a row
#: without a better partition (4 s + 8 s with windows: every window tried, then 12 s more)
STALLED_AFTER = 2


def _exact_job(problem: PipelineProblem, k: int, spec: dict[str, Any], ctx: Any, budget: float,
               common: dict[str, Any], num_workers: int, constraints: Constraints | None,
               searcher: tuple[PipelineProblem, Any]) -> None:
    """The exact MIP (bound and partitions) with the spectral bound next to it; on
    communication-heavy graphs without a memory limit (see :data:`LNS_AFTER_SHARE`) it then
    becomes the LNS loop, on ``searcher`` (the original graph and context where ``problem``
    and ``ctx`` are the contracted ones)."""
    from gapstop.problems.pipeline import bounds

    t0 = time.monotonic()
    head_s = float(spec.get("head_start_s", 0.0))
    if constraints is not None and constraints.all_chips:
        if prove_existence(problem, constraints, ctx, EXISTENCE_SHARE * budget) == "infeasible":
            return  # nothing to bound, nothing to find
        budget = max(0.0, budget - (time.monotonic() - t0))
    if bounds.model_too_large(problem, k) is not None:
        # the bound says why in ``bounds``; the spectral bound (and those after it) still run
        ctx.bound(bounds.exact_bound(problem, k, budget))
        _spectral_alongside(problem, k, ctx, budget).join()
        return
    proven = threading.Event()  # the MIP proved optimality: the spectral bound has nothing left to add
    seen: dict[str, float] = {"spectral": -math.inf, "exact": -math.inf}
    spectral = _spectral_alongside(problem, k, _Watched(ctx, seen), budget, head_s, proven)
    _, inc = ctx.incumbent()
    hint = None if inc is None else inc["blocks"]
    # CP-SAT raises its bound in many tiny steps; only steps of 1e-4 go out live (the
    # final bound always does)
    report = live_bound(ctx, "exact", bounds.SOLVER, 1e-4)

    def on_event(ev: Any) -> None:
        if ev.kind == "incumbent" and ev.blocks is not None:
            ctx.solution({"blocks": list(ev.blocks)}, "exact-mip")
        if ev.bound is not None:
            seen["exact"] = max(seen["exact"], ev.bound)
        report(ev.bound)

    # the LNS models no MCM constraint; with a memory limit every restart of the model costs
    # Python seconds (its peak rows), and the model only bounds the peak: the MIP keeps going
    lns_ok = (constraints is None or not constraints.any) and problem.memory is None
    not_before = t0 + max(head_s, LNS_AFTER_SHARE * budget)

    def to_lns() -> bool:
        return (lns_ok and time.monotonic() >= not_before and math.isfinite(seen["exact"])
                and seen["spectral"] > (1.0 + SPECTRAL_MARGIN) * seen["exact"])

    # CP-SAT needs >= 2 threads for its portfolio (LNS included): with one it finds far
    # worse partitions (regal_000, k=16, 20 s: 3558 with 1 thread, 2136 with 2).
    common["num_workers"] = max(EXACT_MIN_THREADS, num_workers)
    if constraints is not None and constraints.any:
        common["constraints"] = constraints
    stop = common.pop("should_stop")
    b = bounds.exact_bound(problem, k, budget, hint=hint, on_event=on_event, on_solving=ctx.ready,
                           should_stop=lambda: stop() or to_lns(), **common)
    if b.status == "optimal":
        proven.set()
    ctx.bound(b)
    if b.status != "optimal" and not ctx.should_stop() and to_lns():
        from gapstop.problems.pipeline.lns import windows_pay

        graph, outer = searcher
        start = (b.detail or {}).get("blocks")
        if start is not None and isinstance(ctx, _Expanded):
            start = ctx.expand(start)
        # its hinted MIP's bounds go out from the original graph
        _lns_loop(graph, k, outer, common["random_seed"], common["num_workers"], _hinted_bounds(outer),
                  start, windows=windows_pay(graph, k),
                  yield_when_stalled=bool(spec.get("yield_when_stalled")))
    spectral.join()


def _lns_job(problem: PipelineProblem, k: int, spec: dict[str, Any], ctx: Any, seed: int, num_workers: int,
             constraints: Constraints | None) -> None:
    """The exact job's LNS loop on its own (the plan's fallback, :func:`bound_job_specs`): from
    the run's incumbent, until the run stops or, with ``spec["yield_when_stalled"]``, it stalls.
    Its hinted-MIP bounds go out as ``exact``. Nothing to do with a memory limit or MCM
    constraints, which the LNS does not model."""
    from gapstop.problems.pipeline.lns import windows_pay

    if problem.memory is not None or (constraints is not None and constraints.any):
        return
    # a seed of its own per turn, and the search goes on where the previous turn (the exact
    # job's LNS first) stalled: the windows were all tried from the incumbent, and the hinted
    # MIP's slices go on doubling; its long hinted solves are what finds the late gains
    # (regal_000, k = 4, 300 s: 7293 -> 7201 in slices of 64 s)
    turn = int(spec.get("turn", 0))
    _lns_loop(problem, k, ctx, seed + 7919 * (turn + 1), max(EXACT_MIN_THREADS, num_workers), _hinted_bounds(ctx),
              windows=windows_pay(problem, k), yield_when_stalled=bool(spec.get("yield_when_stalled")),
              hinted_from=STALLED_AFTER * (turn + 1))


def _hinted_bounds(ctx: Any) -> Callable[[Any], None]:
    """The LNS loop's ``on_event``: its hinted MIP's bounds go out through ``ctx`` as ``exact``
    (steps of 1e-4 live, as the exact MIP's); its partitions it reports itself, as ``mip-hinted``."""
    from gapstop.problems.pipeline import bounds

    report = live_bound(ctx, "exact", bounds.SOLVER, 1e-4)
    return lambda ev: report(ev.bound)


@functools.lru_cache(maxsize=4)
def _contraction(problem: PipelineProblem) -> Contraction:
    return contract(problem)   # milliseconds, once per problem object and process


class _Expanded:
    """``ctx`` for a job run on a contracted graph: partitions go out expanded to the original
    nodes (same cost), the run's incumbent comes in projected onto the merged ones (at most its
    cost), and bounds are nudged down to cover the merged nodes' float sums of work."""

    def __init__(self, ctx: Any, merged: Contraction) -> None:
        self._ctx, self._merged = ctx, merged

    def expand(self, blocks: Any) -> list[int]:
        return self._merged.expand(blocks).tolist()

    def bound(self, b: Bound) -> None:
        detail = b.detail
        if detail and detail.get("blocks") is not None:
            detail = {**detail, "blocks": self.expand(detail["blocks"])}
        self._ctx.bound(dataclasses.replace(b, value=nudge_down(b.value, len(self._merged.group)), detail=detail))

    def solution(self, solution: Any, source: str) -> None:
        # the jobs on a merged graph report partitions only (the LNS, whose partitions carry a
        # schedule, keeps the original graph); the evaluator schedules the expanded stages
        self._ctx.solution({"blocks": self.expand(solution["blocks"])}, source)

    def incumbent(self) -> tuple[float | None, Any]:
        cost, sol = self._ctx.incumbent()
        if sol is None:
            return cost, sol
        return cost, {"blocks": self._merged.project(sol["blocks"]).tolist()}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


class _Watched:
    """``ctx`` that also records the best value of each bound method reported through it."""

    def __init__(self, ctx: Any, seen: dict[str, float]) -> None:
        self._ctx, self._seen = ctx, seen

    def bound(self, b: Bound) -> None:
        if math.isfinite(b.value):
            self._seen[b.method] = max(self._seen.get(b.method, -math.inf), b.value)
        self._ctx.bound(b)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def _lns_loop(problem: PipelineProblem, k: int, ctx: Any, seed: int, num_workers: int,
              on_event: Any, start: list[int] | None = None, windows: bool = True,
              yield_when_stalled: bool = False, hinted_from: int = 0) -> None:
    """CP-SAT LNS (:class:`problems.pipeline.lns.StageLNS`) around the run's incumbent until
    the job stops: each round starts from the coordinator's incumbent when it beats the LNS's
    own (the islands' partitions included) and reports every gain, re-scored by the exact
    evaluator (``"mip-lns"``). When every window has been tried from the incumbent, the full
    MIP runs hinted with it (:data:`HINTED_MIP_S`, doubling while it finds nothing better;
    its partitions as ``"mip-hinted"``, its bounds as ``exact``). ``start``: a partition to
    begin from while the job has no incumbent from the run (the MIP's last one). Without
    ``windows`` (stages too large for them: :func:`problems.pipeline.lns.windows_pay`) only the
    hinted MIP runs, in the same slices, each from the run's incumbent then. With
    ``yield_when_stalled`` it returns once the hinted MIP has found nothing better twice in a
    row (:data:`STALLED_AFTER`). ``hinted_from`` > 0: a later turn of the same search, which
    goes on where the previous one stalled: the hinted MIP first, its first slice
    ``2 ** hinted_from`` times the base one, and the windows only from a better partition."""
    from gapstop.problems.pipeline import bounds
    from gapstop.problems.pipeline.lns import StageLNS

    lns = StageLNS(problem, k, np.random.default_rng(np.random.SeedSequence([seed, 11])), num_workers=num_workers)
    # without windows the hinted MIP is the whole search: longer slices, fewer restarts
    base_s = HINTED_MIP_S if windows else 2 * HINTED_MIP_S
    hinted_s = base_s * 2 ** hinted_from
    failed = 0   # hinted-MIP slices in a row without a better partition

    def hinted_event(ev: Any) -> None:
        if ev.kind == "incumbent" and ev.blocks is not None:
            ctx.solution({"blocks": list(ev.blocks)}, "mip-hinted")
        elif ev.kind == "bound":
            on_event(ev)

    if start is not None:
        lns.reset(start)
    # a graph too large for the full MIP: windows only, and the loop ends once they are all tried
    hinted_ok = bounds.model_too_large(problem, k) is None
    if not hinted_ok and not windows:
        return
    skip_windows = hinted_from > 0 and hinted_ok   # until the partition changes
    while not ctx.should_stop():
        cost, sol = ctx.incumbent()
        if sol is not None and (lns.current is None or cost < lns.current.objective * (1.0 - 1e-12)):
            if lns.current is not None:
                skip_windows = False
            lns.reset(sol["blocks"], sol.get("order"))
        if lns.current is None:
            return  # nothing to start from
        if not hinted_ok and lns.exhausted:
            return
        if not windows or skip_windows or lns.exhausted:
            before = lns.current.objective
            b = bounds.exact_bound(problem, k, min(hinted_s, ctx.time_left()), hint=lns.current.blocks.tolist(),
                                   on_event=hinted_event, num_workers=num_workers, random_seed=seed,
                                   should_stop=ctx.should_stop)
            ctx.bound(b)
            blocks = (b.detail or {}).get("blocks")
            if blocks is not None:
                from gapstop.problems.pipeline.evaluate import evaluate

                if evaluate(problem, blocks, k=k).objective < before:
                    lns.reset(blocks)
                    hinted_s, failed, skip_windows = base_s, 0, False
                    continue
            hinted_s *= 2
            failed += 1
            if yield_when_stalled and failed >= STALLED_AFTER:
                return
            continue
        for m in lns.run(1.0, ctx.should_stop):
            if m.improved is not None:
                ctx.solution({"blocks": m.improved.blocks.tolist(), "order": m.improved.order.tolist()}, "mip-lns")


def _spectral_alongside(problem: PipelineProblem, k: int, ctx: Any, budget: float,
                        delay_s: float = 0.0, proven: threading.Event | None = None) -> threading.Thread:
    """Start the spectral bound in a thread next to the exact MIP, not before it: it takes
    seconds and is strong where the MIP's bound is weak (communication-heavy graphs), but
    must not delay a MIP that proves optimality within seconds. Where communication
    matters, the heaviest-block bound (the end-blocks bound at small k) follows it in the same
    thread; above that k the end-blocks bound follows heaviest-block where that one stays at or
    under the spectral bound; the block-cover bound comes last. ``delay_s``: wait this long first
    (the MIP's head start), unless the run stops. Once ``proven`` is set the thread ends at once
    (the job then ends without waiting for the driver's stop)."""
    from gapstop.problems.pipeline import bounds

    report = live_bound(ctx, "spectral", "eigenvalues", 1e-3)
    t_start = time.monotonic() + delay_s
    proven = proven if proven is not None else threading.Event()

    def should_stop() -> bool:
        return proven.is_set() or ctx.should_stop()

    def work() -> None:
        while time.monotonic() < t_start:
            if should_stop():
                return
            proven.wait(min(0.05, max(0.0, t_start - time.monotonic())))
        budget_left = budget - delay_s
        if budget_left <= 0 or should_stop():
            return
        # one BLAS thread (process-wide; nothing else in the job uses BLAS): next to the MIP's
        # two solver threads, OpenBLAS's second thread made lstm_lm_unrolled's eigendecompositions
        # erratic (6-34 s instead of 4-6 s), and a late final value cancels the head start's
        # extension (docs/decisions/0001-exact-mip-head-start.md)
        with threadpool_limits(limits=1, user_api="blas"):
            sp = bounds.spectral_bound(problem, k, min(budget_left, SPECTRAL_MAX_S), should_stop=should_stop,
                                       on_improve=report)
        ctx.bound(sp)

        def left() -> float:
            return budget - (time.monotonic() - t_start) - delay_s

        def next_bound(method: str, cap_s: float, floor: float) -> float:
            """The next bound of this thread, for at most ``cap_s`` of the time left, reported."""
            b = bounds.lower_bound(problem, k, method, min(left(), cap_s), num_workers=1, should_stop=should_stop,
                                   floor=floor, on_improve=live_bound(ctx, method, bounds.SOLVER, 1e-4))
            ctx.bound(b)
            return b.value

        if should_stop() or left() <= 0 or sp.value <= (1.0 + SPECTRAL_MARGIN) * bounds.simple_bound(problem, k).value:
            return
        # communication matters (the spectral bound is well above the closed forms): the
        # heaviest-block bound beat it by 2-8 % at k = 8 and 16 on the REGAL-style graphs, in
        # seconds of one CP-SAT worker (docs/decisions/0010-heaviest-block-bound.md)
        method, cap_s = (("end-blocks", END_BLOCKS_MAX_S) if 3 <= k <= END_BLOCKS_MAX_K
                         else ("heaviest-block", HEAVIEST_MAX_S))
        best = max(sp.value, next_bound(method, cap_s, sp.value))
        if should_stop() or left() <= 1.0:
            return
        if method == "heaviest-block" and best <= sp.value:
            # no block of a weighting's k-th is dearer than the spectral bound, but where the cheap
            # ones are ends (down-sets that receive nothing, up-sets that send nothing) the middle
            # blocks must hold more: alone at k = 16 from the spectral bound, the end-blocks bound
            # rose above it on 6 of 11 such REGAL-style graphs (up to 3.3 %); in 60 s runs it raised
            # regal_005 and regal_009 by 1.0 and 1.3 %, where block-cover had refuted nothing, and
            # left block-cover's bound where it had one (docs/decisions/0009-end-blocks-bound.md)
            best = max(best, next_bound("end-blocks", END_BLOCKS_MAX_S, sp.value))
            if should_stop() or left() <= 1.0:
                return
        # the partitioning LP dominates the heaviest block: alone for 40 s it rose above it by up to 7 %
        # on REGAL-style graphs at k = 4, 8 and 16; where it refutes nothing its climb ends within
        # two caps (docs/decisions/0011-block-cover-bound.md)
        next_bound("block-cover", math.inf, best)

    th = threading.Thread(target=work, name="spectral-bound", daemon=True)
    th.start()
    return th
