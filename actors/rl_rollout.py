"""Rollouts of the learned policy on Ray workers: the constraint solver and the exact
evaluator run in parallel while the learner (torch) stays in the driver.

:class:`RolloutWorker` is a plain class (testable without Ray) holding the rollout
environments (:class:`~problems.pipeline.rl.rollout.RolloutEnv`) of any number of graphs;
:class:`RolloutPool` starts a fixed set of such actors once and hands out a
``GraphTask.runner`` per graph that splits each batch of proposals over them.
"""

from __future__ import annotations

import itertools
from typing import Any, Callable

import numpy as np
import ray
from numpy.typing import NDArray

from gapstop.problems.pipeline.constraints import Constraints
from gapstop.problems.pipeline.rl.rollout import Rollout, RolloutEnv


class RolloutWorker:
    """Rollout environments by key, each with its own random stream."""

    def __init__(self) -> None:
        self.envs: dict[int, RolloutEnv] = {}

    def add(self, key: int, problem: Any, constraints: dict[str, Any], mode: str, seed: int) -> None:
        cons = Constraints.from_dict(constraints, int(constraints["chips"]))
        self.envs[key] = RolloutEnv(problem, cons, mode, np.random.default_rng(seed))

    def run(self, key: int, proposals: NDArray[np.int64], probs: NDArray[np.float64]) -> list[Rollout]:
        env = self.envs[key]
        return [env.run(proposals[r], probs[r]) for r in range(len(proposals))]


class RolloutPool:
    """``workers`` rollout actors of one CPU each (Ray must be initialised with room for them).

    Args:
        workers: actors.
        mode: ``"fix"`` or ``"sample"``.
        seed: root of the environments' streams.
    """

    def __init__(self, workers: int, mode: str = "fix", seed: int = 0) -> None:
        remote = ray.remote(num_cpus=1)(RolloutWorker)
        self.actors = [remote.remote() for _ in range(workers)]
        self.mode = mode
        self.seeds = np.random.SeedSequence(seed)
        self.keys = itertools.count()

    def runner(self, problem: Any, constraints: Constraints
               ) -> Callable[[NDArray[np.int64], NDArray[np.float64]], list[Rollout]]:
        """A runner for one graph: its environments are added to every actor once."""
        key = next(self.keys)
        ref = ray.put(problem)
        seeds = self.seeds.spawn(len(self.actors))
        ray.get([a.add.remote(key, ref, constraints.to_dict(), self.mode, int(s.generate_state(1)[0]))
                 for a, s in zip(self.actors, seeds)])

        def run(proposals: NDArray[np.int64], probs: NDArray[np.float64]) -> list[Rollout]:
            parts = np.array_split(np.arange(len(proposals)), len(self.actors))
            refs = [a.run.remote(key, proposals[p], probs[p]) for a, p in zip(self.actors, parts) if len(p)]
            return [ro for part in ray.get(refs) for ro in part]

        return run
