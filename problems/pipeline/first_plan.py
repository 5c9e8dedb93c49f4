"""A first pipeline plan in linear time, before any search: the answer of a run stopped at once.

A search island decodes a whole population before it reports anything, which on graphs of
tens of thousands of nodes takes seconds to minutes. :func:`first_plan` splits two or three
cheap topological orders (the program's order, breadth-first by earliest level, and by
latest level) into at most k contiguous stages with :func:`~problems.pipeline._kernels.bisect_split`
(greedy splits under a bisected cost cap: O(n + m) per probe) and keeps the best, re-scored
by the exact evaluator. With a hard memory limit (``memory_hard``) every stage must also fit
in memory: the cap-aware greedy split is the repair, and no plan comes out if no contiguous
split of these orders fits. :class:`FirstPlanFirst` makes it the first report of an island.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline import _kernels
from gapstop.problems.pipeline.constraints import Constraints, ConstraintViolation
from gapstop.problems.pipeline.decoder import Split
from gapstop.problems.pipeline.evaluate import Evaluation, evaluate
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.run import AT_ONCE_MIN_NODES

#: the ``via`` tag of the first plan in the run's event log (``search-0/first-plan``)
VIA = "first-plan"
#: the island's first step goes on into its seeded first generation (however short the step)
#: on graphs of fewer nodes than :data:`~problems.pipeline.run.AT_ONCE_MIN_NODES` whose first
#: generation takes at most this long, as an island's first step did before the first plan: the seeded generation,
#: polished, was the final answer of 60 s runs on lstm_lm_unrolled, where the exact MIP keeps
#: the cores after its head start (1,736 nodes: about 10 ms a decode)
FIRST_GENERATION_MAX_S = 2.0
#: bisection probes of the first plan's cost cap (to a relative width of 1e-6 at most)
PROBES = 40


def cheap_orders(problem: PipelineProblem) -> list[NDArray[np.int32]]:
    """Topological orders in O(m + n log n) each: the program's order (Kahn, smallest index
    first: the file's node order when that is topological), earliest level first (ASAP,
    breadth-first) and latest level first (ALAP), ties by index. Duplicates dropped."""
    n = problem.n
    idx = np.arange(n, dtype=np.float64)
    program = _kernels.kahn_order(-idx, problem.succ_ptr, problem.succ, problem.pred_ptr)
    asap, alap = _kernels.levels(program, problem.succ_ptr, problem.succ, problem.pred_ptr, problem.pred)
    out = [program]
    for level in (asap, alap):
        o = _kernels.kahn_order(-(level.astype(np.float64) * n + idx), problem.succ_ptr, problem.succ,
                                problem.pred_ptr)
        if not any(np.array_equal(o, q) for q in out):
            out.append(o)
    return out


def _blocks(order: NDArray[np.int32], starts: NDArray[np.int64]) -> NDArray[np.int64]:
    blocks = np.empty(len(order), np.int64)
    blocks[order] = np.searchsorted(starts, np.arange(len(order)), side="right") - 1
    return blocks


def first_plan(problem: PipelineProblem, k: int, constraints: Constraints | None = None) -> Evaluation | None:
    """The best bisected contiguous split of :func:`cheap_orders`, exactly evaluated, or None when
    none is valid under ``constraints`` (e.g. a hard memory limit no such split meets)."""
    cons = constraints if constraints is not None and constraints.any else None
    cap = problem.memory if cons is not None and cons.memory_hard and problem.memory is not None else -1
    p = problem
    cands = []
    for order in cheap_orders(problem):
        value, starts = _kernels.bisect_split(order, k, cap, PROBES, p.work, p.size_param, p.size_out, p.succ_ptr,
                                              p.succ, p.pred_ptr, p.pred, p.bandwidth, p.memory_or_minus1)
        if math.isfinite(value):
            cands.append((float(value), order, starts))
    for _, order, starts in sorted(cands, key=lambda c: c[0]):
        try:
            return evaluate(problem, _blocks(order, starts), order, k=k, constraints=cons)
        except ConstraintViolation:
            continue
    return None


class FirstPlanFirst:
    """An island whose first step reports :func:`first_plan` before anything else.

    ``build()`` makes the island proper (e.g. a :class:`~problems.pipeline.search.PipelineSearch`,
    whose seeds cost seconds on deep graphs); it is built after the first plan is out, and the
    plan goes into it as a chromosome (through its ``accept_incumbent``). The first step goes on
    into the island's own first step only if its first generation (``population`` decodes, timed
    on the plan) fits in what is left of the step: on small graphs the seeded generation is
    reported in the first epoch as before; on deep ones the plan is reported at once. Every other
    call goes to the island.
    """

    def __init__(self, problem: PipelineProblem, k: int, build: Callable[[], Any], *,
                 constraints: Constraints | None = None, population: int = 100) -> None:
        self._problem, self._k, self._build, self._cons = problem, k, build, constraints
        self._population = population
        self._inner: Any = None
        self._plan: Evaluation | None = None
        self._first = True

    @property
    def inner(self) -> Any:
        if self._inner is None:
            self._inner = self._build()
            if self._plan is not None and hasattr(self._inner, "accept_incumbent"):
                self._inner.accept_incumbent(self._plan.objective, {"blocks": self._plan.blocks.tolist(),
                                                                    "order": self._plan.order.tolist()})
        return self._inner

    def step(self, budget_s: float, on_improvement: Callable[[float, Any], None] | None = None,
             should_stop: Callable[[], bool] = lambda: False) -> int:
        if not self._first:
            return int(self.inner.step(budget_s, on_improvement, should_stop))
        self._first = False
        t0 = time.monotonic()
        self._plan = plan = first_plan(self._problem, self._k, self._cons)
        if plan is not None and on_improvement is not None:
            from gapstop.problems.pipeline.memetic import TaggedSplit

            on_improvement(plan.objective, TaggedSplit(plan.objective, plan.blocks, plan.order, False, VIA))
        if should_stop():
            return 0
        if self._problem.n >= AT_ONCE_MIN_NODES:
            return 0
        one_s = 0.0
        if plan is not None:
            from gapstop.problems.pipeline.decoder import SliceDecoder

            decoder = SliceDecoder(self._problem, self._k)
            one_s = math.inf
            for _ in range(2):   # the first call of a process also loads the compiled kernel
                t1 = time.monotonic()
                decoder.slice(plan.order)
                one_s = min(one_s, time.monotonic() - t1)
                if self._population * one_s <= FIRST_GENERATION_MAX_S:
                    break
        if self._population * one_s > FIRST_GENERATION_MAX_S:
            return 0   # the island's first generation would hold the plan back: out with it now
        best = math.inf if plan is None else plan.objective

        def better(value: float, found: Any) -> None:
            # the epoch reports its last improvement only: never one worse than the plan
            nonlocal best
            if value < best and on_improvement is not None:
                best = value
                on_improvement(value, found)

        return int(self.inner.step(max(0.0, budget_s - (time.monotonic() - t0)), better, should_stop))

    def prepare(self) -> None:
        inner = self.inner   # built while a head start holds the islands
        if hasattr(inner, "prepare"):
            inner.prepare()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.inner, name)


def as_split(ev: Evaluation) -> Split:
    """The plan as a :class:`~problems.pipeline.decoder.Split` (not known to be optimal)."""
    return Split(ev.objective, ev.blocks, ev.order, False)
