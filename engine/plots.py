"""What a convergence figure shows, read off a run directory: no drawing here.

A run is a race between the best objective found (the upper bound, falling) and the best
lower bound (rising). :func:`convergence` turns the event log (``events.parquet``) and
``result.json`` into the two step curves, the gap between them, the job behind every
improvement, the target gap and the stop reason, as plain numpy arrays that a drawing
module (:mod:`engine.figures`) or a test can read. Problem-specific plan data lives in
``problems/<p>/plots.py``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.errors import InputError
from gapstop.engine.records import relative_gap


@dataclass(frozen=True)
class Curve:
    """One bound's improvements, in time order.

    Attributes:
        t_s: float64[n], seconds since the run's start (across resumed sessions).
        value: float64[n], the best value after each improvement (monotone: never rising
            for the upper bound, never falling for the lower bound).
        job: the worker that reported each improvement, as the event log names it.
        method: the method (search or bound) of each improvement.
    """

    t_s: NDArray[np.float64]
    value: NDArray[np.float64]
    job: tuple[str, ...]
    method: tuple[str, ...]


@dataclass(frozen=True)
class Convergence:
    """The data of the convergence figure.

    Attributes:
        upper, lower: the best objective's and the best lower bound's improvements.
        gap_t_s, gap: float64[m], the certified gap after every improvement of either bound
            once both exist (:func:`engine.records.relative_gap`), NaN where it is unknown.
        end_s: the run's end (its ``elapsed_s``, at least the last event's time).
        objective, lower_bound: ``result.json``'s values (None if absent).
        target_gap: the run's ``--target-gap`` (from ``config.json``), None if unknown.
        stopped_because: ``result.json``'s stop reason.
        sessions_s: start times of resumed sessions (empty for a run in one session).
    """

    upper: Curve
    lower: Curve
    gap_t_s: NDArray[np.float64]
    gap: NDArray[np.float64]
    end_s: float
    objective: float | None
    lower_bound: float | None
    target_gap: float | None
    stopped_because: str
    sessions_s: NDArray[np.float64]


def _best_steps(rows: list[dict[str, Any]], better: Any) -> Curve:
    """The improvements among ``rows`` (time-ordered): a row counts only when it beats every
    earlier one. The coordinator logs only accepted improvements, but a resumed session
    re-offers its checkpoint, and a merge of two logs must not make the curve go back."""
    t, v, job, method = [], [], [], []
    best: Any = None
    for r in rows:
        x = r["value"]
        if best is None or better(x, best):
            best = x
            t.append(float(r["t_s"]))
            v.append(float(x))
            job.append(str(r["worker"]))
            method.append(str(r["method"]))
    return Curve(np.asarray(t, dtype=np.float64), np.asarray(v, dtype=np.float64), tuple(job), tuple(method))


def _exact_gaps(rows: list[dict[str, Any]]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """The gap after each event once both bounds exist, from the exact values (intra-op costs
    are integers beyond 2^53, whose float difference could read 0 on a positive gap)."""
    ub: Any = None
    lb: Any = None
    ts, gs = [], []
    for r in rows:
        x = r["value"]
        if r["kind"] == "upper" and (ub is None or x < ub):
            ub = x
        elif r["kind"] == "lower" and (lb is None or x > lb):
            lb = x
        else:
            continue
        if ub is not None and lb is not None:
            g = relative_gap(ub, lb)
            ts.append(float(r["t_s"]))
            gs.append(np.nan if g is None else float(g))
    return np.asarray(ts, dtype=np.float64), np.asarray(gs, dtype=np.float64)


def convergence(events: Sequence[dict[str, Any]], result: dict[str, Any],
                config: dict[str, Any] | None = None) -> Convergence:
    """The convergence data of a run.

    Args:
        events: the event log's rows (:func:`engine.rundir.read_events`: exact values).
        result: the run's ``result.json`` document (either problem: ``objective`` or ``cost``).
        config: the run's ``config.json`` (for the target gap), or None.
    Returns:
        The :class:`Convergence`. Events are taken in time order (a stable sort), ``error``
        events are left out.
    """
    rows = sorted((e for e in events if e.get("kind") in ("upper", "lower") and e.get("value") is not None),
                  key=lambda e: float(e["t_s"]))
    upper = _best_steps([r for r in rows if r["kind"] == "upper"], lambda a, b: a < b)
    lower = _best_steps([r for r in rows if r["kind"] == "lower"], lambda a, b: a > b)
    gap_t, gap = _exact_gaps(rows)
    obj = result.get("objective", result.get("cost"))
    lb = result.get("lower_bound")
    last = float(rows[-1]["t_s"]) if rows else 0.0
    end = max(float(result.get("elapsed_s") or 0.0), last)
    first: dict[int, float] = {}
    for e in events:
        s = int(e.get("session") or 0)
        if s > 0:
            first[s] = min(first.get(s, np.inf), float(e["t_s"]))
    sessions = sorted(first.values())
    tg = None if config is None or config.get("target_gap") is None else float(config["target_gap"])
    return Convergence(upper=upper, lower=lower, gap_t_s=gap_t, gap=gap, end_s=end,
                       objective=None if obj is None else float(obj), lower_bound=None if lb is None else float(lb),
                       target_gap=tg, stopped_because=str(result.get("stopped_because", "unknown")),
                       sessions_s=np.asarray(sessions, dtype=np.float64))


def read_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]], dict[str, Any] | None]:
    """``result.json``, the event log and ``config.json`` (None if absent) of a run directory.

    Raises:
        InputError: no readable ``result.json``.
    """
    from gapstop.engine.rundir import read_events

    p = Path(run_dir)
    try:
        doc = json.loads((p / "result.json").read_text())
    except OSError:
        raise InputError(f"{p / 'result.json'}: no result in this run directory") from None
    except (ValueError, RecursionError) as e:
        raise InputError(f"{p / 'result.json'}: unreadable ({e})") from None
    if not isinstance(doc, dict):
        raise InputError(f"{p / 'result.json'}: not a result document")
    try:
        config = json.loads((p / "config.json").read_text())
    except (OSError, ValueError, RecursionError):
        config = None
    return doc, read_events(p), config if isinstance(config, dict) else None
