"""MCM constraints: the exact evaluator against an independent checker, the constraint
solver (SAMPLE, FIX) against brute force, the paper's Figure 2 cases, bad input."""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.problems.pipeline.constraints import Constraints, ConstraintSolver, ConstraintViolation
from gapstop.problems.pipeline.evaluate import evaluate
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.model import PipelineProblem
from tests.problems.pipeline.mcm_reference import all_labellings, first_violation
from tests.timing import slack

CHECK = "tests.problems.pipeline.test_constraints:"


def first_chip_even(problem: PipelineProblem, chips: object) -> bool:
    """A user check: node 0's chip is even."""
    return int(list(chips)[0]) % 2 == 0  # type: ignore[call-overload]


def raises_on_chip_one(problem: PipelineProblem, chips: object) -> bool:
    """A user check that raises for some partitions (a failing backend)."""
    c = list(chips)  # type: ignore[call-overload]
    if int(c[len(c) // 2]) % 2 == 1:
        raise RuntimeError("backend crashed")
    return True


def _graph(n: int, edges: list[tuple[int, int]], *, param: list[int] | None = None,
           memory: int | None = None) -> PipelineProblem:
    return PipelineProblem(name="g", work=np.arange(1, n + 1, dtype=float), size_param=param or [0] * n,
                           size_out=[1] * n, edges=edges, bandwidth=1.0, memory=memory)


def _violation(p: PipelineProblem, labels: tuple[int, ...], cons: Constraints) -> str | None:
    """What the product's evaluator says: a constraint name, cycle/too-many, or None."""
    try:
        evaluate(p, np.array(labels), k=cons.chips, constraints=cons)
    except ConstraintViolation as e:
        return e.name
    except InputError as e:
        msg = str(e)
        assert "cycle" in msg or "more than k" in msg, msg
        return "cycle" if "cycle" in msg else "too-many"
    return None


def _tiny_cases(count: int) -> list[tuple[PipelineProblem, Constraints]]:
    """Random DAGs with n <= 7, C <= 4 (C^n <= 1024 labellings) and random active constraints."""
    rng = np.random.default_rng(7)
    out = []
    for i in range(count):
        c = int(rng.integers(1, 5))
        n_max = {1: 7, 2: 7, 3: 6, 4: 5}[c]
        n = int(rng.integers(max(2, c), n_max + 1))
        p = random_dag(n, 1000 + i, p=float(rng.uniform(0.2, 0.7)), memory=bool(rng.random() < 0.4))
        flags = rng.random(4) < 0.5
        check = (CHECK + "first_chip_even") if flags[3] else None
        memory_hard = bool(rng.random() < 0.5) and p.memory is not None
        # no ring, the prefix reading of equation 3 (ring) and the strict one (all_chips), in turn
        ring, all_chips = (False, False) if not flags[0] else (True, i % 2 == 1)
        out.append((p, Constraints(chips=c, ring=ring, no_triangle=bool(flags[1] or not flags[0]),
                                   memory_hard=memory_hard, check=check, all_chips=all_chips)))
    return out


CASES = _tiny_cases(220)


@pytest.mark.parametrize("strict", [False, True])
def test_evaluator_agrees_with_independent_checker_on_every_labelling(strict: bool) -> None:
    _check_every_labelling(CASES[::4], strict)  # every verdict occurs in the first cases


@pytest.mark.slow
@pytest.mark.parametrize("strict", [False, True])
def test_evaluator_agrees_with_independent_checker_on_every_labelling_sweep(strict: bool) -> None:
    _check_every_labelling(CASES, strict)


def _check_every_labelling(cases: list[tuple[PipelineProblem, Constraints]], strict: bool) -> None:
    """Every case, the ring ones under the prefix reading of equation 3 (``strict`` False) or
    under the strict one (True: every ring case again with ``all_chips``)."""
    seen: dict[str | None, int] = {}
    for p, cons in cases:
        if strict and not cons.ring:
            continue
        rc = replace(cons, all_chips=strict) if cons.ring else cons
        for labels in all_labellings(p.n, rc.chips):
            want = first_violation(p, labels, rc.chips, ring=rc.ring, all_chips=rc.all_chips,
                                   triangle=rc.no_triangle, memory=rc.memory_hard,
                                   check=first_chip_even if rc.check else None)
            got = _violation(p, labels, rc)
            assert got == want, (p.edges.tolist(), labels, rc)
            seen[want] = seen.get(want, 0) + 1
    # every verdict occurs, so each branch of the checker was exercised
    assert {"ring-order", "no-skip", "triangle", "memory", "check", None} | ({"cycle"} if not strict else set()) \
        <= set(seen), seen


def test_prefix_reading_is_feasible_on_every_graph_and_the_strict_one_is_not() -> None:
    """Equation 3 by brute force on every tiny DAG of :data:`CASES` (>= 200), with the solver's
    verdict beside it: under the prefix reading some labelling is valid (everything on chip 0)
    and uses chips 0..m; under the strict one some graphs have none, and the solver proves it."""
    rng = np.random.default_rng(2)
    only_prefix = 0
    for p, cons in CASES:
        prefix = Constraints(chips=cons.chips, ring=True, no_triangle=True)
        strict = replace(prefix, all_chips=True)
        ok = {r.reading: {lab for lab in all_labellings(p.n, r.chips)
                          if first_violation(p, lab, r.chips, ring=True, all_chips=r.all_chips, triangle=True,
                                             memory=False) is None} for r in (prefix, strict)}
        assert (0,) * p.n in ok["prefix"] and ok["all-chips"] <= ok["prefix"]
        assert all(set(lab) == set(range(max(lab) + 1)) for lab in ok["prefix"])
        for r in (prefix, strict):
            out = ConstraintSolver(p, r).sample(None, rng=rng)
            assert out.status == ("valid" if ok[r.reading] else "infeasible"), (p.edges.tolist(), r)
            assert out.chips is None or tuple(out.chips.tolist()) in ok[r.reading]
        only_prefix += not ok["all-chips"]
    assert len(CASES) >= 200 and only_prefix >= 10, only_prefix


def _static_feasible(p: PipelineProblem, cons: Constraints) -> bool:
    return any(first_violation(p, labels, cons.chips, ring=cons.ring, all_chips=cons.all_chips,
                               triangle=cons.no_triangle, memory=False) is None
               for labels in all_labellings(p.n, cons.chips))


def _static_readings(cases: list[tuple[PipelineProblem, Constraints]]) -> list[tuple[PipelineProblem, Constraints]]:
    """The static part of each case, a ring case under both readings of equation 3."""
    return [(p, Constraints(chips=cons.chips, ring=cons.ring, no_triangle=cons.no_triangle, all_chips=a))
            for p, cons in cases for a in ((False, True) if cons.ring else (False,))]


@pytest.mark.parametrize("mode", ["sample", "fix", "cp-sat"])
def test_solver_finds_a_valid_partition_iff_one_exists(mode: str) -> None:
    """``cp-sat``: SAMPLE with no backtracking allowed, so every conflict goes to the CP-SAT fallback."""
    rng = np.random.default_rng(3)
    verdicts = {"valid": 0, "infeasible": 0}
    for p, static in _static_readings(CASES):
        solver = ConstraintSolver(p, static, max_fails=0 if mode == "cp-sat" else None)
        feasible = _static_feasible(p, static)
        for _ in range(2):
            if mode != "fix":
                out = solver.sample(rng.random((p.n, static.chips)), rng.permutation(p.n), rng)
            else:
                out = solver.fix(rng.integers(0, static.chips, p.n), rng.permutation(p.n), rng)
            assert out.status == ("valid" if feasible else "infeasible"), (p.edges.tolist(), static, out)
            if out.valid:
                assert out.chips is not None
                assert first_violation(p, tuple(out.chips.tolist()), static.chips, ring=static.ring,
                                       all_chips=static.all_chips, triangle=static.no_triangle,
                                       memory=False) is None
                assert out.objective == evaluate(p, out.chips, constraints=static).objective
            verdicts[out.status] += 1
            verdicts[out.via] = verdicts.get(out.via, 0) + 1
    assert min(verdicts["valid"], verdicts["infeasible"]) >= 8, verdicts
    if mode == "cp-sat":
        assert verdicts.get("cp-sat", 0) >= 3, verdicts


def test_cp_sat_without_the_triangle_in_its_model_returns_only_valid_partitions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Large models leave the triangle constraint out (a relaxation): CP-SAT's partitions are
    then checked, and one that meets it is used, never one that does not. ``closest`` is
    the CP-SAT repair SAMPLE and FIX fall back to."""
    from gapstop.problems.pipeline import _mip

    monkeypatch.setattr(_mip, "TRIANGLE_MAX_TERMS", 0)
    rng = np.random.default_rng(5)
    seen: dict[tuple[bool, str], int] = {}
    for p, cons in CASES[:160]:
        if not cons.no_triangle or cons.chips < 3 or p.m == 0:  # (without edges the model is whole)
            continue
        static = Constraints(chips=cons.chips, ring=cons.ring, no_triangle=True, all_chips=cons.all_chips)
        solver = ConstraintSolver(p, static)
        feasible = _static_feasible(p, static)
        for _ in range(3):
            out = solver.closest(rng.integers(0, static.chips, p.n), rng)
            assert out.status in (("valid", "unknown") if feasible else ("infeasible", "unknown")), (
                p.edges.tolist(), static, out)
            if out.valid:
                assert out.chips is not None and out.via in ("cp-sat", "witness")
                assert first_violation(p, tuple(out.chips.tolist()), static.chips, ring=static.ring,
                                       all_chips=static.all_chips,
                                       triangle=True, memory=False) is None
            key = (feasible, out.status + ("" if out.status != "valid" else " via " + out.via))
            seen[key] = seen.get(key, 0) + 1
    # partitions of the relaxed model that meet the triangle constraint are used; the others
    # give back the last valid partition (or nothing)
    assert seen.get((True, "valid via cp-sat"), 0) >= 50, seen
    assert seen.get((True, "valid via witness"), 0) >= 1, seen


def test_closest_says_when_it_gives_back_the_last_valid_partition() -> None:
    rng = np.random.default_rng(1)
    p = random_dag(30, 11, p=0.1)
    solver = ConstraintSolver(p, Constraints(chips=4, ring=True, no_triangle=True))
    first = solver.sample(None, rng=rng)
    assert first.valid and first.via == "propagation" and first.chips is not None
    again = solver.closest(first.chips, rng)  # the optimum keeps every chip: the same partition
    assert again.valid and again.via == "witness" and np.array_equal(again.chips, first.chips)
    other = solver.closest((3 - first.chips).clip(0, 3), rng)  # far from it: a new partition
    assert other.valid and other.via == "cp-sat" and not np.array_equal(other.chips, first.chips)
    assert solver.counts["valid"] == 3 and solver.repeats == 1  # only `again` gave one back
    assert first_violation(p, tuple(other.chips.tolist()), 4, ring=True, triangle=True, memory=False) is None


def test_a_rollout_given_back_the_last_valid_partition_earns_no_reward(monkeypatch: pytest.MonkeyPatch) -> None:
    """The learned policy's reward: a FIX that ends by giving back the last valid partition
    did not make the proposal valid, so the rollout counts as invalid."""
    from gapstop.problems.pipeline.rl.rollout import RolloutEnv

    rng = np.random.default_rng(1)
    p = random_dag(30, 11, p=0.1)
    cons = Constraints(chips=4, ring=True, no_triangle=True)
    solver = ConstraintSolver(p, cons)
    first = solver.sample(None, rng=rng)
    env = RolloutEnv(p, cons, "fix", rng, solver=solver)
    found = env.run(first.chips, np.full((p.n, 4), 0.25))
    assert found.outcome.via == "propagation" and found.objective == first.objective
    monkeypatch.setattr(solver, "fix", lambda proposal, order, rng: solver.closest(first.chips, rng))
    given_back = env.run(first.chips, np.full((p.n, 4), 0.25))
    assert given_back.outcome.valid and given_back.outcome.via == "witness" and given_back.objective is None
    assert found.outcome.fresh and not given_back.outcome.fresh


def test_fix_keeps_a_valid_proposal_and_dynamic_failures_are_rejections() -> None:
    rng = np.random.default_rng(0)
    p = random_dag(40, 5, p=0.08)
    cons = Constraints(chips=5, ring=True, no_triangle=True)
    solver = ConstraintSolver(p, cons)
    valid = solver.sample(None, rng=rng)
    assert valid.valid and valid.chips is not None
    again = solver.fix(valid.chips, rng.permutation(p.n), rng)
    assert again.valid and again.kept == p.n and np.array_equal(again.chips, valid.chips)
    # a raising user check rejects that candidate, is counted, and the next call still works
    raising = ConstraintSolver(p, Constraints(chips=5, ring=True, check=CHECK + "raises_on_chip_one"))
    outs = [raising.sample(None, rng=rng) for _ in range(30)]
    assert {o.status for o in outs} <= {"valid", "rejected"}
    rejected = [o for o in outs if o.status == "rejected"]
    assert rejected and all(o.violated == "check" and "backend crashed" in o.message for o in rejected)
    assert raising.counts.get("rejected:check") == len(rejected)


# ----------------------------------------------------------------------------- Figure 2
# (a): 0 -> 1 -> 3 -> 4 and 0 -> 2 -> 4 on three chips in a row (b).
FIG2 = [(0, 1), (0, 2), (1, 3), (2, 4), (3, 4)]


@pytest.mark.parametrize("labels, name", [
    ([0, 0, 1, 1, 0], "ring-order"),   # (c) node 2 -> node 4 goes from chip 1 back to chip 0
    ([0, 0, 0, 2, 2], "no-skip"),      # (d) chip 1 is skipped
    ([0, 1, 2, 2, 2], "triangle"),     # (e) chip 0 -> chip 2 directly (0 -> 2) and via chip 1 (0 -> 1 -> 3)
    ([0, 1, 1, 2, 2], "memory"),       # (f) chip 1 holds both heavy nodes
])
def test_figure2_invalid_partitions_are_rejected_by_name(labels: list[int], name: str) -> None:
    p = _graph(5, FIG2, param=[1, 6, 6, 1, 1], memory=10)
    cons = Constraints(chips=3, ring=True, no_triangle=True, memory_hard=True)
    with pytest.raises(ConstraintViolation) as err:
        evaluate(p, labels, k=3, constraints=cons)
    assert err.value.name == name
    assert f"violates {name}" in str(err.value)


def test_no_skip_under_both_readings_names_the_empty_chip() -> None:
    """Equation 3 (``ring``): chips 0..m used, any m; ``all_chips``: every chip used."""
    p = _graph(5, FIG2)
    prefix = Constraints(chips=4, ring=True)
    strict = Constraints(chips=4, all_chips=True)
    assert strict.ring and strict.reading == "all-chips" and prefix.reading == "prefix"
    for labels in ([0, 0, 0, 0, 0], [0, 1, 1, 2, 2]):
        evaluate(p, labels, k=4, constraints=prefix)
        with pytest.raises(ConstraintViolation, match=r"no-skip: chip \d is empty \(--all-chips"):
            evaluate(p, labels, k=4, constraints=strict)
    with pytest.raises(ConstraintViolation, match="no-skip: chip 1 is empty below chip 3, which is used"):
        evaluate(p, [0, 0, 2, 3, 3], k=4, constraints=prefix)
    evaluate(p, [0, 1, 2, 3, 3], k=4, constraints=strict)


def test_figure2_valid_partition_and_unconstrained_evaluation_unchanged() -> None:
    p = _graph(5, FIG2, param=[1, 6, 1, 6, 1], memory=12)
    cons = Constraints(chips=3, ring=True, no_triangle=True, memory_hard=True)
    ev = evaluate(p, [0, 1, 1, 2, 2], k=3, constraints=cons)
    assert ev.blocks.tolist() == [0, 1, 1, 2, 2]
    assert ev.objective == evaluate(p, [0, 1, 1, 2, 2], k=3).objective


# ----------------------------------------------------------------------------- bad input
def test_bad_options_fail_with_one_line() -> None:
    p = _graph(3, [(0, 1), (1, 2)])
    for cons, text in [(Constraints(chips=0), "--chips: must be >= 1"),
                       (Constraints(chips=4, all_chips=True), "--chips: 4 chips but only 3 nodes"),
                       (Constraints(chips=2, memory_hard=True), "--memory-hard needs a memory limit"),
                       (Constraints(chips=2, check="no_such_module_xyz:f"), "--check: cannot import"),
                       (Constraints(chips=2, check="nocolon"), "--check: expected MODULE:FUNCTION"),
                       (Constraints(chips=63, no_triangle=True), "at most 62 chips")]:
        with pytest.raises(InputError) as err:
            cons.validate(p)
        assert text in str(err.value) and "\n" not in str(err.value)
    Constraints(chips=4).validate(p)  # at most 4 blocks without --ring: fine
    Constraints(chips=4, ring=True).validate(p)  # the used chips a prefix: fine too


# ----------------------------------------------------------------------------- MIP and bounds
def _mip_cases() -> list[tuple[PipelineProblem, Constraints]]:
    rng = np.random.default_rng(11)
    out = []
    for i in range(24):
        c = (2, 3, 4)[i % 3]
        n = int(rng.integers(c + 1, {2: 7, 3: 6, 4: 6}[c] + 1))
        p = random_dag(n, 500 + i, p=float(rng.uniform(0.25, 0.6)), bandwidth=(1.0, 0.7, 3.0)[i % 3])
        out.append((p, Constraints(chips=c, ring=True, no_triangle=i % 4 != 3)))
    return out


def _readings(cons: Constraints) -> list[Constraints]:
    return [replace(cons, all_chips=False), replace(cons, all_chips=True)]


@pytest.mark.mip
def test_constrained_exact_mip_equals_brute_force_and_every_bound_is_below() -> None:
    from gapstop.problems.pipeline import bounds
    from tests.problems.pipeline.mcm_reference import constrained_optimum

    differs = 0
    strict_above = 0
    for i, (p, ring) in enumerate(_mip_cases()):
        opts = []
        for cons in _readings(ring):  # the prefix reading (--ring), then the strict one (--all-chips)
            opt = constrained_optimum(p, cons.chips, ring=cons.ring, all_chips=cons.all_chips,
                                      triangle=cons.no_triangle)
            opts.append(opt)
            ex = bounds.exact_bound(p, cons.chips, 10.0, constraints=cons)
            assert ex.detail["mcm"]["no_skip"] == cons.reading
            if opt is None:
                assert ex.status == "infeasible", (p.edges.tolist(), cons)
                continue
            assert ex.status == "optimal" and ex.value <= opt
            assert ex.value == pytest.approx(opt, rel=1e-6), (p.edges.tolist(), cons)
            got = evaluate(p, ex.detail["blocks"], k=cons.chips, constraints=cons)  # a valid partition
            assert got.objective == pytest.approx(opt, rel=1e-12)
            if not cons.all_chips:
                for method in bounds.METHODS if i % 4 == 0 else ("simple", "bottleneck"):  # others take seconds
                    if method != "exact":
                        assert bounds.lower_bound(p, cons.chips, method, 10.0).value <= opt, method
                differs += opt > bounds.exact_bound(p, cons.chips, 10.0).value * (1 + 1e-6)
        prefix, strict = opts
        assert prefix is not None  # everything on chip 0
        # the strict reading is a restriction: its optimum (and so its bound) may lie above the
        # prefix reading's optimum, and is then no lower bound of it
        strict_above += strict is None or strict > prefix * (1 + 1e-9)
    assert differs >= 2, differs  # the triangle constraint raises the optimum on some of these graphs
    assert strict_above >= 3, strict_above


# ----------------------------------------------------------------------------- searches
def test_exactly_makes_c_contiguous_non_empty_stages() -> None:
    from gapstop.problems.pipeline import _kernels
    from gapstop.problems.pipeline.mcm_search import exactly

    p = random_dag(12, 3, p=0.3)
    order = _kernels.kahn_order(np.random.default_rng(0).random(12), p.succ_ptr, p.succ, p.pred_ptr)
    blocks = np.empty(12, dtype=np.int64)
    blocks[order] = [0] * 9 + [1] * 3
    out = exactly(order, blocks, 5)
    assert sorted(set(out.tolist())) == [0, 1, 2, 3, 4] and (np.diff(out[order]) >= 0).all()
    assert (out[p.edges[:, 0]] <= out[p.edges[:, 1]]).all()


@pytest.mark.parametrize("kind", [0, 1, 2])
def test_constrained_islands_report_valid_partitions_near_the_optimum(kind: int) -> None:
    from gapstop.problems.pipeline.mcm_search import make_constrained_search
    from tests.problems.pipeline.mcm_reference import constrained_optimum

    p = random_dag(7, 21, p=0.4)
    cons = Constraints(chips=3, ring=True, no_triangle=True)
    opt = constrained_optimum(p, 3, ring=True, triangle=True)
    assert opt is not None
    island = make_constrained_search(p, cons, np.random.default_rng(kind), kind, population=20)
    found: list[float] = []
    island.step(0.5, lambda value, split: found.append(
        evaluate(p, split.blocks, split.order, k=3, constraints=cons).objective))
    assert found and found == sorted(found, reverse=True) and found[-1] >= opt - 1e-9
    if kind == 0:  # BRKGA + FIX finds the optimum of a 7-node graph within half a second
        assert found[-1] == pytest.approx(opt, rel=1e-12)


def test_closest_keeps_as_many_proposed_chips_as_the_best_valid_partition() -> None:
    """CP-SAT's closest repair against brute force: a valid partition whenever one exists, keeping
    exactly as many proposed chips as the best valid (chip-ordered) labelling does; infeasible
    otherwise."""
    rng = np.random.default_rng(11)
    checked = {"valid": 0, "infeasible": 0}
    for p, static in _static_readings(CASES):
        solver = ConstraintSolver(p, static)
        target = rng.integers(0, static.chips, p.n)
        valid = [labels for labels in all_labellings(p.n, static.chips)
                 if first_violation(p, labels, static.chips, ring=static.ring,
                                    all_chips=static.all_chips, triangle=static.no_triangle,
                                    memory=False) is None]
        out = solver.closest(target, rng, time_limit_s=5.0)
        if not valid:
            assert out.status == "infeasible", (p.edges.tolist(), static, out)
        else:
            assert out.valid and out.chips is not None and out.via == "cp-sat"
            assert tuple(out.chips.tolist()) in set(valid)
            # the solver labels chips in ring order (edges go to the same or a later chip), which
            # without --ring is only a renumbering of the stages
            monotone = [labels for labels in valid if all(labels[u] <= labels[v] for u, v in p.edges.tolist())]
            best = max(sum(int(a == b) for a, b in zip(labels, target.tolist())) for labels in monotone)
            assert out.kept == best == int((out.chips == target).sum()), (p.edges.tolist(), static)
            assert out.objective == evaluate(p, out.chips, constraints=static).objective
        checked[out.status] += 1
    assert checked["valid"] > 50 and checked["infeasible"] >= 4, checked


def test_brkga_fix_island_tries_the_closest_repair_within_its_share() -> None:
    """The island's CP-SAT repairs stay within their share of its time (and none with share 0),
    and every candidate it reports is valid."""
    from gapstop.problems.pipeline.mcm_search import BrkgaFixSearch

    p = random_dag(40, 5, p=0.05)  # sparse: FIX repairs by propagation, CP-SAT is the island's choice
    cons = Constraints(chips=4, ring=True, no_triangle=True)
    for share in (0.0, 0.3):
        isl = BrkgaFixSearch(p, cons, np.random.default_rng(0), population=20, closest_share=share)
        isl.step(1.0)
        elapsed = time.monotonic() - isl._t0
        via = isl.solver.counts
        if share == 0.0:
            assert isl._closest_s == 0.0
        else:
            assert isl._closest_s > 0.0
        # one solve may overrun the share by at most its own time limit
        assert isl._closest_s <= share * elapsed + isl.solver.fallback_s + 0.5, (isl._closest_s, elapsed)
        assert via.get("valid", 0) >= 1 and set(via) <= {"valid"}, via
        assert isl.best_chips is not None
        assert isl.best_cost == evaluate(p, isl.best_chips, constraints=cons).objective


def test_brkga_fix_island_step_ends_inside_a_slow_generation() -> None:
    """Where FIX ends in CP-SAT for every proposal (tenths of a second each), a step stops when its
    time is up instead of finishing its generation of 100 candidates."""
    from gapstop.problems.pipeline.mcm_search import BrkgaFixSearch

    p = random_dag(40, 5, p=0.15)
    cons = Constraints(chips=6, no_triangle=True, all_chips=True)  # (the prefix reading is easy here)
    isl = BrkgaFixSearch(p, cons, np.random.default_rng(0), population=100, closest_share=0.0)
    t = time.monotonic()
    made = isl.step(1.0)
    wall = time.monotonic() - t
    # a whole generation: 100 solves of tenths of a second each
    assert 1 <= made < 100 and wall < slack(1.0 + 2 * isl.solver.fallback_s + 1.0), (made, wall)
    assert isl.solver.counts.get("valid", 0) == made  # only evaluated candidates were counted
    made2 = isl.step(1.0)  # the next step goes on (the generation was told, unevaluated ones last)
    assert made2 >= 1 and isl.best_cost == evaluate(p, isl.best_chips, constraints=cons).objective
