"""gapstop against plain CP-SAT on the exact MIP, side by side (a script, not a test).

    python benchmarks/pipeline_vs_cpsat.py [--graphs a,b|regal:SEED,...] [--ks 4,16] [--seconds 60]
        [--regal-seeds 26000-26009] [--repo DIR] [--jsonl results.jsonl] [--in-process] [--reps N]
    python benchmarks/pipeline_vs_cpsat.py --table-from results.jsonl

For every graph and k, one after the other, alternating which side goes first:

* gapstop: ``python launch.py pipeline solve GRAPH -k K --time-limit S --target-gap 0 --out r.json``
  (launch.py's default: without ``--address`` or ``--workers``, the solve loop in threads of
  that process), run from ``--repo`` (default: this tree); with ``--in-process``, the same
  solve loop called in a child process of this script, its event sources read from the
  run's event log;
* plain CP-SAT: the exact MIP (:func:`problems.pipeline.bounds.exact_bound`, no hint, no
  floor) for S seconds with 2 workers, in its own process; its last partition is re-scored
  by the exact evaluator and its proven bound is the certificate.

With ``--reps N`` each side runs N times per graph and k (gapstop with ``--seed`` 0..N-1,
CP-SAT with ``random_seed`` 0..N-1): both sides scatter by a percent or more at k = 16 from run to
run, so one run per side does not say which is ahead on a graph. The table then compares each
side's median objective and median bound per graph and k.

Graphs: every file in ``../shared/data/pipeline/`` and fresh REGAL-style graphs from
:func:`problems.pipeline.generators.regal_like` (``regal:SEED``; default seeds 26000-26009).
Prints one row per run, the table of geometric means per group and k: certified
ratio (objective / lower bound) of each side, gapstop's objective / CP-SAT's, gapstop's
bound / CP-SAT's, the worst objective ratio, and where gapstop's incumbents came from
(accepted improvements per source, from the run's ``events.parquet``); each graph's runs and the
ratio of the sides' median objectives; then each source's mean share of gapstop's objective
decrease from its first incumbent to its last.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from _pipeline_graphs import DATA, named_graph, shared_path

ROOT = Path(__file__).resolve().parents[1]
REAL = ("bert_base", "gpt2", "lstm_lm_unrolled", "mobilenet_v2", "resnet50", "vit_base16")


def _graph_files(spec: str, seeds: str, tmp: Path) -> list[tuple[str, str, Path]]:
    """(name, group, path) for each graph to run; generated graphs are written to ``tmp``."""
    from gapstop.problems.pipeline.io import save_graph

    names = [s for s in spec.split(",") if s] if spec else (
        sorted(p.name.split(".")[0] for p in DATA.glob("*.json*")) + [f"regal:{s}" for s in _seed_range(seeds)])
    out = []
    for name in names:
        if name.startswith("regal:"):
            label, problem = named_graph(name)
            path = tmp / f"{label}.json"
            save_graph(problem, path)
            out.append((label, "generated REGAL-style", path))
        else:
            path = shared_path(name)
            stem = path.name.split(".")[0]
            group = "shared REGAL-style" if stem.startswith("regal") else "real models"
            out.append((stem, group, path))
    return out


def _seed_range(s: str) -> list[int]:
    if "-" in s:
        a, b = s.split("-")
        return list(range(int(a), int(b) + 1))
    return [int(x) for x in s.split(",") if x]


def _sources(run_dir: Path) -> tuple[dict[str, int], dict[str, float]]:
    """Accepted improvements per source (``search-1/moves`` -> ``moves``, ``search-0`` -> ``brkga``),
    and each source's share of the objective's decrease (:func:`_gains`)."""
    try:
        from gapstop.engine.rundir import read_events
        events = read_events(run_dir)
    except Exception:  # noqa: BLE001 - a missing log only loses the breakdown
        return {}, {}
    ups = [(str(e.get("worker") or ""), float(e["value"])) for e in events if e.get("kind") == "upper"]
    return _tally([w for w, _ in ups]), _gains(ups)


def run_gapstop(repo: Path, graph: Path, k: int, seconds: float, tmp: Path, seed: int = 0) -> dict[str, Any]:
    out = tmp / f"gapstop_{graph.stem}_{k}_{seed}.json"
    run_dir = tmp / f"run_{graph.stem}_{k}_{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": str(repo)}
    t0 = time.monotonic()
    subprocess.run([sys.executable, str(repo / "launch.py"), "pipeline", "solve", str(graph), "-k", str(k),
                    "--time-limit", str(seconds), "--target-gap", "0", "--seed", str(seed), "--out", str(out),
                    "--run-dir", str(run_dir), "--quiet"], cwd=repo, env=env, stdout=subprocess.DEVNULL, check=False)
    wall = time.monotonic() - t0
    doc = json.loads(out.read_text()) if out.exists() else {}
    src, gains = _sources(run_dir)
    return {"objective": doc.get("objective"), "lower_bound": doc.get("lower_bound"),
            "found_by": doc.get("found_by"), "method": doc.get("lower_bound_method"),
            "sources": src, "gains": gains, "wall_s": round(wall, 1)}


def _tally(sources: list[str]) -> dict[str, int]:
    c: Counter[str] = Counter()
    for src in sources:
        if src.startswith("search-"):
            src = src.split("/", 1)[1] if "/" in src else "brkga"
        c[src] += 1
    return dict(c)


def run_child(mode: str, graph: Path, k: int, seconds: float, repo: Path = ROOT, seed: int = 0) -> dict[str, Any]:
    """Run ``mode`` (``--cpsat-one`` or ``--inproc-one``) in a child process; its last stdout line is JSON."""
    env = {**os.environ, "PYTHONPATH": str(repo)}
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, __file__, mode, str(graph), str(k), str(seconds), str(seed)],
                         env=env, capture_output=True, text=True, check=False)
    wall = time.monotonic() - t0
    try:
        doc = json.loads(res.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        doc = {"objective": None, "lower_bound": None, "error": res.stderr[-300:]}
    doc["wall_s"] = round(wall, 1)
    return doc


def run_cpsat(graph: Path, k: int, seconds: float, seed: int = 0) -> dict[str, Any]:
    """Plain CP-SAT in a child process (same isolation as the gapstop run)."""
    return run_child("--cpsat-one", graph, k, seconds, seed=seed)


def _inproc_one(graph: str, k: int, seconds: float, seed: int) -> None:
    """gapstop in-process (threads, no Ray: ``pipeline solve --in-process``), with its event sources."""
    from _inprocess import solve_in_process

    from gapstop.problems.pipeline.io import load_graph

    doc = solve_in_process("pipeline", load_graph(graph), {"k": k}, time_limit_s=seconds, seed=seed)
    ups = [(e["method"], e["value"]) for e in doc["events"] if e["kind"] == "upper"]
    print(json.dumps({"objective": doc["objective"], "lower_bound": doc["lower_bound"],
                      "found_by": doc["found_by"], "sources": _tally([m for m, _ in ups]), "gains": _gains(ups)}))


def _gains(ups: list[tuple[str, float]]) -> dict[str, float]:
    """Each source's share of the run's improvement: the objective decrease of its accepted
    incumbents over the first one's value, relative to the whole decrease (sums to 1 when any)."""
    if len(ups) < 2:
        return {}
    total = ups[0][1] - ups[-1][1]
    c: Counter[str] = Counter()
    for (_, prev), (src, val) in zip(ups, ups[1:]):
        c[_tally([src]).popitem()[0]] += (prev - val) / total if total > 0 else 0.0
    return {k: round(v, 4) for k, v in c.items()}


