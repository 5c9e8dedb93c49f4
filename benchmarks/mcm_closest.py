"""BRKGA + FIX with and without CP-SAT's closest repair of promising splits, side by side.

Not a test. For one real-model graph and chip count: one island per (seed, share), alternating
share 0 (FIX only) and ``--share`` (the island's default), each stepped for ``--seconds``;
prints candidates made, seconds spent in CP-SAT repairs and the best valid objective.

Usage::

    python benchmarks/mcm_closest.py GRAPH C [--seconds 10] [--seeds 2] [--share 0.3]
        [--data /work/shared/data/pipeline]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.pipeline.constraints import Constraints  # noqa: E402
from gapstop.problems.pipeline.io import load_graph  # noqa: E402
from gapstop.problems.pipeline.mcm_search import CLOSEST_SHARE, BrkgaFixSearch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("chips", type=int)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--share", type=float, default=CLOSEST_SHARE)
    ap.add_argument("--data", default="/work/shared/data/pipeline")
    args = ap.parse_args()
    p = load_graph(str(Path(args.data) / f"{args.graph}.json.gz"))
    cons = Constraints(chips=args.chips, ring=True, no_triangle=True)
    for seed in range(args.seeds):
        for share in (0.0, args.share):
            isl = BrkgaFixSearch(p, cons, np.random.default_rng(seed), closest_share=share)
            t = time.monotonic()
            n = isl.step(args.seconds)
            print(f"{args.graph} C={args.chips} seed {seed} share {share}: {n} candidates, "
                  f"{isl._closest_s:.1f} s in CP-SAT repairs, best {isl.best_cost:.2f}, "
                  f"wall {time.monotonic() - t:.1f} s", flush=True)


if __name__ == "__main__":
    main()
