"""The coordinator's certificate: "optimal" and the gap only from proven bounds, compared exactly."""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

from gapstop.engine.coordinator import Coordinator, integral
from gapstop.engine.records import Bound, relative_gap
from gapstop.engine.stopping import standard
from gapstop.problems import registry
from gapstop.problems.intraop.model import IntraopProblem

COST = 6_548_641_531  # about instance A's cost


def _one_node(costs: list[int], usage: list[int] | None = None, limit: int | None = None) -> IntraopProblem:
    """One node, one strategy per cost, no edges: the cost of ``[s]`` is ``costs[s]``."""
    k = len(costs)
    return IntraopProblem(name="one", node_ptr=np.array([0, k]), node_cost=np.array(costs),
                          node_usage=np.array(usage or [0] * k), start=np.zeros(1), end=np.ones(1),
                          edge_u=np.zeros(0), edge_v=np.zeros(0), edge_ptr=np.zeros(1), edge_cost=np.zeros(0),
                          usage_limit=limit)


def _intraop_coordinator(costs: list[int], target_gap: float = 0.0) -> Coordinator:
    problem = _one_node(costs)
    return Coordinator(registry.get("intraop").evaluator(problem, {}), standard(target_gap, 1e9))


def test_intraop_is_optimal_only_when_the_bound_equals_the_cost() -> None:
    coord = _intraop_coordinator([COST])
    assert coord.integral
    assert coord.offer_solution([0], "w") and coord.ub == COST and isinstance(coord.ub, int)
    # 65,000 below a cost of 6.5e9 is a relative gap of 1e-5: not a proof of optimality
    coord.offer_bound(Bound("lagrangian", COST - 65_000, "bound-only", 0.0))
    assert coord.stop_reason() is None and coord.gap is not None and coord.gap > 0
    coord.offer_bound(Bound("lagrangian", COST - 1, "bound-only", 0.0))
    assert coord.stop_reason() is None and coord.gap > 0
    coord.offer_bound(Bound("exact", COST, "optimal", 0.0))
    assert coord.stop_reason() == "optimal" and coord.gap == 0.0


def test_intraop_target_gap_zero_beyond_float_precision() -> None:
    big = 10**19 + 7  # float(big) == float(big - 1)
    coord = Coordinator(integral(lambda s: (s, s)), standard(0.0, 1e9))
    coord.offer_solution(big, "w")
    coord.offer_bound(Bound("b", big - 1, "bound-only", 0.0))
    assert coord.stop_reason() is None and coord.gap is not None and coord.gap > 0
    coord.offer_bound(Bound("b", big, "bound-only", 0.0))
    assert coord.stop_reason() == "optimal"


def test_the_ray_coordinator_compares_intraop_values_exactly(tmp_path) -> None:
    pytest.importorskip("ray")
    from gapstop.actors.coordinator import CoordinatorActor

    # the cheaper strategy does not fit: the trivial bound (usage ignored) is 100,000 below the optimum
    problem = _one_node([COST - 100_000, COST], usage=[10, 0], limit=5)
    c = CoordinatorActor("intraop", problem, {}, str(tmp_path / "rd"), {"problem": "intraop"}, 0.0, 60.0)
    assert c.poll()["lb"] == COST - 100_000
    assert c.report_solution([1], "w")
    c.report_bound(Bound("lagrangian", COST - 65_000, "bound-only", 0.0), "lagrangian")
    assert c.poll()["stop"] is None
    c.report_bound(Bound("lagrangian", COST, "bound-only", 0.0), "lagrangian")
    assert c.poll()["stop"] == "optimal"


def test_pipeline_keeps_its_documented_tolerance() -> None:
    # integer-scaled MIPs show a proven optimum as a bound about 1e-6 below the objective
    coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    assert not coord.integral
    coord.offer_solution(1000.0, "w")
    coord.offer_bound(Bound("exact", 999.995, "optimal", 0.0))
    assert coord.stop_reason() == "optimal"
    coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    coord.offer_solution(1000.0, "w")
    coord.offer_bound(Bound("exact", 999.9, "feasible", 0.0))
    assert coord.stop_reason() is None


