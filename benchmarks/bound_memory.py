"""Peak memory of each pipeline bound job against the graph's size (a script).

    python benchmarks/bound_memory.py                     # 2k and 8k nodes, k = 4 and 16, 10 s per job
    python benchmarks/bound_memory.py --sizes 2k,8k,33k,100k --ks 4,16 --seconds 15

Graphs: the shared gpt2 graph (514 nodes) chained end to end to about each of ``--sizes`` nodes
(:func:`problems.pipeline.generators.chained`, as ``benchmarks/scale.py``), memory null. Each
(graph, k, job) runs in a subprocess of its own: it loads the graph, computes the run's
first plan (the incumbent an LNS starts from), reads its resident set, then runs the job as a
run's bound slot does (:func:`problems.pipeline.run.run_bound_job`, one worker, ``--seconds``
of budget), and reports the job's peak resident memory above that baseline (the peak resident
set, ``VmHWM``, reset to the baseline through ``/proc/self/clear_refs`` before the job; Linux),
its wall time and the bounds it reported (``skipped`` with the reason where its model is over
its size limit).

The jobs are those of :func:`problems.pipeline.run.bound_job_specs` for the graph: ``exact``
(the MIP with the spectral, heaviest-block, end-blocks and block-cover climbs and the LNS
beside it), ``bottleneck``, one ``guess`` member (k <= 8), ``lns``. Prints a markdown table with
``MB / (n log2 n)`` per row: what the issue's n log n limit asks is that it does not grow with n.
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import SIZES, graphs  # noqa: E402  (the same chained graphs as the scale benchmark)

JOBS = {"exact": {"kind": "exact"}, "bottleneck": {"kind": "bottleneck"},
        "guess": {"kind": "guess", "j": 1, "group": "guess"}, "lns": {"kind": "lns"}}

_CHILD = r"""
import json, math, sys, time
sys.path.insert(0, {root!r})
from gapstop.problems.pipeline.io import load_graph
from gapstop.problems.pipeline.first_plan import first_plan
from gapstop.problems.pipeline.run import run_bound_job
from gapstop.engine.cancel import stop_scope

def status_mb(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
p = load_graph({graph!r})
k = {k}
plan = first_plan(p, k)
inc = (plan.objective, {{"blocks": plan.blocks.tolist(), "order": plan.order.tolist()}})
base = status_mb("VmRSS")
with open("/proc/self/clear_refs", "w") as fh:
    fh.write("5")   # resets the peak resident set (VmHWM) to the current one
bounds = []

class Ctx:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds
    def should_stop(self):
        return time.monotonic() >= self.end
    def time_left(self):
        return max(0.0, self.end - time.monotonic())
    def incumbent(self):
        return inc
    def solution(self, sol, source):
        pass
    def bound(self, b):
        bounds.append((b.method, b.status, b.value, (b.detail or {{}}).get("reason")))
    def ready(self):
        pass

t0 = time.monotonic()
ctx = Ctx({seconds})
with stop_scope(ctx.should_stop):   # as the run's job thread has it: deep loops and CP-SAT see the stop
    run_bound_job(p, k, {spec!r}, ctx, seed=0, num_workers=1)
wall = time.monotonic() - t0
peak = status_mb("VmHWM")
last = {{}}
for method, status, value, reason in bounds:
    last[method] = (status, value, reason)
print(json.dumps({{"n": p.n, "m": p.m, "base_mb": base, "peak_mb": peak,
                  "wall_s": wall, "bounds": last}}))
"""


def run_job(graph: Path, k: int, spec: dict[str, Any], seconds: float) -> dict[str, Any]:
    code = _CHILD.format(root=str(ROOT), graph=str(graph), k=k, spec=spec, seconds=seconds)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        return {"error": (proc.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="2k,8k")
    ap.add_argument("--ks", default="4,16")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--jobs", default=",".join(JOBS))
    ap.add_argument("--jsonl", type=Path, default=None)
    args = ap.parse_args()
    if unknown := [s for s in args.sizes.split(",") if s not in SIZES]:
        sys.exit(f"error: --sizes: unknown {unknown}; known: {', '.join(SIZES)}")
    ks = [int(k) for k in args.ks.split(",")]
    jobs = [j for j in args.jobs.split(",") if j]
    print("| graph | k | job | peak above base MB | MB / (n log2 n) x 1e3 | wall s | bounds (last of each) |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for label, f in graphs(["gpt2"], args.sizes.split(","), Path(tmp)):
            for k in ks:
                for job in jobs:
                    if job == "guess" and k > 8:
                        continue   # the plan runs guess members at k <= 8 only
                    r = run_job(f, k, JOBS[job], args.seconds)
                    if args.jsonl:
                        with args.jsonl.open("a") as fh:
                            fh.write(json.dumps({"graph": label, "k": k, "job": job, **r}) + "\n")
                    if "error" in r:
                        print(f"| {label} | {k} | {job} | error: {r['error']} | | | |", flush=True)
                        continue
                    above = max(0.0, r["peak_mb"] - r["base_mb"])
                    n = r["n"]
                    per = 1e3 * above / (n * math.log2(n))
                    shown = "; ".join(f"{m} {s}" + (f" ({why})" if why else "")
                                      for m, (s, _, why) in sorted(r["bounds"].items()))
                    print(f"| {label} | {k} | {job} | {above:.0f} | {per:.2f} | {r['wall_s']:.1f} | {shown} |",
                          flush=True)


if __name__ == "__main__":
    main()
