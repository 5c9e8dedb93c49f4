"""In-process driver: several adaptive penalty searches on threads, best feasible kept.

Following the contest winner, searches start from globally uniform weights on
a log scale (0.1, 1, 10, 100; then 10^3 ... 10^6 while none is feasible), each
with its own seed and small random perturbations, and in two variants
(:data:`VARIANTS`). After this probing round the
searches that found a feasible solution share the time by successive halving
(the worse half stops after each stage) until ``workers`` of them run to the
time limit. Optionally (``recombine``), the best solution is then recombined
with the other searches' bests (:func:`~problems.intraop.lns.recombine`: the
nodes where they differ are solved exactly with CP-SAT) before the pair-move
polish. Kernels release the GIL, so threads run in parallel; a
distributed driver can wrap the same :class:`~problems.intraop.penalty.PenaltySearch`.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from queue import Empty, Queue
from typing import Any, Callable

import numpy as np

from gapstop.engine.local_runner import sigint_held
from gapstop.engine.records import Bound, Incumbent, relative_gap
from gapstop.problems.intraop import repair as greedy
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.lns import NeighbourhoodSearch, recombine
from gapstop.problems.intraop.model import IntraopProblem
from gapstop.problems.intraop.penalty import Found, PenaltySearch, run_until
from gapstop.problems.intraop.relaxed import Prepared, core_is_tiny, prepare

#: Initial uniform weights tried first, and the escalation while nothing is feasible.
FIRST_SCALES = (0.1, 1.0, 10.0, 100.0)
MORE_SCALES = (1e3, 1e4, 1e5, 1e6)
#: Search variants started at every scale: full relaxed solves, and shorter ones that update the
#: weights more often (clearly better on instance A, slightly worse on M and S in 40 s runs).
VARIANTS: dict[str, dict[str, Any]] = {
    "deep": {},
    "quick": {"solve_options": {"patience": 2, "max_sweeps": 20}},
}
#: Time kept at the end for moving pairs of nodes in the best solution (seconds, share of the limit).
POLISH_RESERVE_S = 3.0
POLISH_SHARE = 0.05
#: Share of the remaining time each successive-halving stage gets.
STAGE_SHARE = 0.5
#: Share of the time limit, before the polish, given to CP-SAT neighbourhood moves on the best solution.
#: Off by default: on instance A (60 s, 2 workers, seeds 0 and 1) giving them the last 30 % ended
#: at 1.00389 x best known against 1.00334-1.00339 without; the penalty searches still improve late,
#: and their solutions are already optimal over every neighbourhood of a few thousand nodes tried.
#: With components of same-kind ops first (queued by the searches' disagreement) still no gain at
#: 25 % (seeds 0, 4, 1: 1.00017, 1.00309, 1.00328 against 1.00018, 1.00309, 1.00304): the one
#: component move that takes A's 1.003 end states to 1.00018 (2,620 nodes) needs 11 s of CP-SAT.
LNS_SHARE = 0.0
#: Part of the polish reserve spent first on recombining the best solution with every search's best
#: (when ``recombine``). Off by default: on instance A (60 s, 2 workers, seeds 0 and 1) the final
#: disagreement sets had 2,900-6,800 nodes, which CP-SAT could not solve in the 1.5 s this leaves
#: (1.00322/1.00328 x best known on, 1.00322/1.00327 off).
RECOMBINE_POLISH_PART = 0.5
#: Share of the time limit taken from the searches' end for the same, and the most each stage boundary
#: may spend on it (from the next stage). Off by default: on instance A (60 s, 2 workers, seeds 0 and 1)
#: 0.1 plus stage boundaries ended at 1.00388 x best known against 1.00322 without; the searches gain
#: some 1e5 per second late in the run, recombination about 1e5 per pair taking 1-2 s.
RECOMBINE_SHARE = 0.0
RECOMBINE_STAGE_SHARE = 0.05
#: Share of the time limit (at most LAGRANGIAN_MAX_S seconds) one worker spends, after the probes,
#: searching Lagrangian multipliers for the usage limit (:func:`~problems.intraop.bounds.multiplier_weights`,
#: steps aimed at the incumbent); it then runs a penalty search started at the prices they put on each
#: node's usage, to the end. Off by default: at 0.15 on instance A (60 s, 2 workers, 12 runs) the runs
#: end at 1.000025-1.00036 x the best known cost (median 1.00025) against 1.00002-1.0031 (median
#: 1.00019, 11 runs) without, so it removes the bad end states but not the median; on M (180 s) it ended at
#: 1.000015 against 0.99993, and S was unchanged.
LAGRANGIAN_SHARE = 0.0
LAGRANGIAN_MAX_S = 10.0
#: Largest disagreement set solved in one CP-SAT model (larger ones go by connected components).
RECOMBINE_MAX_NODES = 4000


class _Best:
    """Thread-safe best-so-far; reports each strict improvement once.

    Every offered solution is re-scored by the exact evaluator (the searches' own
    costs are never trusted); an infeasible or malformed one is counted in
    :attr:`rejected` and dropped. ``stop`` is set when the searches must end (Ctrl-C, a
    failure): every loop of the run checks it, so the threads end within one search slice.
    """

    def __init__(self, problem: IntraopProblem, t0: float,
                 on_improvement: Callable[[Incumbent], None] | None) -> None:
        self.problem = problem
        self.lock = threading.Lock()
        self.t0 = t0
        self.inc: Incumbent | None = None
        self.first_feasible_s: float | None = None
        self.on_improvement = on_improvement
        self.rejected = 0
        self.stop = threading.Event()

    def offer(self, found: Found, source: str) -> None:
        with self.lock:
            if self.inc is not None and found.cost >= self.inc.cost:
                return  # a search that over-states its cost only loses its own report
        ev = evaluate(self.problem, found.solution)  # outside the lock: the other searches go on
        with self.lock:
            if not ev.feasible or ev.cost is None:
                self.rejected += 1
                return
            if self.inc is not None and ev.cost >= self.inc.cost:
                return
            t = time.perf_counter() - self.t0
            if self.first_feasible_s is None:
                self.first_feasible_s = t
            self.inc = Incumbent(cost=ev.cost, solution=np.asarray(found.solution).tolist(), source=source, t_s=t)
            if self.on_improvement is not None:
                self.on_improvement(self.inc)


def solve(problem: IntraopProblem, *, time_limit_s: float, seed: int = 0, workers: int = 1,
          on_improvement: Callable[[Incumbent], None] | None = None, prep: Prepared | None = None,
          slice_s: float = 1.0, max_iterations: int | None = None,
          search_options: dict[str, Any] | None = None, lns_share: float = LNS_SHARE,
          recombine: bool = False, recombine_share: float = RECOMBINE_SHARE,
          lagrangian_share: float = LAGRANGIAN_SHARE) -> dict[str, Any]:
    """Search for a cheap feasible assignment within ``time_limit_s`` seconds.

    Args:
        problem: the instance.
        time_limit_s: wall-clock budget including preparation (the first probing round
            always completes, so very small budgets may be exceeded by one solve per scale);
            the last ``min(3 s, 5 %)`` go to a pair-move polish of the best solution.
        seed: root seed; searches get independent streams from ``SeedSequence(seed)``.
        workers: searches run in parallel threads.
        on_improvement: called (under a lock, from any thread) with each new best
            :class:`~engine.records.Incumbent`; e.g. to write it to disk at once.
        prep: prepared structures, if already built.
        slice_s: how long a search runs between checks of the clock.
        max_iterations: stop each search after this many iterations (probe included);
            makes short runs deterministic for a given seed.
        search_options: extra keyword arguments for every :class:`PenaltySearch`.
        lns_share: share of the time limit (taken from the penalty searches' end, before the
            polish) for :class:`~problems.intraop.lns.NeighbourhoodSearch` moves on the best
            solution; 0 disables them, as does ``max_iterations``.
        recombine: recombine the best solution with each search's best in the first
            :data:`RECOMBINE_POLISH_PART` of the polish reserve; off with ``max_iterations``.
        recombine_share: share of the time limit (taken from the penalty searches' end, before
            the neighbourhood moves) for more of the same; when positive, stage boundaries of
            the successive halving recombine too (at most :data:`RECOMBINE_STAGE_SHARE` each).

    Every solution is re-scored by the exact evaluator before it is kept, reported or
    returned. Ctrl-C (KeyboardInterrupt in the main thread) stops every search within one
    slice and returns the best solution found, with ``stopped_because`` ``"interrupted"``.

    Returns:
        ``{"problem", "instance", "cost", "feasible", "solution", "lower_bound",
        "lower_bound_method", "gap", "elapsed_s", "stopped_because", "time_to_first_feasible_s",
        "iterations", "workers", "seed", "rejected_solutions"}``; cost and solution are None
        when nothing feasible was found. ``lower_bound`` is computed only where it is exact and
        cheap (no usage limit and a core small enough for variable elimination: the
        ``unconstrained`` bound); ``stopped_because`` is ``"optimal"`` only when it equals the cost.
    """
    t0 = time.perf_counter()
    end = t0 + time_limit_s
    lns_end = end - min(POLISH_RESERVE_S, POLISH_SHARE * time_limit_s)
    if max_iterations is not None:
        lns_share = recombine_share = 0.0
        recombine = False
    recombine_end = lns_end - lns_share * time_limit_s
    deadline = recombine_end - recombine_share * time_limit_s
    best = _Best(problem, t0, on_improvement)
    workers = max(1, int(workers))
    searches: list[PenaltySearch] = []
    active: list[PenaltySearch] = []
    proof: Bound | None = None
    interrupted = False
    try:
        prep = prep if prep is not None else prepare(problem)
        pool = ThreadPoolExecutor(max_workers=workers)
        try:
            proof, active = _search(prep, best, pool, searches, workers=workers, seed=seed, deadline=deadline,
                                    slice_s=slice_s, max_iterations=max_iterations, search_options=search_options,
                                    time_limit_s=time_limit_s, recombine_share=recombine_share,
                                    lagrangian_share=lagrangian_share)
        except KeyboardInterrupt:
            interrupted = True
            best.stop.set()
        finally:
            best.stop.set()  # whatever ended the searches (a failure too), none runs on to the deadline
            with sigint_held():  # they end within a slice; their best must not be lost meanwhile
                pool.shutdown(wait=True, cancel_futures=True)
        settled = proof is not None and best.inc is not None and proof.value == best.inc.cost
        if not interrupted and not settled:
            if (recombine or recombine_share > 0) and best.inc is not None:
                last = recombine_end
                if recombine and lns_share == 0:  # nothing runs between here and the polish, so share its reserve
                    last = lns_end + RECOMBINE_POLISH_PART * (end - lns_end)
                _recombine_with(prep, best, searches, last, workers, seed)
            if (lns_share > 0 and best.inc is not None and max_iterations is None
                    and time.perf_counter() < lns_end):
                _neighbourhood_moves(prep, best, lns_end, workers, seed, [s.best() for s in searches])
            if best.inc is not None and max_iterations is None and time.perf_counter() < end:
                _polish(prep, best, end)
    except KeyboardInterrupt:
        interrupted = True
        best.stop.set()
    iterations = sum(s.iterations for s in searches)
    elapsed = time.perf_counter() - t0
    inc = best.inc
    if interrupted:
        stopped = "interrupted"
    elif proof is not None and inc is not None and proof.value == inc.cost:
        stopped = "optimal"  # integer costs: optimal means the proven bound equals the cost
    elif max_iterations is not None and active and all(s.iterations >= max_iterations for s in active):
        stopped = "iteration-limit"
    else:
        stopped = "time-limit"
    if inc is None:
        stopped = f"no-feasible-solution ({stopped})"
    lb = None if proof is None or not math.isfinite(proof.value) else proof.value
    return {"problem": "intraop", "instance": problem.name, "cost": None if inc is None else inc.cost,
            "feasible": inc is not None, "solution": None if inc is None else inc.solution,
            "lower_bound": lb, "lower_bound_method": None if lb is None else proof.method,
            "gap": None if inc is None else relative_gap(inc.cost, lb), "elapsed_s": round(elapsed, 3),
            "stopped_because": stopped, "time_to_first_feasible_s": best.first_feasible_s,
            "iterations": iterations, "workers": workers, "seed": seed, "rejected_solutions": best.rejected}


def _search(prep: Prepared, best: _Best, pool: ThreadPoolExecutor, searches: list[PenaltySearch], *,
            workers: int, seed: int, deadline: float, slice_s: float, max_iterations: int | None,
            search_options: dict[str, Any] | None, time_limit_s: float, recombine_share: float,
            lagrangian_share: float) -> tuple[Bound | None, list[PenaltySearch]]:
    """The probes, the exact bound where it is cheap, then the searches to ``deadline``.

    Appends every search to ``searches`` (also when interrupted). Returns the proven
    bound (only where the core is solved exactly without a usage limit: the exact
    unconstrained optimum) and the searches that ran to the end.
    """
    problem = prep.problem
    keys = [(w0, v) for w0 in FIRST_SCALES + MORE_SCALES for v in VARIANTS]
    seeds = {key: int(ss.generate_state(1)[0]) for key, ss in zip(keys, np.random.SeedSequence(seed).spawn(len(keys)))}
    names: dict[int, str] = {}

    def probe(key: tuple[float, str]) -> PenaltySearch | None:
        if best.stop.is_set():
            return None
        w0, variant = key
        opts = {**(search_options or {}), **VARIANTS[variant]}
        opts["solve_options"] = {**(search_options or {}).get("solve_options", {}),
                                 **VARIANTS[variant].get("solve_options", {})}
        s = PenaltySearch(prep, w0, seeds[key], **opts)
        names[id(s)] = f"penalty-{variant}-w{w0:g}"
        found = s.iterate()
        if found is not None:
            best.offer(found, names[id(s)])
        return s

    def rank(s: PenaltySearch) -> tuple[bool, int]:
        b = s.best()
        return (b is None, 0 if b is None else b.cost)

    for group in (FIRST_SCALES, MORE_SCALES):
        searches += [s for s in pool.map(probe, [(w0, v) for w0 in group for v in VARIANTS]) if s is not None]
        if best.inc is not None or time.perf_counter() >= deadline:
            break
    ranked = sorted(searches, key=rank)
    proof = None
    if _exact_unconstrained(prep):
        # the probes minimise cost plus a usage penalty, so their best is optimal only if it
        # meets the exact optimum (variable elimination of the whole tiny core)
        from gapstop.problems.intraop.bounds import lower_bound

        proof = lower_bound(problem, "unconstrained", max(0.1, deadline - time.perf_counter()))
        if proof.status != "relaxation-optimal" or not isinstance(proof.value, int):
            proof = None
        elif best.inc is not None and proof.value == best.inc.cost:
            return proof, ranked[:workers]
    if max_iterations is not None:
        list(pool.map(lambda s: _iterate_until(s, max_iterations, deadline, best, names[id(s)]),
                      ranked[:workers]))
    else:
        feasible = [s for s in ranked if s.best() is not None]

        def between_stages(stopped: list[PenaltySearch]) -> None:
            if recombine_share > 0:
                budget = min(RECOMBINE_STAGE_SHARE * time_limit_s, deadline - time.perf_counter())
                _recombine_with(prep, best, stopped, time.perf_counter() + budget, workers, seed)

        seeded = None
        if lagrangian_share > 0 and workers >= 2 and problem.usage_limit is not None:
            budget = min(LAGRANGIAN_MAX_S, lagrangian_share * time_limit_s)
            seeded = pool.submit(_lagrangian_search, prep, best, budget, deadline, seeds[keys[0]] + 1,
                                 searches, names)
        _successive_halving(pool, feasible or ranked[:workers], workers - (seeded is not None), deadline,
                            best, names, slice_s, between_stages)
        if seeded is not None:
            seeded.result()
    return proof, ranked[:workers]


def _exact_unconstrained(prep: Prepared) -> bool:
    """True when one relaxed solve is provably optimal: no usage limit and an exactly solved core."""
    return prep.problem.usage_limit is None and core_is_tiny(prep)


def _polish(prep: Prepared, best: _Best, end: float) -> None:
    """Pair-table moves on the incumbent; offered back if strictly cheaper."""
    assert best.inc is not None
    sol = np.array(best.inc.solution, dtype=np.int64)
    greedy.improve(greedy.UsageTracker(prep), sol, pairs=3, deadline=end)
    ev = evaluate(prep.problem, sol)
    if ev.feasible and ev.cost is not None and ev.cost < best.inc.cost:
        best.offer(Found(ev.cost, sol, -1, 0.0), "pair-polish")


def _neighbourhood_moves(prep: Prepared, best: _Best, end: float, workers: int, seed: int,
                         found: list[Found | None]) -> None:
    """CP-SAT neighbourhood moves on the incumbent until ``end``; each improvement is offered.
    Components of same-kind ops go first, those where the searches' bests (``found``) disagree
    with the incumbent most at the front."""
    assert best.inc is not None
    lns = NeighbourhoodSearch(prep, np.array(best.inc.solution, dtype=np.int64), seed, workers=workers)
    lns.prioritize([f.solution for f in found if f is not None])
    while (left := end - time.perf_counter()) > 0.05:
        for cost, sol in lns.step(min(left, 1.0)):
            best.offer(Found(cost, sol, -1, 0.0), "cpsat-lns")


def _recombine_with(prep: Prepared, best: _Best, searches: list[PenaltySearch], end: float, workers: int,
                    seed: int) -> None:
    """Recombine the incumbent with each search's best (cheapest first) until ``end``; offer improvements."""
    found = sorted((f for f in (s.best() for s in searches) if f is not None), key=lambda f: f.cost)
    for i, f in enumerate(found):
        left = end - time.perf_counter()
        if left < 0.2 or best.inc is None:
            return
        inc = np.array(best.inc.solution, dtype=np.int64)
        if np.array_equal(inc, f.solution):
            continue
        sol, res = recombine(prep, inc, f.solution, time_limit_s=left, max_nodes=RECOMBINE_MAX_NODES,
                             workers=workers, seed=seed + i, cost_a=best.inc.cost, cost_b=f.cost)
        if res.cost < best.inc.cost:
            best.offer(Found(res.cost, sol, -1, 0.0), "recombine")


