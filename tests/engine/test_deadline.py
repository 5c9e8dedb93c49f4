"""The process deadline: start time from the kernel, the watchdog, the finish-cost memory."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from gapstop.engine.deadline import (Deadline, FinishCosts, JitClock, compile_note, finish_to_record, jit_clock,
                                     process_start)
from tests.timing import slack


def test_process_start_is_before_now_and_after_a_fresh_process_began() -> None:
    code = "import time; t = time.monotonic(); from gapstop.engine.deadline import process_start; print(t - process_start())"
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    age_at_import = float(out.stdout)
    # the child started after t0 and reported its age when it had run for less than the whole call
    assert 0.0 <= age_at_import <= time.monotonic() - t0 + 0.02
    assert process_start() <= time.monotonic()


def test_deadline_counts_from_its_start(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    from gapstop.engine import deadline

    # a clock that stands still: the arithmetic is checked exactly, however loaded the machine
    monkeypatch.setattr(deadline, "time", types.SimpleNamespace(monotonic=lambda: 1000.0))
    d = Deadline(5.0, start=998.0)
    assert d.elapsed() == 2.0 and d.left() == 3.0


def test_finish_costs_keep_the_last_few_and_reserve_half_again_the_largest(tmp_path) -> None:
    fc = FinishCosts(tmp_path / "f.json")
    assert fc.reserve_s("x") == 0.0
    for v in (1.0, 4.0, 2.0, 0.5, 0.5, 0.5, 0.5):
        fc.record("x", v)
    assert json.loads((tmp_path / "f.json").read_text())["x"] == [2.0, 0.5, 0.5, 0.5, 0.5]
    assert fc.reserve_s("x") == 3.0 and fc.reserve_s("y") == 0.0
    (tmp_path / "f.json").write_text("not json")
    assert fc.reserve_s("x") == 0.0  # a damaged file only loses the measurements


def test_the_jit_clock_sees_a_compile_in_its_window_and_none_outside() -> None:
    from numba import njit

    clock = jit_clock()
    assert jit_clock() is clock  # one per process
    assert clock.attach() and clock.attach()  # numba is loaded here (imported above); listens once

    @njit(cache=False)
    def fresh(x: int) -> int:  # defined here: never cached, so the call compiles it
        s = 0
        for i in range(x):
            s += i * i
        return s

    t0 = time.monotonic()
    assert fresh(10) == 285
    t1 = time.monotonic()
    assert fresh(20) == 2470  # same signature: no compile
    t2 = time.monotonic()
    compiling = clock.within(t0, t1)
    assert 0.0 < compiling <= t1 - t0
    assert clock.within(t1, t2) == 0.0
    assert clock.within(t0 - 100.0, t0) == 0.0
    assert clock.within(t0 + (t1 - t0) / 2, t1) < compiling  # a window's overlap, not whole spans


def test_the_jit_clock_never_imports_numba_itself() -> None:
    code = ("import sys; from gapstop.engine.deadline import jit_clock; c = jit_clock(); "
            "print(c.attach(), 'numba' in sys.modules); import numba; print(c.attach())")
    root = Path(__file__).resolve().parents[2]  # this checkout's code, whatever is installed
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root).stdout
    assert out.split() == ["False", "False", "True"]


def test_a_run_that_found_nothing_says_how_long_it_compiled() -> None:
    clock = JitClock()
    assert compile_note(clock) == ""
    clock._spans.append((time.monotonic() - 19.4, time.monotonic() - 2.0))
    assert "17 s of this run went to compiling" in compile_note(clock)
    clock._spans[0] = (time.monotonic() - 1.5, time.monotonic() - 1.0)
    assert compile_note(clock) == ""  # under a second: not worth a word


def test_a_finish_held_up_by_compiling_kernels_leaves_that_time_out() -> None:
    # a finish that fitted records what it took, without the compiling (once per machine)
    assert finish_to_record(4.9, 4.6, fired=False, gave_answer=False, reserve_s=6.2, margin_s=0.3) == pytest.approx(0.3)
    assert finish_to_record(0.4, 0.0, fired=False, gave_answer=False, reserve_s=0.0, margin_s=0.3) == 0.4
    assert finish_to_record(-2.0, 0.0, fired=False, gave_answer=False, reserve_s=0.0, margin_s=0.3) == 0.0
    # the watchdog gave the answer: twice the reserve, unless compiling held the finish up
    assert finish_to_record(1.0, 0.0, fired=True, gave_answer=True, reserve_s=2.0, margin_s=0.3) == 4.0
    assert finish_to_record(5.0, 4.0, fired=True, gave_answer=True, reserve_s=2.0, margin_s=0.3) == 1.0
    # fired without an answer: the search needed the time; nothing is learnt about the finish
    assert finish_to_record(5.0, 0.0, fired=True, gave_answer=False, reserve_s=2.0, margin_s=0.3) is None


_CHILD = textwrap.dedent("""
    import sys, time
    from gapstop.engine.deadline import Deadline, Watchdog
    mode = sys.argv[1]
    d = Deadline(1.5)
    w = Watchdog(d, lambda: {"cost": 7}, lambda doc: print("emitted", doc["cost"], flush=True),
                 lambda doc: 0 if doc else 1, poll_s=0.05).start()
    if mode == "done":
        assert w.claim(3)
        print("normal", flush=True)
    time.sleep(30)  # a hung search, or a hung shutdown after the answer
""")


def _child(mode: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", _CHILD, mode], capture_output=True, text=True, timeout=20)
    return time.monotonic() - t0, proc


def test_watchdog_gives_the_best_answer_and_ends_a_hung_process_before_the_deadline() -> None:
    wall, proc = _child("hung")
    # ends by the deadline (counted from the child's own start), not after its 30 s sleep; the
    # slack is the child's imports and its watchdog thread's wake-up on a loaded machine
    assert wall < 1.5 + slack(0.5)
    assert proc.stdout.split() == ["emitted", "7"] and proc.returncode == 0


def test_watchdog_only_ends_the_process_once_the_answer_is_out() -> None:
    wall, proc = _child("done")
    assert wall < 1.5 + slack(0.5)
    assert proc.stdout.split() == ["normal"] and proc.returncode == 3
