"""The watchdog's estimate of how long the process takes to end: measured without forking."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from gapstop.engine import deadline


def test_the_exit_estimate_never_forks_and_grows_with_the_resident_set(monkeypatch: Any) -> None:
    def no_fork() -> int:
        raise AssertionError("the watchdog forked a (possibly multithreaded) process")

    monkeypatch.setattr(os, "fork", no_fork)
    wd = deadline.Watchdog(deadline.Deadline(60.0, start=0.0), lambda: None, lambda d: None, lambda d: 0)
    wd._probe_exit()
    small = wd.exit_s
    assert deadline.EXIT_BASE_S < small < 1.0
    held = np.ones((512 << 20) // 8)  # 512 MB more, every page written
    try:
        grown = deadline.teardown_s()
    finally:
        del held
    # at least the floor rate for the added pages (x2 safety), and the watchdog keeps the largest
    assert grown - small >= 2 * (400 << 20) * deadline.MIN_TEARDOWN_S_PER_BYTE
    wd._probe_exit()
    assert wd.exit_s >= small
