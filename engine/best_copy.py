"""The driver's own copy of a run's best solution and bounds.

On Ray the session (:class:`engine.session.Session`) lives in the coordinator actor. A
coordinator that dies (its process killed, its node lost) would take the run's answer
with it, so the driver keeps a copy of what the answer is made of: the best solution and
the best bound of each method, fetched whenever its polls show that they changed. If the
coordinator is lost, :meth:`BestCopy.document` builds the result document from the copy
(and from the run directory's checkpoint, when the driver can read it) the way the
session builds it: every solution re-scored by the problem's exact evaluator, every
bound merged by a :class:`engine.coordinator.Coordinator`.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any, Callable

from gapstop.engine.coordinator import Coordinator
from gapstop.engine.errors import InputError
from gapstop.engine.protocol import RunStatus
from gapstop.engine.records import Bound, Incumbent
from gapstop.engine.rundir import offer_checkpoint
from gapstop.engine.stopping import Clock, standard

#: the stop reason of a run whose coordinator was lost (``stopped_because``)
COORDINATOR_LOST = "coordinator-lost"
#: least seconds between two fetches of the bounds for a better bound alone: live bounds come in
#: bursts (the spectral bound's, CP-SAT's), and each fetch carries every method's record
BOUNDS_EVERY_S = 1.0


class BestCopy:
    """What the driver keeps of a session it does not hold.

    Args:
        adapter, problem, params: the problem, as the session has it (its evaluator and
            result document).
        target_gap, time_limit_s: the run's stopping rule (for the document's stop fields).
    """

    def __init__(self, adapter: Any, problem: Any, params: dict[str, Any], target_gap: float,
                 time_limit_s: float, now: Callable[[], float] = time.monotonic) -> None:
        self.adapter, self.problem, self.params = adapter, problem, params
        self.target_gap, self.time_limit_s = target_gap, time_limit_s
        self.now = now
        self.incumbent: Incumbent | None = None
        self.bounds: dict[str, Bound] = {}
        self.lb: float | None = None
        self.poll: RunStatus | None = None
        self.t_poll = now()
        self.t_bounds = -math.inf

    def update(self, session: Any, st: RunStatus) -> None:
        """Take the session's poll ``st``; fetch the incumbent from ``session`` when the poll's
        cost differs from the copy's, the bounds when its bound does (at most once per
        :data:`BOUNDS_EVERY_S`). An answer may be newer than the poll: it is kept, and the next
        poll then agrees with it."""
        now = self.now()
        if st.ub is not None and (self.incumbent is None or st.ub != self.incumbent.cost):
            inc = session.incumbent_record()
            if inc is not None:
                self.incumbent = inc
        if st.lb is not None and st.lb != self.lb and now - self.t_bounds >= BOUNDS_EVERY_S:
            self.bounds = session.bounds()
            self.lb, self.t_bounds = st.lb, now
        self.poll, self.t_poll = st, now

    def elapsed(self) -> float:
        """The run's seconds so far: the last poll's, plus the driver's time since."""
        return (0.0 if self.poll is None else self.poll.elapsed) + self.now() - self.t_poll

    def document(self, reason: str, run_dir: str | Path | None = None) -> dict[str, Any]:
        """The result document from the copy, stopped for ``reason``. ``run_dir``: also offer
        the incumbent and bounds of its checkpoint (written by the lost coordinator at its last
        improvement, possibly after the driver's last poll), when it can be read."""
        coord = Coordinator(self.adapter.evaluator(self.problem, self.params),
                            standard(self.target_gap, self.time_limit_s), Clock(self.elapsed()))
        if self.incumbent is not None:
            coord.offer_solution(self.incumbent.solution, self.incumbent.source)
        for b in self.bounds.values():
            coord.offer_bound(b, b.method)
        if run_dir is not None:
            try:
                offer_checkpoint(run_dir, coord, prefix="")
            except InputError:  # none written, or not on this machine: the copy is the answer
                pass
        coord.force_stop(reason)
        doc: dict[str, Any] = self.adapter.result_doc(self.problem, self.params, coord, reason, coord.clock.elapsed())
        doc["evaluations"] = 0 if self.poll is None else self.poll.evals
        doc["workers"] = {"nodes": {} if self.poll is None else dict(self.poll.nodes)}
        if run_dir is not None:
            doc["run_dir"] = str(run_dir)
        return doc
