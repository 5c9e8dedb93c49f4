"""Multi-chip-module constraints: solver speed, valid-sample rates, searches, certified gap.

Two tables (not a test):

``--speed``: milliseconds per SAMPLE (uniform) and FIX (uniform random proposal) call of
the constraint solver on residual-chain graphs (:func:`residual_chain`) of n = 200, 1000, 2000 nodes and C = 4, 8, 16,
36 chips, with the ring constraints alone and with the triangle constraint too, the
latter both forward-checked only (the solver before triangle propagation) and propagated;
median over ``--calls`` calls, plus how the calls ended.

``--speed-real``: the same per-call figures on the real-model graphs of ``--graphs`` at
``--chips``, with ring and triangle constraints (propagated): SAMPLE (uniform), FIX of
uniform random proposals and FIX of what BRKGA + FIX proposes (random keys' SliceGraph
split, made into exactly C stages, fixed along its order), medians, and how many calls
ended in CP-SAT's fallback (``via cp-sat``; ``via witness``: CP-SAT found none in time and
the last valid partition came back) instead of propagation and backtracking;
``--sample-only`` times SAMPLE alone, ``--sample-restarts R`` sets its short attempts.

default: on the real-model graphs, for each C: the share of valid partitions among
uniform random labellings (no solver), among SAMPLE calls (uniform) and among FIX calls
(uniform random proposals), counting only partitions a call found (not the last valid one
given back when CP-SAT finds none in time); the best exact objective after ``--samples`` candidates
(comma-separated checkpoints) of random search, simulated annealing and BRKGA+FIX: each
search runs until its last checkpoint, with ``--cap`` seconds as a safety limit (a
checkpoint not reached in time prints the samples made);
the lower bound (max of the simple bound, the unconstrained and the constrained exact
MIP after ``--mip-time`` s each, two CP-SAT workers) and the certified gap of the best of the three.

Usage::

    python benchmarks/mcm_constraints.py --speed [--calls 20]
    python benchmarks/mcm_constraints.py --speed-real --graphs vit_base16,bert_base --chips 4,8,16 [--calls 20]
    python benchmarks/mcm_constraints.py [--graphs resnet50,bert_base] [--chips 4,8,16,36]
        [--samples 1000,10000] [--cap 60] [--mip-time 10] [--memory-hard] [--forward-check]

``--forward-check`` runs the table with the triangle constraint forward-checked only.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.pipeline.bounds import exact_bound, simple_bound  # noqa: E402
from gapstop.problems.pipeline.constraints import Constraints, ConstraintSolver, static_violation  # noqa: E402
from gapstop.problems.pipeline.decoder import SliceDecoder  # noqa: E402
from gapstop.problems.pipeline.evaluate import evaluate  # noqa: E402
from gapstop.problems.pipeline.generators import model_like  # noqa: E402
from gapstop.problems.pipeline.io import load_graph  # noqa: E402
from gapstop.problems.pipeline.mcm_search import AnnealingSearch, BrkgaFixSearch, RandomSearch, exactly  # noqa: E402

REAL = ("mobilenet_v2", "resnet50", "vit_base16", "bert_base", "gpt2", "lstm_lm_unrolled")


def residual_chain(n: int, seed: int):
    """model_like's weights on a chain with short skip edges (reach 2-8, on 30 % of the
    nodes), like residual and attention blocks: model_like's skip edges reach up to 30
    nodes, which leaves few or no triangle-free partitions into 8 or more chips."""
    from gapstop.problems.pipeline.model import PipelineProblem

    base = model_like(n, seed, memory=False)
    rng = np.random.default_rng(seed)
    edges = [(i, i + 1) for i in range(n - 1)]
    edges += [(i, i + int(rng.integers(2, 9))) for i in range(n) if rng.random() < 0.3]
    edges = [(u, v) for u, v in edges if v < n]
    return PipelineProblem(name=f"residual-chain-n{n}", work=base.work, size_param=base.size_param,
                           size_out=base.size_out, edges=np.array(edges), bandwidth=base.bandwidth, memory=None)


def speed(calls: int) -> None:
    print("| n | C | constraints | SAMPLE ms (median) | FIX ms (median) | SAMPLE outcomes | FIX outcomes |")
    print("|---|---|---|---|---|---|---|")
    for n in (200, 1000, 2000):
        p = residual_chain(n, 1)
        for c in (4, 8, 16, 36):
            for tri, prop in ((False, True), (True, False), (True, True)):
                cons = Constraints(chips=c, ring=True, no_triangle=tri)
                solver = ConstraintSolver(p, cons, propagate_triangle=prop)
                rng = np.random.default_rng(0)
                solver.sample(None, rng=rng)  # compile
                solver.counts.clear()
                ts = []
                for _ in range(calls):
                    t = time.perf_counter()
                    solver.sample(None, rng=rng)
                    ts.append(time.perf_counter() - t)
                s_counts = dict(solver.counts)
                solver.counts.clear()
                tf = []
                for _ in range(calls):
                    y = rng.integers(0, c, n)
                    t = time.perf_counter()
                    solver.fix(y, rng=rng)
                    tf.append(time.perf_counter() - t)
                kind = "ring" + ("" if not tri else " + triangle" + (" (propagated)" if prop else " (forward check)"))
                print(f"| {n} | {c} | {kind} | {1e3 * np.median(ts):.2f} | "
                      f"{1e3 * np.median(tf):.2f} | {s_counts} | {dict(solver.counts)} |", flush=True)


def speed_real(data: Path, graphs: list[str], chips: list[int], calls: int, sample_only: bool = False) -> None:
    if sample_only:
        print("| graph | n | C | SAMPLE ms | SAMPLE outcomes |")
    else:
        print("| graph | n | C | SAMPLE ms | FIX ms (uniform) | FIX ms (BRKGA split) | SAMPLE outcomes | FIX outcomes "
              "(uniform) | FIX outcomes (BRKGA split) |")
    print("|---" * (5 if sample_only else 9) + "|")
    for g in graphs:
        p = load_graph(data / f"{g}.json.gz")
        for c in chips:
            solver = ConstraintSolver(p, Constraints(chips=c, ring=True, no_triangle=True))
            decoder = SliceDecoder(p, c)
            rng = np.random.default_rng(0)
            row = []
            for kind in ("sample",) if sample_only else ("sample", "fix", "fix-sliced"):
                ts, ends = [], {}
                for _ in range(calls):
                    order = None
                    if kind == "fix-sliced":  # what BRKGA + FIX hands FIX: random keys' SliceGraph split
                        split = decoder.decode(rng.random(decoder.n_keys))
                        y, order = exactly(split.order, split.blocks, c), split.order
                    else:  # drawn for SAMPLE too: the stream the BENCHMARKS.md figures came from
                        y = rng.integers(0, c, p.n)
                    t = time.perf_counter()
                    out = solver.sample(None, rng=rng) if kind == "sample" else solver.fix(y, order, rng=rng)
                    ts.append(time.perf_counter() - t)
                    key = out.status + (f" via {out.via}" if out.status == "valid" and out.via != "propagation" else "")
                    ends[key] = ends.get(key, 0) + 1
                row.append((1e3 * float(np.median(ts)), ends))
            print(f"| {g} | {p.n} | {c} | " + " | ".join(f"{ms:.2f}" for ms, _ in row) + " | "
                  + " | ".join(str(ends) for _, ends in row) + " |", flush=True)


def raw_valid_rate(p, cons: Constraints, draws: int, rng: np.random.Generator) -> float:
    """Share of uniform random labellings that meet the static constraints (and memory)."""
    ok = 0
    for _ in range(draws):
        y = rng.integers(0, cons.chips, p.n)
        if p.m and (y[p.edges[:, 0]] > y[p.edges[:, 1]]).any():
            continue
        if static_violation(p, cons, y) is not None:
            continue
        try:
            evaluate(p, y, k=cons.chips, constraints=cons)
        except ValueError:
            continue
        ok += 1
    return ok / draws


def run_search(search, checkpoints: list[int], cap_s: float) -> tuple[list[str], float]:
    """Best objective at each checkpoint of candidates made (or 'x (n in cap)' if not reached)."""
    out: list[str] = []
    t_end = time.monotonic() + cap_s
    for cp in checkpoints:
        while search.evals < cp and time.monotonic() < t_end:
            search.step(0.2)
        best = search.best_cost
        txt = "none" if not math.isfinite(best) else f"{best:.6g}"
        out.append(txt if search.evals >= cp else f"{txt} ({search.evals} in {cap_s:.0f} s)")
    return out, search.best_cost


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--speed", action="store_true")
    ap.add_argument("--speed-real", action="store_true", help="per-call times on the real-model graphs")
    ap.add_argument("--sample-only", action="store_true", help="--speed-real: SAMPLE calls only")
    ap.add_argument("--sample-restarts", type=int, default=None,
                    help="SAMPLE's short attempts (ConstraintSolver.SAMPLE_RESTARTS; default: the solver's)")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--data", default="/work/shared/data/pipeline")
    ap.add_argument("--graphs", default=",".join(REAL))
    ap.add_argument("--chips", default="4,8,16,36")
    ap.add_argument("--samples", default="1000,10000")
    ap.add_argument("--cap", type=float, default=60.0, help="safety limit in seconds per search")
    ap.add_argument("--rate-calls", type=int, default=200, help="solver calls for the SAMPLE/FIX rates")
    ap.add_argument("--draws", type=int, default=10000, help="uniform labellings for the raw rate")
    ap.add_argument("--mip-time", type=float, default=10.0)
    ap.add_argument("--memory-hard", action="store_true", help="add the hard memory limit")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--forward-check", action="store_true", help="forward-check the triangle only")
    a = ap.parse_args()
    if a.sample_restarts is not None:
        ConstraintSolver.SAMPLE_RESTARTS = a.sample_restarts
    if a.speed:
        speed(a.calls)
        return
    if a.speed_real:
        speed_real(Path(a.data), a.graphs.split(","), [int(x) for x in a.chips.split(",")], a.calls, a.sample_only)
        return
    checkpoints = [int(x) for x in a.samples.split(",")]
    print("| graph | C | raw valid | SAMPLE valid | FIX valid | "
          + " | ".join(f"{m} @{cp}" for m in ("random", "SA", "BRKGA+FIX") for cp in checkpoints)
          + " | lower bound | gap |")
    print("|---" * (6 + 3 * len(checkpoints)) + "|---|")
    for g in a.graphs.split(","):
        p = load_graph(Path(a.data) / f"{g}.json.gz")
        for c in (int(x) for x in a.chips.split(",")):
            cons = Constraints(chips=c, ring=True, no_triangle=True, memory_hard=a.memory_hard)
            rng = np.random.default_rng(a.seed)
            raw = raw_valid_rate(p, cons, a.draws, rng)
            prop = not a.forward_check
            solver = ConstraintSolver(p, cons, propagate_triangle=prop)
            # a call that gives back the last valid partition (via "witness") found nothing new
            s_ok = sum(solver.sample(None, rng=rng).fresh for _ in range(a.rate_calls)) / a.rate_calls
            f_ok = sum(solver.fix(rng.integers(0, c, p.n), rng=rng).fresh for _ in range(a.rate_calls)) / a.rate_calls
            cells: list[str] = []
            best = math.inf
            for cls in (RandomSearch, AnnealingSearch, BrkgaFixSearch):
                search = cls(p, cons, np.random.default_rng(a.seed + 1))
                search.solver.propagate_triangle = prop
                txt, b = run_search(search, checkpoints, a.cap)
                cells += txt
                best = min(best, b)
            # every bound of the unconstrained problem holds; the unconstrained MIP is often
            # the stronger one within a short limit (its model is smaller)
            lb = max(simple_bound(p, c).value, exact_bound(p, c, a.mip_time, num_workers=2).value)
            ex = exact_bound(p, c, a.mip_time, constraints=cons, num_workers=2)
            if ex.status == "infeasible":
                lb_txt, gap = "infeasible (MIP)", "-"
            else:
                lb = max(lb, ex.value)
                lb_txt = f"{lb:.6g}{' (mcm MIP)' if ex.value >= lb else ''}"
                gap = "-" if not math.isfinite(best) else f"{100 * (1 - lb / best):.1f} %"
            print(f"| {g} | {c} | {raw:.4f} | {s_ok:.3f} | {f_ok:.3f} | " + " | ".join(cells)
                  + f" | {lb_txt} | {gap} |", flush=True)


if __name__ == "__main__":
    main()
