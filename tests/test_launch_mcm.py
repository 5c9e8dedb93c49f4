"""The MCM constraint options of ``pipeline solve`` and ``pipeline evaluate`` (in-process)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from gapstop.launch import main
from gapstop.problems.pipeline.model import PipelineProblem
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.io import load_graph, problem_to_dict, save_graph
from tests.problems.pipeline.mcm_reference import constrained_optimum

RAISING = "tests.problems.pipeline.test_constraints:raises_on_chip_one"


@pytest.fixture()
def tiny(tmp_path: Path) -> Path:
    f = tmp_path / "tiny.json"
    save_graph(random_dag(7, 5, p=0.35), f)
    return f


@pytest.mark.parametrize("args, msg", [
    (["--chips", "0", "--ring"], "error: -k: must be >= 1, got 0"),
    (["--chips", "8", "--all-chips"], "error: --chips: 8 chips but only 7 nodes"),
    (["--chips", "2", "--check", "no_such_module_xyz:fn"], "error: --check: cannot import 'no_such_module_xyz:fn'"),
    (["--chips", "2", "--memory-hard"], "--memory-hard needs a memory limit"),
])
def test_bad_constraint_options_exit_2_with_one_line(tiny: Path, args: list[str], msg: str) -> None:
    res = CliRunner().invoke(main, ["pipeline", "solve", str(tiny), *args, "--in-process", "--quiet"])
    assert res.exit_code == 2, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and msg in lines[0], res.output


@pytest.mark.mip
@pytest.mark.parametrize("flag", ["--ring", "--all-chips"])
def test_constrained_solve_proves_the_constrained_optimum(tiny: Path, tmp_path: Path, flag: str) -> None:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["pipeline", "solve", str(tiny), "--chips", "3", flag, "--no-triangle",
                                    "--in-process", "--time-limit", "30", "--quiet", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    strict = flag == "--all-chips"
    opt = constrained_optimum(load_graph(tiny), 3, ring=True, triangle=True, all_chips=strict)
    assert opt is not None and doc["objective"] == pytest.approx(opt, rel=1e-12)
    assert doc["stopped_because"] == "optimal" and doc["lower_bound"] <= opt
    cons = doc["constraints"]
    assert cons["active"] == ["ring-order", "no-skip", "triangle"]
    assert cons["reading"] == ("all-chips" if strict else "prefix") and cons["all_chips"] is strict
    assert cons["chips_used"] == len(set(doc["blocks"])) and sorted(set(doc["blocks"])) == list(
        range(cons["chips_used"]))
    if strict:
        assert cons["chips_used"] == 3
    # evaluate re-checks the constraints the result states
    res = CliRunner().invoke(main, ["pipeline", "evaluate", str(tiny), str(out)])
    assert res.exit_code == 0 and json.loads(res.output)["objective"] == doc["objective"]
    doc["blocks"] = [0] * len(doc["blocks"])  # chip 0 only: valid under the prefix reading alone
    out.write_text(json.dumps(doc))
    res = CliRunner().invoke(main, ["pipeline", "evaluate", str(tiny), str(out)])
    assert (res.exit_code, "violates no-skip" in res.output) == ((2, True) if strict else (0, False)), res.output
    doc["blocks"] = [2] * len(doc["blocks"])  # chips 0 and 1 skipped: invalid under both
    out.write_text(json.dumps(doc))
    res = CliRunner().invoke(main, ["pipeline", "evaluate", str(tiny), str(out)])
    assert res.exit_code == 2 and "violates no-skip" in res.output


@pytest.mark.mip
def test_all_chips_infeasibility_is_proven_and_ring_uses_fewer_chips(tmp_path: Path) -> None:
    """0 -> 1 -> 2 and 0 -> 2 on three chips: every chip used puts each node on its own chip,
    and 0 -> 2 is then direct and also through chip 1 (a triangle). The strict reading has no
    valid partition, and the run ends with CP-SAT's proof; the prefix reading uses two chips."""
    g = PipelineProblem(name="tri", work=np.array([1.0, 2.0, 3.0]), size_param=[0] * 3, size_out=[1] * 3,
                        edges=[(0, 1), (1, 2), (0, 2)], bandwidth=1.0, memory=None)
    f = tmp_path / "tri.json"
    save_graph(g, f)
    for flag in ("--all-chips", "--ring"):
        out = tmp_path / f"r{flag}.json"
        res = CliRunner().invoke(main, ["pipeline", "solve", str(f), "--chips", "3", flag, "--no-triangle",
                                        "--in-process", "--time-limit", "30", "--quiet", "--out", str(out)])
        doc = json.loads(out.read_text())
        opt = constrained_optimum(g, 3, ring=True, triangle=True, all_chips=flag == "--all-chips")
        if flag == "--all-chips":
            assert opt is None and res.exit_code == 1, res.output
            lines = res.output.strip().splitlines()
            assert len(lines) == 1 and "CP-SAT proved --all-chips infeasible in" in lines[0], res.output
            assert doc["stopped_because"] == "infeasible" and doc["objective"] is None
            assert doc["constraints"]["existence"]["verdict"] == "infeasible"
        else:
            assert opt is not None and res.exit_code == 0, res.output
            assert doc["objective"] == pytest.approx(opt, rel=1e-12) and doc["constraints"]["chips_used"] == 2
            assert "existence" not in doc["constraints"]


