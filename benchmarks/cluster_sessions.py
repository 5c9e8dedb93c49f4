"""Fresh Ray sessions in a row, each a local two-node cluster running the same shipped code.

Each session starts a new ``ray.cluster_utils.Cluster`` (head and one more node, one CPU each),
so the shipped code is unpacked under a new session folder every time: this measures what a
worker's first kernels cost in a new session. Prints one JSON line per session: when each
worker's first solution came (seconds into the run), the islands' evaluations, the objective.

    python benchmarks/cluster_sessions.py --sessions 3 --seconds 30 --clear-cache
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import ray
from ray.cluster_utils import Cluster

from gapstop.actors.runner import run
from gapstop.engine.jit_cache import node_cache_root
from gapstop.engine.rundir import read_events
from gapstop.problems.pipeline.generators import regal_like
from gapstop.problems.pipeline.io import save_graph


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("-k", type=int, default=4)
    ap.add_argument("--clear-cache", action="store_true", help=f"delete {node_cache_root()} first")
    args = ap.parse_args()
    if args.clear_cache:
        shutil.rmtree(node_cache_root(), ignore_errors=True)
    for session in range(args.sessions):
        tmp = Path(tempfile.mkdtemp())
        graph = tmp / "g.json"
        save_graph(regal_like(7, n=60, family="sbm"), graph)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        cluster.add_node(num_cpus=1)
        try:
            cluster.wait_for_nodes()
            doc = run("pipeline", str(graph), {"k": args.k}, time_limit_s=args.seconds, target_gap=0.0, seed=0,
                      run_dir=str(tmp / "rd"), address=cluster.address, workers=2)
        finally:
            ray.shutdown()
            cluster.shutdown()
        first: dict[str, float] = {}
        for e in read_events(tmp / "rd"):
            if e["kind"] == "upper":
                first.setdefault(e["worker"].split("/")[0], round(e["t_s"], 2))
        print(json.dumps({"session": session, "first_solution_s": first,
                          "nodes": len(set(doc["workers"]["nodes"].values())), "evals": doc["workers"]["evals"],
                          "objective": doc["objective"]}), flush=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
