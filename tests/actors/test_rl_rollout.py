"""Policy rollouts on Ray workers give what the local loop gives: valid partitions scored exactly."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gapstop.problems.pipeline.constraints import Constraints
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag


def test_rollout_worker_without_ray_scores_exactly() -> None:
    from gapstop.actors.rl_rollout import RolloutWorker

    p = random_dag(10, 2)
    cons = Constraints(3, ring=True)
    w = RolloutWorker()
    w.add(7, p, cons.to_dict(), "fix", 0)
    rng = np.random.default_rng(1)
    props = rng.integers(0, 3, size=(5, 10))
    out = w.run(7, props, np.full((5, 10, 3), 1 / 3))
    assert len(out) == 5
    for ro, y in zip(out, props):
        assert ro.outcome.valid and np.array_equal(ro.action, y)
        assert math.isclose(ro.objective, evaluate(p, ro.outcome.chips, constraints=cons).objective)


@pytest.mark.ray
@pytest.mark.slow
def test_ppo_collects_through_ray_workers() -> None:
    torch = pytest.importorskip("torch")
    import ray

    from gapstop.actors.rl_rollout import RolloutPool
    from gapstop.cluster.connect import connect
    from gapstop.problems.pipeline.rl.policy import Policy, PolicyConfig
    from gapstop.problems.pipeline.rl.ppo import PPOTrainer

    torch.set_num_threads(1)
    connect(None, 2)
    try:
        p = random_dag(12, 3)
        cons = Constraints(4, ring=True)
        trainer = PPOTrainer(Policy(PolicyConfig(layers=1, width=8)), seed=0)
        pool = RolloutPool(2, "fix", 0)
        task = trainer.task(p, cons)
        task.runner = pool.runner(p, cons)
        other = trainer.task(random_dag(9, 4), Constraints(3, ring=True))  # a second graph on the same actors
        other.runner = pool.runner(other.problem, other.constraints)
        assert all(ro.outcome.valid for ro in trainer.collect(other).rollouts)
        batch = trainer.collect(task)
        assert len(batch.rollouts) == 20
        for ro, y in zip(batch.rollouts, batch.ys[:, -1].numpy()):
            assert ro.outcome.valid and np.array_equal(ro.action, y)
            assert math.isclose(ro.objective, evaluate(p, ro.outcome.chips, constraints=cons).objective)
        trainer.update(task, batch)
    finally:
        ray.shutdown()
