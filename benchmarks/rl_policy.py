"""The learned proposal policy against the constrained searches, at equal evaluated samples.

Not a test. On REGAL-style generated graphs (:func:`problems.pipeline.generators.regal_like`,
``--n`` nodes each): pre-trains a policy on the training graphs of a seeded split
(``rl pretrain``'s procedure), then on each held-out test graph and C, per seed, records the
best exact objective after each checkpoint in ``--samples`` of

* ``rl-scratch``: a fresh policy trained with PPO on the graph;
* ``rl-zero-shot``: the pre-trained policy, sampled without updates;
* ``rl-finetune``: the pre-trained policy, trained with PPO on the graph;
* ``random``: uniform + SAMPLE; ``sa``: simulated annealing; ``brkga-fix``: BRKGA + FIX
  (no MLA seeds), the islands of :mod:`problems.pipeline.mcm_search`;

with the ring constraints (FIX mode for the policy), the share of valid samples (a call that gives
back the last valid partition, ``Outcome.fresh`` false, counts as not valid), the
certified gap against the ``simple`` lower bound, and for the fine-tuned policy the samples
it needs to reach the best objective that training from scratch reaches (the paper's
Tables 2-3 ratio). Prints a table and writes ``--json``.

Usage::

    python benchmarks/rl_policy.py [--corpus 24] [--n 40,80] [--chips 4,8] [--samples 100,500]
        [--seeds 3] [--pretrain-samples 2000] [--layers 4 --width 64] [--json out.json]
        [--methods rl-scratch,...,brkga-fix] [--policy policy.pt] [--seconds S]

``--seconds S`` replaces the sample checkpoints by equal time: every method gets S seconds of
CPU time on one thread. ``--policy`` reuses a pre-trained policy (same ``--layers/--width``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.pipeline.closed_form import simple_bound  # noqa: E402
from gapstop.problems.pipeline.constraints import Constraints  # noqa: E402
from gapstop.problems.pipeline.generators import regal_like  # noqa: E402
from gapstop.problems.pipeline.io import save_graph  # noqa: E402
from gapstop.problems.pipeline.mcm_search import AnnealingSearch, BrkgaFixSearch, RandomSearch  # noqa: E402


def trace_island(make: Callable[[], Any], checkpoints: list[int],
                 seconds: float | None = None) -> tuple[list[float], float, int]:
    """Best objective at each checkpoint of evaluated samples, the valid share, and the
    samples evaluated. With ``seconds``: one checkpoint, the best after that much CPU time."""
    isl = make()
    out = []
    if seconds is not None:
        end = time.process_time() + seconds
        while time.process_time() < end:
            isl._iterate()
        out.append(isl.best_cost)
    else:
        for cp in checkpoints:
            while isl.evals < cp:
                isl._iterate()
            out.append(isl.best_cost)
    fresh = isl.solver.counts.get("valid", 0) - isl.solver.repeats  # a partition given back again is no sample
    return out, fresh / max(1, sum(isl.solver.counts.values())), int(isl.evals)


def trace_policy(policy: Any, problem: Any, cons: Constraints, checkpoints: list[int], seed: int,
                 learn: bool, seconds: float | None = None) -> tuple[list[float], float, list[float], int]:
    """Best objective at each checkpoint, valid share, the best after every batch, and the
    samples evaluated. With ``seconds``: one checkpoint, the best after that much CPU time
    (collection and updates both count)."""
    from gapstop.problems.pipeline.rl.ppo import PPOConfig, PPOTrainer

    trainer = PPOTrainer(policy, PPOConfig(), seed=seed)
    task = trainer.task(problem, cons)
    out, per_batch, valid, total = [], [], 0, 0
    end = None if seconds is None else time.process_time() + seconds

    def more(cp: int) -> bool:
        return time.process_time() < end if end is not None else task.samples < cp

    for cp in checkpoints[:1] if end is not None else checkpoints:
        while more(cp):
            batch = trainer.collect(task)
            valid += sum(r.outcome.fresh for r in batch.rollouts)
            total += len(batch.rollouts)
            per_batch.append(task.best_cost)
            if learn and more(cp):
                trainer.update(task, batch)
        out.append(task.best_cost)
    return out, valid / max(1, total), per_batch, int(task.samples)


def samples_to_reach(per_batch: list[float], target: float, batch: int = 20) -> int | None:
    for i, v in enumerate(per_batch):
        if v <= target * (1 + 1e-9):
            return (i + 1) * batch
    return None


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=int, default=24)
    ap.add_argument("--n", default="40,80", help="node count range lo,hi of the generated graphs")
    ap.add_argument("--chips", default="4,8")
    ap.add_argument("--samples", default="100,500")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--tests", type=int, default=3, help="held-out test graphs used")
    ap.add_argument("--pretrain-samples", type=int, default=2000)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=64)
    ap.add_argument("--workdir", default="/tmp/gapstop-rl-bench")
    ap.add_argument("--json", default=None)
    ap.add_argument("--methods", default="rl-scratch,rl-zero-shot,rl-finetune,random,sa,brkga-fix")
    ap.add_argument("--seconds", type=float, default=None,
                    help="equal time: every method runs for this many seconds of CPU time (one column) instead of "
                         "--samples; all methods run on one thread, so on an idle core this is wall time, and "
                         "other jobs on the machine do not tilt the comparison")
    ap.add_argument("--policy", default=None, help="a pre-trained policy to use instead of pre-training one")
    args = ap.parse_args()

    import torch

    from gapstop.problems.pipeline.rl.policy import Policy, PolicyConfig, load_policy
    from gapstop.problems.pipeline.rl.pretrain import pretrain, split_corpus

    torch.set_num_threads(1)
    lo, hi = (int(x) for x in args.n.split(","))
    chips = [int(c) for c in args.chips.split(",")]
    checkpoints = [int(s) for s in args.samples.split(",")]
    work = Path(args.workdir)
    (work / "graphs").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for s in range(args.corpus):
        save_graph(regal_like(1000 + s, n=int(rng.integers(lo, hi + 1))), work / "graphs" / f"g{s:03d}.json")
    split = split_corpus(str(work / "graphs"), 0)
    config = PolicyConfig(layers=args.layers, width=args.width)
    t0 = time.monotonic()
    if args.policy:
        import shutil

        shutil.copy(args.policy, work / "policy.pt")
        summary: dict[str, Any] = {"policy": args.policy}
    else:
        summary = pretrain(split, str(work / "policy.pt"), chips=chips, samples=args.pretrain_samples,
                           checkpoint_every=10, config=config, seed=0,
                           log=lambda line: print(line, file=sys.stderr, flush=True))
        print(f"pretrain: {args.pretrain_samples} samples in {time.monotonic() - t0:.0f} s, chose iteration "
              f"{summary['chosen']['iteration']} (validation reward {summary['chosen']['val_reward']:.4f})",
              flush=True)
    methods = args.methods.split(",")
    if args.seconds is not None:
        checkpoints = [0]
    sec = args.seconds

    from gapstop.problems.pipeline.io import load_graph

    rows = []
    for path in split.test[:args.tests]:
        problem = load_graph(path)
        for c in chips:
            cons = Constraints(c, ring=True)
            lb = float(simple_bound(problem, c).value)
            for seed in range(args.seeds):
                res: dict[str, Any] = {"graph": Path(path).name, "n": problem.n, "chips": c, "seed": seed, "lb": lb}
                t = time.monotonic()
                torch.manual_seed(seed)
                pol = str(work / "policy.pt")
                runs: dict[str, Callable[[], Any]] = {
                    "rl-scratch": lambda: trace_policy(Policy(config), problem, cons, checkpoints, seed, True, sec),
                    "rl-zero-shot": lambda: trace_policy(load_policy(pol)[0], problem, cons, checkpoints, seed,
                                                         False, sec),
                    "rl-finetune": lambda: trace_policy(load_policy(pol)[0], problem, cons, checkpoints, seed,
                                                        True, sec),
                    "random": lambda: trace_island(lambda: RandomSearch(problem, cons, r), checkpoints, sec),
                    "sa": lambda: trace_island(lambda: AnnealingSearch(problem, cons, r), checkpoints, sec),
                    "brkga-fix": lambda: trace_island(lambda: BrkgaFixSearch(problem, cons, r), checkpoints, sec),
                }
                for m in methods:
                    r = np.random.default_rng(seed)
                    res[m] = runs[m]()
                res["wall_s"] = round(time.monotonic() - t, 1)
                rows.append(res)
                print(json.dumps({k: ((v[0], v[1], v[-1]) if isinstance(v, tuple) else v) for k, v in res.items()}),
                      flush=True)
    what = f"after {sec:g} s of CPU time each (samples in brackets)" if sec is not None else "(valid share)"
    print(f"\nmedian over seeds of best objective / simple bound {what}")
    print(f"{'graph':<10} {'n':>4} {'C':>3} " + " ".join(f"{m + '@' + (f'{sec:g}s' if sec is not None else str(cp)):>18}"
                                                 for m in methods for cp in checkpoints))
    ratios = []
    for g in dict.fromkeys((r["graph"], r["chips"]) for r in rows):
        rs = [r for r in rows if (r["graph"], r["chips"]) == g]
        cells = []
        for m in methods:
            for i in range(len(checkpoints)):
                v = statistics.median(r[m][0][i] / r["lb"] for r in rs)
                share = statistics.median(r[m][1] for r in rs)
                done = statistics.median(r[m][-1] for r in rs)
                cells.append(f"{v:11.4f} ({done:.0f})" if sec is not None else f"{v:11.4f} ({share:.2f})")
        print(f"{g[0]:<10} {rs[0]['n']:>4} {g[1]:>3} " + " ".join(f"{c:>18}" for c in cells))
        for r in rs:  # samples fine-tuning needs to reach scratch's final best
            if sec is not None or "rl-scratch" not in r or "rl-finetune" not in r:
                continue
            target = r["rl-scratch"][0][-1]
            ratios.append((g, samples_to_reach(r["rl-scratch"][2], target),
                           samples_to_reach(r["rl-finetune"][2], target)))
    print("\nsamples to reach RL-from-scratch's final best (scratch, finetune) per graph, C, seed:")
    for g, s, f in ratios:
        print(f"  {g[0]} C={g[1]}: scratch {s}, finetune {f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "ratios": ratios, "pretrain": summary}, default=str))


if __name__ == "__main__":
    main()
