"""Helpers for tests that a bound does the same work next to busy cores as alone: threads that
keep the cores busy (as a run's search does beside a bound job), and a record of CP-SAT statuses."""

from __future__ import annotations

import contextlib
import threading
from typing import Iterator

import numpy as np
import pytest

from gapstop.problems.pipeline import _mip


@contextlib.contextmanager
def busy_cores(threads: int) -> Iterator[None]:
    """Run ``threads`` threads of numpy products (which release the GIL) for the block's duration."""
    done = threading.Event()

    def burn() -> None:
        a = np.random.default_rng(0).random((300, 300))
        while not done.is_set():
            a = np.tanh(a @ a)

    running = [threading.Thread(target=burn) for _ in range(threads)]
    for t in running:
        t.start()
    try:
        yield
    finally:
        done.set()
        for t in running:
            t.join()


def record_statuses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Patch :func:`problems.pipeline._mip.solve` to append each solve's status to the list returned."""
    statuses: list[str] = []
    solve = _mip.solve

    def recorded(*args: object, **kw: object) -> tuple[str, float, object, float]:
        out = solve(*args, **kw)   # type: ignore[arg-type]
        statuses.append(out[0])
        return out

    monkeypatch.setattr(_mip, "solve", recorded)
    return statuses
