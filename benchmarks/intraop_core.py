"""Benchmark: the relaxed problem's core with and without bijection contraction and single-strategy
folding, and what they do to the search.

Usage::

    python benchmarks/intraop_core.py [--instances A C M] [--iterations 40] [--generated M-crosscut0.4 ...]
        [--settings off contract fold] [--weight 1.0]

For each instance and each setting (``off``: plain elimination; ``contract``: bijection
contraction; ``fold``: contraction plus single-strategy nodes of any degree folded, the default
of :func:`~problems.intraop.relaxed.prepare`) it prints the core left by the
elimination (nodes, tables, strategies), the planning time, and then runs one
:class:`~problems.intraop.penalty.PenaltySearch` (weight scale ``--weight``, seed 0, single thread) for a
fixed number of iterations: its best feasible cost after 10 and after all iterations, and the
thread's CPU seconds per iteration (``time.thread_time``, less sensitive to other jobs on a
shared machine than wall time). The iteration counts make the costs independent of the
machine's load. Generated instances are read from ``benchmarks/intraop_contest.py``'s
``--instance-dir``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gapstop.problems.intraop.io import load_problem  # noqa: E402
from gapstop.problems.intraop.penalty import PenaltySearch  # noqa: E402
from gapstop.problems.intraop.relaxed import prepare  # noqa: E402

DATA = Path("/work/shared/data/iopddl")
#: setting name -> prepare()'s (contract, fold)
SETTINGS = {"off": (False, False), "contract": (True, False), "fold": (True, True)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instances", nargs="*", default=["A", "C", "M"])
    ap.add_argument("--generated", nargs="*", default=[])
    ap.add_argument("--instance-dir", type=Path, default=Path.home() / ".cache" / "gapstop" / "bench-instances")
    ap.add_argument("--iterations", type=int, default=40)
    ap.add_argument("--settings", nargs="*", default=["off", "contract", "fold"], choices=list(SETTINGS))
    ap.add_argument("--weight", type=float, default=1.0)
    args = ap.parse_args()
    paths = [DATA / f"asplos-2025-iopddl-{x}.json.gz" for x in args.instances]
    paths += [args.instance_dir / f"{x}.json.gz" for x in args.generated]
    print(f"{'instance':18} {'setting':>8} {'core':>6} {'core_tabs':>9} {'core_k':>7} {'plan_s':>6} "
          f"{'best@10':>16} {'best@end':>16} {'cpu_s/it':>8}", flush=True)
    for path in paths:
        p = load_problem(path)
        for setting in args.settings:
            contract, fold = SETTINGS[setting]
            t = time.perf_counter()
            prep = prepare(p, contract=contract, fold=fold)
            plan_s = time.perf_counter() - t
            core = prep.plan.core
            s = PenaltySearch(prep, args.weight, 0)
            best10 = None
            c0 = time.thread_time()
            for i in range(args.iterations):
                s.iterate()
                if i == 9:
                    best10 = s.best()
            cpu = (time.thread_time() - c0) / args.iterations
            b = s.best()
            print(f"{path.name.split('.')[0][-18:]:18} {setting:>8} {len(core):6d} "
                  f"{int(prep.plan.adj_ptr[-1]) // 2:9d} {int(prep.net.k[core].sum()):7d} {plan_s:6.2f} "
                  f"{best10.cost if best10 else '-':>16} {b.cost if b else '-':>16} {cpu:8.3f}", flush=True)


if __name__ == "__main__":
    main()
