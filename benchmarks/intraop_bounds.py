"""Lower bounds on the public contest instances: value, time, and ratios to the contest anchors.

For each instance in the data folder, runs every bound method and prints one row
per method, then the instance's best bound with ``best_known / bound`` next to
the winner paper's ``best_known / lower_bound_table5`` (smaller is tighter; the
paper reports cost/LB of A 1.01, G 1.00, M 1.01, S 1.02). Not a test. On a
shared machine keep ``--time-limit`` small; the methods run one after another.

Usage::

    python benchmarks/intraop_bounds.py [--data DIR] [--instances A,G] [--methods trivial,lagrangian]
                                        [--time-limit S] [--exact-time-limit S] [--ub-target]
                                        [--direction labelling|dual]
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.intraop.bounds import METHODS, lower_bound  # noqa: E402
from gapstop.problems.intraop.io import load_problem  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="/work/shared/data/iopddl")
    ap.add_argument("--instances", default="", help="comma-separated letters (default: all in the folder)")
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per method (unconstrained, lagrangian)")
    ap.add_argument("--exact-time-limit", type=float, default=30.0, help="seconds for CP-SAT")
    ap.add_argument("--ub-target", action="store_true",
                    help="give the Lagrangian the best known cost as its Polyak step target (an incumbent)")
    ap.add_argument("--direction", default="labelling", choices=("labelling", "dual"),
                    help="which supergradient steers the Lagrangian's multiplier steps")
    args = ap.parse_args()
    data = Path(args.data)
    anchors = {r["instance"]: r for r in csv.DictReader((data / "contest_anchors.csv").open())}
    files = sorted(data.glob("asplos-2025-iopddl-*.json.gz"))
    wanted = set(filter(None, args.instances.split(",")))
    print(f"{'inst':<4} {'method':<14} {'bound':>16} {'status':<20} {'time_s':>8} {'best/bound':>10}")
    summary = []
    for f in files:
        name = f.name.split("-")[-1].split(".")[0]
        if wanted and name not in wanted:
            continue
        t0 = time.perf_counter()
        problem = load_problem(f)
        load_s = time.perf_counter() - t0
        best_known = int(anchors[name]["best_known"])
        table5 = float(anchors[name]["lower_bound_table5"])
        best = -math.inf
        for method in args.methods.split(","):
            kw = {}
            limit = args.exact_time_limit if method == "exact" else args.time_limit
            if method == "lagrangian":
                kw["direction"] = args.direction
                if args.ub_target:
                    kw["upper_bound"] = best_known
            b = lower_bound(problem, method, limit, **kw)
            if b.value > best_known:
                raise SystemExit(f"BUG: {name} {method} bound {b.value} above the best known cost {best_known}")
            ratio = best_known / b.value if b.value > 0 else math.inf
            print(f"{name:<4} {method:<14} {b.value:>16} {b.status[:20]:<20} {b.wall_s:8.1f} {ratio:10.4f}", flush=True)
            best = max(best, b.value)
        summary.append((name, best_known, best, table5, load_s))
    print(f"\n{'inst':<4} {'best_known':>16} {'our_bound':>16} {'best/ours':>10} {'table5_LB':>10} {'best/table5':>11}")
    for name, bk, b, t5, _ in summary:
        r = bk / b if b > 0 else math.inf
        print(f"{name:<4} {bk:>16} {b:>16} {r:10.4f} {t5:10.3g} {bk / t5:11.4f}")


if __name__ == "__main__":
    main()
