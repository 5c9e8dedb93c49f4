"""Benchmark: ``launch.py intraop solve`` as a user runs it, on the contest instances and generated ones.

Usage::

    python benchmarks/intraop_contest.py [--limits contest|third|quick] [--seeds 0 1 2]
        [--only A C G-k30-180 ...] [--no-generated] [--in-process] [--format contest] [--out rows.json]
        [--paths LABEL=ROOT[,FLAG...] ...]

Every instance in the data directory (``asplos-2025-iopddl-*.json.gz`` and ``example.json``)
plus a set of generated ones (:data:`GENERATED`: denser variants of A, G, M and S with
tables resampled from their own, a C-like variant of M with equality crosscuts, and G's
graph with 30-60 and 30-180 strategies per node) is solved once per seed by
``python launch.py intraop solve INSTANCE --time-limit L --seed S --out r.json`` in a
subprocess. For each run it measures the subprocess's wall time from just before it is
started to its exit, re-scores the ``--out`` file's solution with the package's exact
evaluator (and checks that the printed answer and the file agree with it), and prints

* cost / best known: the contest's best known cost (``contest_anchors.csv``) for its
  instances; for a generated one the least cost any run of this table (or the anchor
  used to generate it) reached, so ratios there are relative to this table only, except
  for the many-strategy variants, whose optimum is at most the base's (every base solution
  is kept), so the base's best known cost caps their reference;
* the wall time and whether it is within the limit (the process's whole wall clock);
* cost / own bound: the run's certified lower bound.

With ``--paths`` every instance and seed is run once by each listed checkout (with its extra
flags) in turn, so that paths or versions are compared side by side on one machine state.

Limits: ``contest`` the contest's (A, C 60 s; G 120 s; M 180 s; S 240 s; generated: see
:data:`GENERATED`), ``third`` a third of them (C is M with a third of M's time), ``quick``
a tenth (at least 5 s), for checking the script itself. Generated instances are written
once, as contest JSON, to ``--instance-dir``; their anchor (a feasible solution of the base
that the added edges never forbid) comes from a short in-process solve of the base.

Not a test; the full table (7 contest + 7 generated instances, 3 seeds, contest limits)
takes about 2.5 hours.
"""

from __future__ import annotations

import argparse
import csv
import gzip
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from gapstop.problems.intraop.evaluate import evaluate  # noqa: E402
from gapstop.problems.intraop.io import load_problem, problem_to_dict  # noqa: E402

DATA = Path("/work/shared/data/iopddl")
CONTEST_LIMIT_S = {"A": 60, "B": 60, "C": 60, "D": 60, "E": 60, "F": 120, "G": 120, "H": 120, "I": 120, "J": 120,
                   "K": 180, "L": 180, "M": 180, "N": 180, "O": 180, "P": 240, "Q": 240, "R": 240, "S": 240,
                   "T": 240, "U": 300, "V": 300, "W": 300, "X": 300, "Y": 300, "example": 10}
#: generated instances: name -> (base, generator, keyword arguments, contest-like limit in seconds).
#: Denser variants get a third of the base's limit, as C has against M.
GENERATED: dict[str, tuple[str, str, dict[str, Any], float]] = {
    "A-resample0.11": ("A", "densify", {"seed": 0, "extra": 0.11, "kind": "resample"}, 60),
    "G-resample0.3": ("G", "densify", {"seed": 0, "extra": 0.3, "kind": "resample"}, 40),
    "M-resample0.11": ("M", "densify", {"seed": 0, "extra": 0.11, "kind": "resample"}, 60),
    "M-crosscut0.4": ("M", "densify", {"seed": 1, "extra": 0.4, "kind": "crosscut"}, 60),
    "S-resample0.11": ("S", "densify", {"seed": 0, "extra": 0.11, "kind": "resample"}, 80),
    "G-k30-60": ("G", "many_strategies", {"seed": 0, "lo": 30, "hi": 60}, 120),
    "G-k30-180": ("G", "many_strategies", {"seed": 0, "lo": 30, "hi": 180}, 300),
}
LIMIT_SCALE = {"contest": 1.0, "third": 1 / 3, "quick": 0.1}
#: seconds of the in-process solve of a base instance that provides a generator's anchor
ANCHOR_SOLVE_S = 15.0


def _instance_path(data: Path, name: str) -> Path:
    return data / ("example.json" if name == "example" else f"asplos-2025-iopddl-{name}.json.gz")


def _write_instance(problem: Any, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(json.dumps(problem_to_dict(problem), separators=(",", ":")).encode(), 5))
    tmp.replace(path)


