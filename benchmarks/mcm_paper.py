"""The multi-chip-module paper's experiment (Xie et al. 2022, §5) on the shared real-model graphs.

Not a test. For each graph of ``--graphs`` and C of ``--chips``, with ``--ring`` (equation 3 as
written: the used chips are a prefix 0..m of the ring) and the triangle constraint
(``--all-chips`` instead: every chip used), records for each method the best exact objective,
how many chips that partition uses, and the certified gap against the best lower bound:

* ``random`` (uniform + SAMPLE), ``sa`` (simulated annealing over per-node distributions
  + SAMPLE), ``brkga-fix`` (BRKGA + SliceGraph + FIX): at equal samples (``--samples``
  checkpoints; each search stops at ``--cap`` seconds of CPU time, a checkpoint it did not
  reach shows the samples it made) and at equal time (``--seconds`` of CPU time each);
* ``rl-zero-shot`` and ``rl-finetune``: a policy pre-trained on REGAL-style graphs
  (``--policy``, or pre-trained here with ``--pretrain-samples``/``--pretrain-time``),
  sampled without updates or trained with PPO on the graph (FIX mode), at equal time and at the
  sample checkpoints it reaches within ``--cap``;
* ``exact-mip``: the constrained exact MIP (:func:`problems.pipeline.bounds.exact_bound`)
  for ``--mip-time`` seconds with two CP-SAT workers: its partition and its proven bound.

The lower bound of a row is the maximum of the ``simple`` bound (a bound of the unconstrained
problem, hence of the constrained one) and the constrained MIP's proven bound (under the active
reading of equation 3); the gap of a method is ``objective / bound - 1``. Every objective is the
exact evaluator's, on a partition it checks against the constraints. All methods run on one
thread, their budgets are CPU time (``time.process_time``), so other jobs on a shared machine
slow the run down but do not tilt the comparison (the MIP's limit is wall time).

Usage::

    python benchmarks/mcm_paper.py [--graphs bert_base,gpt2,...] [--chips 4,8,16,36]
        [--samples 1000,10000] [--cap 30] [--seconds 10] [--mip-time 20]
        [--policy policy.pt | --pretrain-samples 600 --pretrain-time 300] [--methods ...]
        [--all-chips] [--json out.json] [--markdown out.md]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.pipeline.bounds import exact_bound  # noqa: E402
from gapstop.problems.pipeline.closed_form import simple_bound  # noqa: E402
from gapstop.problems.pipeline.constraints import Constraints  # noqa: E402
from gapstop.problems.pipeline.evaluate import evaluate  # noqa: E402
from gapstop.problems.pipeline.io import load_graph  # noqa: E402
from gapstop.problems.pipeline.mcm_search import AnnealingSearch, BrkgaFixSearch, RandomSearch  # noqa: E402

DATA = Path("/work/shared/data/pipeline")
GRAPHS = ("bert_base", "gpt2", "vit_base16", "resnet50", "mobilenet_v2", "lstm_lm_unrolled")
SEARCHES = ("random", "sa", "brkga-fix")
POLICIES = ("rl-zero-shot", "rl-finetune")


def chips_used(chips: Any) -> int | None:
    return None if chips is None else len(set(np.asarray(chips).tolist()))


def trace_search(make: Callable[[], Any], checkpoints: list[int], cap_s: float) -> dict[str, Any]:
    """Best objective (and its chips used) at each sample checkpoint reached within ``cap_s``
    seconds of CPU time; the samples made."""
    isl = make()
    end = time.process_time() + cap_s
    at: list[tuple[float, int | None] | None] = []
    for cp in checkpoints:
        while isl.evals < cp and time.process_time() < end:
            isl._iterate()
        at.append((isl.best_cost, chips_used(isl.best_chips)) if isl.evals >= cp else None)
    return {"at": at, "samples": int(isl.evals)}


def timed_search(make: Callable[[], Any], seconds: float) -> dict[str, Any]:
    isl = make()
    end = time.process_time() + seconds
    while time.process_time() < end:
        isl._iterate()
    return {"best": isl.best_cost, "chips": chips_used(isl.best_chips), "samples": int(isl.evals),
            "best_chips": None if isl.best_chips is None else isl.best_chips.tolist()}


def run_policy(policy_path: str, problem: Any, cons: Constraints, learn: bool, seconds: float,
               checkpoints: list[int], seed: int) -> dict[str, Any]:
    """The pre-trained policy for ``seconds`` of CPU time (collection and updates count): the
    best at each sample checkpoint reached, at the end, and the best after every batch."""
    import torch

    from gapstop.problems.pipeline.rl.policy import load_policy
    from gapstop.problems.pipeline.rl.ppo import PPOConfig, PPOTrainer

    torch.manual_seed(seed)
    trainer = PPOTrainer(load_policy(policy_path)[0], PPOConfig(), seed=seed)
    task = trainer.task(problem, cons)
    end = time.process_time() + seconds
    per_batch: list[tuple[int, float]] = []
    while time.process_time() < end:
        batch = trainer.collect(task)
        per_batch.append((task.samples, task.best_cost))
        if learn and time.process_time() < end:
            trainer.update(task, batch)
    at = [next(((v, None) for s, v in per_batch if s >= cp), None) for cp in checkpoints]
    return {"best": task.best_cost, "chips": chips_used(task.best_chips), "samples": int(task.samples), "at": at,
            "per_batch": per_batch, "best_chips": None if task.best_chips is None else task.best_chips.tolist()}


def pretrain_policy(path: Path, samples: int, seconds: float, chips: list[int], all_chips: bool) -> dict[str, Any]:
    """A small pre-training run on REGAL-style graphs (the paper pre-trains on 66 production models)."""
    from gapstop.problems.pipeline.generators import regal_like
    from gapstop.problems.pipeline.io import save_graph
    from gapstop.problems.pipeline.rl.policy import PolicyConfig
    from gapstop.problems.pipeline.rl.pretrain import pretrain, split_corpus

    graphs = path.parent / "corpus"
    graphs.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for s in range(24):
        save_graph(regal_like(1000 + s, n=int(rng.integers(40, 121))), graphs / f"g{s:03d}.json")
    summary = pretrain(split_corpus(str(graphs), 0), str(path), chips=chips, no_triangle=True, all_chips=all_chips,
                       samples=samples, checkpoint_every=5, config=PolicyConfig(layers=4, width=64), seed=0,
                       time_limit_s=seconds, log=lambda line: print(line, file=sys.stderr, flush=True))
    return {"chosen": summary["chosen"], "samples": samples, "time_limit_s": seconds}


def row(name: str, c: int, args: argparse.Namespace, policy: str | None) -> dict[str, Any]:
    problem = load_graph(str(DATA / f"{name}.json.gz"))
    cons = Constraints(c, ring=True, no_triangle=True, all_chips=args.all_chips)
    checkpoints = [int(s) for s in args.samples.split(",")]
    methods = args.methods.split(",")
    out: dict[str, Any] = {"graph": name, "n": problem.n, "chips": c, "reading": cons.reading}
    t = time.monotonic()
    lb = float(simple_bound(problem, c).value)
    out["simple"] = lb
    if "exact-mip" in methods:
        b = exact_bound(problem, c, args.mip_time, constraints=cons, num_workers=2)
        blocks = (b.detail or {}).get("blocks")
        obj = None
        if blocks is not None:
            obj = evaluate(problem, np.array(blocks), k=c, constraints=cons).objective  # checks the constraints
        out["exact-mip"] = {"best": obj if obj is not None else math.inf, "chips": chips_used(blocks),
                            "bound": b.value, "status": b.status}
        if math.isfinite(b.value):
            lb = max(lb, b.value)
    out["lb"] = lb
    for m in methods:
        if m in SEARCHES:
            cls = {"random": RandomSearch, "sa": AnnealingSearch, "brkga-fix": BrkgaFixSearch}[m]

            def make(cls: Any = cls) -> Any:
                return cls(problem, cons, np.random.default_rng(args.seed))

            out[m] = {"samples_run": trace_search(make, checkpoints, args.cap), **timed_search(make, args.seconds)}
        elif m in POLICIES and policy is not None:
            out[m] = run_policy(policy, problem, cons, m == "rl-finetune", args.seconds, checkpoints, args.seed)
    for m in methods:
        r = out.get(m)
        if isinstance(r, dict) and r.get("best_chips") is not None:  # the exact evaluator re-scores and checks
            ev = evaluate(problem, np.array(r.pop("best_chips")), k=c, constraints=cons)
            assert abs(ev.objective - r["best"]) <= 1e-9 * max(1.0, ev.objective), (m, ev.objective, r["best"])
    out["wall_s"] = round(time.monotonic() - t, 1)
    return out


def gap(v: float | None, lb: float) -> str:
    return "-" if v is None or not math.isfinite(v) or lb <= 0 else f"{100 * (v / lb - 1):.1f}%"


def cell(v: float | None, chips: int | None, lb: float) -> str:
    if v is None or not math.isfinite(v):
        return "none"
    return f"{v:.4g} ({chips}, {gap(v, lb)})"


def markdown(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    checkpoints = [int(s) for s in args.samples.split(",")]
    methods = [m for m in args.methods.split(",") if any(m in r for r in rows)]
    def budget(m: str) -> str:  # the exact MIP runs for --mip-time seconds of wall time, the rest --seconds of CPU
        return f"{args.mip_time:g}s wall" if m == "exact-mip" else f"{args.seconds:g}s"

    lines = [f"Equal time: {args.seconds:g} s of CPU time per method, the exact MIP {args.mip_time:g} s of wall time "
             "(samples made in brackets). Cells: best objective (chips used, gap to the row's bound).", "",
             "| graph | n | C | bound | " + " | ".join(f"{m} @{budget(m)}" for m in methods) + " |",
             "|---|---|---|---|" + "---|" * len(methods)]
    for r in rows:
        cells = []
        for m in methods:
            x = r.get(m)
            if x is None:
                cells.append("-")
            elif m == "exact-mip":
                cells.append(cell(x["best"], x["chips"], r["lb"]) + f" [{x['status']}]")
            else:
                cells.append(cell(x["best"], x["chips"], r["lb"]) + f" [{x['samples']}]")
        lines.append(f"| {r['graph']} | {r['n']} | {r['chips']} | {r['lb']:.4g} | " + " | ".join(cells) + " |")
    lines += ["", f"Equal samples ({', '.join(map(str, checkpoints))}; a search stops at {args.cap:g} s of CPU "
              "time: `<N` = the checkpoint was not reached, N samples were made). Cells: best objective (chips "
              "used, gap).", "",
              "| graph | C | " + " | ".join(f"{m} @{cp}" for m in SEARCHES + POLICIES if m in methods
                                            for cp in checkpoints) + " |",
              "|---|---|" + "---|" * (len(checkpoints) * len([m for m in SEARCHES + POLICIES if m in methods]))]
    for r in rows:
        cells = []
        for m in SEARCHES + POLICIES:
            if m not in methods:
                continue
            x = r.get(m)
            for i in range(len(checkpoints)):
                if x is None:
                    cells.append("-")
                    continue
                at = x["samples_run"]["at"][i] if m in SEARCHES else x["at"][i]
                n_made = x["samples_run"]["samples"] if m in SEARCHES else x["samples"]
                cells.append(f"<{n_made}" if at is None else cell(at[0], at[1], r["lb"]) if at[1] is not None
                             else f"{at[0]:.4g} ({gap(at[0], r['lb'])})")
        lines.append(f"| {r['graph']} | {r['chips']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--graphs", default=",".join(GRAPHS))
    ap.add_argument("--chips", default="4,8,16,36")
    ap.add_argument("--samples", default="1000,10000")
    ap.add_argument("--cap", type=float, default=30.0, help="CPU seconds per search for the sample checkpoints")
    ap.add_argument("--seconds", type=float, default=10.0, help="CPU seconds per method at equal time")
    ap.add_argument("--mip-time", type=float, default=20.0)
    ap.add_argument("--methods", default="exact-mip,random,sa,brkga-fix,rl-zero-shot,rl-finetune")
    ap.add_argument("--policy", default=None, help="a pre-trained policy (default: pre-train one here)")
    ap.add_argument("--pretrain-samples", type=int, default=600)
    ap.add_argument("--pretrain-time", type=float, default=300.0)
    ap.add_argument("--all-chips", action="store_true", help="the strict reading: every chip used")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workdir", default="/tmp/gapstop-mcm-paper")
    ap.add_argument("--json", default=None)
    ap.add_argument("--markdown", default=None)
    ap.add_argument("--merge", default=None,
                    help="comma-separated --json files of runs with other --methods or --graphs: print their table")
    args = ap.parse_args()
    if args.merge:
        merged: dict[tuple[str, int], dict[str, Any]] = {}
        for f in args.merge.split(","):
            for r in json.loads(Path(f).read_text())["rows"]:
                into = merged.setdefault((r["graph"], r["chips"]), r)
                if into is not r:
                    into.update({k: v for k, v in r.items() if k not in into or k == "lb" and v > into["lb"]})
        rows = sorted(merged.values(), key=lambda r: (GRAPHS.index(r["graph"]) if r["graph"] in GRAPHS else 99,
                                                      r["chips"]))
        print(markdown(rows, args))
        return

    policy = args.policy
    meta: dict[str, Any] = {"args": vars(args)}
    wants_rl = any(m in POLICIES for m in args.methods.split(","))
    if wants_rl:
        import torch

        torch.set_num_threads(1)
        if policy is None:
            path = Path(args.workdir) / "policy.pt"
            t = time.monotonic()
            meta["pretrain"] = pretrain_policy(path, args.pretrain_samples, args.pretrain_time, [4, 8],
                                               args.all_chips)
            meta["pretrain"]["wall_s"] = round(time.monotonic() - t, 1)
            print(f"pretrain: {meta['pretrain']}", file=sys.stderr, flush=True)
            policy = str(path)
    rows = []
    for name in args.graphs.split(","):
        for c in (int(x) for x in args.chips.split(",")):
            r = row(name, c, args, policy)
            rows.append(r)
            print(json.dumps({k: v for k, v in r.items()}, default=str), flush=True)
            if args.json:
                Path(args.json).write_text(json.dumps({"meta": meta, "rows": rows}, default=str))
            if args.markdown:
                Path(args.markdown).write_text(markdown(rows, args))
    print(markdown(rows, args))


if __name__ == "__main__":
    main()
