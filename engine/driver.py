"""The one ask/evaluate/tell loop of a key-based search (the islands run it inside their steps)."""

from __future__ import annotations

from typing import Callable

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.search import BaseKeySearch, KeyBatch

#: evaluate(batch) -> costs float64[len(batch)]
BatchEvaluator = Callable[[KeyBatch], NDArray[np.float64]]


def run_ask_tell(search: BaseKeySearch, evaluate: BatchEvaluator, should_stop: Callable[[], bool],
              batch_size: int | None = None, max_evals: int | None = None,
              on_improvement: Callable[[float, NDArray[np.float64]], None] | None = None) -> int:
    """Run ask -> evaluate -> tell until ``should_stop()`` or ``max_evals`` evaluations.

    ``should_stop`` is checked between batches, never in the middle of one.
    ``on_improvement(cost, keys)`` is called whenever the search's best improves.
    Returns the number of evaluations made.
    """
    evals = 0
    while not should_stop() and (max_evals is None or evals < max_evals):
        batch = search.ask(batch_size)
        if len(batch) == 0:
            break
        before = search.best_cost
        search.tell(batch, evaluate(batch))
        evals += len(batch)
        if on_improvement is not None and search.best_cost < before and search.best_keys is not None:
            on_improvement(search.best_cost, search.best_keys)
    return evals
