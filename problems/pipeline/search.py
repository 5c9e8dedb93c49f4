"""Key-based searches for MTPP: decoders plugged into the engine's ask/tell algorithms.

* :func:`mla_seeds`: BRKGA on the (weighted) minimum-linear-arrangement objective of
  Kahn orders (Archer et al. 2024, App. C.1); its best key vectors seed the main search.
* :class:`PipelineSearch`: one island = a BRKGA population (plus a share of random-T
  samples) decoded by Kahn + SliceGraph, stepped for a time budget at a time. The same
  object runs in-process or inside a Ray actor.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.engine import cancel
from gapstop.engine.brkga import BRKGA
from gapstop.engine.driver import run_ask_tell
from gapstop.engine.search import KeyBatch, RandomKeys
from gapstop.problems.pipeline import _kernels
from gapstop.problems.pipeline.decoder import SliceDecoder, Split
from gapstop.problems.pipeline.model import PipelineProblem


#: longest time of each of :func:`mla_seeds`' two searches: 25 generations of 40 take 40 ms on
#: 514 nodes but about 20 s on 100,000 (one Kahn order per chromosome); then they stop early
MLA_MAX_S = 1.0


def mla_seeds(problem: PipelineProblem, rng: np.random.Generator, *, population: int = 40,
              generations: int = 25, max_s: float = MLA_MAX_S) -> NDArray[np.float64]:
    """Two key vectors: the best found for mla and for mla-weighted, shape (2, n). Each search
    stops after ``max_s`` seconds (between generations), so only large graphs see the clock."""
    out = []
    for weighted in (False, True):
        ga = BRKGA(problem.n, rng, population=population)

        def score(batch: KeyBatch, weighted: bool = weighted) -> NDArray[np.float64]:
            return _kernels.mla_batch(np.ascontiguousarray(batch.keys), weighted, problem.size_out,
                                      problem.succ_ptr, problem.succ, problem.pred_ptr, problem.bandwidth)

        t_end = time.monotonic() + max_s
        run_ask_tell(ga, score, lambda: time.monotonic() >= t_end, max_evals=population * generations)
        out.append(ga.best()[1])
    return np.array(out)


#: the island's time share of the LNS where stage windows pay, and where they are large
#: (:func:`problems.pipeline.lns.windows_pay`)
LNS_SHARE = 0.6
LNS_SHARE_LARGE = 0.2
#: the island's time share of simulated annealing (:mod:`problems.pipeline.anneal`) on graphs
#: without a memory limit; the LNS shares the rest. Once the annealer has gone
#: ANNEAL_STALL_RESTARTS restarts without a gain its share is ANNEAL_SHARE_STALLED, until the
#: island's best goes down (from any piece) and it starts again from there.
ANNEAL_SHARE = 0.5
ANNEAL_SHARE_STALLED = 0.15
ANNEAL_STALL_RESTARTS = 6
#: longest compiled decode call of an island between two looks at the run's stop (seconds)
DECODE_CALL_S = 0.25


class PipelineSearch:
    """A BRKGA island with SliceGraph decoding, interleaved with random-T sampling.

    Args:
        problem, k: the instance.
        rng: the island's generator (spawn one per island from a SeedSequence).
        population: BRKGA population (paper default 100).
        random_share: fraction of evaluations spent on random-T samples.
        seeds: optional key vectors placed in the first generation (e.g. :func:`mla_seeds`).
        polish_improvements: run the local search :meth:`polish` on every new island best
            (memetic step) and inject the polished order back into the population.
        memetic_every: every this many BRKGA generations, improve the elites by
            adjacent-stage moves (:func:`problems.pipeline.memetic.memetic_step`); 0: never.
        lns_share: fraction of the island's time (from its second step on) given to CP-SAT
            large-neighbourhood search (:class:`problems.pipeline.lns.StageLNS`) around the
            best partition known to the island, its own or the run's incumbent; 0: never;
            None: :data:`LNS_SHARE` where windows pay (:func:`problems.pipeline.lns.windows_pay`),
            else :data:`LNS_SHARE_LARGE`, and 0 with a memory limit. The LNS idles once every window has been tried from
            its partition.
        anneal_share: fraction of the island's time (from its second step on) given to
            simulated annealing over stage labels (:class:`problems.pipeline.anneal.Annealer`)
            from the best partition known to the island; None: :data:`ANNEAL_SHARE` without a
            memory limit, else 0 (it needs schedule-free stage costs). The LNS's share is then
            of the time the annealing leaves.
    """

    def __init__(self, problem: PipelineProblem, k: int, rng: np.random.Generator, *,
                 population: int = 100, random_share: float = 0.1,
                 seeds: NDArray[np.float64] | None = None, polish_improvements: bool = True,
                 memetic_every: int = 5, lns_share: float | None = None,
                 anneal_share: float | None = None) -> None:
        self.decoder = SliceDecoder(problem, k)
        self.lns_share = lns_share
        if anneal_share is None:
            anneal_share = ANNEAL_SHARE if problem.memory is None else 0.0
        if anneal_share > 0 and problem.memory is not None:
            raise ValueError("anneal_share: annealing needs a problem without a memory limit")
        self.anneal_share = anneal_share
        self._annealer: Any = None
        self._anneal_s = 0.0
        self._lns: Any = None  # built at first use: it loads OR-Tools
        self._lns_rng = rng.spawn(1)[0]
        self._lns_s = 0.0  # seconds spent in the LNS, and in steps overall
        self._step_s = 0.0
        self._steps = 0
        self.memetic_every = memetic_every
        self._memetic_rng = rng.spawn(1)[0]  # leaves the island stream as it was
        self._anneal_rng = rng.spawn(1)[0]    # spawned last: the streams above stay as they were
        self._memetic_seen: set[bytes] = set()
        self._next_memetic = memetic_every
        self.polish_improvements = polish_improvements
        self.ga = BRKGA(problem.n, rng, population=population, seeds=seeds)
        self.rand = RandomKeys(problem.n, rng, batch_size=max(1, population // 10))
        self.random_share = random_share
        self.evals = 0
        self._rand_evals = 0
        self._decode_s = 0.0   # seconds per decode, last measured

    def _score(self, batch: KeyBatch) -> NDArray[np.float64]:
        """The batch's values, decoded in compiled calls of about :data:`DECODE_CALL_S` each; once
        the run stops (:func:`engine.cancel.stop_requested`) the rest of the batch is scored inf
        (a generation of a 100,000-node graph takes seconds to decode; the run need not wait)."""
        keys = batch.keys
        per = max(1, int(DECODE_CALL_S / self._decode_s)) if self._decode_s > 0 else 1
        if per >= len(keys):
            return self._timed_values(keys, batch.cutoff)
        out = np.full(len(keys), math.inf)
        i = 0
        while i < len(keys):
            if i and cancel.stop_requested():
                break
            out[i:i + per] = self._timed_values(keys[i:i + per], batch.cutoff)
            i += per
            per = max(1, int(DECODE_CALL_S / self._decode_s))
        return out

    def _timed_values(self, keys: NDArray[np.float64], cutoff: float) -> NDArray[np.float64]:
        t0 = time.perf_counter()
        values = self.decoder.values(keys, cutoff)
        self._decode_s = (time.perf_counter() - t0) / max(1, len(keys))
        return values

    def polish(self, split: Split, rounds: int = 20) -> Split:
        """Alternate :func:`_kernels.improve_split` and an optimal re-slice until neither helps."""
        p = self.decoder.problem
        for _ in range(rounds):
            starts = np.flatnonzero(np.diff(split.blocks[split.order], prepend=-1)).astype(np.int64)
            order, _ = _kernels.improve_split(split.order, starts, *self.decoder._args, 4 * p.n)
            nxt = self.decoder.slice(order)
            if not nxt.value < split.value:
                break
            split = nxt
        return split

    def _polish_best(self) -> None:
        """Memetic step: polish the island's best; put the result back as a chromosome."""
        cost, keys = self.ga.best()
        if keys is None:
            return
        split = self.polish(self.decoder.decode(keys))
        if split.value < cost:
            n = len(split.order)
            new_keys = np.empty(n)
            new_keys[split.order] = 1.0 - np.arange(n) / n  # Kahn reproduces this order exactly
            self.ga.inject(new_keys[None, :], np.array([self.decoder.values(new_keys[None, :])[0]]))

    def best(self) -> tuple[float, Split | None]:
        """Best value found and its split (decoded again, exactly)."""
        cands = [s for s in (self.ga, self.rand) if s.best_keys is not None]
        if not cands:
            return math.inf, None
        s = min(cands, key=lambda s: s.best_cost)
        return s.best_cost, self.decoder.decode(s.best_keys)

    def step(self, budget_s: float, on_improvement: Callable[[float, Split], None] | None = None,
             should_stop: Callable[[], bool] = lambda: False) -> int:
        """Search for about ``budget_s`` seconds; returns evaluations made.

        ``on_improvement(value, split)`` is called for each new best of this island.
        At least one batch is evaluated (unless ``should_stop()`` is already true), and the
        first batch of an island is always its first generation (the seeded chromosomes),
        so even a very short first step reports the seeded partitions.
        """
        t0 = time.monotonic()
        t_end = t0 + budget_s
        best_before = min(self.ga.best_cost, self.rand.best_cost)
        n = 0
        self._steps += 1
        # not in the first step: it reports the seeded partitions at once (a head start's
        # epoch in a driver that must not load OR-Tools)
        if self._steps > 1 and self.lns_share is None:  # resolved here: the module loads OR-Tools
            from gapstop.problems.pipeline.lns import lns_share

            self.lns_share = lns_share(self.decoder.problem, self.decoder.k, LNS_SHARE, LNS_SHARE_LARGE)
        if self._steps > 1 and self._anneal_s < self._anneal_share_now() * self._step_s:
            if self._anneal_step(t_end, should_stop):
                best_before = self._report(on_improvement, best_before, "anneal")
            self._anneal_s += time.monotonic() - t0
        elif (self.lns_share is not None and self.lns_share > 0 and self._steps > 1
                and self._lns_s < self.lns_share * (self._step_s - self._anneal_s)):
            if self._lns_step(t_end, should_stop):
                best_before = self._report(on_improvement, best_before, "lns")
            self._lns_s += time.monotonic() - t0
        while not should_stop():
            use_random = self.evals > 0 and self._rand_evals < self.random_share * self.evals
            search = self.rand if use_random else self.ga
            k = run_ask_tell(search, self._score, should_stop, max_evals=1)
            n += k
            self.evals += k
            if use_random:
                self._rand_evals += k
            best_now = min(self.ga.best_cost, self.rand.best_cost)
            via = ""  # the piece that lowered the island's best last, for the event log
            if best_now < best_before and self.polish_improvements:
                self._polish_best()
                via = "polish" if min(self.ga.best_cost, self.rand.best_cost) < best_now else via
                best_now = min(self.ga.best_cost, self.rand.best_cost)
            if self.memetic_every and self.ga.generation >= self._next_memetic:
                from gapstop.problems.pipeline.memetic import memetic_step

                self._next_memetic = self.ga.generation + self.memetic_every
                memetic_step(self, self._memetic_rng, seen=self._memetic_seen)
                via = "moves" if min(self.ga.best_cost, self.rand.best_cost) < best_now else via
                best_now = min(self.ga.best_cost, self.rand.best_cost)
            if best_now < best_before:
                best_before = best_now
                if on_improvement is not None:
                    value, split = self.best()
                    if split is not None:
                        from gapstop.problems.pipeline.memetic import TaggedSplit

                        on_improvement(value, TaggedSplit(split.value, split.blocks, split.order, split.exact, via))
            if time.monotonic() >= t_end:  # checked after the batch: a step makes at least one
                break
        self._step_s += time.monotonic() - t0
        return n

    def _report(self, on_improvement: Callable[[float, Split], None] | None, best_before: float,
                via: str) -> float:
        """Report the island's best to ``on_improvement`` as found by ``via`` if it is below
        ``best_before``; returns the new reference value."""
        value, split = self.best()
        if on_improvement is None or split is None or not value < best_before:
            return best_before
        from gapstop.problems.pipeline.memetic import TaggedSplit

        on_improvement(value, TaggedSplit(split.value, split.blocks, split.order, split.exact, via))
        return value

    def prepare(self) -> None:
        """Compile the annealing's kernels (seconds on a fresh install) before the island's
        second step needs them; the worker calls this after the first epoch, while a head start
        holds the island."""
        if self.anneal_share > 0 and self._annealer is None:
            from gapstop.problems.pipeline.anneal import Annealer

            self._annealer = Annealer(self.decoder.problem, self.decoder.k, self._anneal_rng)
            self._annealer.compile()

    def _anneal_share_now(self) -> float:
        """The annealing's share of the island's time: :attr:`anneal_share`, lowered to
        :data:`ANNEAL_SHARE_STALLED` while the annealer is stalled on the island's best."""
        ann = self._annealer
        if (ann is not None and ann.best is not None
                and ann.restarts_without_gain >= ANNEAL_STALL_RESTARTS
                and not min(self.ga.best_cost, self.rand.best_cost) < ann.best.objective):
            return min(self.anneal_share, ANNEAL_SHARE_STALLED)
        return self.anneal_share

    def _anneal_step(self, t_end: float, should_stop: Callable[[], bool]) -> bool:
        """Annealing until ``t_end`` from the best partition known (the annealer's own unless the
        island holds a better one); its gains go into the population. True if the island's best
        went down."""
        best_cost = min(self.ga.best_cost, self.rand.best_cost)
        self.prepare()  # builds the annealer on first use
        ann = self._annealer
        if ann.best is None or best_cost < ann.best.objective:
            _, split = self.best()
            if split is None:
                return False
            ann.reset(split.blocks)
        if not ann.run(max(0.0, t_end - time.monotonic()), should_stop):
            return False
        return self._inject_order(ann.best.order, best_cost)

    def _inject_order(self, order: NDArray[np.int32], best_cost: float) -> bool:
        """Put the chromosome whose Kahn order is ``order`` into the population; True if the
        island's best is now below ``best_cost``."""
        from gapstop.problems.pipeline.memetic import order_keys

        keys = order_keys(order)
        self.ga.inject(keys[None, :], np.array([float(self.decoder.values(keys[None, :])[0])]))
        return min(self.ga.best_cost, self.rand.best_cost) < best_cost

    def _lns_step(self, t_end: float, should_stop: Callable[[], bool]) -> bool:
        """CP-SAT LNS until ``t_end`` (at least one sub-solve) from the best partition known;
        its gains go into the population. Returns True if the island's best went down."""
        from gapstop.problems.pipeline.lns import StageLNS

        best_cost = min(self.ga.best_cost, self.rand.best_cost)
        if self._lns is None:
            self._lns = StageLNS(self.decoder.problem, self.decoder.k, self._lns_rng)
        lns = self._lns
        if lns.current is None or best_cost < lns.current.objective:
            _, split = self.best()
            if split is None:
                return False
            lns.reset(split.blocks, split.order)
        if lns.exhausted:
            return False
        moves = lns.run(max(0.0, t_end - time.monotonic()), should_stop)
        if not any(m.improved is not None for m in moves):
            return False
        return self._inject_order(lns.current.order, best_cost)

    def migrants(self, n: int) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The island's ``n`` best chromosomes and costs, to send to other islands."""
        return self.ga.elites(n)

    def accept_migrants(self, keys: NDArray[np.float64], costs: NDArray[np.float64]) -> None:
        self.ga.inject(keys, costs)

    def accept_incumbent(self, cost: float, solution: dict[str, Any]) -> bool:
        """The run's incumbent into the population (:func:`problems.pipeline.memetic.accept_incumbent`)."""
        from gapstop.problems.pipeline.memetic import accept_incumbent

        return accept_incumbent(self, cost, solution)

    def state_dict(self) -> dict[str, Any]:
        return {"ga": self.ga.state_dict(), "rand": self.rand.state_dict(), "evals": self.evals,
                "rand_evals": self._rand_evals}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.ga.load_state_dict(state["ga"])
        self.rand.load_state_dict(state["rand"])
        self.evals = state["evals"]
        self._rand_evals = state["rand_evals"]