def test_a_proof_that_nothing_is_feasible_stops_the_run_as_infeasible() -> None:
    coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    coord.offer_bound(Bound("exact", 10.0, "feasible", 0.0))
    assert coord.stop_reason() is None
    coord.offer_bound(Bound("existence", math.inf, "infeasible", 0.0))
    assert coord.stop_reason() == "infeasible" and coord.lb == math.inf
    # next to a feasible solution such a bound is a contradiction: ignored, never a stop
    coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    coord.offer_solution(5.0, "w")
    with pytest.warns(RuntimeWarning):
        coord.offer_bound(Bound("existence", math.inf, "infeasible", 0.0))
    assert coord.stop_reason() is None


def test_relative_gap_is_exact_for_integers_and_never_zero_below_the_cost() -> None:
    assert relative_gap(10**19, 10**19 - 1) == pytest.approx(1e-19) and relative_gap(10**19, 10**19 - 1) > 0
    assert relative_gap(2**60 + 1, 2**60) > 0
    assert relative_gap(COST, COST) == 0.0
    assert relative_gap(COST, math.inf) is None and relative_gap(1.5, math.inf) is None


def test_infinite_bound_next_to_an_incumbent_is_reported_and_ignored() -> None:
    coord = _intraop_coordinator([COST, COST + 5])
    coord.offer_bound(Bound("trivial", COST - 10, "closed-form", 0.0))
    coord.offer_solution([1], "w")
    with pytest.warns(RuntimeWarning, match="internal error"):
        assert not coord.offer_bound(Bound("lagrangian", math.inf, "infeasible", 0.0), "bound-0")
    assert coord.lb == COST - 10 and coord.gap is not None and coord.gap > 0
    assert coord.stop_reason() is None  # the run goes on
    errors = [e for e in coord.events if e.kind == "error"]
    assert len(errors) == 1 and errors[0].worker == "bound-0" and "lagrangian" in errors[0].status
    # a second one: logged again, warned about once only
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not coord.offer_bound(Bound("exact", math.inf, "infeasible", 0.0))
    assert len([e for e in coord.events if e.kind == "error"]) == 2
    # the run still improves and proves optimality the normal way
    assert coord.offer_solution([0], "w")
    coord.offer_bound(Bound("exact", COST, "optimal", 0.0))
    assert coord.stop_reason() == "optimal"


def test_infinite_bound_before_the_incumbent_is_dropped_when_one_is_found() -> None:
    coord = _intraop_coordinator([COST])
    coord.offer_bound(Bound("trivial", COST - 10, "closed-form", 0.0))
    coord.offer_bound(Bound("lagrangian", math.inf, "infeasible", 0.0))
    assert coord.lb == math.inf and coord.gap is None
    with pytest.warns(RuntimeWarning, match="internal error"):
        assert coord.offer_solution([0], "w")
    assert coord.lb == COST - 10 and coord.bound.method == "trivial"
    assert "lagrangian" not in coord.bounds
    assert coord.gap is not None and coord.gap > 0 and coord.stop_reason() is None
    assert [e.kind for e in coord.events] == ["lower", "lower", "upper", "error"]


def test_an_infinite_bound_alone_stays_a_proof_of_infeasibility() -> None:
    coord = _intraop_coordinator([COST])
    assert coord.offer_bound(Bound("trivial", math.inf, "infeasible", 0.0))
    assert coord.lb == math.inf and coord.gap is None and not coord.errors


def _member(j: int, v: float, members: int = 3) -> Bound:
    return Bound(f"guess[{j}]", v, "feasible", 0.0, detail={"group": "guess", "member": j, "members": members})


def test_group_is_released_only_with_exactly_the_members_one_to_k() -> None:
    coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    for b in (_member(1, 5.0), _member(1, 6.0), _member(2, 7.0)):  # a duplicate: still two members
        coord.offer_bound(b)
    assert coord.lb is None
    for b in (_member(0, 1.0), _member(4, 1.0), _member(-1, 1.0)):  # outside 1..3: never a member
        assert not coord.offer_bound(b)
    assert coord.lb is None and len(coord.rejected) == 3
    assert not coord.offer_bound(_member(3, 2.0, members=4))  # another size of the same group
    assert coord.lb is None
    coord.offer_bound(_member(3, 8.0))
    assert coord.lb == 6.0 and coord.bound.detail["per_member"] == [6.0, 7.0, 8.0]


