"""Rollouts without torch: a proposal -> the constraint solver -> the exact objective -> a reward.

Kept free of torch so that rollouts can run wherever the constraint solver runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline.constraints import Constraints, ConstraintSolver, Outcome
from gapstop.problems.pipeline.model import PipelineProblem

MODES = ("fix", "sample")
#: reward of a proposal the solver could not turn into a valid partition, relative to the
#: worst valid one of its batch (all invalid: every reward equal, nothing is learnt)
INVALID_FACTOR = 1.5


def reference(problem: PipelineProblem, chips: int) -> float:
    """The per-graph reward scale: the ``simple`` lower bound (positive whenever the graph
    has work or traffic), so a reward -objective / reference lies in (-inf, -1] and is -1
    only at a provably optimal partition. 1.0 for a graph without cost."""
    from gapstop.problems.pipeline.closed_form import simple_bound

    lb = float(simple_bound(problem, chips).value)
    return lb if lb > 0 and math.isfinite(lb) else 1.0


@dataclass
class Rollout:
    """One proposal's outcome.

    Attributes:
        outcome: what the solver returned.
        action: int64[n], the chips whose log-probability PPO raises or lowers: the proposal
            y in FIX mode, the solver's partition y' in SAMPLE mode (see :class:`RolloutEnv`).
        objective: exact objective of a valid partition, else None.
    """

    outcome: Outcome
    action: NDArray[np.int64]
    objective: float | None


class RolloutEnv:
    """Turns proposals into valid partitions and rewards, for one graph and C.

    FIX (default, the paper's choice): the policy's last assignment y is the proposal and
    the action: the solver is part of the environment and the reward is that of the valid
    partition y' it makes of y (the paper trains on y''s reward because y itself is almost
    never valid). SAMPLE: the solver samples y' from the policy's last distributions
    restricted to each node's domain; the action is then y' (the proposal y plays no role),
    scored under the unrestricted distributions, which ignores the renormalisation over the
    domain (an approximation).

    Args:
        problem, constraints: the instance (C = ``constraints.chips``).
        mode: ``"fix"`` or ``"sample"``.
        rng: the stream for node orders and the solver's random choices.
        solver: a solver of this instance to share (default: a new one).
    """

    def __init__(self, problem: PipelineProblem, constraints: Constraints, mode: str = "fix",
                 rng: np.random.Generator | None = None, solver: ConstraintSolver | None = None) -> None:
        if mode not in MODES:
            raise ValueError(f"mode: expected one of {MODES}, got {mode!r}")
        self.problem, self.constraints, self.mode = problem, constraints, mode
        self.solver = solver if solver is not None else ConstraintSolver(problem, constraints)
        self.rng = rng if rng is not None else np.random.default_rng()
        self.reference = reference(problem, constraints.chips)

    def run(self, proposal: NDArray[np.int64], probs: NDArray[np.float64]) -> Rollout:
        """One rollout from the proposal int64[n] and the distributions float64[n, C]."""
        if self.mode == "fix":
            out = self.solver.fix(proposal, None, self.rng)
            action = proposal
        else:
            out = self.solver.sample(probs, None, self.rng)
            action = out.chips if out.chips is not None else proposal
        # a call that gives back the last valid partition ("witness") did not turn this
        # proposal into one: its cost says nothing about the proposal
        obj = out.objective if out.fresh else None
        return Rollout(out, np.asarray(action, np.int64), obj)

    def rewards(self, rollouts: list[Rollout]) -> NDArray[np.float64]:
        """-objective / :attr:`reference` per rollout; invalid ones get :data:`INVALID_FACTOR`
        times the batch's worst valid reward (0 for all if none is valid)."""
        r = np.array([-o.objective / self.reference if o.objective is not None else np.nan for o in rollouts])
        ok = np.isfinite(r)
        r[~ok] = INVALID_FACTOR * r[ok].min() if ok.any() else 0.0
        return r
