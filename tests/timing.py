"""Bounds on wall-clock durations that hold on a loaded machine.

A test that checks that something ends in time (a stop obeyed, a deadline kept, a job that
keeps to its budget) compares a wall-clock duration with a bound. On a quiet 2-core machine
the bounds in these tests hold with a wide margin; on a loaded one (a CI runner, several jobs
sharing 2 cores) every process runs slower, by up to the load's factor. :func:`slack` scales a
bound by :data:`LOAD_SLACK` for that. Every test that uses it keeps the fault it looks for
far above the scaled bound: a stop that is not obeyed runs to a budget of 30-60 s, a job that
ignores its deadline to 30 s, against scaled bounds of a few seconds.

Durations of work done in the test's own process (drawing, importing a model) are measured in
CPU seconds instead (:func:`cpu_s`), which other processes' load does not stretch.

The end-to-end deadline tests of the command line (``tests/test_launch_deadline.py``) keep
their bounds unscaled: that a command ends by its ``--time-limit`` is the promise they check.
"""

from __future__ import annotations

import os
import time

#: how much slower than a quiet 2-core machine a loaded one may be before a latency bound fails
#: (``GAPSTOP_TEST_SLACK`` overrides it)
LOAD_SLACK = float(os.environ.get("GAPSTOP_TEST_SLACK", "3"))


def slack(seconds: float) -> float:
    """``seconds``, a bound measured on a quiet machine, scaled for a loaded one."""
    return seconds * LOAD_SLACK


def cpu_s() -> float:
    """CPU seconds of this process so far (all its threads)."""
    return time.process_time()


def watch_compiling() -> None:
    """Start noting when this process compiles numba kernels (numba must be loaded), for
    :func:`wall_s_without_compiling`."""
    from gapstop.engine.deadline import jit_clock

    assert jit_clock().attach(), "numba is not loaded yet"


def wall_s_without_compiling(t0: float) -> float:
    """Wall seconds since ``t0`` (``time.monotonic()``) less those spent compiling numba kernels:
    with a cold cache (a fresh CI machine) a first call compiles for seconds, and no deadline can
    cut a compile short. Needs :func:`watch_compiling` before ``t0``."""
    from gapstop.engine.deadline import jit_clock

    t1 = time.monotonic()
    return t1 - t0 - jit_clock().within(t0, t1)
