"""One intra-op search worker for the distributed runner: its share of the weight scales.

Island ``index`` of ``n_islands`` probes the log-spaced uniform weights
0.1, 1, 10, 100 (then 10^3 ... 10^6 while none of its own is feasible) assigned
to it round-robin, each as an adaptive :class:`~problems.intraop.penalty.PenaltySearch`
with its own seed, then spends its time mostly on its best search, giving every
fourth slice to the others in turn (a search started elsewhere can overtake).
Its best solution is polished by pair-table moves at most every ``polish_every_s``.
Knows nothing of Ray: the search worker actor calls :meth:`step`.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from problems.intraop import repair as greedy
from problems.intraop.evaluate import evaluate
from problems.intraop.penalty import Found, PenaltySearch
from problems.intraop.relaxed import Prepared
from problems.intraop.runner import FIRST_SCALES, MORE_SCALES


class IntraopIsland:
    def __init__(self, prep: Prepared, seed: int, index: int = 0, n_islands: int = 1, *,
                 slice_s: float = 0.5, polish_every_s: float = 10.0) -> None:
        scales = list(FIRST_SCALES + MORE_SCALES)
        mine = scales[index % len(scales)::max(1, n_islands)] or [scales[index % len(scales)]]
        self.first = [w for w in mine if w in FIRST_SCALES] or mine[:1]
        self.more = [w for w in mine if w not in self.first]
        streams = np.random.SeedSequence([seed, index]).spawn(len(mine))
        self.seeds = {w: int(s.generate_state(1)[0]) for w, s in zip(mine, streams)}
        self.prep = prep
        self.slice_s = slice_s
        self.polish_every_s = polish_every_s
        self.searches: list[PenaltySearch] = []
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
            for w in group:
                if any(s.weight_scale_start == w for s in self.searches) or time.monotonic() >= deadline:
                    continue
                s = PenaltySearch(self.prep, w, self.seeds[w])
                s.weight_scale_start = w  # type: ignore[attr-defined]
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
            ranked = sorted(self.searches, key=lambda s: s.best().cost if s.best() else 2 ** 200)
            self._turn += 1
            s = ranked[0] if self._turn % 4 or len(ranked) == 1 else ranked[1 + (self._turn // 4) % (len(ranked) - 1)]
            for f in s.step(min(self.slice_s, max(0.01, deadline - time.monotonic()))):
                self._offer(f, on_improvement)
        if (self.best is not None and self.best.cost != self._polished_cost
                and time.monotonic() - self._last_polish >= self.polish_every_s):
            self._polish(on_improvement)
        return sum(s.iterations for s in self.searches) - before

    def _polish(self, report: Callable[[Any, Any], None]) -> None:
        assert self.best is not None
        self._last_polish = time.monotonic()
        sol = np.array(self.best.solution, dtype=np.int64)
        greedy.improve(greedy.UsageTracker(self.prep), sol, pairs=3)
        ev = evaluate(self.prep.problem, sol)
        if ev.feasible and ev.cost is not None and ev.cost < self.best.cost:
            self._offer(Found(ev.cost, sol, -1, 0.0), report)
        self._polished_cost = self.best.cost
