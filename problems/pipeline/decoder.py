"""Random-key decoding for MTPP: keys -> Kahn order -> SliceGraph split.

A key vector is one priority per node in [0, 1]; a larger key is scheduled
earlier among ready nodes. Decoding is deterministic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline import _kernels
from gapstop.problems.pipeline.evaluate import Evaluation, evaluate
from gapstop.problems.pipeline.model import PipelineProblem


@dataclass(frozen=True)
class Split:
    """Result of SliceGraph on one order.

    Attributes:
        value: bottleneck cost of the returned split.
        blocks: int64[n], block per node (0..p-1 along the order).
        order: int32[n], the order that was split.
        exact: True if ``value`` is the optimum over all splits of ``order``
            (always, unless a cutoff was given and the optimum is not below it).
    """

    value: float
    blocks: NDArray[np.int64]
    order: NDArray[np.int32]
    exact: bool


class SliceDecoder:
    """Decodes key vectors of length n into partitions into at most k blocks."""

    def __init__(self, problem: PipelineProblem, k: int) -> None:
        if k < 1:
            raise ValueError("k must be >= 1")
        self.problem = problem
        self.k = int(k)
        p = problem
        self._args = (p.work, p.size_param, p.size_out, p.succ_ptr, p.succ, p.pred_ptr, p.pred,
                      p.bandwidth, p.memory_or_minus1)

    @property
    def n_keys(self) -> int:
        return self.problem.n

    def order(self, keys: NDArray[np.float64]) -> NDArray[np.int32]:
        """Kahn's topological order for one key vector."""
        p = self.problem
        return _kernels.kahn_order(np.asarray(keys, np.float64), p.succ_ptr, p.succ, p.pred_ptr)

    def slice(self, order: NDArray[np.int32], cutoff: float = math.inf) -> Split:
        """SliceGraph on a given topological order (not validated here)."""
        o = np.ascontiguousarray(order, dtype=np.int32)
        value, starts, exact = _kernels.slice_order(o, self.k, *self._args, float(cutoff))
        blocks_pos = np.zeros(len(o), dtype=np.int64)
        for i, s in enumerate(starts):
            blocks_pos[s:] = i
        blocks = np.empty(len(o), dtype=np.int64)
        blocks[o] = blocks_pos
        return Split(float(value), blocks, o, bool(exact))

    def decode(self, keys: NDArray[np.float64], cutoff: float = math.inf) -> Split:
        """Decode one key vector into a split."""
        return self.slice(self.order(keys), cutoff)

    def values(self, keys: NDArray[np.float64], cutoff: float = math.inf) -> NDArray[np.float64]:
        """Bottleneck values of a batch of key vectors, shape (batch,), in one compiled call.

        A value is exact when below ``cutoff``; otherwise it is the cost of some feasible
        split and only known to be ``>= cutoff``-or-not-better.
        """
        k2 = np.ascontiguousarray(np.atleast_2d(keys), dtype=np.float64)
        if not k2.flags.writeable:
            # numba compiles a read-only array as another type: one writable kind keeps it to
            # one compile of the kernel (seconds of a machine's first run)
            k2 = k2.copy()
        return _kernels.decode_batch(k2, self.k, *self._args, float(cutoff))

    def evaluate(self, split: Split) -> Evaluation:
        """Re-score a split with the exact evaluator."""
        return evaluate(self.problem, split.blocks, split.order, k=self.k)
