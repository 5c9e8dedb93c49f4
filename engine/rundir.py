"""The run directory: everything a run leaves on disk, written as it happens.

Files (all rewritten atomically, so a reader or a crash never sees half a file):

* ``config.json`` — the resolved run configuration, including the problem file's digest;
* ``best_solution.json`` — the incumbent, rewritten at every accepted improvement;
* ``events.parquet`` — every accepted improvement: ``t_s`` (seconds since the start of
  the first session), ``worker``, ``kind`` (``upper`` | ``lower`` | ``error``), ``value``
  (float64, for plots), ``method``, ``status``, ``session`` (0 for the first run, +1 per
  resume), ``value_exact`` (the value as exact text: decimal for integers of any size,
  see :func:`engine.records.exact_text`; logs written before it existed lack the column
  and are read as if it held ``value``);
* ``checkpoint.json`` — incumbent, bounds and elapsed time, enough to resume; integer
  costs and bounds are JSON integers (exact at any size);
* ``result.json`` — the problem's result document (``"stopped_because": "running"``
  while the run goes on).
"""

from __future__ import annotations

import json
import math
import functools
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from gapstop.engine.coordinator import Coordinator, Event
from gapstop.engine.errors import InputError
from gapstop.engine.persist import WriteFailures, file_digest, write_json_atomic
from gapstop.engine.records import Bound, Incumbent, exact_text, exact_value

EVENT_SCHEMA = pa.schema([("t_s", pa.float64()), ("worker", pa.string()), ("kind", pa.string()),
                          ("value", pa.float64()), ("method", pa.string()), ("status", pa.string()),
                          ("session", pa.int32()), ("value_exact", pa.string())])


_NUMPY_TYPES = {pa.float64(): np.float64, pa.int32(): np.int32}


def _event_table(rows: list[dict[str, Any]]) -> pa.Table:
    """The event rows as a table of :data:`EVENT_SCHEMA` (no nulls), built from raw buffers.

    ``pa.array`` and ``Table.from_pylist`` import pandas when it is installed (OR-Tools
    depends on it): 0.3 s of CPU on the first event of every run, taken from the exact
    MIP's head start. Building the columns from buffers avoids that import.
    """
    cols = []
    for f in EVENT_SCHEMA:
        if f.name == "value_exact":  # rows of logs written before the column existed lack it
            vals = [r.get("value_exact") or exact_text(r["value"]) for r in rows]
        elif f.name == "value":
            vals = [float(r["value"]) for r in rows]
        else:
            vals = [r[f.name] for r in rows]
        if f.type == pa.string():
            data = [v.encode() for v in vals]
            off = np.zeros(len(data) + 1, dtype=np.int32)
            np.cumsum([len(b) for b in data], out=off[1:])
            bufs = [None, pa.py_buffer(off), pa.py_buffer(b"".join(data))]
        else:
            bufs = [None, pa.py_buffer(np.asarray(vals, dtype=_NUMPY_TYPES[f.type]))]
        cols.append(pa.Array.from_buffers(f.type, len(vals), bufs))
    return pa.Table.from_arrays(cols, schema=EVENT_SCHEMA)


_Method = TypeVar("_Method", bound=Callable[..., None])


def _reported(file: str) -> Callable[[_Method], _Method]:
    """Make a write method of :class:`RunDir` report an ``OSError`` (one line, through its
    :attr:`RunDir.write_failures`) instead of raising it: the run and its result in memory
    go on, and the next successful write of the file catches up."""

    def wrap(method: _Method) -> _Method:
        @functools.wraps(method)
        def guarded(self: RunDir, *args: Any, **kwargs: Any) -> None:
            try:
                method(self, *args, **kwargs)
            except OSError as e:
                self.write_failures.failed(self.path / file, e)

        return guarded  # type: ignore[return-value]

    return wrap


