"""Contracts of the ask/tell searches, the gap, stopping criteria and the coordinator."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from gapstop.engine.brkga import BRKGA
from gapstop.engine.coordinator import Coordinator
from gapstop.engine.driver import run_ask_tell
from gapstop.engine.records import Bound, relative_gap
from gapstop.engine.search import KeyBatch, RandomKeys
from gapstop.engine.stopping import AnyOf, GapReached, Progress, WallClock, standard


def sphere(batch: KeyBatch) -> np.ndarray:
    return ((batch.keys - 0.3) ** 2).sum(axis=1)


@pytest.mark.parametrize("make", [lambda r: BRKGA(5, r, population=20), lambda r: RandomKeys(5, r, batch_size=8)])
class TestSearchContract:
    def test_ask_shape_and_range(self, make) -> None:
        s = make(np.random.default_rng(0))
        b = s.ask()
        assert b.keys.shape == (len(b.ids), 5) and len(b) > 0
        assert (b.keys >= 0).all() and (b.keys < 1).all()
        assert not b.keys.flags.writeable

    def test_same_seed_same_run_other_seed_differs(self, make) -> None:
        def run(seed: int) -> float:
            s = make(np.random.default_rng(seed))
            run_ask_tell(s, sphere, lambda: False, max_evals=300)
            return s.best()[0]
        assert run(1) == run(1)
        assert run(1) != run(2)

    def test_best_never_worsens_and_state_round_trips(self, make) -> None:
        s = make(np.random.default_rng(3))
        seen = []
        for _ in range(20):
            b = s.ask()
            s.tell(b, sphere(b))
            seen.append(s.best()[0])
        assert all(a >= b for a, b in zip(seen, seen[1:]))
        t = make(np.random.default_rng(99))
        t.load_state_dict(s.state_dict())
        b1, b2 = s.ask(), t.ask()
        assert np.array_equal(b1.keys, b2.keys)

    def test_nan_costs_count_as_inf(self, make) -> None:
        s = make(np.random.default_rng(0))
        b = s.ask()
        s.tell(b, np.full(len(b), np.nan))
        assert s.best()[0] == math.inf


def test_brkga_beats_random_on_a_smooth_objective() -> None:
    ga, rs = BRKGA(20, np.random.default_rng(0)), RandomKeys(20, np.random.default_rng(0))
    run_ask_tell(ga, sphere, lambda: False, max_evals=3000)
    run_ask_tell(rs, sphere, lambda: False, max_evals=3000)
    assert ga.best()[0] < 0.5 * rs.best()[0]


def test_brkga_elites_survive_and_inject() -> None:
    ga = BRKGA(4, np.random.default_rng(0), population=10)
    b = ga.ask()
    ga.tell(b, sphere(b))
    elite_keys, elite_costs = ga.elites()
    assert ga.generation == 1 and len(ga.ask()) == 10 - ga.n_elite
    ga.inject(np.full((1, 4), 0.3), np.array([0.0]))
    assert ga.best()[0] == 0.0


def test_relative_gap_edge_cases() -> None:
    assert relative_gap(None, 1.0) is None and relative_gap(1.0, None) is None
    assert relative_gap(math.inf, 1.0) is None and relative_gap(2.0, -math.inf) is None
    assert relative_gap(10.0, 9.0) == pytest.approx(0.1)
    assert relative_gap(10.0, 11.0) == 0.0
    assert relative_gap(10.0, 0.0) == 1.0 and relative_gap(10.0, -5.0) == 1.0
    assert relative_gap(0.0, 0.0) == 0.0 and relative_gap(0.0, -1.0) is None


def test_stopping_criteria() -> None:
    c = standard(0.05, 10.0)
    assert c.reason(Progress(10.0, 9.6, 1.0)) == "target-gap"
    assert c.reason(Progress(10.0, 10.0, 1.0)) == "optimal"
    assert c.reason(Progress(10.0, 5.0, 11.0)) == "time-limit"
    assert c.reason(Progress(None, 5.0, 1.0)) is None
    assert AnyOf(WallClock(5), GapReached(0.5)).reason(Progress(1.0, 0.6, 6)) == "time-limit"


def test_coordinator_merges_monotonically_in_any_order() -> None:
    # solutions are integers whose exact cost is the integer itself; a worker's claim is ignored
    reports = [("ub", v) for v in (9, 7, 8, 7, 5, 6)] + [("lb", v) for v in (1.0, 3.0, 2.0, 3.0, 4.0)]
    for seed in range(20):
        random.Random(seed).shuffle(reports)
        coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
        ubs, lbs = [], []
        for kind, v in reports + reports:  # duplicates too
            if kind == "ub":
                coord.offer_solution(v, "w")
            else:
                coord.offer_bound(Bound("m" + str(v), v, "optimal", 0.0))
            ubs.append(coord.ub if coord.ub is not None else math.inf)
            lbs.append(coord.lb if coord.lb is not None else -math.inf)
        assert coord.ub == 5 and coord.lb == 4.0
        assert all(a >= b for a, b in zip(ubs, ubs[1:])) and all(a <= b for a, b in zip(lbs, lbs[1:]))
        assert len([e for e in coord.events if e.kind == "upper"]) <= 5  # distinct values 9,8,7,6,5


def test_coordinator_rejects_infeasible_and_stops_at_gap() -> None:
    def ev(s):
        if s < 0:
            raise ValueError("infeasible")
        return float(s), s
    coord = Coordinator(ev, standard(0.1, 1e9))
    assert not coord.offer_solution(-3, "bad") and coord.rejected
    coord.offer_solution(10, "w")
    assert coord.stop_reason() is None
    coord.offer_bound(Bound("b", 8.9, "feasible", 0.1))
    assert coord.stop_reason() is None
    coord.offer_bound(Bound("b", 9.0, "feasible", 0.1))
    assert coord.stop_reason() == "target-gap" and coord.gap == pytest.approx(0.1)


def test_group_bound_is_min_over_members_only_when_all_reported() -> None:
    coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))

    def member(j: int, v: float) -> Bound:
        return Bound("guess[j]", v, "feasible", 0.0, detail={"group": "guess", "member": j, "members": 3})

    assert not coord.offer_bound(member(1, 5.0)) and coord.lb is None
    coord.offer_bound(member(2, 7.0))
    assert coord.lb is None  # member 3 missing: min over a subset would not be a bound
    coord.offer_bound(member(3, 6.0))
    assert coord.lb == 5.0 and coord.bound.method == "guess"
    coord.offer_bound(member(1, 4.0))  # a worse report of a member never lowers anything
    assert coord.lb == 5.0 and coord.member_bounds("guess")[1] == 5.0
    coord.offer_bound(member(1, 9.0))
    assert coord.lb == 6.0 and coord.bound.detail["argmin_member"] == 3


def test_coordinator_keeps_exact_integer_costs() -> None:
    big = 2 ** 63 + 12345  # beyond float precision: float(big) == float(big + 1)
    coord = Coordinator(lambda s: (s, s), standard(0.0, 1e9))
    coord.offer_solution(big + 1, "w")
    assert coord.offer_solution(big, "w")  # one unit better must be accepted
    assert coord.ub == big and isinstance(coord.ub, int)
