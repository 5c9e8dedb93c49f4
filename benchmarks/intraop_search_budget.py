"""Benchmark: one penalty search at a fixed CPU budget, two configurations side by side.

Usage::

    python benchmarks/intraop_search_budget.py [--instances C A M S G] [--generated M-crosscut0.4 ...]
        [--weights 1 10] [--seeds 0 1] [--cpu-scale 1.0]

For each instance, starting weight scale and seed it runs one
:class:`~problems.intraop.penalty.PenaltySearch` per configuration until the search thread has
used the instance's CPU budget (:data:`CPU_S` times ``--cpu-scale``; ``time.thread_time``, so
other jobs on a shared machine slow it down less than wall time would) and prints its best
feasible cost divided by the reference cost (contest_anchors.csv's best known, or the generated
instance's anchor), and the iterations it made. Configurations (:data:`CONFIGS`):

* ``before``: bijection contraction only, weights lowered by ``down`` after every feasible
  relaxed solution (``max_streak=1``);
* ``after``: contraction plus single-strategy nodes folded, and the accelerated lowering
  (``max_streak`` = :data:`~problems.intraop.penalty.MAX_STREAK`).

Both use the split replay (:class:`~problems.intraop.reduce.Replay`), which changes no choice.
Generated instances are read from ``benchmarks/intraop_contest.py``'s ``--instance-dir``.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gapstop.problems.intraop.io import load_problem  # noqa: E402
from gapstop.problems.intraop.penalty import MAX_STREAK, PenaltySearch  # noqa: E402
from gapstop.problems.intraop.relaxed import prepare  # noqa: E402

DATA = Path("/work/shared/data/iopddl")
#: CPU seconds per search (about a tenth of a 2-core contest run's search time)
CPU_S = {"C": 6.0, "A": 6.0, "G": 2.0, "M": 12.0, "S": 15.0}
#: name -> (prepare()'s fold, PenaltySearch's max_streak)
CONFIGS = {"before": (False, 1), "after": (True, MAX_STREAK)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", nargs="*", default=["C", "A", "M", "S", "G"])
    ap.add_argument("--generated", nargs="*", default=[])
    ap.add_argument("--instance-dir", type=Path, default=Path.home() / ".cache" / "gapstop" / "bench-instances")
    ap.add_argument("--weights", nargs="*", type=float, default=[1.0, 10.0])
    ap.add_argument("--seeds", nargs="*", type=int, default=[0, 1])
    ap.add_argument("--cpu-scale", type=float, default=1.0)
    args = ap.parse_args()
    best_known = {r["instance"]: int(r["best_known"]) for r in csv.DictReader(open(DATA / "contest_anchors.csv"))}
    jobs = [(x, DATA / f"asplos-2025-iopddl-{x}.json.gz", best_known[x], CPU_S[x]) for x in args.instances]
    for x in args.generated:
        anchor = json.loads((args.instance_dir / f"{x}.anchor.json").read_text())
        jobs.append((x, args.instance_dir / f"{x}.json.gz", anchor["cost"], CPU_S[anchor["base"]]))
    print("instance        weight seed " + " ".join(f"{c + ' / ref':>14} {'its':>5}" for c in CONFIGS), flush=True)
    for name, path, ref, cpu in jobs:
        p = load_problem(path)
        preps = {c: prepare(p, fold=fold) for c, (fold, _) in CONFIGS.items()}
        for w in args.weights:
            for seed in args.seeds:
                cells = []
                for c, (_, streak) in CONFIGS.items():
                    s = PenaltySearch(preps[c], w, seed, max_streak=streak)
                    c0 = time.thread_time()
                    while time.thread_time() - c0 < cpu * args.cpu_scale:
                        s.iterate()
                    b = s.best()
                    cells.append(f"{b.cost / ref if b else float('nan'):14.5f} {s.iterations:5d}")
                print(f"{name:15} {w:6g} {seed:4d} " + " ".join(cells), flush=True)


if __name__ == "__main__":
    main()