def _json_float(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x


class RunDir:
    """Persists a coordinator's state; see the module docstring for the files."""

    def __init__(self, path: str | Path, config: dict[str, Any], *, resume: bool = False,
                 take_over: bool = False, write_failures: WriteFailures | None = None) -> None:
        """``resume``: a new session of a stopped run (its checkpoint must exist and match).
        ``take_over``: the same session continued by another process (the events written
        so far are kept; the clock is the caller's); neither: a new run.
        ``write_failures``: where failed writes are reported (default: one line on stderr
        per file); a write never raises."""
        self.path = Path(path)
        self.write_failures = write_failures if write_failures is not None else WriteFailures()
        self.config = config
        self.session = 0
        self.t_offset = 0.0
        self.events: list[dict[str, Any]] = []
        if resume:
            old = self.load_checkpoint(self.path)
            cfg = json.loads((self.path / "config.json").read_text())
            for key in ("problem", "problem_digest", "params"):
                if cfg.get(key) != config.get(key):
                    raise InputError(f"{self.path}: config.json: {key} differs from this run "
                                     f"({cfg.get(key)!r} vs {config.get(key)!r}); cannot resume")
            self.session = int(old.get("session", 0)) + 1
            self.t_offset = float(old.get("elapsed_s", 0.0))
            ev = self.path / "events.parquet"
            if ev.exists():
                self.events = pq.read_table(ev).to_pylist()
        else:
            self._write_config(config)
            ev = self.path / "events.parquet"
            if take_over and ev.exists():
                self.events = pq.read_table(ev).to_pylist()

    # -- writing ------------------------------------------------------------------------
    @_reported("config.json")
    def _write_config(self, config: dict[str, Any]) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        write_json_atomic(self.path / "config.json", config)

    @_reported("events.parquet")
    def record_event(self, e: Event) -> None:
        row = asdict(e)
        row["t_s"] = row["t_s"] + self.t_offset
        row["session"] = self.session
        row["value_exact"] = exact_text(e.value)
        self.events.append(row)
        tmp = self.path / ".events.parquet.tmp"
        pq.write_table(_event_table(self.events), tmp)
        tmp.replace(self.path / "events.parquet")

    @_reported("best_solution.json")
    def record_incumbent(self, inc: Incumbent) -> None:
        write_json_atomic(self.path / "best_solution.json",
                          {"cost": inc.cost, "source": inc.source, "t_s": inc.t_s + self.t_offset,
                           "solution": inc.solution})

    @_reported("checkpoint.json")
    def checkpoint(self, coord: Coordinator, elapsed_s: float) -> None:
        inc = coord.incumbent
        doc = {
            "session": self.session,
            "elapsed_s": self.t_offset + elapsed_s,
            "incumbent": None if inc is None else {"cost": inc.cost, "solution": inc.solution,
                                                     "source": inc.source},
            "bounds": [dict(b.to_dict(), value=_json_float(b.value)) for b in coord.bounds.values()],
            "group_members": {g: [m.to_dict() for m in ms.values()] for g, ms in coord.groups.items()},
        }
        write_json_atomic(self.path / "checkpoint.json", doc)

    @_reported("result.json")
    def write_result(self, doc: dict[str, Any]) -> None:
        write_json_atomic(self.path / "result.json", doc)

    # -- reading ------------------------------------------------------------------------
    @staticmethod
    def load_checkpoint(path: str | Path) -> dict[str, Any]:
        p = Path(path) / "checkpoint.json"
        try:
            doc: dict[str, Any] = json.loads(p.read_text())
            return doc
        except OSError:
            raise InputError(f"{p}: no checkpoint to resume from") from None
        except ValueError as e:
            raise InputError(f"{p}: unreadable checkpoint ({e})") from None

    def restore_into(self, coord: Coordinator, prefix: str = "resumed:") -> None:
        """Re-offer the checkpointed incumbent and bounds (see :func:`offer_checkpoint`)."""
        offer_checkpoint(self.path, coord, prefix)


def offer_checkpoint(path: str | Path, coord: Coordinator, prefix: str = "resumed:") -> None:
    """Offer the incumbent (re-scored by the evaluator; its source gets ``prefix``) and the
    bounds of the checkpoint in run directory ``path`` to ``coord``.

    Raises:
        InputError: no checkpoint there, or an unreadable one.
    """
    old = RunDir.load_checkpoint(path)
    inc = old.get("incumbent")
    if inc is not None:
        coord.offer_solution(inc["solution"], f"{prefix}{inc.get('source', '')}")
    for rec in [*old.get("bounds", []), *[m for ms in old.get("group_members", {}).values() for m in ms]]:
        if rec.get("value") is None:
            continue
        # JSON integers come back as exact ints (intra-op bounds exceed 2^53)
        coord.offer_bound(Bound(rec["method"], exact_value(rec["value"]), rec["status"], rec["wall_s"],
                                rec.get("solver", ""), rec.get("detail") or {}), prefix.rstrip(":") or "restored")


def holds_run(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` already holds a run (its config or checkpoint)."""
    return any((Path(run_dir) / f).exists() for f in ("config.json", "checkpoint.json"))


def run_config(problem_name: str, problem_path: str | None, params: dict[str, Any], seed: int, target_gap: float,
               time_limit_s: float, address: str | None = None, cpus_per_worker: float = 1.0) -> dict[str, Any]:
    """The run's ``config.json`` (a resumed run must match its problem, digest and params);
    ``problem_path`` None: a problem built in memory (no file, no digest)."""
    return {"problem": problem_name, "problem_path": None if problem_path is None else str(problem_path),
            "problem_digest": None if problem_path is None else file_digest(problem_path),
            "params": params, "seed": seed, "target_gap": target_gap, "time_limit_s": time_limit_s,
            "address": address, "cpus_per_worker": cpus_per_worker}


def read_events(path: str | Path) -> list[dict[str, Any]]:
    """The event log of a run directory as a list of rows (empty if none yet); ``value`` is
    the exact stored value (a Python int for integer values), also in older logs' floats."""
    p = Path(path) / "events.parquet"
    rows = pq.read_table(p).to_pylist() if p.exists() else []
    for r in rows:
        r["value"] = exact_value(r.get("value_exact") or r["value"])
    return rows
