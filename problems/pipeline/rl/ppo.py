"""PPO for the proposal policy (Schulman et al. 2017; Xie et al. 2022, §5.1).

One PPO iteration on one graph: sample ``rollouts`` trajectories from the current policy,
turn each last assignment into a valid partition with the constraint solver and score it
exactly (:class:`~problems.pipeline.rl.rollout.RolloutEnv`), then ``epochs`` passes of
``minibatches`` minibatches over them, each a gradient step on the clipped objective, a
value-baseline loss and an entropy bonus.

The action of a rollout is n x T chip decisions. The probability ratio is taken per
decision (each decision shares its rollout's advantage) rather than for the product over
all of them: the joint ratio of thousands of decisions leaves the clipping range after
the first step, and no gradient would flow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import torch
from numpy.typing import NDArray

from gapstop.problems.pipeline.constraints import Constraints
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.rl.features import graph_inputs
from gapstop.problems.pipeline.rl.policy import GraphTensors, Policy
from gapstop.problems.pipeline.rl.rollout import Rollout, RolloutEnv


@dataclass(frozen=True)
class PPOConfig:
    """PPO hyper-parameters (rollouts, minibatches, epochs: the paper's choice).

    Attributes:
        rollouts: trajectories per iteration.
        minibatches: minibatches per epoch.
        epochs: passes over an iteration's rollouts.
        clip: the ratio's clipping range (1 +- clip).
        lr: Adam's learning rate.
        entropy: weight of the mean per-decision entropy bonus.
        value: weight of the value loss.
        max_grad_norm: gradient clipping.
        mode: ``"fix"`` or ``"sample"`` (see :class:`RolloutEnv`).
    """

    rollouts: int = 20
    minibatches: int = 4
    epochs: int = 10
    clip: float = 0.2
    lr: float = 3e-4
    entropy: float = 0.001
    value: float = 0.5
    max_grad_norm: float = 0.5
    mode: str = "fix"


class GraphTask:
    """One graph and C: its tensors and its rollout environment."""

    def __init__(self, problem: PipelineProblem, constraints: Constraints, mode: str = "fix",
                 rng: np.random.Generator | None = None, solver: Any = None) -> None:
        self.problem, self.constraints = problem, constraints
        self.tensors = GraphTensors(graph_inputs(problem, constraints.chips))
        self.env = RolloutEnv(problem, constraints, mode, rng, solver)
        self.best_cost = math.inf
        self.best_chips: NDArray[np.int64] | None = None
        self.samples = 0
        #: ``runner(proposals int64[R, n], probs float64[R, n, C]) -> R rollouts``; None: in
        #: this process, one after another (:mod:`actors.rl_rollout` runs them on Ray workers)
        self.runner: Callable[[NDArray[np.int64], NDArray[np.float64]], list[Rollout]] | None = None

    def rollouts(self, proposals: NDArray[np.int64], probs: NDArray[np.float64]) -> list[Rollout]:
        """One rollout per proposal (row), through :attr:`runner` if set."""
        if self.runner is not None:
            return self.runner(proposals, probs)
        return [self.env.run(proposals[r], probs[r]) for r in range(len(proposals))]


@dataclass
class Batch:
    """One iteration's rollouts: trajectories long[R, T, n], their per-decision
    log-probabilities under the sampling policy, rewards and values."""

    ys: torch.Tensor
    old_logp: torch.Tensor
    rewards: torch.Tensor
    old_values: torch.Tensor
    rollouts: list[Rollout] = field(default_factory=list)


class PPOTrainer:
    """Samples, scores and updates one :class:`Policy` (any number of graphs, one at a time).

    Args:
        policy: the network (trained in place).
        config: hyper-parameters.
        seed: seeds the sampling generator.
    """

    def __init__(self, policy: Policy, config: PPOConfig | None = None, seed: int = 0) -> None:
        self.policy = policy
        self.config = config or PPOConfig()
        self.opt = torch.optim.Adam(policy.parameters(), lr=self.config.lr)
        self.gen = torch.Generator().manual_seed(seed)
        self.np_rng = np.random.default_rng(seed)

    def task(self, problem: PipelineProblem, constraints: Constraints, solver: Any = None) -> GraphTask:
        """A :class:`GraphTask` with its own stream from this trainer's."""
        return GraphTask(problem, constraints, self.config.mode, np.random.default_rng(self.np_rng.integers(2 ** 63)),
                         solver)

    def collect(self, task: GraphTask, count: int | None = None) -> Batch:
        """Sample ``count`` (default ``rollouts``) trajectories and score them exactly."""
        count = count or self.config.rollouts
        self.policy.eval()
        ys, probs = self.policy.propose(task.tensors, count, self.gen)
        rollouts = task.rollouts(ys[:, -1], probs)
        for r, ro in enumerate(rollouts):
            ys[r, -1] = ro.action
            if ro.objective is not None and ro.objective < task.best_cost:
                task.best_cost = ro.objective
                task.best_chips = ro.outcome.chips.copy() if ro.outcome.chips is not None else None
        task.samples += count
        yt = torch.from_numpy(ys)
        with torch.no_grad():
            logp, _, values = self.policy.log_prob(task.tensors, yt)
        return Batch(yt, logp, torch.from_numpy(task.env.rewards(rollouts)).float(), values, rollouts)

    def update(self, task: GraphTask, batch: Batch) -> dict[str, float]:
        """``epochs`` x ``minibatches`` gradient steps on one batch; returns mean losses."""
        cfg = self.config
        self.policy.train()
        adv = batch.rewards - batch.old_values
        adv = (adv - adv.mean()) / (adv.std(unbiased=False) + 1e-8)
        r = len(batch.rewards)
        size = max(1, math.ceil(r / cfg.minibatches))
        sums = {"policy": 0.0, "value": 0.0, "entropy": 0.0}
        steps = 0
        for _ in range(cfg.epochs):
            perm = torch.randperm(r, generator=self.gen)
            for s in range(0, r, size):
                idx = perm[s:s + size]
                logp, entropy, values = self.policy.log_prob(task.tensors, batch.ys[idx])
                ratio = torch.exp(logp - batch.old_logp[idx])
                a = adv[idx][:, None, None]
                surrogate = torch.min(ratio * a, torch.clamp(ratio, 1 - cfg.clip, 1 + cfg.clip) * a).mean()
                value_loss = ((values - batch.rewards[idx]) ** 2).mean()
                loss = -surrogate + cfg.value * value_loss - cfg.entropy * entropy.mean()
                self.opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), cfg.max_grad_norm)
                self.opt.step()
                sums["policy"] += float(-surrogate.detach())
                sums["value"] += float(value_loss.detach())
                sums["entropy"] += float(entropy.mean().detach())
                steps += 1
        return {k: v / max(1, steps) for k, v in sums.items()}

    def iterate(self, task: GraphTask) -> Batch:
        """One PPO iteration (collect, then update); returns the batch collected."""
        batch = self.collect(task)
        self.update(task, batch)
        return batch

    def state_dict(self) -> dict[str, Any]:
        return {"policy": self.policy.state_dict(), "opt": self.opt.state_dict()}
