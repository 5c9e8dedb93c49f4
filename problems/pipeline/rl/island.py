"""The learned policy as a search island: zero-shot sampling or fine-tuning during a run.

Like the other constrained islands (:mod:`problems.pipeline.mcm_search`) it has
``step(budget_s, on_improvement, should_stop) -> evaluations`` and reports the valid
partitions the constraint solver makes of the policy's proposals.
"""

from __future__ import annotations

import numpy as np
import torch

from gapstop.problems.pipeline.constraints import Constraints
from gapstop.problems.pipeline.mcm_search import _Island
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.rl.policy import load_policy
from gapstop.problems.pipeline.rl.ppo import PPOConfig, PPOTrainer


class PolicySearch(_Island):
    """Samples proposals from a pre-trained policy; with ``finetune`` every batch is also a
    PPO iteration on this graph (the paper's fine-tuning), otherwise the policy stays fixed
    (zero-shot).

    Args:
        problem, constraints, rng: as for the other islands.
        policy_path: a file written by :func:`~problems.pipeline.rl.policy.save_policy`.
        finetune: update the policy with PPO while searching.
        mode: ``"fix"`` or ``"sample"``.
    """

    def __init__(self, problem: PipelineProblem, constraints: Constraints, rng: np.random.Generator, *,
                 policy_path: str, finetune: bool = False, mode: str = "fix") -> None:
        super().__init__(problem, constraints, rng)
        torch.set_num_threads(1)  # one island = one CPU slot
        policy, _ = load_policy(policy_path)
        self.finetune = finetune
        self.trainer = PPOTrainer(policy, PPOConfig(mode=mode), seed=int(rng.integers(2 ** 31)))
        self.task = self.trainer.task(problem, constraints, self.solver)

    def _iterate(self) -> None:
        batch = self.trainer.collect(self.task)
        for ro in batch.rollouts:
            self._offer(ro.outcome)
        if self.finetune:
            self.trainer.update(self.task, batch)
