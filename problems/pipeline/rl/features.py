"""Node features and adjacency of a pipeline graph for the policy (numpy, no torch).

Static per-node features, each normalised per graph so that one policy reads graphs of
any scale: work, parameter and output bytes (each as a share of the graph's largest and
as log1p of its share of the mean), the communication time of the output over the ideal
stage time ``total work / C``, in- and out-degree (log1p), topological depth from the
sources and from the sinks (over the longest path), and the position in a topological
order (over n). The previous iteration's assignment is appended per iteration by the
policy (:func:`assignment_features`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline.model import PipelineProblem

#: static features per node
N_STATIC = 13
#: features of the previous iteration's assignment: chip / (C - 1), assigned flag
N_ASSIGN = 2


@dataclass(frozen=True)
class GraphInputs:
    """What the policy reads from one graph.

    Attributes:
        n, chips: nodes and C.
        x: float32[n, N_STATIC] static node features.
        pred_rows, pred_cols, pred_vals: COO of the row-normalised predecessor matrix
            (mean over a node's producers; rows of sources are empty).
        succ_rows, succ_cols, succ_vals: the same for successors.
    """

    n: int
    chips: int
    x: NDArray[np.float32]
    pred_rows: NDArray[np.int64]
    pred_cols: NDArray[np.int64]
    pred_vals: NDArray[np.float32]
    succ_rows: NDArray[np.int64]
    succ_cols: NDArray[np.int64]
    succ_vals: NDArray[np.float32]


def _depths(problem: PipelineProblem, order: NDArray[np.int64]) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Longest-path depth from the sources and to the sinks (edges counted)."""
    n = problem.n
    down = np.zeros(n)
    up = np.zeros(n)
    sp, s, pp, p = problem.succ_ptr, problem.succ, problem.pred_ptr, problem.pred
    for v in order:
        preds = p[pp[v]:pp[v + 1]]
        if len(preds):
            down[v] = down[preds].max() + 1
    for v in order[::-1]:
        succs = s[sp[v]:sp[v + 1]]
        if len(succs):
            up[v] = up[succs].max() + 1
    return down, up


def _share(a: NDArray[np.float64]) -> NDArray[np.float64]:
    m = float(np.abs(a).max()) if len(a) else 0.0
    return a / m if m > 0 else np.zeros_like(a)


def _log_share(a: NDArray[np.float64]) -> NDArray[np.float64]:
    mean = float(a.mean()) if len(a) else 0.0
    return np.log1p(a / mean) if mean > 0 else np.zeros_like(a)


def graph_inputs(problem: PipelineProblem, chips: int) -> GraphInputs:
    """The policy's view of ``problem`` partitioned onto ``chips`` chips."""
    from gapstop.problems.pipeline import _kernels

    n = problem.n
    order = _kernels.kahn_order(-np.arange(n, dtype=np.float64), problem.succ_ptr, problem.succ,
                                problem.pred_ptr).astype(np.int64)
    down, up = _depths(problem, order)
    span = max(1.0, float(down.max()) if n else 1.0)
    pos = np.empty(n)
    pos[order] = np.arange(n) / max(1, n - 1)
    work = problem.work.astype(np.float64)
    param = problem.size_param.astype(np.float64)
    out = problem.size_out.astype(np.float64)
    stage = max(float(work.sum()) / max(1, chips), 1e-12)
    indeg = np.diff(problem.pred_ptr).astype(np.float64)
    outdeg = np.diff(problem.succ_ptr).astype(np.float64)
    x = np.stack([_share(work), _log_share(work), _share(param), _log_share(param), _share(out), _log_share(out),
                  np.log1p(out / problem.bandwidth / stage), np.log1p(indeg), np.log1p(outdeg),
                  down / span, up / span, pos, np.full(n, 1.0 / chips)], axis=1).astype(np.float32)
    assert x.shape[1] == N_STATIC
    e = problem.edges.astype(np.int64)
    src, dst = (e[:, 0], e[:, 1]) if len(e) else (np.zeros(0, np.int64), np.zeros(0, np.int64))
    pv = (1.0 / np.maximum(indeg, 1))[dst].astype(np.float32)
    sv = (1.0 / np.maximum(outdeg, 1))[src].astype(np.float32)
    return GraphInputs(n, chips, x, dst, src, pv, src, dst, sv)


def assignment_features(prev: NDArray[np.int64] | None, n: int, chips: int) -> NDArray[np.float32]:
    """float32[..., n, N_ASSIGN] from chips per node (``prev``: int[..., n], -1 = none yet; None: none)."""
    if prev is None:
        return np.zeros((n, N_ASSIGN), np.float32)
    prev = np.asarray(prev)
    pos = np.where(prev >= 0, prev / max(1, chips - 1), 0.0)
    return np.stack([pos, (prev >= 0).astype(np.float64)], axis=-1).astype(np.float32)