def _lagrangian_search(prep: Prepared, best: _Best, budget_s: float, deadline: float, seed: int,
                       searches: list[PenaltySearch], names: dict[int, str]) -> None:
    """Lagrangian multipliers for ``budget_s``, then a penalty search from their usage prices until ``deadline``."""
    from gapstop.problems.intraop.bounds import multiplier_weights
    budget_s = min(budget_s, deadline - time.perf_counter())
    if budget_s <= 0:
        return
    # the steps aim at the incumbent, which the other workers keep lowering meanwhile
    w = multiplier_weights(prep.problem, budget_s, upper_bound=lambda: None if best.inc is None else best.inc.cost)
    if w is None:
        return
    s = PenaltySearch(prep, w, seed, jitter=0.0)
    names[id(s)] = "penalty-lagrangian"
    searches.append(s)
    run_until(s, deadline, lambda f: best.offer(f, names[id(s)]), should_stop=best.stop.is_set)


def _iterate_until(s: PenaltySearch, max_iterations: int, deadline: float, best: _Best, name: str) -> None:
    while s.iterations < max_iterations and time.perf_counter() < deadline and not best.stop.is_set():
        found = s.iterate()
        if found is not None:
            best.offer(found, name)


def _successive_halving(pool: ThreadPoolExecutor, active: list[PenaltySearch], workers: int, deadline: float,
                        best: _Best, names: dict[int, str], slice_s: float,
                        between_stages: Callable[[list[PenaltySearch]], None] | None = None) -> None:
    """Share the time among ``active`` round-robin; after each stage keep the better half.

    A stage lasts :data:`STAGE_SHARE` of the remaining time; once at most ``workers``
    searches are left they run to the deadline. ``between_stages`` is called with the
    searches of a finished stage (all paused) before the worse half is dropped. Searches started from different
    weight scales end up in different places, so a portfolio beats betting on the
    best probe alone.
    """
    while True:
        now = time.perf_counter()
        if now >= deadline or best.stop.is_set():
            return
        final = len(active) <= workers
        end = deadline if final else now + STAGE_SHARE * (deadline - now)
        queue: Queue[PenaltySearch] = Queue()
        for s in active:
            queue.put(s)

        def worker() -> None:
            while True:
                left = end - time.perf_counter()
                if left <= 0 or best.stop.is_set():
                    return
                try:
                    s = queue.get_nowait()
                except Empty:
                    return
                for f in s.step(min(slice_s, left)):
                    best.offer(f, names[id(s)])
                queue.put(s)

        list(pool.map(lambda _: worker(), range(min(workers, len(active)))))
        if final:
            return
        if between_stages is not None:
            between_stages(active)
        active = sorted(active, key=lambda s: s.best().cost if s.best() else 2**200)
        active = active[:max(workers, (len(active) + 1) // 2)]
