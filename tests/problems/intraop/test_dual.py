"""The TRW-S dual of the reduced core (problems/intraop/_dual.CoreDual)."""

from __future__ import annotations

import numpy as np

from gapstop.problems.intraop._dual import EXCL, CoreDual, prepare_bounds
from gapstop.problems.intraop.generators import random_instance


def _arc_consistent_theta(dual: CoreDual, theta: np.ndarray) -> np.ndarray | None:
    if dual._replay(theta) is None:
        return None
    dual._arc_consistency()
    return dual.theta.copy()


def test_reused_arc_consistency_matches_a_fresh_one() -> None:
    """One CoreDual called with a sequence of unary costs (same excluded pattern with new values,
    then more exclusions, then fewer) must exclude exactly what a new CoreDual excludes."""
    checked = removed = 0
    for seed in range(40):
        p = random_instance(40, seed, max_k=4, edge_p=0.12, forbidden_p=0.1)
        prep = prepare_bounds(p)
        if len(prep.plan.core) == 0:
            continue
        rng = np.random.default_rng(seed)
        dual = CoreDual(prep)
        base = prep.unary.copy()
        more = base.copy()  # some core nodes keep one label: their neighbours lose the labels it forbids
        net = prep.net
        for v in prep.plan.core.tolist():
            if rng.random() < 0.3:
                row = more[net.ptr[v]:net.ptr[v + 1]]
                keep = rng.choice(np.nonzero(row < EXCL)[0]) if np.any(row < EXCL) else -1
                row[np.arange(len(row)) != keep] = EXCL
        for theta in (base, np.where(base < EXCL, base + rng.integers(0, 50, len(base)), EXCL), more, base):
            want = _arc_consistent_theta(CoreDual(prep), theta)
            if want is None:
                continue
            got = _arc_consistent_theta(dual, theta)
            assert got is not None and np.array_equal(got, want), seed
            removed += int(np.sum((want >= EXCL) & (theta < EXCL)))
            checked += 1
    assert checked >= 40 and removed > 0  # the cases exercise both paths and real exclusions