@pytest.mark.parametrize("flag", ["--ring", "--all-chips"])
def test_a_raising_check_rejects_partitions_without_ending_the_run(tiny: Path, tmp_path: Path, flag: str) -> None:
    out = tmp_path / "r.json"
    res = CliRunner().invoke(main, ["pipeline", "solve", str(tiny), "--chips", "3", flag, "--check", RAISING,
                                    "--in-process", "--time-limit", "4", "--no-bounds", "--islands", "3",
                                    "--quiet", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text())
    assert doc["constraints"]["check"] == RAISING and doc["objective"] is not None
    assert doc["blocks"][len(doc["blocks"]) // 2] % 2 == 0  # the check raises on odd chips there
    assert doc["constraints"]["reading"] == ("all-chips" if flag == "--all-chips" else "prefix")
    if flag == "--all-chips":
        assert sorted(set(doc["blocks"])) == [0, 1, 2]


def _solve_tight(f: Path, out: Path, flags: list[str]) -> Any:
    prove = flags == ["--all-chips"]
    return CliRunner().invoke(main, ["pipeline", "solve", str(f), "--chips", "3", "--memory-hard", *flags,
                                     "--in-process", "--time-limit", "30" if prove else "2",
                                     *([] if prove else ["--no-bounds"]), "--quiet", "--out", str(out)])


@pytest.fixture(scope="module")
def tight(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A graph where every stage holds some node whose parameters alone exceed the memory limit.

    Each run is made once before the tests (output ignored), and the threads it leaves are
    waited for: on a cold numba cache the islands compile for longer than a 3 s run, cannot stop
    inside the compiler (the run then ends with a second line, a warning that they did not stop
    in time) and go on compiling in this process after the run, holding up the next one."""
    import threading
    import time
    g = random_dag(30, 3, memory=True, k_hint=3)
    doc = json.loads(json.dumps(problem_to_dict(g)))
    doc["memory"] = int(g.size_param.max()) - 1
    d = tmp_path_factory.mktemp("tight")
    f = d / "tight.json"
    f.write_text(json.dumps(doc))
    before = set(threading.enumerate())
    for flags in ([], ["--ring"], ["--all-chips"]):
        _solve_tight(f, d / "warm.json", flags)
    end = time.monotonic() + 600.0
    for t in set(threading.enumerate()) - before:
        t.join(max(0.0, end - time.monotonic()))
    return f


@pytest.mark.parametrize("flags", [[], ["--ring"], ["--all-chips"]])
def test_a_hard_memory_limit_nothing_meets_is_one_line_and_exit_1_with_the_bound(
        tmp_path: Path, flags: list[str], tight: Path) -> None:
    # no plan at all, not even the first one (a contiguous split) an island reports before its
    # search; with --all-chips the bound jobs run, and CP-SAT proves that no partition exists
    # (param <= M per chip)
    out = tmp_path / "r.json"
    res = _solve_tight(tight, out, flags)
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and "no feasible" in lines[0], res.output
    result = json.loads(out.read_text())
    assert result["objective"] is None and result["lower_bound"] is not None
    if flags == ["--all-chips"]:
        assert result["stopped_because"] == "infeasible", result["stopped_because"]
        assert result["constraints"]["existence"]["verdict"] == "infeasible"
        assert "CP-SAT proved --all-chips infeasible" in lines[0]
