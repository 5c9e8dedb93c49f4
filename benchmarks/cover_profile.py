"""Where the block-cover bound's time goes, alone on one core (a script).

    python benchmarks/cover_profile.py --graphs a,b,... [--ks 16] [--seconds 40] [--floor-seconds 40]

Per graph and k, on the contracted graph (what a run's bound thread bounds): the spectral
bound, then the heaviest-block bound from it (at most ``--floor-seconds``), then the
block-cover climb from the better of the two for ``--seconds``, as the bound thread runs
them. Prints each cap (refuted or not, why the attempt ended, its seconds, LP rounds and the
restricted LP's last value) and the seconds spent in the restricted LP, the interval and
greedy pricing and CP-SAT's exact pricing (count, and each solve's status). Graphs: names in
``../shared/data/pipeline/``, ``regal:SEED`` (generated), or paths.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from _pipeline_graphs import named_graph  # noqa: E402
from gapstop.problems.pipeline import block_cover, bounds  # noqa: E402
from gapstop.problems.pipeline.contract import contract  # noqa: E402


def _timed(seconds: dict[str, float], calls: collections.Counter, key: str, fn: Callable[..., Any]
           ) -> Callable[..., Any]:
    def run(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        seconds[key] += time.perf_counter() - t0
        calls[key] += 1
        if key == "exact":
            calls[f"exact {out[0]}"] += 1
        return out
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", required=True)
    ap.add_argument("--ks", default="16")
    ap.add_argument("--seconds", type=float, default=40.0)
    ap.add_argument("--floor-seconds", type=float, default=40.0)
    args = ap.parse_args()
    seconds: dict[str, float] = collections.defaultdict(float)
    calls: collections.Counter = collections.Counter()
    cover = block_cover.Cover
    cover._duals = _timed(seconds, calls, "lp", cover._duals)
    cover.intervals = _timed(seconds, calls, "intervals", cover.intervals)
    cover.grown = _timed(seconds, calls, "greedy", cover.grown)
    block_cover._mip.solve = _timed(seconds, calls, "exact", block_cover._mip.solve)
    for name in args.graphs.split(","):
        q = contract(named_graph(name)[1]).problem
        for k in (int(x) for x in args.ks.split(",")):
            t0 = time.perf_counter()
            sp = bounds.spectral_bound(q, k, 30.0).value
            hb = bounds.heaviest_block_bound(q, k, args.floor_seconds, num_workers=1, floor=sp).value
            t1 = time.perf_counter()
            seconds.clear()
            calls.clear()
            b = bounds.block_cover_bound(q, k, args.seconds, num_workers=1, floor=max(sp, hb))
            print(f"{name} k={k} n={q.n}: spectral {sp:.2f}, heaviest-block {hb:.2f} ({t1 - t0:.1f} s), "
                  f"block-cover {b.value:.2f} ({time.perf_counter() - t1:.1f} s)", flush=True)
            for cap, ok, info in b.detail["caps"]:
                print(f"    cap {cap:.2f} {'refuted' if ok else 'stands '} ({info['why']}) {info['seconds']:.1f} s, "
                      f"{info['rounds']} LP rounds, LP {info['lp']:.3f}")
            print("    seconds: " + ", ".join(f"{key} {seconds[key]:.1f} ({calls[key]} calls)"
                                           for key in ("lp", "intervals", "greedy", "exact")))
            print("    exact pricing: " + ", ".join(f"{key[6:]} {n}" for key, n in sorted(calls.items())
                                                  if key.startswith("exact ")), flush=True)


if __name__ == "__main__":
    main()
