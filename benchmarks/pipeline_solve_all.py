"""Time to a certified gap on every graph (a script, not a test).

    python benchmarks/pipeline_solve_all.py [--ks 4,8,16] [--target-gap 0.05] [--time-limit 600] [--graphs a,b]

Runs ``python launch.py pipeline solve GRAPH -k K --target-gap G --time-limit S`` (the
default local run: the solve loop in threads of that process) for each graph in
../shared/data/pipeline and each k, each in its own process, and prints the objective, the bound and its method, the gap reached,
the time the run stopped and why (``target-gap``/``optimal`` means the target was met at
that time; ``time-limit`` means the gap shown is what was reached).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _pipeline_graphs import DATA

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", default="4,8,16")
    ap.add_argument("--target-gap", type=float, default=0.05)
    ap.add_argument("--time-limit", type=float, default=600.0)
    ap.add_argument("--graphs", default="")
    a = ap.parse_args()
    graphs = sorted(DATA.glob("*.json.gz"))
    if a.graphs:
        graphs = [g for g in graphs if any(w in g.name for w in a.graphs.split(","))]
    print(f"{'graph':<18} {'k':>3} {'objective':>12} {'bound':>12} {'method':<22} {'gap':>8} {'t_stop':>8}  stopped")
    for g in graphs:
        for k in [int(x) for x in a.ks.split(",")]:
            out = Path(tempfile.mkdtemp(prefix="gapstop-bench-")) / "result.json"
            r = subprocess.run([sys.executable, str(ROOT / "launch.py"), "pipeline", "solve", str(g), "-k", str(k),
                                "--target-gap", str(a.target_gap), "--time-limit", str(a.time_limit), "--quiet",
                                "--out", str(out), "--run-dir", str(out.parent / "run")],
                               capture_output=True, text=True)
            name = g.name.split(".")[0]
            if r.returncode != 0 or not out.exists():  # one failed run must not lose the others' rows
                err = (r.stderr.strip().splitlines() or ["no output"])[-1]
                print(f"{name:<18} {k:>3} failed (exit {r.returncode}): {err}", flush=True)
                continue
            d = json.loads(out.read_text())
            print(f"{name:<18} {k:>3} {d['objective']:12.6g} {d['lower_bound']:12.6g} {d['lower_bound_method']:<22} "
                  f"{100 * d['gap']:7.3f}% {d['elapsed_s']:7.1f}s  {d['stopped_because']}", flush=True)


if __name__ == "__main__":
    main()
