"""An intra-op island's iteration rate beside other work in a second thread (a benchmark script, not a test).

    python benchmarks/intraop_contention.py INSTANCE {alone,moves,penalty,lagrangian} SECONDS [--start R.json]
        [--switch-interval S] [--fixed N] [--process]

The island (index 0, seed 0) runs in the main thread for ``SECONDS``; beside it, in a second
thread, nothing (``alone``), CP-SAT neighbourhood moves on the solution of ``--start`` (an
``intraop solve --out`` file) (``moves``), a penalty search from uniform weight 1
(``penalty``), or the Lagrangian bound for the whole time (``lagrangian``). Printed: the island's
penalty iterations, its best cost, the other thread's moves, iterations or bound.

How many iterations the island makes depends on which of its searches it runs, which depends on
the timing: with ``--fixed N`` the measured work is instead N iterations of one penalty search
(weight 10, seed 1), timed (the side work starts 3 s before it and gets ``SECONDS``). With
``--process`` the side work runs in a forked process instead of a thread (no shared interpreter
lock: what remains is the machine's own contention; its count is not reported back).
``--switch-interval``: the interpreter's thread switch interval for the run (seconds; Python's
default is 0.005; the in-process runner uses ``engine.local_runner.SWITCH_INTERVAL_S``).
Run it with ``OPENBLAS_NUM_THREADS=1``, as ``launch.py`` sets, and nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.intraop.io import load_problem  # noqa: E402
from gapstop.problems.intraop.island import IntraopIsland  # noqa: E402
from gapstop.problems.intraop.penalty import PenaltySearch  # noqa: E402
from gapstop.problems.intraop.relaxed import prepare  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("mode", choices=("alone", "moves", "penalty", "lagrangian"))
    ap.add_argument("seconds", type=float)
    ap.add_argument("--start", type=Path, default=None, help="moves: the solution to improve (--out file)")
    ap.add_argument("--switch-interval", type=float, default=None)
    ap.add_argument("--fixed", type=int, default=None, metavar="N",
                    help="time N iterations of one penalty search instead of running the island")
    ap.add_argument("--process", action="store_true", help="the side work in a forked process")
    a = ap.parse_args()
    if a.mode == "moves" and a.start is None:
        ap.error("moves needs --start")
    if a.switch_interval is not None:
        sys.setswitchinterval(a.switch_interval)
    prep = prepare(load_problem(a.instance))
    IntraopIsland(prep, 99).step(3.0, lambda c, f: None)  # compile the kernels first
    stop = threading.Event()
    side = {"count": 0}

    def moves() -> None:
        from gapstop.problems.intraop.lns import NeighbourhoodSearch

        sol = np.array(json.loads(a.start.read_text())["solution"], dtype=np.int64)
        m = NeighbourhoodSearch(prep, sol, 0)
        while not stop.is_set():
            m.step(1.0)
            side["count"] = m.moves

    def penalty() -> None:
        s = PenaltySearch(prep, 1.0, 7)
        while not stop.is_set():
            s.step(0.5)
            side["count"] = s.iterations

    def lagrangian() -> None:
        from gapstop.problems.intraop.bounds import lower_bound

        b = lower_bound(prep.problem, "lagrangian", a.seconds)
        side["count"] = int(b.value)

    other = {"moves": moves, "penalty": penalty, "lagrangian": lagrangian}.get(a.mode)
    th: Any = None
    if other is not None and a.process:
        import multiprocessing

        th = multiprocessing.get_context("fork").Process(target=other, daemon=True)
    elif other is not None:
        th = threading.Thread(target=other, daemon=True)
    best: dict[str, int] = {}
    if th is not None:
        th.start()
    if a.fixed is not None:
        time.sleep(3.0)   # the side work under way
        s = PenaltySearch(prep, 10.0, 1)
        t0 = time.perf_counter()
        while s.iterations < a.fixed:
            s.iterate()
        found = s.best()
        print(f"{Path(a.instance).name} {a.mode}{' (process)' if a.process else ''}: {a.fixed} iterations "
              f"of one search in {time.perf_counter() - t0:.2f} s, best {found.cost if found else None}")
        if a.process and th is not None:
            th.kill()
        sys.stdout.flush()
        os._exit(0)   # a side thread may be inside a kernel that cannot be stopped
    island = IntraopIsland(prep, 0)
    t0 = time.perf_counter()
    iterations = 0
    while time.perf_counter() - t0 < a.seconds:
        iterations += island.step(1.0, lambda c, f: best.__setitem__("cost", c))
    stop.set()
    if a.process and th is not None:
        th.kill()
    elif th is not None:
        th.join()
    print(f"{Path(a.instance).name} {a.mode}{' (process)' if a.process else ''}: island iterations {iterations}, "
          f"best {best.get('cost')}, other thread {'-' if a.process else side['count']}, "
          f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
