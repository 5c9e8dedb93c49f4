"""``--time-limit`` as the whole process's wall clock, for the command line's solve commands.

:class:`Guard` gives the search the time up to the deadline less the finish reserve that
earlier runs of the same kind measured, and starts the watchdog of :mod:`engine.deadline`
that answers in the run's place if its own finish overruns. The entry point marks the
process as the command (:func:`mark_entry`) and records the finish (:func:`record_finish`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

#: the least finish reserve of a run with ``--plot`` (seconds; at most half its time limit): about
#: twice what importing matplotlib and drawing a run take on a 2-core machine
PLOT_RESERVE_S = 3.0

#: the running command's time-limit guard (read by the entry point to record how long the finish took)
GUARD: dict[str, Any] = {}


class Guard:
    """``--time-limit`` as the whole process's wall clock: see :mod:`engine.deadline`.

    The search gets the time up to ``deadline - reserve``, where the reserve is what the
    finish (final writes, shutdown) of the last runs of the same ``kind`` took; a watchdog
    thread writes and prints the best answer so far, the run directory's ``result_path``
    (``result.json``, rewritten as the run goes), and ends the process if the normal path has
    not done so in time; it also writes that answer, final, back to ``result_path``, which the
    run's own finish did not get to write.
    """

    def __init__(self, kind: str, time_limit: float, result_path: Path,
                 emit: Callable[[dict[str, Any]], None],
                 write_json: Callable[[str | Path, dict[str, Any]], Any]) -> None:
        import time

        from gapstop.engine.deadline import Deadline, FinishCosts, Watchdog, jit_clock, set_run_end

        # only a process that is this command (``run()``, the entry point) counts from its own
        # start and may be ended by the watchdog; called from a longer-lived one (tests, a
        # library), the limit counts from the command's start and no thread ends the caller
        whole = "entry" in GUARD
        self.kind, self.costs, self.jit = kind, FinishCosts(), jit_clock()
        self.deadline = Deadline(time_limit) if whole else Deadline(time_limit, start=time.monotonic())
        self.reserve_s = self.costs.reserve_s(kind) if whole else 0.0
        if whole and kind.endswith("-plot"):
            # before a first measurement, drawing (importing matplotlib included) still needs its time
            self.reserve_s = max(self.reserve_s, min(PLOT_RESERVE_S, 0.5 * time_limit))
        self.t_emitted: float | None = None
        self.budget_end = self.deadline.end - self.reserve_s
        if whole:  # (a longer-lived caller keeps its own run clock)
            set_run_end(self.budget_end)

        def late(doc: dict[str, Any]) -> None:
            doc = {**doc, "elapsed_s": round(self.deadline.elapsed(), 3)}
            if doc.get("stopped_because") == "running":
                doc["stopped_because"] = "time-limit"
            # the run's own finish did not get to write it: the run directory's result.json
            # must not stay a running document
            if result_path.parent.is_dir():
                write_json(result_path, doc)
            emit(doc)

        self.watchdog = Watchdog(self.deadline, lambda: running_doc(result_path), late,
                                 lambda d: 0 if feasible(d) else 1, on_exit=self.record,
                                 on_poll=self.jit.attach)
        if whole:
            self.watchdog.start()
            GUARD["guard"] = self

    def budget_s(self) -> float:
        import time

        return max(0.0, self.budget_end - time.monotonic())

    def give(self, doc: dict[str, Any], emit: Callable[[dict[str, Any]], None]) -> None:
        """Write and print the normal path's answer, unless the watchdog is already giving
        its own (then wait for it to end the process)."""
        import time

        if "guard" in GUARD and not self.watchdog.claim(0 if feasible(doc) else 1):
            while True:
                time.sleep(1.0)
        emit(doc)
        self.t_emitted = time.monotonic()

    def record(self) -> None:
        """Remember how long after the search's end the answer was out (written and printed),
        when that was after it. What follows (Ray's shutdown) needs no reserve: the watchdog
        ends the process at the deadline. When the watchdog had to give the answer, the finish
        needed more than the reserve and the time that was left: twice the reserve (at least
        the watchdog's margin) is recorded, so the reserve of the following runs grows until
        their own finish fits and is measured. A finish that fitted records what it took
        (0 if nothing), so the reserve also shrinks again (it is the largest of the last few).
        Time spent compiling numba kernels in the finish is left out (see
        :func:`engine.deadline.finish_to_record`)."""
        import time

        from gapstop.engine.deadline import finish_to_record

        out = self.t_emitted or time.monotonic()
        over = out - self.budget_end
        seconds = finish_to_record(over, self.jit.within(self.budget_end, out), fired=self.watchdog.fired,
                                   gave_answer=self.watchdog.gave_answer, reserve_s=self.reserve_s,
                                   margin_s=self.watchdog.margin_s)
        if seconds is not None:
            self.costs.record(self.kind, seconds)


def feasible(doc: dict[str, Any] | None) -> bool:
    return doc is not None and bool(doc.get("feasible", doc.get("objective") is not None))


def running_doc(path: Path) -> dict[str, Any] | None:
    """The result document a run keeps rewriting: None until it holds a solution, or an
    ``answer_note`` (what is known without one, e.g. that none exists or how long a proof ran)."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict):
        return None
    return doc if feasible(doc) or doc.get("answer_note") else None


def guard_kind(problem: str, local: bool, plot: str | None) -> str:
    """The guard's kind: runs that draw their figures at the end (``--plot``) learn their own
    finish reserve, so drawing never shortens the search of runs that do not."""
    return f"{problem}-{'in-process' if local else 'ray'}{'-plot' if plot else ''}"


def mark_entry() -> None:
    """This process is the command: ``--time-limit`` counts from its start, and the watchdog
    may end it."""
    GUARD["entry"] = True


def record_finish() -> None:
    """After a solve command: how long its finish took, for the next run's reserve."""
    if "guard" in GUARD:
        GUARD["guard"].record()
