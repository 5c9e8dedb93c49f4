"""Two gapstop trees side by side on pipeline graphs: certified ratio and time to proof (a script).

    python benchmarks/pipeline_ab.py --paths old=DIR new=DIR --graphs a,b,... [--ks 4,16]
        [--seconds 60] [--reps 1] [--memory-null] [--jsonl out.jsonl]

Each (graph, k, rep) runs ``python launch.py pipeline solve GRAPH -k K --time-limit S
--target-gap 0 --in-process --seed REP --out r.json`` from every tree in turn, alternating
which goes first (rep r runs with seed r in every tree). Graphs: names in
``../shared/data/pipeline/``, ``regal:SEED`` (generated), or paths;
``--memory-null`` drops the graphs' memory limit first (the issue tables' real models).
Prints one row per run (objective, bound, certified ratio, seconds, stop reason) and the
geometric mean of the certified ratio per tree and k, and the median wall to the stop; then,
per k, each tree's objective against the first tree's: the geometric mean over graphs of the
ratio of the per-graph medians over reps, and the graphs over 1.01.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _graphs(spec: str, memory_null: bool, tmp: Path) -> list[tuple[str, Path]]:
    from gapstop.problems.pipeline.io import save_graph
    import dataclasses

    from _pipeline_graphs import named_graph

    out = []
    for name in [s for s in spec.split(",") if s]:
        label, p = named_graph(name)
        if memory_null:
            p = dataclasses.replace(p, memory=None)
        dest = tmp / f"{label}.json"
        save_graph(p, dest)
        out.append((label, dest))
    return out


def _run(tree: str, graph: Path, k: int, seconds: float, out: Path, seed: int) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "launch.py", "pipeline", "solve", str(graph), "-k", str(k),
                           "--time-limit", str(seconds), "--target-gap", "0", "--in-process", "--quiet",
                           "--seed", str(seed), "--out", str(out)], cwd=tree, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0 or not out.exists():
        return {"error": (proc.stderr or proc.stdout).strip().splitlines()[-1:], "wall_s": wall}
    doc = json.loads(out.read_text())
    obj, lb = doc.get("objective"), doc.get("lower_bound")
    return {"objective": obj, "bound": lb, "ratio": obj / lb if obj and lb else math.inf, "wall_s": wall,
            "stopped": doc.get("stopped_because")}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--paths", nargs="+", required=True, help="NAME=DIR of each gapstop tree")
    ap.add_argument("--graphs", required=True)
    ap.add_argument("--ks", default="4,16")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--memory-null", action="store_true")
    ap.add_argument("--jsonl", default="")
    a = ap.parse_args()
    trees = [p.split("=", 1) for p in a.paths]
    rows = []
    with tempfile.TemporaryDirectory(prefix="gapstop-ab-") as tmp_s:
        tmp = Path(tmp_s)
        turn = 0
        print(f"{'graph':22s} {'k':>3s} {'tree':>6s} {'objective':>12s} {'bound':>12s} {'ratio':>8s} {'wall_s':>7s} stopped")
        for label, path in _graphs(a.graphs, a.memory_null, tmp):
            for k in (int(x) for x in a.ks.split(",")):
                for rep in range(a.reps):
                    order = trees if turn % 2 == 0 else trees[::-1]
                    turn += 1
                    for name, tree in order:
                        r = {"graph": label, "k": k, "tree": name, "rep": rep,
                             **_run(tree, path, k, a.seconds, tmp / f"{name}.json", rep)}
                        rows.append(r)
                        if a.jsonl:
                            with open(a.jsonl, "a") as f:
                                f.write(json.dumps(r) + "\n")
                        if "error" in r:
                            print(f"{label:22s} {k:3d} {name:>6s} error {r['error']}")
                        else:
                            print(f"{label:22s} {k:3d} {name:>6s} {r['objective']:12.6g} {r['bound']:12.6g} "
                                  f"{r['ratio']:8.4f} {r['wall_s']:7.1f} {r['stopped']}", flush=True)
    print()
    for k in sorted({r["k"] for r in rows}):
        for name, _ in trees:
            rs = [r for r in rows if r["k"] == k and r["tree"] == name and "error" not in r]
            if rs:
                gm = _gmean([r["ratio"] for r in rs])
                print(f"k={k:3d} {name:>6s}: geometric-mean certified ratio {gm:.4f}, median wall "
                      f"{statistics.median(r['wall_s'] for r in rs):.1f} s, proven {sum(r['ratio'] <= 1.0001 for r in rs)}"
                      f" of {len(rs)}")
    _objective_table(rows, [name for name, _ in trees])


def _gmean(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _objective_table(rows: list[dict], names: list[str]) -> None:
    """Per k, each tree's per-graph median objective over the first tree's."""
    runs: dict[tuple[int, str, str], list[float]] = {}
    for r in rows:
        if "error" not in r:
            runs.setdefault((r["k"], r["graph"], r["tree"]), []).append(r["objective"])
    med = {key: statistics.median(objs) for key, objs in runs.items()}
    for k in sorted({key[0] for key in med}):
        graphs = sorted({g for kk, g, _ in med if kk == k})
        for n in names[1:]:
            ratios = {g: med[k, g, n] / med[k, g, names[0]] for g in graphs
                      if (k, g, n) in med and (k, g, names[0]) in med}
            if not ratios:
                continue
            worse = ", ".join(f"{g} {x:.4f}" for g, x in sorted(ratios.items()) if x > 1.01) or "none"
            print(f"k={k:3d} {n:>6s} / {names[0]}: objective (medians per graph) {_gmean(list(ratios.values())):.4f}"
                  f" over {len(ratios)} graphs; over 1.01: {worse}")
            print("    " + ", ".join(f"{g} {x:.4f}" for g, x in sorted(ratios.items())))


if __name__ == "__main__":
    main()
