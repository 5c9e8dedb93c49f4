"""The Lagrangian bound's settings side by side on the same instances (a script, not a test).

Usage::

    python benchmarks/intraop_lagrangian.py --time-limit 15 \\
        --configs '{"settle_share": 0}' '{"settle_share": 0.1}' \\
        --instances /work/shared/data/iopddl/asplos-2025-iopddl-A.json.gz ~/.cache/gapstop/bench-instances/G-resample0.3.json.gz \\
        [--ub 6548641531 73486126]

Each config is a JSON object of keyword arguments of ``lower_bound(problem, "lagrangian", ...)``
(e.g. ``settle_share``, ``direction``, ``inner_iterations``). For every instance the configs run
one after another, each for ``--time-limit`` seconds, with ``--ub`` (the instance's best known
cost, or the cost a run found) as the Polyak step target, as the solve's bound job passes its
incumbent. Prints the final bound, ``ub / bound`` and the bound reached after a quarter and half
of the time (what a run reports early).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.intraop.bounds import lower_bound  # noqa: E402
from gapstop.problems.intraop.io import load_problem  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--instances", nargs="+", required=True)
    ap.add_argument("--ub", nargs="*", type=int, default=None, help="one upper bound per instance")
    ap.add_argument("--configs", nargs="+", default=["{}"])
    ap.add_argument("--time-limit", type=float, default=15.0)
    a = ap.parse_args()
    if a.ub and len(a.ub) != len(a.instances):
        ap.error("--ub: one value per instance")
    for i, path in enumerate(a.instances):
        p = load_problem(path)
        ub = a.ub[i] if a.ub else None
        name = Path(path).name.replace("asplos-2025-iopddl-", "").replace(".json.gz", "")
        for text in a.configs:
            kw = json.loads(text)
            t0 = time.perf_counter()
            seen: list[tuple[float, int]] = []
            b = lower_bound(p, "lagrangian", a.time_limit, upper_bound=ub,
                            on_improvement=lambda v: seen.append((time.perf_counter() - t0, v)), **kw)

            def at(s: float) -> object:
                return max((v for t, v in seen if t <= s), default="-")

            ratio = f"{ub / b.value:.4f}" if ub and b.value > 0 else "-"
            print(f"{name:16} {json.dumps(kw):42} {b.value:>16} ub/bound {ratio}  at T/4 {at(a.time_limit / 4)}"
                  f"  T/2 {at(a.time_limit / 2)}", flush=True)


if __name__ == "__main__":
    main()
