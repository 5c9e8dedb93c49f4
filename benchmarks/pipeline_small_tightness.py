"""How tight each pipeline lower bound is where the optimum is known (a benchmark script, not a test).

    python benchmarks/pipeline_small_tightness.py [--seeds 0 1 2 3 4 5] [--sizes 20 26] [--ks 4 6]
        [--exact-s 90] [--bound-s 60] [--jsonl rows.jsonl]

For each REGAL-style graph ``regal_like(seed, n=size)`` and each k, the exact MIP (two CP-SAT
workers) runs until it proves its optimum or ``--exact-s``; only graphs it proves are kept. Its
partition is re-scored by the exact evaluator (OPT). Then each bound runs alone on one worker, as
``pipeline bound`` runs it: ``spectral``, ``heaviest-block``, ``end-blocks`` and ``block-cover`` (the
cover climbing from the best of the others, as in a run), each for at most ``--bound-s``. Printed per case: OPT, each bound /
OPT (1 = tight), and the geometric means. On these sizes the blocks hold 3-7 nodes, as at k = 16 on the
shared REGAL-style graphs of 60-200 nodes, so the ratios say how much of a k = 16 certificate gap the
bound families themselves leave, with time no object.

Where the cover stays under the optimum, the last column says what holds it there: its partitioning LP
at a cap of 0.999 x OPT (below every acyclic partition's bottleneck) is solved to the end, and its
solution is either ``refuted`` (the cover climbs there given the time), ``fractional``, or ``acyclic``
(an integral partition into at most k convex blocks within the cap; the attempt cuts off those whose
block graph has a cycle, and an acyclic one within 0.999 x OPT would contradict OPT on these
memory-free graphs). Another word is the attempt's own reason to stop (``time``, ``stalled``).
(At n = 32 the MIP already fails to prove k = 8 in two minutes on 2 cores.) The defaults take about
6 minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.pipeline.block_cover import Cover  # noqa: E402
from gapstop.problems.pipeline.bounds import lower_bound  # noqa: E402
from gapstop.problems.pipeline.evaluate import evaluate  # noqa: E402
from gapstop.problems.pipeline.generators import regal_like  # noqa: E402

BOUNDS = ("spectral", "heaviest-block", "end-blocks", "block-cover")


def gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def blocker(p, k: int, opt: float, time_s: float) -> str:
    """What keeps the block-cover LP from refuting a cap of 0.999 x ``opt`` (module docstring)."""
    from fractions import Fraction

    cover = Cover(p, k)
    _, info = cover.refute(cover.sc.floor_of(Fraction(0.999 * opt)), time_s)
    if info["why"] != "lp <= k":
        return str(info["why"])
    # an integral partition left is acyclic: the attempt cuts off every cyclic one (Cover.cycle_cuts)
    return "fractional" if cover.integral_columns() is None else "acyclic"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4, 5])
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 26])
    ap.add_argument("--ks", type=int, nargs="+", default=[4, 6])
    ap.add_argument("--exact-s", type=float, default=90.0)
    ap.add_argument("--bound-s", type=float, default=60.0)
    ap.add_argument("--jsonl", type=Path, default=None)
    ap.add_argument("--no-why", action="store_true", help="skip the blocker column")
    a = ap.parse_args()
    rows = []
    print(f"{'graph':>28} {'k':>3} {'OPT':>10} {'exact s':>8} " + " ".join(f"{b:>15}" for b in BOUNDS)
          + ("" if a.no_why else "  at 0.999 OPT"), flush=True)
    for n in a.sizes:
        for seed in a.seeds:
            p = regal_like(seed, n=n)
            for k in a.ks:
                t = time.perf_counter()
                ex = lower_bound(p, k, "exact", a.exact_s, num_workers=2)
                ex_s = time.perf_counter() - t
                blocks = ex.detail.get("blocks")
                if ex.status != "optimal" or blocks is None:
                    print(f"{p.name:>28} {k:>3} {'unproven':>10} {ex_s:8.1f}", flush=True)
                    continue
                opt = float(evaluate(p, blocks, k=k).objective)
                row = {"graph": p.name, "n": n, "seed": seed, "k": k, "opt": opt, "exact_s": round(ex_s, 2)}
                best = -math.inf
                for b in BOUNDS:
                    kw = {"floor": best} if b == "block-cover" and math.isfinite(best) else {}
                    bd = lower_bound(p, k, b, a.bound_s, **kw)
                    if bd.value > opt * (1 + 1e-6):
                        raise SystemExit(f"{p.name} k={k}: {b} bound {bd.value} above the optimum {opt}")
                    row[b] = bd.value
                    row[b + "_s"] = round(bd.wall_s, 2)
                    best = max(best, bd.value)
                if not a.no_why and row["block-cover"] < 0.9999 * opt:
                    row["blocker"] = blocker(p, k, opt, a.bound_s)
                rows.append(row)
                print(f"{p.name:>28} {k:>3} {opt:10.2f} {ex_s:8.1f} "
                      + " ".join(f"{row[b] / opt:9.4f} ({row[b + '_s']:4.0f}s)" for b in BOUNDS)
                      + f"  {row.get('blocker', '')}", flush=True)
                if a.jsonl is not None:
                    with a.jsonl.open("a") as f:
                        f.write(json.dumps(row) + "\n")
    for k in a.ks:
        sel = [r for r in rows if r["k"] == k]
        if sel:
            print(f"k = {k}: {len(sel)} proven; geometric mean bound / OPT: "
                  + ", ".join(f"{b} {gmean([r[b] / r['opt'] for r in sel]):.4f}" for b in BOUNDS)
                  + f", best of them {gmean([max(r[b] for b in BOUNDS) / r['opt'] for r in sel]):.4f}"
                  + "".join(f"; {w} {sum(r.get('blocker') == w for r in sel)}"
                            for w in sorted({r['blocker'] for r in sel if 'blocker' in r})))


if __name__ == "__main__":
    main()