def _cpsat_one(graph: str, k: int, seconds: float, seed: int) -> None:
    from gapstop.problems.pipeline import bounds
    from gapstop.problems.pipeline.evaluate import evaluate
    from gapstop.problems.pipeline.io import load_graph

    p = load_graph(graph)
    b = bounds.exact_bound(p, k, seconds, num_workers=2, random_seed=seed)
    blocks = (b.detail or {}).get("blocks")
    obj = None if blocks is None else evaluate(p, blocks, k=k).objective
    lb = b.value if math.isfinite(b.value) else None
    print(json.dumps({"objective": obj, "lower_bound": lb, "status": b.status}))


def _gmean(xs: list[float]) -> float:
    xs = [x for x in xs if x is not None and math.isfinite(x) and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else math.nan


def _ratio(a: Any, b: Any) -> float | None:
    return a / b if a is not None and b not in (None, 0) else None


def _median(xs: list[Any]) -> float | None:
    known = [x for x in xs if x is not None]
    return statistics.median(known) if known else None


def per_graph(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (graph, k): each side's median objective and median bound over its runs
    (rows of ``--reps``; a row without ``rep`` is one run), the sources summed over the runs."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for r in rows:
        key = (r["graph"], r["k"])
        o = out.setdefault(key, {"graph": r["graph"], "group": r["group"], "k": r["k"], "runs": [],
                                 "gapstop": {"sources": Counter()}, "cpsat": {}})
        o["runs"].append(r)
        o["gapstop"]["sources"].update(r["gapstop"].get("sources", {}))
    for o in out.values():
        for side in ("gapstop", "cpsat"):
            for f in ("objective", "lower_bound"):
                o[side][f] = _median([r[side][f] for r in o["runs"]])
    return list(out.values())


def table(rows: list[dict[str, Any]]) -> str:
    """The issue's table, per group and k (geometric means over graphs; with several runs per graph
    and side, of the ratios of their medians)."""
    rows = per_graph(rows)
    lines = ["| graphs | k | n | gapstop certified | plain CP-SAT certified | objective ratio (worst) "
             "| bound ratio | gapstop's incumbents by source |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    keys = sorted({(r["group"], r["k"]) for r in rows}, key=lambda t: (t[0], t[1]))
    for group, k in keys:
        rs = [r for r in rows if r["group"] == group and r["k"] == k]
        g = [_ratio(r["gapstop"]["objective"], r["gapstop"]["lower_bound"]) for r in rs]
        c = [_ratio(r["cpsat"]["objective"], r["cpsat"]["lower_bound"]) for r in rs]
        o = [_ratio(r["gapstop"]["objective"], r["cpsat"]["objective"]) for r in rs]
        b = [_ratio(r["gapstop"]["lower_bound"], r["cpsat"]["lower_bound"]) for r in rs]
        src: Counter[str] = Counter()
        for r in rs:
            src.update(r["gapstop"].get("sources", {}))
        worst = max((x for x in o if x is not None), default=math.nan)
        lines.append(f"| {group} | {k} | {len(rs)} | {_gmean(g):.4f} | {_gmean(c):.4f} | "
                     f"{_gmean(o):.4f} ({worst:.4f}) | {_gmean(b):.4f} | "
                     + ", ".join(f"{s} {v}" for s, v in src.most_common()) + " |")
    return "\n".join(lines)


def graphs_table(rows: list[dict[str, Any]]) -> str:
    """Per graph and k: each side's runs, their medians and the ratio of the medians' objectives."""
    lines = ["| graph | k | gapstop objectives | CP-SAT objectives | median ratio |", "| --- | ---: | --- | --- | ---: |"]
    for o in sorted(per_graph(rows), key=lambda o: (o["k"], o["graph"])):
        objs = {side: ", ".join("-" if r[side]["objective"] is None else f"{r[side]['objective']:.2f}"
                                for r in o["runs"]) for side in ("gapstop", "cpsat")}
        ratio = _ratio(o["gapstop"]["objective"], o["cpsat"]["objective"])
        lines.append(f"| {o['graph']} | {o['k']} | {objs['gapstop']} | {objs['cpsat']} | "
                     + ("-" if ratio is None else f"{ratio:.4f}") + " |")
    return "\n".join(lines)


def gains_table(rows: list[dict[str, Any]]) -> str:
    """Mean share of gapstop's objective decrease per source (:func:`_gains`), per group and k."""
    keys = sorted({(r["group"], r["k"]) for r in rows}, key=lambda t: (t[0], t[1]))
    lines = ["| graphs | k | runs | share of the improvement by source (mean over runs) |", "| --- | ---: | ---: | --- |"]
    for group, k in keys:
        rs = [r["gapstop"].get("gains") or {} for r in rows if r["group"] == group and r["k"] == k]
        tot: Counter[str] = Counter()
        for g in rs:
            tot.update(g)
        lines.append(f"| {group} | {k} | {len(rs)} | "
                     + ", ".join(f"{s} {v / len(rs):.2f}" for s, v in tot.most_common()) + " |")
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) == 6 and sys.argv[1] in ("--cpsat-one", "--inproc-one"):
        one = _cpsat_one if sys.argv[1] == "--cpsat-one" else _inproc_one
        one(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--graphs", default="", help="comma list: names in the shared data, paths, or regal:SEED")
    ap.add_argument("--regal-seeds", default="26000-26009", help="generated graphs when --graphs is not given")
    ap.add_argument("--ks", default="4,16")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--repo", default=str(ROOT), help="the gapstop tree to run launch.py from")
    ap.add_argument("--jsonl", default="", help="append one JSON line per (graph, k) here")
    ap.add_argument("--in-process", action="store_true",
                    help="call the solve loop in a child process instead of running launch.py")
    ap.add_argument("--table-from", default="", help="print the tables of a --jsonl file's rows and exit")
    ap.add_argument("--reps", type=int, default=1, help="runs per side, graph and k (seeds 0..N-1)")
    args = ap.parse_args()
    if args.table_from:
        rows = [json.loads(line) for line in Path(args.table_from).read_text().splitlines() if line.strip()]
        print(table(rows))
        print()
        print(graphs_table(rows))
        print()
        print(gains_table(rows))
        return
    sys.path.insert(0, str(ROOT))
    ks = [int(k) for k in args.ks.split(",")]
    with tempfile.TemporaryDirectory() as td:
        tmp = Path(td)
        graphs = _graph_files(args.graphs, args.regal_seeds, tmp)
        rows = []
        i = 0
        for name, group, path, k, rep in ((*gr, k, rep) for gr in graphs for k in ks for rep in range(args.reps)):
            # alternate which side runs first, so drift in the machine's load hits both alike
            def gap() -> dict[str, Any]:
                if args.in_process:
                    return run_child("--inproc-one", path, k, args.seconds, Path(args.repo), seed=rep)
                return run_gapstop(Path(args.repo), path, k, args.seconds, tmp, seed=rep)

            if i % 2 == 0:
                g = gap()
                c = run_cpsat(path, k, args.seconds, seed=rep)
            else:
                c = run_cpsat(path, k, args.seconds, seed=rep)
                g = gap()
            i += 1
            row = {"graph": name, "group": group, "k": k, "rep": rep, "seconds": args.seconds, "gapstop": g,
                   "cpsat": c}
            rows.append(row)
            print(f"{name:22s} k={k:<3d} rep {rep} gapstop {g['objective']} / {g['lower_bound']} "
                  f"(by {g['found_by']}, {g['sources']})  cpsat {c['objective']} / {c['lower_bound']} "
                  f"obj ratio {_ratio(g['objective'], c['objective'])}", flush=True)
            if args.jsonl:
                with open(args.jsonl, "a") as f:
                    f.write(json.dumps(row) + "\n")
        print()
        print(table(rows))
        print()
        print(graphs_table(rows))
        print()
        print(gains_table(rows))


if __name__ == "__main__":
    main()
