"""Ray scaling and certification benchmark (a script, not a test).

    python benchmarks/ray_scaling.py sampling  [--graph G] [--k 8] [--seconds 20] [--reps 3]
    python benchmarks/ray_scaling.py guess     [--graph G] [--k 8] [--seconds 60]
    python benchmarks/ray_scaling.py certify   [--graphs a,b] [--ks 4,16] [--seconds 60] [--reps 1]
    python benchmarks/ray_scaling.py latency   [--graphs a,b] [--ks 4,16] [--seconds 60] [--reps 3]
                                               [--paths old=/tmp/old new=.,--workers,2] [--no-cpsat]

* sampling: SliceGraph evaluations per second of search workers on Ray local, with 1 and
  2 workers, measured side by side (alternating, --reps times), over the steady state
  (from 5 s in to the end) from the coordinator's counters; prints medians and the ratio.
* guess: wall time of all k guess-the-bottleneck sub-models one after another in this
  process vs as Ray tasks, one per CPU; each model gets the same per-model time limit.
* certify: for each graph and k, plain CP-SAT on the exact MIP (2 workers, no hint) vs
  gapstop (Ray local, 2 worker slots) given the same wall time; prints objective/bound of
  each at the end (CP-SAT: its own incumbent / its proven bound; gapstop: certified), and
  when each proved optimality (with ``--reps N``: N alternating runs and the medians).
  ``--memory null`` (default) drops the memory limit, as in
  the plain CP-SAT baseline the comparison is against.
* latency: what a user waits for, end to end (a new process each time, imports and Ray
  start-up included): ``launch.py pipeline bound --method exact`` (plain CP-SAT, one worker
  per core) vs ``launch.py pipeline solve`` with the same time limit, alternating --reps
  times; prints each run's wall time and stop reason, and the medians. ``--paths`` runs the
  ``pipeline solve`` of several checkouts in turn (e.g. two versions side by side).
Graphs default to ../shared/data/pipeline.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from _pipeline_graphs import shared_path as _graph  # noqa: E402


def sampling(a: argparse.Namespace) -> None:
    import ray

    from gapstop.actors.runner import run

    rates: dict[int, list[float]] = {1: [], 2: []}
    for rep in range(a.reps):
        for n in (1, 2):
            samples: list[tuple[float, int]] = []
            run("pipeline", str(_graph(a.graph)), {"k": a.k}, time_limit_s=a.seconds, target_gap=0.0,
                seed=rep, run_dir=tempfile.mkdtemp(prefix="gapstop-bench-"), workers=n, bounds=False,
                progress=lambda st: samples.append((st["elapsed"], st["evals"])))
            ray.shutdown()
            steady = [s for s in samples if s[0] >= 5.0]
            (t0, e0), (t1, e1) = steady[0], steady[-1]
            rates[n].append((e1 - e0) / (t1 - t0))
            print(f"rep {rep} workers {n}: {rates[n][-1]:,.0f} evals/s", flush=True)
    m1, m2 = statistics.median(rates[1]), statistics.median(rates[2])
    print(f"graph {a.graph} k={a.k}: median evals/s 1 worker {m1:,.0f}, 2 workers {m2:,.0f}, ratio {m2 / m1:.2f}")


def guess(a: argparse.Namespace) -> None:
    import ray

    from gapstop.problems.pipeline.bounds import combine_guesses, guess_jobs
    from gapstop.problems.pipeline.io import load_graph

    p = load_graph(_graph(a.graph))
    per = a.seconds / a.k
    t = time.perf_counter()
    seq = combine_guesses([j.run(per) for j in guess_jobs(p, a.k)], a.k)
    t_seq = time.perf_counter() - t
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    run_job = ray.remote(num_cpus=1)(lambda job, tl: job.run(tl))
    t = time.perf_counter()
    par = combine_guesses(ray.get([run_job.remote(j, per) for j in guess_jobs(p, a.k)]), a.k)
    t_par = time.perf_counter() - t
    ray.shutdown()
    print(f"graph {a.graph} k={a.k} per-model limit {per:.1f}s: sequential {t_seq:.1f}s (LB {seq.value:.6g}), "
          f"parallel on 2 CPUs {t_par:.1f}s (LB {par.value:.6g}), speed-up {t_seq / t_par:.2f}")


def certify(a: argparse.Namespace) -> None:
    import dataclasses

    import ray

    from gapstop.actors.runner import run
    from gapstop.problems.pipeline.bounds import exact_bound
    from gapstop.problems.pipeline.evaluate import evaluate
    from gapstop.problems.pipeline.io import load_graph, save_graph

    print(f"# {a.seconds:g} s each; memory: {a.memory}")
    print(f"{'graph':<18} {'k':>3} {'cpsat obj':>10} {'bound':>10} {'ratio':>7} {'t_opt':>7}   "
          f"{'gapstop obj':>11} {'bound':>10} {'method':<10} {'ratio':>7} {'t_stop':>7} stopped")
    for g in a.graphs.split(","):
        p = load_graph(_graph(g))
        path = str(_graph(g))
        if a.memory == "null" and p.memory is not None:
            p = dataclasses.replace(p, memory=None)
            path = str(Path(tempfile.mkdtemp(prefix="gapstop-bench-")) / f"{g}.json")
            save_graph(p, path)
        for k in [int(x) for x in a.ks.split(",")]:
            t_cp: list[float] = []
            t_gs: list[float] = []
            for _ in range(a.reps):  # alternating, so both sides see the same machine
                b = exact_bound(p, k, a.seconds, num_workers=2)
                blocks = b.detail.get("blocks")
                obj = evaluate(p, blocks, k=k).objective if blocks is not None else float("inf")
                cp = obj / b.value if b.value > 0 else float("inf")
                t_opt = f"{b.wall_s:.1f}s" if b.status == "optimal" else "-"
                doc = run("pipeline", path, {"k": k}, time_limit_s=a.seconds, target_gap=0.0, seed=0,
                          run_dir=tempfile.mkdtemp(prefix="gapstop-bench-"), workers=2)
                ray.shutdown()
                gs = doc["objective"] / doc["lower_bound"]
                print(f"{g:<18} {k:>3} {obj:10.6g} {b.value:10.6g} {cp:7.4f} {t_opt:>7}   "
                      f"{doc['objective']:11.6g} {doc['lower_bound']:10.6g} {doc['lower_bound_method']:<10} "
                      f"{gs:7.4f} {doc['elapsed_s']:6.1f}s {doc['stopped_because']}", flush=True)
                t_cp.append(b.wall_s if b.status == "optimal" else float("inf"))
                t_gs.append(doc["elapsed_s"] if doc["stopped_because"] == "optimal" else float("inf"))
            if a.reps > 1:
                print(f"# {g} k={k}: median time to optimality over {a.reps} runs: CP-SAT alone "
                      f"{statistics.median(t_cp):.1f} s, gapstop {statistics.median(t_gs):.1f} s", flush=True)


def latency(a: argparse.Namespace) -> None:
    import dataclasses
    import json
    import subprocess

    from gapstop.problems.pipeline.io import load_graph, save_graph

    print(f"# {a.seconds:g} s limit; memory: {a.memory}; wall seconds from process start to exit")
    for g in a.graphs.split(","):
        p = load_graph(_graph(g))
        path = str(_graph(g))
        if a.memory == "null" and p.memory is not None:
            path = str(Path(tempfile.mkdtemp(prefix="gapstop-bench-")) / f"{g}.json")
            save_graph(dataclasses.replace(p, memory=None), path)
        roots: dict[str, tuple[Path, list[str]]] = {}
        for spec in a.paths or [f"gapstop={ROOT}"]:
            label, _, rest = spec.partition("=")
            root, *flags = rest.split(",")
            roots[label] = (Path(root).resolve(), flags)
        for k in [int(x) for x in a.ks.split(",")]:
            walls: dict[str, list[float]] = {**({} if a.no_cpsat else {"cp-sat": []}), **{label: [] for label in roots}}
            for _ in range(a.reps):
                for name in walls:
                    out = Path(tempfile.mkdtemp(prefix="gapstop-bench-")) / "out.json"
                    root, flags = roots.get(name, (ROOT, []))
                    cmd = [sys.executable, str(root / "launch.py"), "pipeline"]
                    if name == "cp-sat":
                        cmd += ["bound", path, "-k", str(k), "--method", "exact", "--time-limit", str(a.seconds),
                                "--out", str(out)]
                    else:
                        cmd += ["solve", path, "-k", str(k), "--time-limit", str(a.seconds), "--quiet", "--out",
                                str(out), "--run-dir", str(out.parent / "run"), *flags]
                    t0 = time.perf_counter()
                    r = subprocess.run(cmd, capture_output=True, text=True, cwd=root)
                    wall = time.perf_counter() - t0
                    doc = json.loads(out.read_text()) if out.exists() else {}
                    how = doc.get("status") if name == "cp-sat" else doc.get("stopped_because")
                    if r.returncode != 0 or how is None:
                        how = f"error {r.returncode}: {r.stderr.strip().splitlines()[-1:] }"
                    walls[name].append(wall if how == "optimal" else float("inf"))
                    print(f"{g:<14} k={k:<3} {name:<8} {wall:6.2f}s  {how}", flush=True)
            print(f"# {g} k={k}: median wall time to a proven optimum over {a.reps} runs: "
                  + ", ".join(f"{name} {statistics.median(w):.2f} s" for name, w in walls.items()), flush=True)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["sampling", "guess", "certify", "latency"])
    ap.add_argument("--graph", default="regal_004")
    ap.add_argument("--graphs", default="bert_base,resnet50,regal_000,regal_004")
    ap.add_argument("--k", type=int, default=8)
    ap.add_argument("--ks", default="4,16")
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--reps", type=int, default=None,
                    help="sampling, latency: repetitions (default 3); certify: runs per (graph, k), with "
                         "medians (default 1)")
    ap.add_argument("--paths", nargs="+", default=None, metavar="LABEL=ROOT[,FLAG...]",
                    help="latency: run each checkout's launch.py, with the extra flags, in turn (default: gapstop=this "
                         "one)")
    ap.add_argument("--no-cpsat", action="store_true", help="latency: without the plain CP-SAT runs")
    ap.add_argument("--memory", choices=["null", "file"], default="null",
                    help="certify: drop the graphs' memory limit (the CP-SAT baseline's setting) or keep it")
    a = ap.parse_args()
    if a.reps is None:
        a.reps = 3 if a.what in ("sampling", "latency") else 1
    {"sampling": sampling, "guess": guess, "certify": certify, "latency": latency}[a.what](a)


if __name__ == "__main__":
    main()
