"""Benchmark: the intraop solver on the public contest instances at contest time limits.

Usage::

    python benchmarks/intraop_solve.py [--time-scale 0.25] [--workers 2] [--instances A G M S] [--ray]

Each instance runs as ``launch.py intraop solve --workers N`` in a new process: search
islands and bound jobs, in threads (``--in-process``, the default) or with ``--ray`` on
Ray started locally. The time to the first feasible solution is read from the run's
event log and counts from the run's start.

For each instance it prints the cost, feasibility as re-checked by an
independent evaluator written here from the raw JSON (not the package's loader
or evaluator), the time to the first feasible solution, and the ratios to the
contest winner's cost and to the best known cost (``contest_anchors.csv``) and
to the winner's solver re-run on 2 cores (``peer_solvers_2cores.csv``). It then
measures load time and peak memory for instance A from ``.json.gz`` and from
the array cache, each in a fresh subprocess. Not a test; takes minutes.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


DATA = Path("/work/shared/data/iopddl")
TIME_LIMIT_S = {"A": 60, "B": 60, "C": 60, "D": 60, "E": 60, "F": 120, "G": 120, "H": 120, "I": 120, "J": 120,
                "K": 180, "L": 180, "M": 180, "N": 180, "O": 180, "P": 240, "Q": 240, "R": 240, "S": 240, "T": 240}


def independent_check(path: Path, solution: list[int]) -> tuple[int, bool]:
    """(cost, feasible) from the raw contest JSON with plain Python ints; shares no package code."""
    doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())["problem"]
    nodes, edges = doc["nodes"], doc["edges"]
    cost = sum(c[s] for c, s in zip(nodes["costs"], solution))
    for (u, v), table in zip(edges["nodes"], edges["costs"]):
        cost += table[solution[u] * len(nodes["costs"][v]) + solution[v]]
    events: dict[int, int] = {}
    for (b, e), use, s in zip(nodes["intervals"], nodes["usages"], solution):
        if b < e:
            events[b] = events.get(b, 0) + use[s]
            events[e] = events.get(e, 0) - use[s]
    live, peak = 0, 0
    for t in sorted(events):
        live += events[t]
        peak = max(peak, live)
    limit = doc.get("usage_limit")
    forbidden = any(c[s] >= 10**18 for c, s in zip(nodes["costs"], solution))
    return cost, (limit is None or peak <= limit) and not forbidden


def _csv(path: Path, key: str) -> dict[str, dict[str, str]]:
    if not path.exists():
        return {}
    with path.open() as f:
        return {row[key]: row for row in csv.DictReader(f)}


_LOAD = """
import re, sys, time
sys.path.insert(0, {root!r})
from gapstop.problems.intraop.io import load_problem
t = time.perf_counter()
p = load_problem({path!r}, cache_dir={cache!r}, cache={use_cache})
hwm = re.search(r"VmHWM:\\s+(\\d+)", open("/proc/self/status").read()).group(1)
print(time.perf_counter() - t, int(hwm) / 1024)
"""


def _load_stats(path: Path, cache: str, use_cache: bool) -> tuple[float, float]:
    code = _LOAD.format(root=str(ROOT), path=str(path), cache=cache, use_cache=use_cache)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    return float(out[0]), float(out[1])


def _solve(path: Path, limit_s: float, seed: int, workers: int, ray: bool) -> dict:
    """``launch.py intraop solve`` in a subprocess (threads, or Ray with ``ray``): its result
    document plus the time of the first accepted solution (run clock) from the event log."""
    import pyarrow.parquet as pq

    with tempfile.TemporaryDirectory() as tmp:
        out, run_dir = Path(tmp) / "result.json", Path(tmp) / "run"
        subprocess.run([sys.executable, str(ROOT / "launch.py"), "intraop", "solve", str(path), "--time-limit",
                        str(limit_s), "--seed", str(seed), "--workers", str(workers), "--quiet", "--out", str(out),
                        "--run-dir", str(run_dir)] + ([] if ray else ["--in-process"]), check=True, cwd=ROOT,
                       stdout=subprocess.DEVNULL)
        doc = json.loads(out.read_text())
        events = pq.read_table(run_dir / "events.parquet").to_pylist()
    uppers = [e["t_s"] for e in events if e["kind"] == "upper"]
    return {**doc, "time_to_first_feasible_s": min(uppers) if uppers else None,
            "iterations": doc.get("evaluations")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--instances", nargs="+", default=["A", "G", "M", "S"])
    ap.add_argument("--time-scale", type=float, default=1.0, help="multiply the contest time limits")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    ap.add_argument("--ray", action="store_true", help="workers as Ray actors instead of threads")
    args = ap.parse_args()
    anchors = _csv(args.data_dir / "contest_anchors.csv", "instance")
    peers = {r["instance"]: r for r in csv.DictReader((args.data_dir / "peer_solvers_2cores.csv").open())
             if "winner" in r["solver"]} if (args.data_dir / "peer_solvers_2cores.csv").exists() else {}
    rows = []
    print(f"time scale {args.time_scale}, workers {args.workers}, seed {args.seed}, "
          f"{'Ray (launch.py intraop solve)' if args.ray else 'in-process threads'}")
    print(f"{'inst':4} {'limit_s':>7} {'cost':>14} {'feasible':>8} {'first_feas_s':>12} "
          f"{'/winner':>8} {'/best_known':>11} {'/winner_2core':>13}")
    for name in args.instances:
        path = args.data_dir / f"asplos-2025-iopddl-{name}.json.gz"
        limit_s = TIME_LIMIT_S.get(name, 60) * args.time_scale
        r = _solve(path, limit_s, args.seed, args.workers, args.ray)
        cost, feasible = independent_check(path, r["solution"]) if r["solution"] else (None, False)
        assert cost == r["cost"] or cost is None, (cost, r["cost"])
        a = anchors.get(name, {})
        ratio = {k: (cost / int(a[k]) if cost and a.get(k, "NA") not in ("", "NA") else None)
                 for k in ("winner_team01", "best_known")}
        peer = cost / int(peers[name]["cost"]) if cost and name in peers else None
        first = r["time_to_first_feasible_s"]
        row = {"instance": name, "time_limit_s": limit_s, "cost": cost, "feasible": feasible,
               "time_to_first_feasible_s": first, "ratio_winner": ratio["winner_team01"],
               "ratio_best_known": ratio["best_known"], "ratio_winner_2cores": peer,
               "iterations": r["iterations"]}
        rows.append(row)
        fmt = lambda x: "-" if x is None else f"{x:.4f}"  # noqa: E731
        print(f"{name:4} {limit_s:7.1f} {cost if cost else '-':>14} {str(feasible):>8} "
              f"{'-' if first is None else f'{first:.2f}':>12} {fmt(ratio['winner_team01']):>8} "
              f"{fmt(ratio['best_known']):>11} {fmt(peer):>13}", flush=True)
    a_path = args.data_dir / "asplos-2025-iopddl-A.json.gz"
    if a_path.exists():
        with tempfile.TemporaryDirectory() as cache:
            t_json, mem_json = _load_stats(a_path, cache, True)  # first load: parse + write the cache
            t_cache, mem_cache = _load_stats(a_path, cache, True)
        print(f"load A: from .json.gz {t_json:.2f} s, peak RSS {mem_json:.0f} MiB; "
              f"from cache {t_cache:.3f} s, peak RSS {mem_cache:.0f} MiB")
        rows.append({"load_A": {"json_s": t_json, "json_peak_mib": mem_json,
                                "cache_s": t_cache, "cache_peak_mib": mem_cache}})
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
