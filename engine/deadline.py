"""The process's wall-clock budget: a time limit that counts from the process's start to its exit.

:func:`process_start` dates the process from the kernel's record (``/proc/self/stat``), so
the interpreter's start-up and imports count too. A :class:`Deadline` holds the end; a
:class:`Watchdog` thread keeps it: shortly before the end (by a margin it measures: how
late its own wake-ups come and how long fetching and writing the answer take) it writes and
prints the best answer so far and ends the process, unless the normal path has already done
so, in which case it only ends the process (e.g. a slow Ray shutdown) at the same point.
:class:`FinishCosts` remembers, per kind of run, how long the end of a run (final writes,
shutdown) took, so the next run of that kind stops its search early enough for it.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

_IMPORTED = time.monotonic()


def process_start() -> float:
    """``time.monotonic()`` at which this process started (the kernel's start time; 10 ms
    resolution). Falls back to when this module was imported where ``/proc`` is unavailable."""
    try:
        stat = Path("/proc/self/stat").read_text()
        fields = stat[stat.rindex(")") + 2:].split()
        started_ticks = int(fields[19])  # field 22 of the whole line: starttime, clock ticks after boot
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        age = uptime - started_ticks / os.sysconf("SC_CLK_TCK")
        now = time.monotonic()
        return min(now, max(now - age, 0.0)) if age >= 0 else _IMPORTED
    except (OSError, ValueError, IndexError):
        return _IMPORTED


class Deadline:
    """``limit_s`` seconds of wall clock from ``start`` (default: the process's start)."""

    def __init__(self, limit_s: float, start: float | None = None) -> None:
        self.start = process_start() if start is None else start
        self.limit_s = float(limit_s)
        self.end = self.start + self.limit_s

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.end - time.monotonic()


#: bytes of the buffer whose unmapping times the process's teardown rate (:func:`teardown_s`)
TEARDOWN_PROBE_BYTES = 32 << 20
#: what ending a process costs beyond unmapping its memory (closing files, reaping; seconds)
EXIT_BASE_S = 0.02
#: the least teardown rate assumed (seconds per resident byte): a child process holding 0.1-3 GB
#: of touched numpy memory took 5-36 ms to exit on a 2-core machine, about 20 ms per GB at most
#: at 1 GB; a probe buffer's unmapping alone measures less where the kernel backs it with huge pages
MIN_TEARDOWN_S_PER_BYTE = 20e-3 / 2**30
_unmap_rate: list[float] = []  # seconds per resident byte, measured once


def resident_bytes() -> int:
    """This process's resident set (bytes; 0 where ``/proc`` is unavailable)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def teardown_s() -> float:
    """An estimate of how long this process takes to end now: :data:`EXIT_BASE_S` plus twice its
    resident set unmapped at the rate measured once on a touched probe buffer of
    :data:`TEARDOWN_PROBE_BYTES`, at least :data:`MIN_TEARDOWN_S_PER_BYTE` (a process's exit is
    dominated by freeing its pages: tens of ms for a Ray driver of a few GB)."""
    if not _unmap_rate:
        import numpy as np

        buf = np.ones(TEARDOWN_PROBE_BYTES // 8)  # written, so every page is resident
        t = time.perf_counter()
        del buf
        _unmap_rate.append((time.perf_counter() - t) / TEARDOWN_PROBE_BYTES)
    return EXIT_BASE_S + 2.0 * resident_bytes() * max(_unmap_rate[0], MIN_TEARDOWN_S_PER_BYTE)


class Watchdog:
    """Keeps a :class:`Deadline` for the whole process (a daemon thread).

    Args:
        deadline: the end.
        answer: returns the best answer document so far (or None); called from the thread.
        emit: writes and prints a document (``--out``, stdout); called once, from the thread,
            only if the normal path has not emitted its own (:meth:`emitted`).
        exit_code: the process's exit code for a document (or None: nothing feasible).
        poll_s: how often the thread wakes to measure (and to fetch the answer).
        on_exit: called just before the thread ends the process (e.g. to record a finish cost).
        on_poll: called at each of the thread's wake-ups before the end (cheap, never raises).

    Margin: ``late + 2 * (fetch + write) + exit`` with ``late`` the latest the thread has
    woken after its requested time, ``fetch`` the slowest ``answer()`` call, ``write`` the
    slowest write reported by :meth:`note_write` (or measured around ``emit``), and ``exit``
    the longest the end of the process is estimated to take: tearing down its address space,
    i.e. its resident set at the rate this process unmaps a probe buffer (:func:`teardown_s`),
    estimated every :data:`EXIT_PROBE_S` in the second half of the time; all measured during
    the run. The thread acts at ``end - margin``. Nothing forks: a fork of a multithreaded
    process (a Ray driver, numba and OR-Tools threads) can deadlock or crash the copy.
    """

    #: seconds between two measurements of the cost of ending the process
    EXIT_PROBE_S = 2.0
    #: added to the measured margin: what the run cannot measure before its end, the hand-offs of
    #: the interpreter lock to this thread while search threads run (each up to the switch
    #: interval, 5 ms) and the finish-cost record after the answer, which are a few milliseconds
    #: and would otherwise end the process just past the limit (docs/decisions/0018-finish-reserve.md).
    UNMEASURED_S = 0.05

    def __init__(self, deadline: Deadline, answer: Callable[[], dict[str, Any] | None],
                 emit: Callable[[dict[str, Any]], None], exit_code: Callable[[dict[str, Any] | None], int],
                 poll_s: float = 0.25, on_exit: Callable[[], None] | None = None,
                 on_poll: Callable[[], Any] | None = None) -> None:
        self.deadline, self.answer, self.emit, self.exit_code = deadline, answer, emit, exit_code
        self.on_exit, self.on_poll = on_exit, on_poll
        self.poll_s = poll_s
        self.late_s = 0.0
        self.fetch_s = 0.0
        self.write_s = 0.0
        self.exit_s = 0.0
        self._probed_at = -float("inf")
        self.fired = False
        self.gave_answer = False  # fired with an answer to give
        self._done = threading.Event()  # the normal path has emitted its answer
        self._code = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name="gapstop-deadline", daemon=True)

    def start(self) -> "Watchdog":
        self._thread.start()
        return self

    @property
    def margin_s(self) -> float:
        return self.late_s + 2.0 * (self.fetch_s + self.write_s) + self.exit_s + self.UNMEASURED_S

    def _probe_exit(self) -> None:
        """Update the estimate of how long ending the process takes (:func:`teardown_s`)."""
        self.exit_s = max(self.exit_s, teardown_s())

    def note_write(self, seconds: float) -> None:
        """Report how long a write of the answer took (the running ``--out`` rewrites)."""
        self.write_s = max(self.write_s, seconds)

    def claim(self, code: int) -> bool:
        """The normal path is about to write and print its answer (the process's exit code
        will be ``code``): from now on the thread only ends the process if it is still
        running at the deadline. False if the thread has already begun giving its own
        answer: the caller must then give none (the thread ends the process)."""
        with self._lock:
            if self.fired:
                return False
            self._code = code
            self._done.set()
            return True

    def _run(self) -> None:
        end = self.deadline.end
        while not self._done.is_set():
            now = time.monotonic()
            if now >= end - self.margin_s:
                break
            wake = min(end - self.margin_s, now + self.poll_s)
            if self._done.wait(wake - now):
                break
            self.late_s = max(self.late_s, time.monotonic() - wake)
            if self.on_poll is not None:
                self.on_poll()
            if time.monotonic() < end - self.margin_s:
                t = time.monotonic()
                try:
                    self.answer()
                except Exception:  # noqa: BLE001 - only measured here; a failing fetch is reported below
                    pass
                self.fetch_s = max(self.fetch_s, time.monotonic() - t)
                now = time.monotonic()
                if now - self.deadline.start >= 0.5 * self.deadline.limit_s and now - self._probed_at >= self.EXIT_PROBE_S:
                    self._probed_at = now
                    self._probe_exit()
        with self._lock:
            done, code = self._done.is_set(), self._code
            self.fired = not done
        if done:  # the answer is out: only make sure the process ends (e.g. a slow shutdown) in time,
            # keeping the whole margin: a large process (Ray's) takes tens of ms to be torn down
            self._probe_exit()
            time.sleep(max(0.0, end - self.margin_s - time.monotonic()))
        else:
            doc = None
            try:
                doc = self.answer()
                if doc is not None:
                    self.gave_answer = True
                    t = time.monotonic()
                    self.emit(doc)
                    self.note_write(time.monotonic() - t)
                else:
                    print(f"error: no feasible solution found by the time limit{compile_note()}", file=sys.stderr)
            except Exception as e:  # noqa: BLE001 - the process must still end in time
                print(f"error: at the time limit the answer could not be written: {e}", file=sys.stderr)
            code = self.exit_code(doc)
        if self.on_exit is not None:
            try:
                self.on_exit()
            except Exception:  # noqa: BLE001 - recording is optional, ending in time is not
                pass
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)


class FinishCosts:
    """Measured seconds from a run's answer to its process's exit, per kind of run, kept in
    ``$GAPSTOP_CACHE/finish_costs.json`` (or ``~/.cache/gapstop``); the last few per kind."""

    KEEP = 5

    def __init__(self, path: Path | None = None) -> None:
        root = os.environ.get("GAPSTOP_CACHE")
        self.path = path or (Path(root) if root else Path.home() / ".cache" / "gapstop") / "finish_costs.json"

    def _load(self) -> dict[str, list[float]]:
        try:
            data = json.loads(self.path.read_text())
            return {str(k): [float(x) for x in v] for k, v in data.items()}
        except (OSError, ValueError, TypeError, AttributeError):
            return {}

    def reserve_s(self, kind: str) -> float:
        """1.5x the longest recent measurement for ``kind`` (0 when none was measured yet)."""
        seen = self._load().get(kind, [])
        return 1.5 * max(seen) if seen else 0.0

    def record(self, kind: str, seconds: float) -> None:
        data = self._load()
        data[kind] = (data.get(kind, []) + [round(float(seconds), 3)])[-self.KEEP:]
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f"{self.path.name}.{os.getpid()}.tmp")
            tmp.write_text(json.dumps(data))
            tmp.replace(self.path)
        except OSError:
            pass  # an unwritable cache only loses the measurement


def finish_to_record(over_s: float, jit_s: float, *, fired: bool, gave_answer: bool, reserve_s: float,
                     margin_s: float) -> float | None:
    """What a run's finish teaches the next runs of its kind (seconds to record, None: nothing).

    ``over_s``: from the search's end (the budget's end) until the answer was out, or until the
    watchdog ended the run; ``jit_s``: the part of that spent compiling numba kernels
    (:class:`JitClock`), which a machine pays once (the kernels are cached on disk), so it is left
    out: a fresh install's first runs compile the islands' decoder into their finish, and their
    reserve cut the next five runs short by seconds each. A watchdog that had to give the answer
    records twice the reserve (at least its margin) unless compiling held the finish up; one that
    fired without an answer records nothing (the search needed the time, not the finish)."""
    if fired and not gave_answer:
        return None
    if fired and jit_s <= 0:
        return max(over_s, 2 * reserve_s, margin_s)
    return max(0.0, over_s - jit_s)


class JitClock:
    """When this process compiled numba kernels: the wall-clock intervals of numba's
    ``numba:compile`` events (cache misses only; a kernel loaded from the disk cache is not
    compiled), in ``time.monotonic()`` seconds, from :meth:`attach` on. One per process:
    :func:`jit_clock`."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._since: float | None = None
        self._spans: list[tuple[float, float]] = []
        self.attached = False

    def attach(self) -> bool:
        """Listen to numba's compile events if numba is loaded (True once listening). Never
        imports numba itself (0.3 s, which the command line keeps off the session's start):
        called again and again (the watchdog's every wake-up), it begins listening once the
        run has loaded numba, before its first kernel compiles."""
        if self.attached:
            return True
        ev = sys.modules.get("numba.core.event")
        if ev is None or not hasattr(ev, "register") or not hasattr(ev, "Listener"):
            return False  # not loaded, or still loading in another thread
        clock = self

        class _Listener(ev.Listener):  # type: ignore[name-defined, misc]
            def on_start(self, event: Any) -> None:
                clock._on_start()

            def on_end(self, event: Any) -> None:
                clock._on_end()

        with self._lock:
            if not self.attached:
                ev.register("numba:compile", _Listener())
                self.attached = True
        return True

    def _on_start(self) -> None:
        with self._lock:
            if self._depth == 0:
                self._since = time.monotonic()
            self._depth += 1

    def _on_end(self) -> None:
        with self._lock:
            self._depth = max(0, self._depth - 1)   # a compile begun before attach() ends unseen
            if self._depth == 0 and self._since is not None:
                self._spans.append((self._since, time.monotonic()))
                self._since = None

    def within(self, t0: float, t1: float) -> float:
        """Seconds of ``[t0, t1]`` during which a kernel was compiling (one still compiling
        counts up to ``t1``)."""
        with self._lock:
            spans = list(self._spans) + ([(self._since, t1)] if self._since is not None else [])
        return sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans)


_JIT = JitClock()


def jit_clock() -> JitClock:
    """This process's :class:`JitClock` (not yet listening: see :meth:`JitClock.attach`)."""
    return _JIT


def compile_note(clock: JitClock | None = None) -> str:
    """For a run that found nothing: how much of it went to compiling kernels (a fresh
    install's first runs; empty below a second)."""
    spent = (clock or _JIT).within(0.0, time.monotonic())
    if spent < 1.0:
        return ""
    return (f"; {spent:.0f} s of this run went to compiling gapstop's kernels, once per install: "
            "the next runs load them")


#: the monotonic time by which a run in this process must have stopped its search (set by the
#: command line from the process's deadline; ``inf``: no such limit, e.g. when used as a library)
_RUN_END = {"t": float("inf")}


def set_run_end(t: float) -> None:
    """Set the latest ``time.monotonic()`` at which a run's search must stop (see :func:`run_end`)."""
    _RUN_END["t"] = float(t)


def run_end() -> float:
    """The latest ``time.monotonic()`` at which this process's run must stop searching; the Ray
    driver loop clamps its end to it, so Ray's start-up counts against the process's budget."""
    return _RUN_END["t"]
