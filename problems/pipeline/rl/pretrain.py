"""Pre-training on a corpus of graphs (Xie et al. 2022, §4.3 and Figure 4).

The corpus is split (seeded) into train, validation and test graphs. The trainer runs PPO
iterations on the training graphs in turn; every ``checkpoint_every`` iterations it writes
a checkpoint and scores it zero-shot on the validation graphs (the mean normalised reward
of ``val_samples`` proposals per graph, each turned into a valid partition by the
constraint solver). The checkpoint with the best validation reward is written to ``out``;
its metadata keep the split, so that the test graphs stay held out.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from gapstop.engine.errors import InputError
from gapstop.problems.pipeline.constraints import Constraints
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.rl.policy import Policy, PolicyConfig, save_policy
from gapstop.problems.pipeline.rl.ppo import GraphTask, PPOConfig, PPOTrainer


@dataclass(frozen=True)
class Split:
    """Graph files by role (paths as given)."""

    train: tuple[str, ...]
    val: tuple[str, ...]
    test: tuple[str, ...]


def split_corpus(directory: str, seed: int, val_share: float = 0.1, test_share: float = 0.2) -> Split:
    """The ``*.json`` / ``*.json.gz`` files of ``directory``, shuffled (seeded) and split.

    At least one graph goes to training and, with three or more graphs, at least one to
    validation and one to test. Raises InputError without any graph file.
    """
    d = Path(directory)
    if not d.is_dir():
        raise InputError(f"--graphs: {directory}: not a directory")
    files = sorted(str(p) for p in d.iterdir() if p.name.endswith((".json", ".json.gz")))
    if not files:
        raise InputError(f"--graphs: {directory}: no .json or .json.gz graph files")
    files = [files[i] for i in np.random.default_rng(seed).permutation(len(files))]
    n = len(files)
    n_val = max(1, round(val_share * n)) if n >= 3 else 0
    n_test = max(1, round(test_share * n)) if n >= 3 else 0
    return Split(tuple(files[n_val + n_test:]), tuple(files[:n_val]), tuple(files[n_val:n_val + n_test]))


def validation_reward(policy: Policy, tasks: list[GraphTask], samples: int, seed: int) -> float:
    """Mean normalised reward of ``samples`` zero-shot proposals per task, averaged over tasks
    (a proposal the solver cannot make valid counts as the batch's penalty)."""
    trainer = PPOTrainer(policy, PPOConfig(), seed=seed)
    return float(np.mean([trainer.collect(t, samples).rewards.mean().item() for t in tasks])) if tasks else math.nan


def pretrain(split: Split, out: str, *, chips: list[int], ring: bool = True, no_triangle: bool = False,
             all_chips: bool = False, samples: int = 20_000, checkpoint_every: int = 10, val_samples: int = 20,
             config: PolicyConfig | None = None, ppo: PPOConfig | None = None, seed: int = 0,
             time_limit_s: float = math.inf, log: Callable[[str], None] | None = None,
             runner_factory: Callable[[PipelineProblem, Constraints], Any] | None = None) -> dict[str, Any]:
    """Pre-train a policy; write the best checkpoint (by validation reward) to ``out``.

    Args:
        split: the corpus (see :func:`split_corpus`).
        out: the policy file; checkpoints go to ``out`` + ``.checkpoints/``.
        chips: C values; each training or validation graph is used with every C that it
            can take (C <= n with ``all_chips``).
        ring, no_triangle, all_chips: the MCM constraints trained for (``ring``: the used chips
            a prefix of the ring, equation 3; ``all_chips``: every chip used).
        samples: evaluated proposals in all (the paper: 20,000).
        checkpoint_every: PPO iterations between checkpoints.
        val_samples: proposals per validation task.
        config, ppo: network and PPO settings.
        seed: seeds the split's use, the network and the sampling.
        time_limit_s: stop early (after the current iteration) once this much time passed.
        log: progress lines.
        runner_factory: ``(problem, constraints) -> runner`` for every training task's
            rollouts (e.g. :meth:`actors.rl_rollout.RolloutPool.runner`); default in this process.
    Returns:
        a summary: the chosen checkpoint's iteration and validation reward, and the history.
    """
    from gapstop.problems.pipeline.io import load_graph

    torch.manual_seed(seed)
    policy = Policy(config)
    ppo = ppo or PPOConfig()
    trainer = PPOTrainer(policy, ppo, seed=seed)

    def tasks_of(paths: tuple[str, ...]) -> list[GraphTask]:
        out_tasks = []
        for path in paths:
            problem: PipelineProblem = load_graph(path)
            for c in chips:
                if not all_chips or c <= problem.n:
                    cons = Constraints(c, ring=ring, no_triangle=no_triangle, all_chips=all_chips)
                    out_tasks.append(trainer.task(problem, cons))
        return out_tasks

    train, val = tasks_of(split.train), tasks_of(split.val)
    if runner_factory is not None:
        for t in train:
            t.runner = runner_factory(t.problem, t.constraints)
    if not train:
        raise InputError("--graphs: no training graph can take the given --chips")
    ckpt_dir = Path(str(out) + ".checkpoints")
    ckpt_dir.mkdir(parents=True, exist_ok=True)
    meta: dict[str, Any] = {"split": asdict(split), "chips": chips, "ring": ring or all_chips, "all_chips": all_chips,
                            "no_triangle": no_triangle, "ppo": asdict(ppo), "seed": seed}
    history: list[dict[str, Any]] = []
    best: tuple[float, str] | None = None
    t0 = time.monotonic()
    order = np.random.default_rng(seed)
    used = 0
    it = 0
    while used < samples and time.monotonic() - t0 < time_limit_s:
        task = train[int(order.integers(len(train)))]
        batch = trainer.iterate(task)
        used += len(batch.rollouts)
        it += 1
        if it % checkpoint_every == 0 or used >= samples:
            path = str(ckpt_dir / f"iter-{it:05d}.pt")
            save_policy(policy, path, {**meta, "iteration": it, "samples": used})
            v = validation_reward(policy, val, val_samples, seed + it) if val else float(batch.rewards.mean())
            history.append({"iteration": it, "samples": used, "val_reward": v, "checkpoint": path,
                            "elapsed_s": round(time.monotonic() - t0, 2)})
            if log is not None:
                log(f"iteration {it}  samples {used}  validation reward {v:.4f}  ({time.monotonic() - t0:.0f} s)")
            if best is None or v > best[0]:
                best = (v, path)
    if best is None:
        raise InputError("--time-limit: too short for one checkpoint")
    chosen = next(h for h in history if h["checkpoint"] == best[1])
    best_policy = Policy(policy.config)
    best_policy.load_state_dict(torch.load(best[1], weights_only=True)["state"])
    save_policy(best_policy, out, {**meta, "iteration": chosen["iteration"], "samples": chosen["samples"],
                                   "val_reward": chosen["val_reward"], "history": history})
    return {"out": out, "chosen": chosen, "history": history, "split": asdict(split)}
