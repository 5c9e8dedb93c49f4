"""What a run does with its worker slots: the plan both runners follow.

A run has ``workers`` slots (threads in-process, actors on Ray). Half of them (at
least one) run bound jobs, the rest search islands (:func:`slot_plan`). Bound jobs
are small picklable specs from the problem's definition (:class:`engine.protocol.JobSpec`):

* a ``dedicated`` job owns bound slot 0 for the whole run (the pipeline's exact MIP);
  with ``head_start`` it asks for the cores to itself for its first seconds
  (:func:`default_head_start`): the islands are held after their first epoch;
* the others queue for the remaining bound slots and take their ``share`` of the time
  left; *members* of a case split (specs with ``j`` and a ``group``) get a time slice
  each, and once all have run, the open member with the smallest bound runs again with
  a doubled slice (:class:`BoundPlan`);
* a ``fallback`` job (at most one) shares bound slot 0 with the queue's other jobs (not its
  members) once the dedicated job has ended: each such job, then a turn of the fallback,
  handed out with ``yield_when_stalled`` True (it should end once it stops making progress,
  so that the next job gets its turn); when none is left, the fallback runs to the end,
  with ``yield_when_stalled`` False. ``turn`` counts its turns from 0.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Callable

from gapstop.engine.protocol import JobSpec


def slot_plan(total: int, with_bounds: bool, islands: int | None = None) -> tuple[int, int]:
    """``(search islands, bound slots)`` for ``total`` worker slots: half (at least one) for
    bounds when ``with_bounds``; ``islands``, if given, fixes the number of islands."""
    n_bound = max(1, total // 2) if with_bounds else 0
    n_search = islands if islands is not None else max(1, total - n_bound)
    return n_search, n_bound


def default_head_start(time_limit_s: float) -> float:
    """Seconds the dedicated bound job runs alone: 20 % of the run, within [2 s, 20 s].

    10 % within [2 s, 10 s] (6 s at a 60 s limit) was too short for exact-MIP proofs that
    take plain CP-SAT 7-14 s (resnet50 and mobilenet_v2 at k = 16); on the REGAL graphs,
    where the MIP proves nothing, it costs nothing beyond run-to-run noise
    (docs/decisions/0001-exact-mip-head-start.md)."""
    return min(20.0, max(2.0, 0.2 * time_limit_s))


#: longest wait for the dedicated job to start (its worker's hello) before the head start counts anyway
HELLO_WAIT_S = 5.0


class BoundPlan:
    """Which bound job a free bound slot runs next, and for how long.

    Args:
        specs: the adapter's bound job specs.
        time_limit_s: the run's limit (sets the members' time slice).
    """

    def __init__(self, specs: list[JobSpec] | list[Mapping[str, Any]], time_limit_s: float) -> None:
        jobs = [JobSpec.of(s) for s in specs]
        self.dedicated = [s for s in jobs if s.dedicated]
        self.fallback = [s for s in jobs if s.fallback][:1]
        others = [s for s in jobs if not s.dedicated and not s.fallback]
        self.members = [s for s in others if s.j is not None]
        self.queue = list(others)
        self.slice_s = max(5.0, time_limit_s / max(2, 2 * len(self.members))) if self.members else 0.0
        self._rounds: dict[int, int] = {}
        self._fallback_turns = 0
        self._fallback_next = False   # slot 0: a queued job first, then the fallback, in turn

    @property
    def head_start_wanted(self) -> bool:
        return any(s.head_start for s in self.dedicated)

    def set_head_start(self, seconds: float) -> None:
        """The dedicated jobs' head start (``head_start_s`` of the specs handed out)."""
        self.dedicated = [s.with_(head_start_s=seconds) for s in self.dedicated]

    def next(self, slot: int, left_s: float, ub: float | None,
             member_bounds: Callable[[str], dict[int, float]]) -> tuple[JobSpec | None, float]:
        """``(spec, seconds)`` for bound slot ``slot`` with ``left_s`` seconds of the run left,
        or ``(None, 0)`` when it has nothing (more) to do. ``ub``: the incumbent's cost;
        ``member_bounds(group)``: the current bound of each member of ``group``."""
        if slot == 0 and self.dedicated:
            return self.dedicated.pop(0), left_s  # once; a failed run puts it back
        if slot == 0 and self.fallback:
            return self._with_fallback(left_s)
        if self.queue:
            spec = self.queue.pop(0)
            return spec, self._budget(spec, left_s)
        return self._rerun_weakest(left_s, ub, member_bounds)

    def _budget(self, spec: JobSpec, left_s: float) -> float:
        """A queued job's first run: a member's slice, or the job's share of the time left."""
        share = 1.0 if spec.share is None else spec.share
        return min(self.slice_s if spec.j is not None else share * left_s, left_s)

    def _with_fallback(self, left_s: float) -> tuple[JobSpec, float]:
        others = [s for s in self.queue if s.j is None]
        if others and not self._fallback_next:
            self._fallback_next = True
            self.queue.remove(others[0])
            return others[0], self._budget(others[0], left_s)
        self._fallback_next = False
        spec = self.fallback[0].with_(yield_when_stalled=bool(others), turn=self._fallback_turns)
        self._fallback_turns += 1
        if not others:
            self.fallback.clear()   # nothing else for this slot: the fallback to the end, once
        return spec, left_s

    def _rerun_weakest(self, left_s: float, ub: float | None,
                       member_bounds: Callable[[str], dict[int, float]]) -> tuple[JobSpec | None, float]:
        if not self.members:
            return None, 0.0
        groups = {s.group or "" for s in self.members}
        cur: dict[tuple[str, int], float] = {}
        for g in groups:
            cur.update({(g, j): v for j, v in member_bounds(g).items()})

        def value(s: JobSpec) -> float:
            return cur.get((s.group or "", int(s.j or 0)), -math.inf)

        open_ = [s for s in self.members if value(s) < (math.inf if ub is None else ub)]
        if not open_:
            return None, 0.0
        weakest = min(open_, key=value)
        rounds = self._rounds.get(id(weakest), 1)
        self._rounds[id(weakest)] = rounds + 1
        return weakest, min(self.slice_s * 2.0 ** min(rounds, 40), left_s)   # a member that ends at once reruns often

    def put_back(self, spec: JobSpec | Mapping[str, Any]) -> None:
        """A job whose worker failed runs again: a dedicated one without its head start,
        the fallback in its turn, others first in the queue."""
        spec = JobSpec.of(spec)
        if spec.dedicated:
            self.dedicated.append(spec.with_(head_start_s=0.0))
        elif spec.fallback:
            self.fallback[:] = [spec.with_(yield_when_stalled=False, turn=0)]
        else:
            self.queue.insert(0, spec)
