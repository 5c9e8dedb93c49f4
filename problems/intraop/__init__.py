"""Intra-operator sharding strategies (the ASPLOS/EuroSys 2025 IOPDDL contest problem).

Modules: ``model`` (instance arrays), ``io`` (contest JSON loader with array
cache), ``evaluate`` (the exact evaluator), ``network`` (merged pair tables of
the relaxed problem), ``reduce`` (exact degree <= 2 elimination), ``_kernels``
(numba: TRW-S, forest descent, local costs), ``relaxed`` (one relaxed solve),
``repair`` (greedy swaps and repair under the usage limit), ``penalty`` (the
adaptive penalty search), ``island`` (a search island of the solve loop), ``jobs`` (the
bound jobs), ``generators``.
``elimination`` (FindOptStrategy: exact vertex elimination, mini-bucket bound) over
``_factors`` (bucket elimination on factor tables), ``strategies`` (instances from a
model's op metadata).
``PenaltySearch`` is imported lazily (it compiles numba kernels).
"""

from __future__ import annotations

from typing import Any

from gapstop.problems.intraop.evaluate import Evaluation, evaluate
from gapstop.problems.intraop.io import load_problem
from gapstop.problems.intraop.model import FORBIDDEN, IntraopProblem

__all__ = ["FORBIDDEN", "Evaluation", "IntraopProblem", "PenaltySearch", "evaluate", "load_problem"]


def __getattr__(name: str) -> Any:
    if name == "PenaltySearch":
        from gapstop.problems.intraop.penalty import PenaltySearch
        return PenaltySearch
    raise AttributeError(name)
