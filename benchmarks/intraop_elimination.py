"""FindOptStrategy on generated and on contest instances. Not a test.

Part 1 (``--generated``, or ``--graph FILE`` for imported graphs): the hand-built graphs
of ``benchmarks/op_graphs.py`` (or the given ones) are turned into instances at p in
{4, 8, 16} (A100 profile, inference and training), solved by elimination, and the penalty search (``intraop solve --in-process``, one worker) gets the
same wall time; both costs come from the exact evaluator. With ``--labels DIR`` the
chosen configuration per op is written there, one file per instance.

Part 2 (``--contest DIR``): on the contest instances (too wide for exact tables) the
mini-bucket bound of elimination against the Lagrangian bound, both with ``--time-limit``.

Usage::

    python benchmarks/intraop_elimination.py --generated [--labels DIR]
    python benchmarks/intraop_elimination.py --graph bert.json.gz --graph gpt2.json.gz [--labels DIR]
    python benchmarks/intraop_elimination.py --contest /work/shared/data/iopddl --time-limit 30 \\
        [--instances A,C] [--max-table 1048576]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from op_graphs import dense_block, resnet_blocks, transformer  # noqa: E402

from gapstop.engine.persist import read_json_file  # noqa: E402
from gapstop.problems.chip import load_chip  # noqa: E402
from gapstop.problems.intraop.bounds import lower_bound  # noqa: E402
from gapstop.problems.intraop.elimination import find_opt_strategy  # noqa: E402
from gapstop.problems.intraop.evaluate import evaluate  # noqa: E402
from gapstop.problems.intraop.io import load_problem, problem_from_dict  # noqa: E402
from _inprocess import solve_in_process  # noqa: E402
from gapstop.problems.intraop.strategies import describe_solution, generate  # noqa: E402


def generated(labels: Path | None, files: list[Path]) -> None:
    chip = load_chip("a100-sxm-80gb")
    graphs = [read_json_file(f) for f in files] or [transformer(1), transformer(4), resnet_blocks(2),
                                                    resnet_blocks(6), dense_block(4), dense_block(6)]
    print("graph | mode | p | nodes | edges | configs (dropped) | elim s | width | max table | elim cost "
          "| bound | exact | optimal | search cost (same time) | search s")
    for g in graphs:
        for training in (False, True):
            for p in (4, 8, 16):
                doc = generate(g, "graph", p, chip, training=training)
                prob = problem_from_dict(doc, "graph")
                r = find_opt_strategy(prob)
                cost = evaluate(prob, r.solution).cost if r.solution is not None else None
                t0 = time.perf_counter()
                s = solve_in_process("intraop", prob, {}, time_limit_s=max(r.elapsed_s, 0.05), workers=1,
                                     bounds=False)
                ts = time.perf_counter() - t0
                scost = evaluate(prob, s["solution"]).cost if s.get("solution") is not None else None
                mode = "train" if training else "infer"
                print(f"{g['graph']['name']} | {mode} | {p} | {prob.n} | {prob.m} | {int(prob.node_ptr[-1])} "
                      f"({doc['meta']['dropped_total']}) | {r.elapsed_s:.3f} | {r.width} | {r.max_table} | {cost} "
                      f"| {r.value} | {r.exact} | {r.optimal} | {scost} | {ts:.2f}", flush=True)
                if labels is not None and r.solution is not None:
                    labels.mkdir(parents=True, exist_ok=True)
                    f = labels / f"{g['graph']['name']}-{mode}-p{p}.txt"
                    f.write_text("\n".join(describe_solution(doc["meta"], r.solution)) + "\n")


def contest(folder: Path, names: list[str] | None, time_limit: float, max_table: int) -> None:
    print("instance | n | elimination bound | width | split buckets | timed out | s | lagrangian bound | s")
    for f in sorted(folder.glob("*.json.gz")):
        tag = f.name.split(".")[0].split("-")[-1]
        if names and tag not in names:
            continue
        prob = load_problem(f)
        e = lower_bound(prob, "elimination", time_limit, table_limit=max_table)
        lag = lower_bound(prob, "lagrangian", time_limit)
        d = e.detail
        print(f"{tag} | {prob.n} | {e.value} | {d['width']} | {d['split_buckets']} | {d['timed_out']} | "
              f"{e.wall_s:.1f} | {lag.value} | {lag.wall_s:.1f}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--generated", action="store_true")
    ap.add_argument("--labels", type=Path, default=None)
    ap.add_argument("--graph", type=Path, action="append", default=[],
                    help="an imported graph with op metadata (repeatable); replaces the built-in graphs")
    ap.add_argument("--contest", type=Path, default=None)
    ap.add_argument("--instances", default=None, help="comma-separated letters, e.g. A,C")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--max-table", type=int, default=1 << 20)
    a = ap.parse_args()
    if a.generated or a.graph:
        generated(a.labels, a.graph)
    if a.contest is not None:
        contest(a.contest, a.instances.split(",") if a.instances else None, a.time_limit, a.max_table)


if __name__ == "__main__":
    main()
