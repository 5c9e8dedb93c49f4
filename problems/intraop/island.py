"""One intra-op search island: its share of the weight scales.

Island ``index`` of ``n_islands`` probes the (weight scale, solver variant) pairs
assigned to it round-robin: uniform weights 0.1, 1, 10, 100 (then 10^3 ... 10^6
while none of its own is feasible, following the contest winner), each solver
variant of :data:`VARIANTS`, each as an adaptive :class:`~problems.intraop.penalty.PenaltySearch` with its own
seed; once each has made :data:`PROBE_ITERATIONS` iterations, every other slice goes to the
leading search (while it has improved in its last :data:`LEADER_STALL` iterations) and the rest
go round-robin to every search still in the race. Told the run's time left
(:meth:`IntraopIsland.set_time_left`), the island halves the race by successive halving: each
stage lasts :data:`STAGE_SHARE` of the time left, then the worse half drops out.
Its best solution is polished by pair-table moves at most every ``polish_every_s``, and at once in
the run's last :data:`FINAL_POLISH_S` seconds (so that the run ends on a polished solution).
(A search from Lagrangian usage prices runs in the Lagrangian bound job instead:
:mod:`problems.intraop.jobs`.) Knows nothing of threads or Ray: the solve loop's island
worker (:func:`engine.workers.run_island`) calls :meth:`step`.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from gapstop.engine import cancel
from gapstop.problems.intraop import repair as greedy
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.penalty import Found, PenaltySearch
from gapstop.problems.intraop.relaxed import Prepared

#: Initial uniform weights tried first, and the escalation while nothing is feasible.
FIRST_SCALES = (0.1, 1.0, 10.0, 100.0)
MORE_SCALES = (1e3, 1e4, 1e5, 1e6)
#: Search variants started at every scale: full relaxed solves, and shorter ones that update the
#: weights more often (clearly better on instance A, slightly worse on M and S in 40 s runs).
VARIANTS: dict[str, dict[str, Any]] = {
    "deep": {},
    "quick": {"solve_options": {"patience": 2, "max_sweeps": 20}},
}


#: Every search started makes this many iterations, the least advanced first, before the island
#: ranks them by cost. Ranked after one iteration, the searches whose weights fell fastest led: on
#: instance C a search started at weight 10 that lowered them into a 115e9 trap (1.37 x the best
#: known cost) took three quarters of the time, while those started at 1 reached 85e9.
PROBE_ITERATIONS = 15

#: Iterations without a new best (two of the search's restart cycles) after which the leading
#: search no longer gets every other slice: all the racers share them evenly until it improves
#: again. (With three quarters of the slices to the leader, a stalled leader can hold most of a
#: run: on instance S one sat at the same cost from 56 s to 217 s of 240 s.)
LEADER_STALL = 60

#: Each successive-halving stage's share of the time left. A search started at a high weight
#: needs some 40 iterations to lower its weights to where its solutions compete (on instance S one
#: from weight 100 is at 1.057 x the best known cost after the 15 probe iterations and among the
#: best after about 40); ranked on cost alone it would be starved, while the first
#: stage's round-robin gives every search an eighth of half the run before any drops out.
STAGE_SHARE = 0.5


#: In the run's last this many seconds (or twice the last polish's duration, if longer) every new
#: best is polished at once, not only ``polish_every_s`` after the last polish, within the time left:
#: a best found shortly before the end went out unpolished (instance A at 60 s: 6548774006, where
#: the pair moves give 6548774002 in one pass of about 1.2 s).
FINAL_POLISH_S = 3.0


class IntraopIsland:
    def __init__(self, prep: Prepared, seed: int, index: int = 0, n_islands: int = 1, *,
                 slice_s: float = 0.5, polish_every_s: float = 10.0, probe_iterations: int | None = None) -> None:
        # (weight scale, solver variant) pairs
        keys = [(w, v) for w in FIRST_SCALES + MORE_SCALES for v in VARIANTS]
        mine = keys[index % len(keys)::max(1, n_islands)] or [keys[index % len(keys)]]
        self.first = [key for key in mine if key[0] in FIRST_SCALES] or mine[:1]
        self.more = [key for key in mine if key not in self.first]
        streams = np.random.SeedSequence([seed, index]).spawn(len(mine))
        self.seeds = {key: int(s.generate_state(1)[0]) for key, s in zip(mine, streams)}
        self.prep = prep
        self.slice_s = slice_s
        self.probe_iterations = PROBE_ITERATIONS if probe_iterations is None else probe_iterations
        self.polish_every_s = polish_every_s
        self.searches: list[PenaltySearch] = []
        self._started: set[tuple[float, str]] = set()
        self.best: Found | None = None
        self._turn = 0
        self._last_polish = time.monotonic()
        self._polished_cost: int | None = None
        self._polish_s = 0.0  # how long the last polish took
        self._end: float | None = None  # the run's deadline (monotonic), once told
        self._stage_end: float | None = None
        self.racing: list[PenaltySearch] = []  # the searches still in the race (after the probe)
        self._rr = 0
        self._entered = 0

    def set_time_left(self, seconds: float) -> None:
        """The run ends in ``seconds`` (inf: no limit, no stages)."""
        self._end = time.monotonic() + seconds if np.isfinite(seconds) else None

    def _offer(self, f: Found | None, report: Callable[[Any, Any], None]) -> None:
        if f is not None and (self.best is None or f.cost < self.best.cost):
            self.best = f
            report(f.cost, f)

    def _probe(self, report: Callable[[Any, Any], None], deadline: float) -> None:
        for group in (self.first, self.more):
            for key in group:
                if key in self._started or time.monotonic() >= deadline:
                    continue
                w, variant = key
                s = PenaltySearch(self.prep, w, self.seeds[key], **VARIANTS[variant])
                self._started.add(key)
                self.searches.append(s)
                self._offer(s.iterate(), report)
            if self.best is not None:
                return

    def step(self, budget_s: float, on_improvement: Callable[[Any, Any], None],
             should_stop: Callable[[], bool] = lambda: False) -> int:
        """Search for about ``budget_s`` seconds; ``on_improvement(cost, Found)`` on each new island best.
        Returns the number of penalty iterations made."""
        deadline = time.monotonic() + budget_s
        before = sum(s.iterations for s in self.searches)
        if len(self.searches) < len(self.first) or (self.best is None and self.more):
            self._probe(on_improvement, deadline)
        while self.searches and not cancel.expired(deadline, time.monotonic) and not should_stop():
            young = min(self.searches, key=lambda s: s.iterations)
            if young.iterations < self.probe_iterations:
                for f in young.step(0.0):
                    self._offer(f, on_improvement)
                continue
            s = self._next()
            for f in s.step(min(self.slice_s, max(0.01, deadline - time.monotonic()))):
                self._offer(f, on_improvement)
        if self.best is not None and self.best.cost != self._polished_cost and self._polish_due():
            self._polish(on_improvement)
        return sum(s.iterations for s in self.searches) - before

    def _polish_due(self) -> bool:
        now = time.monotonic()
        if now - self._last_polish >= self.polish_every_s:
            return True
        return self._end is not None and self._end - now <= max(FINAL_POLISH_S, 2.0 * self._polish_s)

    def _next(self) -> PenaltySearch:
        """The search that gets the next slice (the probes done)."""
        if self._entered < len(self.searches):  # the probe just ended, or a search was started since
            self.racing += self.searches[self._entered:]
            self._entered = len(self.searches)
        now = time.monotonic()
        if self._end is not None and len(self.racing) > 1:
            if self._stage_end is None:
                self._stage_end = now + STAGE_SHARE * (self._end - now)
            elif now >= self._stage_end:
                keep = set(map(id, sorted(self.racing, key=self._rank)[:(len(self.racing) + 1) // 2]))
                self.racing = [s for s in self.racing if id(s) in keep]
                self._stage_end = now + STAGE_SHARE * (self._end - now)
        self._turn += 1
        lead = min(self.racing, key=self._rank)
        found = lead.best()
        if self._turn % 2 and found is not None and lead.iterations - found.iteration < LEADER_STALL:
            return lead
        self._rr += 1
        return self.racing[self._rr % len(self.racing)]

    def _rank(self, s: PenaltySearch) -> int:
        b = s.best()
        return b.cost if b is not None else 2 ** 200

    def _polish(self, report: Callable[[Any, Any], None]) -> None:
        assert self.best is not None
        self._last_polish = start = time.monotonic()
        # no pass of pair moves that would end after the run (the first always runs)
        deadline = None if self._end is None else time.perf_counter() + (self._end - start)
        sol = np.array(self.best.solution, dtype=np.int64)
        greedy.improve(greedy.UsageTracker(self.prep), sol, pairs=3, deadline=deadline)
        self._polish_s = time.monotonic() - start
        ev = evaluate(self.prep.problem, sol)
        if ev.feasible and ev.cost is not None and ev.cost < self.best.cost:
            self._offer(Found(ev.cost, sol, -1, 0.0), report)
        self._polished_cost = self.best.cost
