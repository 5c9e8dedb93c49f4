"""Ctrl-C and SIGTERM as stop reasons: held back while a result is written, raised in a run's loop."""

from __future__ import annotations

import os
import signal
import time

import pytest

from gapstop.engine import interrupts


def _deliver(sig: int) -> None:
    os.kill(os.getpid(), sig)
    time.sleep(0.05)  # the handler runs in the main thread at its next bytecode


def test_signals_held_notes_both_signals_and_restores_the_handlers() -> None:
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    with interrupts.signals_held() as got:
        _deliver(signal.SIGTERM)  # would end the process here otherwise
        _deliver(signal.SIGINT)  # would raise KeyboardInterrupt here otherwise
        assert got == [signal.SIGTERM, signal.SIGINT]
    assert {s: signal.getsignal(s) for s in before} == before
    assert interrupts.reason_of(got[0]) == "terminated" and interrupts.reason_of(got[1]) == "interrupted"
    with pytest.raises(KeyboardInterrupt):
        _deliver(signal.SIGINT)


def test_in_a_runs_loop_sigterm_raises_and_is_told_from_ctrl_c() -> None:
    before = signal.getsignal(signal.SIGTERM)
    for sig, reason, code in ((signal.SIGTERM, "terminated", 143), (signal.SIGINT, "interrupted", 130)):
        with interrupts.sigterm_raises():
            with pytest.raises(KeyboardInterrupt) as e:
                _deliver(sig)
        assert interrupts.stop_reason(e.value) == reason and interrupts.exit_code(reason) == code
    assert signal.getsignal(signal.SIGTERM) is before
    # a library that re-raises a plain KeyboardInterrupt (Ray's ray.get does) still says SIGTERM
    with interrupts.sigterm_raises():
        with pytest.raises(KeyboardInterrupt):
            try:
                _deliver(signal.SIGTERM)
            except interrupts.Terminated:
                raise KeyboardInterrupt() from None
        assert interrupts.stop_reason(KeyboardInterrupt()) == "terminated"
    assert interrupts.exit_code("time-limit") is None
