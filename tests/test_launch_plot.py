"""``report --plot`` and ``solve --plot`` through click's runner: a small run of each problem drawn
as PNG, SVG and HTML, its figures' data checked against result.json and the event log, and the
one-line error without the optional extra."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from gapstop.engine.plots import convergence, read_run
from gapstop.launch import main
from gapstop.problems.pipeline.generators import random_dag
from gapstop.problems.pipeline.io import save_graph
from tests.problems.intraop.test_strategies import CHIP, gemm_chain


def _check_convergence(run_dir: Path) -> None:
    doc, events, config = read_run(run_dir)
    c = convergence(events, doc, config)
    assert c.upper.value[-1] == float(doc.get("objective", doc.get("cost")))  # the last plotted objective
    assert np.all(np.diff(c.lower.value) > 0) and np.all(np.diff(c.upper.value) < 0)
    assert c.lower.value[-1] <= c.upper.value[-1] and c.stopped_because == doc["stopped_because"]


def _png_size(path: Path) -> tuple[int, int]:
    import matplotlib.image

    h, w = matplotlib.image.imread(path).shape[:2]
    return w, h


@pytest.fixture()
def graph(tmp_path: Path) -> Path:
    f = tmp_path / "g.json"
    save_graph(random_dag(12, 4, memory=True, k_hint=3), f)
    return f


@pytest.mark.parametrize("ring", [False, True])
def test_pipeline_solve_and_report_draw_the_run(tmp_path: Path, graph: Path, ring: bool) -> None:
    pytest.importorskip("matplotlib")
    rd = tmp_path / "rd"
    res = CliRunner().invoke(main, ["pipeline", "solve", str(graph), "-k", "3", *(["--ring"] if ring else []),
                                    "--time-limit", "3", "--quiet", "--in-process", "--run-dir", str(rd),
                                    "--plot", str(tmp_path / "run.png")])
    assert res.exit_code == 0, res.output
    # convergence, stage bars, and for an MCM run the chips on the ring: 4 + 4 (+ 4.5) inches at 100 dpi
    assert _png_size(tmp_path / "run.png") == (1000, 1250 if ring else 800)
    _check_convergence(rd)
    for suffix in (".svg", ".html"):
        r = CliRunner().invoke(main, ["report", str(rd), "--plot", str(tmp_path / f"run{suffix}")])
        assert r.exit_code == 0, r.output
    page = (tmp_path / "run.html").read_text()
    assert page.count("<svg") == (3 if ring else 2) and "<title>stage 0: compute" in page
    assert json.loads((rd / "result.json").read_text())["graph"] in page  # the report's table


def test_intraop_solve_draws_memory_and_named_configurations(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from gapstop.problems.intraop.strategies import generate

    inst = tmp_path / "chain.json"
    inst.write_text(json.dumps(generate(gemm_chain(), "chain.json", 4, CHIP)))
    rd = tmp_path / "rd"
    res = CliRunner().invoke(main, ["intraop", "solve", str(inst), "--time-limit", "3", "--quiet", "--in-process",
                                    "--run-dir", str(rd), "--plot", str(tmp_path / "run.png")])
    assert res.exit_code == 0, res.output
    assert _png_size(tmp_path / "run.png") == (1000, 1100)  # convergence 4 + memory 3.5 + costliest ops 3.5
    _check_convergence(rd)
    r = CliRunner().invoke(main, ["report", str(rd), "--plot", str(tmp_path / "run.html")])
    assert r.exit_code == 0, r.output
    page = (tmp_path / "run.html").read_text()
    assert "mm1: " in page and "usage limit" in page and page.count("<svg") == 3


def _fake_run(tmp_path: Path) -> Path:
    rd = tmp_path / "rd"
    rd.mkdir()
    (rd / "result.json").write_text(json.dumps({"problem": "pipeline", "objective": 2.0, "lower_bound": 1.0,
                                                "stopped_because": "time-limit", "elapsed_s": 1.0}))
    return rd


def test_without_matplotlib_one_line_and_exit_2(tmp_path: Path, graph: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if gapstop[plot] were not installed
    for args in (["report", str(_fake_run(tmp_path)), "--plot", str(tmp_path / "x.png")],
                 ["pipeline", "solve", str(graph), "-k", "2", "--plot", str(tmp_path / "x.png"), "--in-process"]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 2, res.output
        assert res.output.strip().splitlines() == [
            "error: --plot needs matplotlib, the optional extra gapstop[plot]: pip install 'gapstop[plot]'"]
    assert not (tmp_path / "x.png").exists() and not Path("runs").exists()  # refused before any run


def test_bad_suffix_is_refused_before_the_run(tmp_path: Path, graph: Path) -> None:
    pytest.importorskip("matplotlib")
    res = CliRunner().invoke(main, ["pipeline", "solve", str(graph), "-k", "2", "--plot", "x.pdf", "--in-process"])
    assert res.exit_code == 2 and "--plot: x.pdf: the suffix must be one of .png, .svg, .html" in res.output
    assert not Path("runs").exists()
    res = CliRunner().invoke(main, ["report", str(_fake_run(tmp_path)), "--plot", "x.gif"])
    assert res.exit_code == 2 and res.output.strip().splitlines()[-1].startswith("error: --plot: x.gif")


def test_a_run_without_its_graph_still_draws_its_convergence(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    res = CliRunner().invoke(main, ["report", str(_fake_run(tmp_path)), "--plot", str(tmp_path / "x.png")])
    assert res.exit_code == 0 and "note: no plan figure" in res.output
    assert _png_size(tmp_path / "x.png") == (1000, 400)
