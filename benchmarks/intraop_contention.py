"""An intra-op island's iteration rate beside other work in a second thread (a benchmark script, not a test).

    python benchmarks/intraop_contention.py INSTANCE {alone,moves,penalty} SECONDS [--start R.json]
        [--switch-interval S]

The island (index 0, seed 0) runs in the main thread for ``SECONDS``; beside it, in a second
thread, nothing (``alone``), CP-SAT neighbourhood moves on the solution of ``--start`` (an
``intraop solve --out`` file) (``moves``), or a penalty search from uniform weight 1
(``penalty``). Printed: the island's penalty iterations, its best cost, the other thread's moves or
iterations. ``--switch-interval``: the interpreter's thread switch interval for the run (seconds;
Python's default is 0.005; the in-process runner uses ``engine.local_runner.SWITCH_INTERVAL_S``).
Run it with ``OPENBLAS_NUM_THREADS=1``, as ``launch.py`` sets, and nothing else on the machine.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.intraop.io import load_problem  # noqa: E402
from gapstop.problems.intraop.island import IntraopIsland  # noqa: E402
from gapstop.problems.intraop.penalty import PenaltySearch  # noqa: E402
from gapstop.problems.intraop.relaxed import prepare  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("instance")
    ap.add_argument("mode", choices=("alone", "moves", "penalty"))
    ap.add_argument("seconds", type=float)
    ap.add_argument("--start", type=Path, default=None, help="moves: the solution to improve (--out file)")
    ap.add_argument("--switch-interval", type=float, default=None)
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

    other = {"moves": moves, "penalty": penalty}.get(a.mode)
    th = threading.Thread(target=other) if other is not None else None
    island = IntraopIsland(prep, 0)
    best: dict[str, int] = {}
    t0 = time.perf_counter()
    if th is not None:
        th.start()
    iterations = 0
    while time.perf_counter() - t0 < a.seconds:
        iterations += island.step(1.0, lambda c, f: best.__setitem__("cost", c))
    stop.set()
    if th is not None:
        th.join()
    print(f"{Path(a.instance).name} {a.mode}: island iterations {iterations}, best {best.get('cost')}, "
          f"other thread {side['count']}, {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
