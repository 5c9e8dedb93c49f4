"""Ctrl-C and SIGTERM as a run's stop reasons.

Both signals stop a run the same way: the solve loop (:func:`engine.solve_loop.drive`)
ends with ``"interrupted"`` (SIGINT) or ``"terminated"`` (SIGTERM, what job runners,
Kubernetes, Slurm and systemd send), and the runner writes the final result before the
process exits with :func:`exit_code` (128 + the signal's number). While the result is
being written both are held back (:func:`signals_held`), so a second signal cannot
leave it half-written. Python delivers signals to the main thread only; elsewhere these
helpers change nothing.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from typing import Any, Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread as Ctrl-C raises :class:`KeyboardInterrupt`."""


#: stop reason -> the process's exit status (the shell's convention: 128 + signal number); also
#: 3 for a Ray run whose coordinator actor died (the result is the driver's copy, :mod:`engine.best_copy`)
EXIT_CODES = {"interrupted": 128 + signal.SIGINT, "terminated": 128 + signal.SIGTERM, "coordinator-lost": 3}


#: the last signal :func:`_raise` turned into an exception. Some libraries catch a
#: KeyboardInterrupt in native code and raise a plain one of their own (Ray's ``ray.get``
#: does), so the exception's type alone cannot tell SIGTERM from Ctrl-C.
_last: list[int] = []


def stop_reason(exc: BaseException) -> str:
    """The stop reason of an interrupt: ``"terminated"`` for SIGTERM, else ``"interrupted"``."""
    if isinstance(exc, Terminated) or (_last and _last[-1] == signal.SIGTERM):
        return "terminated"
    return "interrupted"


def reason_of(signum: int) -> str:
    return "terminated" if signum == signal.SIGTERM else "interrupted"


def exit_code(reason: str) -> int | None:
    """The exit status a run stopped for ``reason`` ends with (None: the usual one)."""
    return EXIT_CODES.get(reason)


def _raise(signum: int, frame: Any) -> None:
    _last.append(signum)
    if signum == signal.SIGTERM:
        raise Terminated()
    raise KeyboardInterrupt()


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def install_sigterm() -> None:
    """From now on SIGTERM raises :class:`Terminated` and SIGINT :class:`KeyboardInterrupt` in
    the main thread, both noted for :func:`stop_reason` (a command's entry point)."""
    if _in_main_thread():
        del _last[:]
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, _raise)


@contextlib.contextmanager
def sigterm_raises() -> Iterator[None]:
    """While the block runs SIGTERM raises :class:`Terminated` and SIGINT :class:`KeyboardInterrupt`
    (both noted for :func:`stop_reason`); then the previous handlers are back."""
    if not _in_main_thread():
        yield
        return
    del _last[:]
    previous = {s: signal.signal(s, _raise) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


@contextlib.contextmanager
def signals_held() -> Iterator[list[int]]:
    """Hold SIGINT and SIGTERM back while the block runs; yields the list of those that came.

    For a block that must not be cut short: the final write of a result, or a run's set-up
    whose end the caller then treats as a stop (``reason_of(got[0])``)."""
    got: list[int] = []
    if not _in_main_thread():
        yield got
        return

    def note(signum: int, frame: Any) -> None:
        got.append(signum)

    previous = {s: signal.signal(s, note) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in previous.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)