def test_an_intraop_bound_above_2_to_the_53_survives_resume_exactly(tmp_path) -> None:
    pytest.importorskip("ray")
    from gapstop.actors.coordinator import CoordinatorActor

    # two live nodes whose cheap strategies do not fit together: optimum 2^60 + 2, trivial bound 2^60 - 2000
    half = 2**59
    problem = IntraopProblem(name="two", node_ptr=np.array([0, 2, 4]), node_cost=np.array([half + 1, half - 1000] * 2),
                             node_usage=np.array([0, 10] * 2), start=np.zeros(2), end=np.ones(2),
                             edge_u=np.zeros(0), edge_v=np.zeros(0), edge_ptr=np.zeros(1), edge_cost=np.zeros(0),
                             usage_limit=5)
    args = ("intraop", problem, {}, str(tmp_path / "rd"), {"problem": "intraop"}, 0.0, 60.0)
    c = CoordinatorActor(*args)
    assert c.report_solution([0, 0], "w") and c.poll()["ub"] == 2**60 + 2
    assert c.report_bound(Bound("lagrangian", 2**60 + 1, "bound-only", 0.0), "lagrangian")
    c.finalize("interrupted")
    back = CoordinatorActor(*args, resume=True)
    state = back.poll()
    assert state["lb"] == 2**60 + 1 and isinstance(state["lb"], int) and state["stop"] is None
    assert back.finalize("time-limit")["lower_bound"] == 2**60 + 1


def test_a_member_may_be_infinite_but_not_the_group() -> None:
    coord = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    coord.offer_solution(10, "w")
    coord.offer_bound(_member(1, math.inf))  # guess 1 is impossible: fine
    coord.offer_bound(_member(2, 7.0))
    assert not coord.errors and coord.lb is None
    coord.offer_bound(_member(3, 8.0))
    assert coord.lb == 7.0 and not coord.errors
    other = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    other.offer_solution(10, "w")
    with pytest.warns(RuntimeWarning):
        for j in (1, 2, 3):
            other.offer_bound(_member(j, math.inf))
    assert other.lb is None and len(other.errors) == 1 and other.gap is None


def test_an_integer_bound_above_a_feasible_cost_is_an_internal_error() -> None:
    coord = _intraop_coordinator([COST, COST + 5])
    coord.offer_bound(Bound("trivial", COST - 10, "closed-form", 0.0))
    coord.offer_bound(Bound("lagrangian", COST + 3, "bound-only", 0.0))  # no incumbent yet: nothing to contradict
    assert coord.lb == COST + 3
    with pytest.warns(RuntimeWarning, match="internal error"):
        coord.offer_solution([1], "w")  # cost COST + 5: fine next to COST + 3
        coord.offer_solution([0], "w")  # cost COST: the bound COST + 3 was false
    assert coord.lb == COST - 10 and coord.stop_reason() is None and len(coord.errors) == 1
    assert not coord.offer_bound(Bound("exact", COST + 1, "optimal", 0.0))
    assert coord.lb == COST - 10 and len(coord.errors) == 2 and coord.stop_reason() is None
    # a real-valued objective's bound may lie a rounding above the incumbent
    real = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    real.offer_solution(1000.0, "w")
    assert real.offer_bound(Bound("exact", 1000.0000001, "optimal", 0.0)) and not real.errors
    assert real.stop_reason() == "optimal"


def test_a_real_valued_bound_far_above_the_incumbent_is_an_internal_error() -> None:
    # beyond the documented tolerance a bound above a feasible cost is false, not a rounding:
    # it must not certify the incumbent optimal
    real = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    real.offer_solution(1000.0, "w")
    real.offer_bound(Bound("simple", 900.0, "bound-only", 0.0))
    with pytest.warns(RuntimeWarning, match="internal error"):
        assert not real.offer_bound(Bound("exact", 1100.0, "optimal", 0.0))
    assert real.lb == 900.0 and real.stop_reason() is None and len(real.errors) == 1
    # and a false bound held before the incumbent arrived is dropped when it does
    early = Coordinator(lambda s: (float(s), s), standard(0.0, 1e9))
    early.offer_bound(Bound("exact", 1100.0, "optimal", 0.0))
    with pytest.warns(RuntimeWarning, match="internal error"):
        early.offer_solution(1000.0, "w")
    assert early.lb is None and early.stop_reason() is None
