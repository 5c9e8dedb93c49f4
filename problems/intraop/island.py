"""One intra-op search island: its share of the weight scales.

Island ``index`` of ``n_islands`` probes the (weight scale, solver variant) pairs
assigned to it round-robin: uniform weights 0.1, 1, 10, 100 (then 10^3 ... 10^6
while none of its own is feasible, following the contest winner), each solver
variant of :data:`VARIANTS`, each as an adaptive :class:`~problems.intraop.penalty.PenaltySearch` with its own
seed; once each has made :data:`PROBE_ITERATIONS` iterations it spends its time mostly on its best search, giving every
fourth slice to the others in turn (a search started elsewhere can overtake), and, while that search has gone
:data:`LEADER_STALL` iterations without a new best of its own, shares the time evenly among the better half.
Its best solution is polished by pair-table moves at most every ``polish_every_s``.
(A search from Lagrangian usage prices runs in the Lagrangian bound job instead:
:mod:`problems.intraop.jobs`.) Knows nothing of threads or Ray: the solve loop's island
worker (:func:`engine.workers.run_island`) calls :meth:`step`.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

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
#: search no longer gets three quarters of the island's time: the better half of the searches
#: share it evenly until the leader improves again. Without this, on instance S the leader sat at
#: the same cost from 56 s to 217 s of a 240 s run while the others got a 28th of the time each.
LEADER_STALL = 60


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
        while self.searches and time.monotonic() < deadline and not should_stop():
            young = min(self.searches, key=lambda s: s.iterations)
            if young.iterations < self.probe_iterations:
                for f in young.step(0.0):
                    self._offer(f, on_improvement)
                continue
            ranked = sorted(self.searches, key=self._rank)
            self._turn += 1
            lead = ranked[0].best()
            if lead is not None and ranked[0].iterations - lead.iteration >= LEADER_STALL:
                top = ranked[:(len(ranked) + 1) // 2]
                s = top[self._turn % len(top)]
            else:
                s = ranked[0] if self._turn % 4 or len(ranked) == 1 else ranked[1 + (self._turn // 4) % (len(ranked) - 1)]
            for f in s.step(min(self.slice_s, max(0.01, deadline - time.monotonic()))):
                self._offer(f, on_improvement)
        if (self.best is not None and self.best.cost != self._polished_cost
                and time.monotonic() - self._last_polish >= self.polish_every_s):
            self._polish(on_improvement)
        return sum(s.iterations for s in self.searches) - before

    def _rank(self, s: PenaltySearch) -> int:
        b = s.best()
        return b.cost if b is not None else 2 ** 200

    def _polish(self, report: Callable[[Any, Any], None]) -> None:
        assert self.best is not None
        self._last_polish = time.monotonic()
        sol = np.array(self.best.solution, dtype=np.int64)
        greedy.improve(greedy.UsageTracker(self.prep), sol, pairs=3)
        ev = evaluate(self.prep.problem, sol)
        if ev.feasible and ev.cost is not None and ev.cost < self.best.cost:
            self._offer(Found(ev.cost, sol, -1, 0.0), report)
        self._polished_cost = self.best.cost
