"""Intra-op bound paths beyond a single final value, against the exhaustive optimum
(:func:`tests.problems.intraop.reference.brute_force_table`): the Lagrangian's live values
(multiplier steps and cycle tightening, reported as they rise) with a usage limit, and
bounds restored by ``--resume`` from a checkpoint.
"""

from __future__ import annotations

import pytest

from gapstop.engine.records import Bound
from gapstop.problems.intraop.bounds import lower_bound
from gapstop.problems.intraop.generators import random_instance
from tests.problems.intraop.reference import brute_force_table


def _instance(seed: int):
    # dense enough that the core survives elimination (TRW-S and cycles, not exact elimination)
    return random_instance(11, seed, max_k=3, edge_p=0.45, limit_quantile=0.3)


def test_live_lagrangian_bounds_with_a_usage_limit() -> None:
    live = tightened = 0
    for seed in range(16):
        p = _instance(seed)
        assert p.usage_limit is not None
        opt, _ = brute_force_table(p)
        seen: list[int] = []
        b = lower_bound(p, "lagrangian", 0.4, exact_table_limit=0, max_iterations=40, on_improvement=seen.append)
        assert seen == sorted(seen) and all(isinstance(v, int) for v in seen)
        if opt is None:
            continue
        assert all(v <= opt for v in seen + [b.value]), (seed, opt, seen, b.value)
        live += len(seen)
        tightened += b.detail.get("cycle_gain", 0) > 0
    assert live >= 30 and tightened >= 1  # steps and a cycle tightening both reported live


def test_intraop_bounds_restored_on_resume_are_the_checkpointed_ones(tmp_path) -> None:
    pytest.importorskip("ray")
    from gapstop.actors.coordinator import CoordinatorActor

    checked = 0
    for seed in (1, 5, 6):
        p = _instance(seed)
        opt, sol = brute_force_table(p)
        assert opt is not None
        args = ("intraop", p, {}, str(tmp_path / f"rd{seed}"), {"problem": "intraop"}, 0.0, 60.0)
        c = CoordinatorActor(*args)
        seen: list[int] = []
        final = lower_bound(p, "lagrangian", 0.4, exact_table_limit=0, max_iterations=40, on_improvement=seen.append)
        for v in seen:
            c.report_bound(Bound("lagrangian", v, "bound-only", 0.0), "lagrangian")
        c.report_bound(final, "lagrangian")
        c.report_bound(lower_bound(p, "unconstrained", 0.4), "unconstrained")
        before = {m: b.value for m, b in c.coord.bounds.items()}
        lb = c.coord.lb
        c.finalize("interrupted")
        back = CoordinatorActor(*args, resume=True)
        after = {m: b.value for m, b in back.coord.bounds.items()}
        assert after == before and back.coord.lb == lb and isinstance(back.coord.lb, int)
        assert all(v <= opt for v in after.values()), (seed, after, opt)
        # the optimum found after the resume is proven only by a bound equal to it
        back.report_solution(sol, "brute-force")
        assert (back.poll()["stop"] == "optimal") == (lb == opt)
        checked += 1
    assert checked == 3
