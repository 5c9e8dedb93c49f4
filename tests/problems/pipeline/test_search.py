"""The pipeline search island (problems/pipeline/search.py)."""

from __future__ import annotations

import numpy as np

from gapstop.problems.pipeline.generators import regal_like
from gapstop.problems.pipeline.search import PipelineSearch


def test_first_batch_of_an_island_is_its_seeded_generation() -> None:
    # A head start holds the islands after their first epoch (engine/solve_loop.py): that
    # epoch must evaluate the seeded chromosomes, not a batch of random keys.
    problem = regal_like(3)
    k = 4
    seed_keys = np.random.default_rng(7).random((2, problem.n))
    island = PipelineSearch(problem, k, np.random.default_rng(0), population=60, seeds=seed_keys)
    seeded_best = min(island.decoder.decode(seed_keys[i]).value for i in range(2))
    found: list[float] = []
    evals = island.step(0.0, lambda value, split: found.append(value))
    assert evals == 60  # one whole generation: a step always makes one batch
    assert island.ga.best_cost <= seeded_best
    assert found and found[-1] <= seeded_best