def generated_instance(name: str, data: Path, out_dir: Path) -> tuple[Path, int | None]:
    """The generated instance ``name`` as a file (written on first use), and its anchor's cost."""
    from gapstop.problems.intraop import generators

    base, gen, kw, _ = GENERATED[name]
    path, meta = out_dir / f"{name}.json.gz", out_dir / f"{name}.anchor.json"
    if path.exists() and meta.exists():
        return path, json.loads(meta.read_text())["cost"]
    out_dir.mkdir(parents=True, exist_ok=True)
    p = load_problem(_instance_path(data, base))
    if gen == "densify":
        from _inprocess import solve_in_process

        sol = solve_in_process("intraop", p, {}, time_limit_s=ANCHOR_SOLVE_S, workers=1, bounds=False)["solution"]
        q = generators.densify(p, anchor=None if sol is None else np.array(sol), **kw)
        anchor_cost = None if sol is None else evaluate(q, sol).cost
    else:
        q, _ = generators.many_strategies(p, **kw)
        anchor_cost = None
    _write_instance(q, path)
    meta.write_text(json.dumps({"base": base, "generator": gen, "args": kw, "cost": anchor_cost}))
    return path, anchor_cost


def run_once(path: Path, limit_s: float, seed: int, flags: list[str], fmt: str, root: Path = ROOT) -> dict[str, Any]:
    """One ``launch.py intraop solve`` subprocess (of the checkout ``root``, with ``flags``): wall
    time, exit code, result file and stdout."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "r.json"
        cmd = [sys.executable, str(root / "launch.py"), "intraop", "solve", str(path), "--time-limit", str(limit_s),
               "--seed", str(seed), "--out", str(out), "--quiet", "--format", fmt, "--run-dir", str(Path(tmp) / "run")]
        cmd += flags
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        doc = json.loads(out.read_text()) if out.exists() else None
    lines = proc.stdout.strip().splitlines()
    printed = json.loads(lines[-1]) if lines else None
    if isinstance(printed, dict):
        printed = printed.get("solution")
    return {"wall_s": wall, "returncode": proc.returncode, "doc": doc, "printed": printed,
            "stderr": proc.stderr.strip().splitlines()[-1:] if proc.stderr.strip() else []}


def _fmt(x: float | None, spec: str = ".4f") -> str:
    return "-" if x is None else format(x, spec)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data-dir", type=Path, default=DATA)
    ap.add_argument("--instance-dir", type=Path, default=Path.home() / ".cache" / "gapstop" / "bench-instances")
    ap.add_argument("--limits", choices=sorted(LIMIT_SCALE), default="contest")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--only", nargs="+", default=None, help="instance names (A, C, ..., G-k30-180)")
    ap.add_argument("--no-generated", action="store_true")
    ap.add_argument("--in-process", action="store_true", help="pass --in-process")
    ap.add_argument("--paths", nargs="+", default=None, metavar="LABEL=ROOT[,FLAG...]",
                    help="side by side: for every instance and seed, one run of each, in turn, by the checkout "
                         "ROOT's launch.py with the extra flags (e.g. old=/tmp/old,--in-process new=.)")
    ap.add_argument("--format", dest="fmt", choices=["json", "contest"], default="json")
    ap.add_argument("--out", type=Path, default=None, help="also write the rows as JSON")
    args = ap.parse_args()
    anchors = {r["instance"]: r for r in csv.DictReader((args.data_dir / "contest_anchors.csv").open())}
    peers = {r["instance"]: int(r["cost"]) for r in csv.DictReader((args.data_dir / "peer_solvers_2cores.csv").open())
             if "winner" in r["solver"]}
    names = sorted(p.name.split("-")[-1].split(".")[0] for p in args.data_dir.glob("asplos-2025-iopddl-*.json.gz"))
    names += ["example"] if (args.data_dir / "example.json").exists() else []
    if not args.no_generated:
        names += list(GENERATED)
    if args.only:
        names = [x for x in names if x in args.only]
    scale = LIMIT_SCALE[args.limits]
    paths: list[tuple[str, Path, list[str]]] = []
    for spec in args.paths or [f"run={ROOT}" + (",--in-process" if args.in_process else "")]:
        label, _, rest = spec.partition("=")
        root, *flags = rest.split(",")
        paths.append((label, Path(root).resolve(), flags))
    print(f"limits {args.limits} (x{scale:.3g}), seeds {args.seeds}, "
          f"{'; '.join(lab + ': ' + str(root) + ' ' + ' '.join(fl) for lab, root, fl in paths)}, --format {args.fmt}",
          flush=True)
    print(f"{'instance':16} {'path':>10} {'limit_s':>7} {'seed':>4} {'cost':>16} {'wall_s':>7} {'in_limit':>8} "
          f"{'/own_bound':>10} {'exit':>4}", flush=True)
    rows: list[dict[str, Any]] = []
    for name in names:
        if name in GENERATED:
            path, anchor_cost = generated_instance(name, args.data_dir, args.instance_dir)
            limit = GENERATED[name][3]
        else:
            path, anchor_cost, limit = _instance_path(args.data_dir, name), None, CONTEST_LIMIT_S.get(name, 60)
        limit_s = max(5.0, round(limit * scale, 1))
        problem = load_problem(path)
        for seed, (label, root, flags) in ((sd, pth) for sd in args.seeds for pth in paths):
            r = run_once(path, limit_s, seed, flags, args.fmt, root)
            doc = r["doc"]
            sol = None if doc is None else doc.get("solution")
            ev = None if sol is None else evaluate(problem, sol)
            cost = ev.cost if ev is not None and ev.feasible else None
            if doc is not None and cost is not None:
                assert doc["cost"] == cost, (name, doc["cost"], cost)  # the file states its true cost
                assert r["printed"] == sol, (name, "printed answer differs from --out")
            lb = None if doc is None else doc.get("lower_bound")
            row = {"instance": name, "path": label, "limit_s": limit_s, "seed": seed, "cost": cost, "wall_s": round(r["wall_s"], 3),
                   "within_limit": r["wall_s"] <= limit_s, "lower_bound": lb,
                   "cost_over_bound": cost / lb if cost and lb else None, "returncode": r["returncode"],
                   "stopped_because": None if doc is None else doc.get("stopped_because"),
                   "anchor_cost": anchor_cost, "stderr": r["stderr"]}
            rows.append(row)
            print(f"{name:16} {label:>10} {limit_s:7.1f} {seed:4d} {cost if cost is not None else '-':>16} "
                  f"{r['wall_s']:7.2f} {str(row['within_limit']):>8} {_fmt(row['cost_over_bound']):>10} "
                  f"{r['returncode']:4d}", flush=True)
    # reference costs: the contest's best known, else the best of this table (capped as documented)
    print(f"\n{'instance':16} {'path':>10} {'limit_s':>7} {'median/best':>11} {'worst/best':>10} {'/winner_2c':>10} "
          f"{'max_wall_s':>10} {'over_limit':>10} {'med/bound':>9}  reference")
    ratios = []
    for name, label in dict.fromkeys((r["instance"], r["path"]) for r in rows):
        every = [r for r in rows if r["instance"] == name]
        mine = [r for r in every if r["path"] == label]
        costs = [r["cost"] for r in mine if r["cost"] is not None]
        seen = [c for c in [r["cost"] for r in every] + [mine[0]["anchor_cost"]] if c is not None]
        if name in anchors:
            ref, what = int(anchors[name]["best_known"]), "contest best known"
        elif name in GENERATED and GENERATED[name][1] == "many_strategies":
            base = int(anchors[GENERATED[name][0]]["best_known"])
            ref, what = min(seen + [base]), "min(base best known, this table)"
        else:
            ref, what = (min(seen) if seen else None), "best in this table"
        med = statistics.median(costs) / ref if costs and ref else None
        worst = max(costs) / ref if len(costs) == len(mine) and ref else None
        peer = statistics.median(costs) / peers[name] if costs and name in peers else None
        bounds = [r["cost_over_bound"] for r in mine if r["cost_over_bound"] is not None]
        if med is not None and name in anchors and label == paths[0][0]:
            ratios.append(med)
        for r in mine:
            r["reference"], r["cost_over_reference"] = ref, (r["cost"] / ref if r["cost"] and ref else None)
        print(f"{name:16} {label:>10} {mine[0]['limit_s']:7.1f} {_fmt(med):>11} {_fmt(worst):>10} {_fmt(peer):>10} "
              f"{max(r['wall_s'] for r in mine):10.2f} {sum(not r['within_limit'] for r in mine):10d} "
              f"{_fmt(statistics.median(bounds) if bounds else None):>9}  {what}")
    if ratios:
        print(f"geometric mean of the contest instances' median / best known ({paths[0][0]}): "
              f"{math.exp(statistics.fmean(math.log(x) for x in ratios)):.4f}")
    over = [r for r in rows if not r["within_limit"]]
    print(f"runs over their limit: {len(over)} of {len(rows)}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
