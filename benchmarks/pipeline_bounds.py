"""Benchmark of the MTPP lower bounds on the bundled graphs (not a test).

For every graph and k, prints one row: the simple bound, the spectral bound, the heaviest-block
bound, the three-superblock ``bottleneck`` bound, guess-the-bottleneck (min over j) and the exact
MIP bound, each with its wall time, the best partition of one BRKGA island searching for
``--search-seconds`` (``search``), the better of that and the exact MIP's partition,
both re-scored by the evaluator (``best-ub``), and the certified gap
``1 - best_lb / best_ub``.

Columns are plain functions registered in :data:`COLUMNS`; any column that returns
a ``"ub"`` key feeds the gap.

Usage::

    python benchmarks/pipeline_bounds.py --time-limit 20 --ks 2,4,8,16
    python benchmarks/pipeline_bounds.py --graphs resnet50,regal_003 --ks 4,8 --time-limit 2
    python benchmarks/pipeline_bounds.py --graphs regal_ --ks 4,16 --columns heaviest --as-run --tree OLD

``--columns cover`` runs the block-cover bound from the better of the spectral and
heaviest-block bounds (``floor`` in the JSON rows). ``--as-run`` times the heaviest-block bound as a run does; ``--tree`` runs another
checkout's bounds with this script, for side-by-side comparisons.
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable

def _tree() -> str:
    """The checkout whose code runs: ``--tree DIR`` (read before any import), else this one."""
    for i, a in enumerate(sys.argv):
        if a == "--tree" and i + 1 < len(sys.argv):
            return os.path.abspath(sys.argv[i + 1])
        if a.startswith("--tree="):
            return os.path.abspath(a.split("=", 1)[1])
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


sys.path.insert(0, _tree())

from gapstop.engine.records import relative_gap  # noqa: E402
from gapstop.problems.pipeline import bounds  # noqa: E402
from gapstop.problems.pipeline.evaluate import evaluate  # noqa: E402
from gapstop.problems.pipeline.io import load_graph  # noqa: E402
from gapstop.problems.pipeline.model import PipelineProblem  # noqa: E402

DEFAULT_GLOB = "/work/shared/data/pipeline/*.json.gz"


@dataclass(frozen=True)
class Column:
    """One benchmark column: ``fn(problem, k, args) -> {"value": float, "s": float, ...}``.

    ``lb=True`` marks the value as a lower bound (it feeds the best-bound column);
    a returned ``"ub"`` entry is an exactly re-scored feasible cost.
    """

    name: str
    fn: Callable[[PipelineProblem, int, argparse.Namespace], dict[str, Any]]
    lb: bool = True


def _bound_cell(b: bounds.Bound) -> dict[str, Any]:
    return {"value": b.value, "s": b.wall_s, "status": b.status}


def _simple(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    return _bound_cell(bounds.simple_bound(p, k))


def _spectral(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    return _bound_cell(bounds.spectral_bound(p, k, args.time_limit))


def _heaviest(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    if args.as_run:
        # as `solve` runs it: on the dominance contraction, after the spectral bound (its floor),
        # one CP-SAT worker, at most run.HEAVIEST_MAX_S
        from gapstop.problems.pipeline import run
        from gapstop.problems.pipeline.contract import contract

        t0 = time.perf_counter()
        q = contract(p).problem
        floor = bounds.spectral_bound(q, k, run.SPECTRAL_MAX_S).value
        b = bounds.heaviest_block_bound(q, k, run.HEAVIEST_MAX_S, num_workers=1, floor=floor)
        return {"value": b.value, "s": time.perf_counter() - t0, "status": b.status, "mu": b.detail["mu"],
                "floor": floor}
    b = bounds.heaviest_block_bound(p, k, args.time_limit, num_workers=args.workers)
    return {**_bound_cell(b), "mu": b.detail["mu"]}


def _cover(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    """The block-cover bound for --time-limit seconds from the better of the spectral and
    heaviest-block bounds (with --as-run: on the dominance contraction, those two as `solve`
    runs them, one worker); its time excludes theirs."""
    q = p
    if args.as_run:
        from gapstop.problems.pipeline.contract import contract

        q = contract(p).problem
    spectral = bounds.spectral_bound(q, k, 30.0).value
    floor = max(spectral, bounds.heaviest_block_bound(q, k, 40.0, num_workers=1, floor=spectral).value)
    b = bounds.block_cover_bound(q, k, args.time_limit, num_workers=1 if args.as_run else args.workers, floor=floor)
    return {**_bound_cell(b), "floor": floor, "caps": len(b.detail["caps"]), "columns": b.detail["columns"]}


def _bottleneck(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    return _bound_cell(bounds.bottleneck_bound(p, k, args.time_limit, num_workers=args.workers))


def _guess(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    b = bounds.guess_the_bottleneck(p, k, args.time_limit, num_workers=args.workers)
    return {**_bound_cell(b), "argmin_j": b.detail["argmin_j"]}


def _exact(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    b = bounds.exact_bound(p, k, args.time_limit, num_workers=args.workers)
    cell = _bound_cell(b)
    if b.detail["blocks"] is not None:
        cell["ub"] = evaluate(p, b.detail["blocks"], k=k).objective
    return cell


def _search(p: PipelineProblem, k: int, args: argparse.Namespace) -> dict[str, Any]:
    """One BRKGA island (MLA seeds, random-T share, memetic polish) for --search-seconds, in-process."""
    import time as _time

    from gapstop.problems.pipeline.run import make_search

    t0 = _time.perf_counter()
    s = make_search(p, k, args.seed, 0)
    s.step(args.search_seconds)
    value, split = s.best()
    ub = evaluate(p, split.blocks, split.order, k=k).objective
    return {"value": ub, "ub": ub, "s": _time.perf_counter() - t0, "status": "closed-form"}


COLUMNS: list[Column] = [
    Column("simple", _simple),
    Column("spectral", _spectral),
    Column("heaviest", _heaviest),
    Column("cover", _cover),
    Column("bottleneck", _bottleneck),
    Column("guess", _guess),
    Column("exact", _exact),
    Column("search", _search, lb=False),
]


def run_row(p: PipelineProblem, k: int, args: argparse.Namespace, columns: list[Column]) -> dict[str, Any]:
    row: dict[str, Any] = {"graph": p.name, "n": p.n, "k": k}
    for col in columns:
        try:
            row[col.name] = col.fn(p, k, args)
        except Exception as e:  # a failed column is data, not a crash of the whole table
            row[col.name] = {"value": math.nan, "s": 0.0, "status": f"error: {e}"}
    lbs = [row[c.name]["value"] for c in columns if c.lb and math.isfinite(row[c.name]["value"])]
    ubs = [row[c.name]["ub"] for c in columns if "ub" in row[c.name]]
    row["best_lb"] = max(lbs, default=-math.inf)
    row["best_ub"] = min(ubs, default=math.inf)
    row["gap"] = relative_gap(row["best_ub"], row["best_lb"])
    return row


def _fmt(x: float) -> str:
    if not math.isfinite(x):
        return "-"
    return f"{x:.6g}"


def format_row(row: dict[str, Any], columns: list[Column]) -> str:
    cells = [f"{row['graph'][:18]:18s}", f"{row['n']:5d}", f"{row['k']:3d}"]
    for col in columns:
        c = row[col.name]
        # the eigenvalue and weighting ascents have no "optimal": their values are final
        final = c.get("status") in (None, "optimal", "closed-form") or col.name in ("spectral", "heaviest", "cover")
        flag = "" if final else "*"
        cells.append(f"{_fmt(c['value']) + flag:>12s} {c['s']:6.1f}s")
    cells.append(f"{_fmt(row['best_ub']):>12s}")
    cells.append(f"{'-' if row['gap'] is None else format(row['gap'], '.4f'):>7s}")
    return " ".join(cells)


def header(columns: list[Column]) -> str:
    cells = [f"{'graph':18s}", f"{'n':>5s}", f"{'k':>3s}"]
    cells += [f"{col.name:>12s} {'time':>7s}" for col in columns]
    cells += [f"{'best-ub':>12s}", f"{'gap':>7s}"]
    return " ".join(cells)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default=DEFAULT_GLOB, help="glob of graph files")
    ap.add_argument("--graphs", default="", help="comma-separated name filter (substring of the file name)")
    ap.add_argument("--ks", default="2,4,8,16", help="comma-separated k values")
    ap.add_argument("--time-limit", type=float, default=20.0, help="seconds per MIP method and row")
    ap.add_argument("--workers", type=int, default=1, help="CP-SAT workers (keep <= 2 on shared machines)")
    ap.add_argument("--columns", default="", help=f"comma-separated subset of {[c.name for c in COLUMNS]}")
    ap.add_argument("--json", default=None, help="also write all rows as JSON lines to this file")
    ap.add_argument("--search-seconds", type=float, default=10.0, help="seconds of BRKGA search per row")
    ap.add_argument("--seed", type=int, default=0, help="search seed")
    ap.add_argument("--as-run", action="store_true",
                    help="heaviest column as `solve` runs it: contracted graph, spectral floor, 1 worker, "
                         "the run's time cap (its time includes the spectral bound)")
    ap.add_argument("--tree", default=None, help="run the bounds of this checkout (default: this one)")
    args = ap.parse_args(argv)

    files: list[Any] = sorted(glob.glob(args.data))
    if args.graphs:
        wanted = [w for w in args.graphs.split(",") if w]
        files = [f for f in files if any(w in os.path.basename(f) for w in wanted)]
        # regal:SEED: a generated REGAL-style graph (problems.pipeline.generators.regal_like)
        files += [int(w.split(":", 1)[1]) for w in wanted if w.startswith("regal:")]
    ks = [int(x) for x in args.ks.split(",") if x]
    columns = COLUMNS
    if args.columns:
        wanted_cols = args.columns.split(",")
        columns = [c for c in COLUMNS if c.name in wanted_cols]
    print(f"# time limit {args.time_limit:g} s per method, {args.workers} CP-SAT worker(s); "
          f"'*' = not proven optimal (best bound at the limit)")
    print(header(columns))
    out = open(args.json, "w") if args.json else None
    t0 = time.perf_counter()
    for f in files:
        if isinstance(f, int):
            from gapstop.problems.pipeline.generators import regal_like

            p = regal_like(f)
        else:
            p = load_graph(f)
        for k in ks:
            row = run_row(p, k, args, columns)
            print(format_row(row, columns), flush=True)
            if out:
                out.write(json.dumps(row, default=float) + "\n")
                out.flush()
    print(f"# total {time.perf_counter() - t0:.0f} s")
    if out:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
