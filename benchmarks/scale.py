"""Pipeline runs on deep graphs: time to a first plan, certified gap over time, peak memory.

    python benchmarks/scale.py                       # quick: 2k and 8k nodes, k = 4 and 16, 10 s runs
    python benchmarks/scale.py --sizes 2k,8k,33k,100k --ks 4,16,64 --time-limit 60 --bases gpt2,regal
    python benchmarks/scale.py --sizes 8k,100k --ks 16 --time-limit 60 --workers 2      # on Ray

Graphs: shared real graphs (``--bases``, default gpt2, 514 nodes) chained end to end
(:func:`problems.pipeline.generators.chained`: the last sink of copy r feeds every source of
copy r + 1) to about each of ``--sizes`` nodes, memory null; base ``regal`` is a REGAL-style
random DAG (:func:`~problems.pipeline.generators.regal_like`, 200 nodes) chained the same way.
Each (graph, k) is one ``pipeline solve`` in a subprocess of its own on the default local path
(``--time-limit`` seconds, seed 0), and its run directory's event log gives:

* ``first plan s``: session time of the first feasible plan (the session starts once the graph
  is loaded: ``load s`` is the process's time before it, graph reading mostly);
* ``gap@10s``, ``gap@60s``: the certified gap ``1 - bound/objective`` at that session time, or
  the run's final one where the time limit is not above it (``-``: no plan yet, or a shorter run);
* ``peak RSS GB``: the process's peak resident memory (``wait4``'s rusage, per run);
* ``evals/s``: the islands' decodes per second over the run; ``outside s``: the process's wall
  time outside the session (loading the graph, the final writes); ``exit``: the command's exit code.

Prints a markdown table. Timings on a shared machine are noisy: compare runs side by side.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SIZES = {"2k": 2_000, "8k": 8_000, "33k": 33_000, "100k": 100_000}


def graphs(bases: list[str], sizes: list[str], out_dir: Path) -> list[tuple[str, Path]]:
    """(label, file) of each chained graph, written to ``out_dir``; base ``regal`` is a
    REGAL-style random DAG of 200 nodes (Barabasi-Albert base graph, seed 0)."""
    from _pipeline_graphs import named_graph

    from gapstop.problems.pipeline.generators import chained, regal_like
    from gapstop.problems.pipeline.io import save_graph

    out = []
    for name in bases:
        label, g = ("regal200", regal_like(0, n=200, family="ba")) if name == "regal" else named_graph(name)
        for s in sizes:
            copies = max(1, round(SIZES[s] / g.n))
            p = chained(g, copies)
            f = out_dir / f"{label}_x{copies}.json.gz"
            save_graph(p, f)
            out.append((f"{label} x{copies} ({p.n:,} nodes)", f))
    return out


def run(graph: Path, k: int, time_limit_s: float, work: Path, workers: int | None = None) -> dict[str, Any]:
    """One solve in a subprocess; its figures (see the module docstring). ``workers``: on Ray (a
    local instance the command starts) with that many worker slots; None: the default local path."""
    from gapstop.engine.records import relative_gap
    from gapstop.engine.rundir import read_events

    run_dir, out = work / f"run-{graph.stem}-{k}", work / f"result-{graph.stem}-{k}.json"
    cmd = [sys.executable, str(ROOT / "launch.py"), "pipeline", "solve", str(graph), "-k", str(k),
           "--time-limit", str(time_limit_s), "--quiet", "--run-dir", str(run_dir), "--out", str(out),
           *([] if workers is None else ["--workers", str(workers)])]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.monotonic() - t0
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    events = sorted(read_events(run_dir), key=lambda e: e["t_s"])
    doc = json.loads(out.read_text()) if out.exists() else {}

    def gap_at(t: float) -> float | None:
        if t > time_limit_s:    # a shorter run
            return None
        if t == time_limit_s:   # the run's certificate (its session ends a little before the limit)
            return doc.get("gap")
        if (doc.get("elapsed_s") or 0.0) < t:   # ended before t: its certificate holds at t if it was proven
            return doc.get("gap") if doc.get("stopped_because") in ("optimal", "target-gap") else None
        ub = min((e["value"] for e in events if e["kind"] == "upper" and e["t_s"] <= t), default=None)
        lb = max((e["value"] for e in events if e["kind"] == "lower" and e["t_s"] <= t), default=None)
        return relative_gap(ub, lb)

    first = next((e["t_s"] for e in events if e["kind"] == "upper"), None)
    elapsed = doc.get("elapsed_s") or 0.0
    return {"exit": os.waitstatus_to_exitcode(status), "first_s": first, "gap10": gap_at(10.0),
            "gap60": gap_at(60.0), "rss_gb": usage.ru_maxrss / 2 ** 20, "wall_s": wall,
            "outside_s": max(0.0, wall - elapsed) if elapsed else None,
            "evals_s": doc.get("evaluations", 0) / elapsed if elapsed else None,
            "gap": doc.get("gap"), "error": stderr.strip().splitlines()[-1] if proc.returncode and stderr else ""}


def _fmt(x: Any, spec: str) -> str:
    return "-" if x is None or (isinstance(x, float) and not math.isfinite(x)) else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bases", default="gpt2", help="comma-separated graphs to chain: names in the shared data, "
                    "paths, or regal (a REGAL-style random DAG of 200 nodes)")
    ap.add_argument("--sizes", default="2k,8k", help=f"comma-separated, of {', '.join(SIZES)}")
    ap.add_argument("--ks", default="4,16")
    ap.add_argument("--time-limit", type=float, default=10.0)
    ap.add_argument("--workers", type=int, default=None,
                    help="run on Ray (started locally) with this many worker slots; peak RSS is then the driver's")
    a = ap.parse_args()
    sizes = a.sizes.split(",")
    if unknown := [s for s in sizes if s not in SIZES]:
        sys.exit(f"error: --sizes: unknown {unknown}; known: {', '.join(SIZES)}")
    ks = [int(x) for x in a.ks.split(",")]
    path = "threads (the default local path)" if a.workers is None else f"Ray, {a.workers} worker slots"
    print(f"{a.time_limit:g} s per run, {os.cpu_count()} CPUs, {path}, seed 0, memory null; times in the session's "
          "clock\n")
    print("| graph | k | first plan s | gap@10s | gap@60s | peak RSS GB | evals/s | outside s | exit |")
    print("|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="gapstop-scale-") as tmp:
        work = Path(tmp)
        for label, f in graphs(a.bases.split(","), sizes, work):
            for k in ks:
                r = run(f, k, a.time_limit, work, a.workers)
                print(f"| {label} | {k} | {_fmt(r['first_s'], '.2f')} | {_fmt(r['gap10'], '.3%')} | "
                      f"{_fmt(r['gap60'], '.3%')} | {r['rss_gb']:.2f} | {_fmt(r['evals_s'], '.1f')} | "
                      f"{_fmt(r['outside_s'], '.1f')} | {r['exit']}{' ' + r['error'] if r['error'] else ''} |",
                      flush=True)


if __name__ == "__main__":
    main()
