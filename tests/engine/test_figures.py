"""Drawing (engine/figures.py): every panel kind is written, a PNG has its stated size, and a run
with thousands of events is drawn in well under 5 s."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.engine.plots import convergence
from tests.engine.test_plots import synthetic_events, synthetic_result

pytest.importorskip("matplotlib")

from gapstop.engine import figures  # noqa: E402
from gapstop.problems.intraop.plots import CostlyOps, MemoryProfile  # noqa: E402
from gapstop.problems.pipeline.plots import ChipGraph, StageBars  # noqa: E402
from tests.timing import cpu_s  # noqa: E402


def _bars(p: int = 5) -> StageBars:
    comp = np.linspace(10, 20, p)
    comm, over = np.full(p, 2.0), np.where(np.arange(p) == 3, 5.0, 0.0)
    cost = comp + comm + over
    return StageBars(comp, comm, over, cost, int(np.argmax(cost)),
                     tuple((f"layers.{s}", f"layers.{s}.mlp") for s in range(p)), tuple([7] * p), "evaluator")


def _panels() -> list[figures.Panel]:
    ev = synthetic_events(200)
    conv = convergence(ev, synthetic_result(ev), {"target_gap": 0.01})
    bars = _bars()
    chips = ChipGraph(5, True, np.array([[0, 1], [1, 2], [0, 3], [3, 4]]), np.array([10, 20, 5, 40]))
    mem = MemoryProfile(np.array([3, 5, 9, 4, 2], dtype=np.int64), 10, 2, ("a", "b", "c", "d", "e"))
    ops = CostlyOps(np.array([2, 0]), np.array([50.0, 20.0]), ("c: split n by 4", "a: replicated"), 100)
    return [figures.convergence_panel(conv, "test run"), figures.stages_panel(bars), figures.chips_panel(chips, bars),
            figures.memory_panel(mem), figures.costly_panel(ops)]


def test_png_has_the_stated_size(tmp_path: Path) -> None:
    import matplotlib.image

    panels = _panels()
    for some in (panels[:1], panels):
        f = figures.write(tmp_path / "run.png", some)
        h, w = matplotlib.image.imread(f).shape[:2]
        assert (w, h) == figures.size_px(some)
    assert figures.size_px(panels) == (1000, 1950)  # 4 + 4 + 4.5 + 3.5 + 3.5 inches at 100 dpi


def test_svg_and_html_hold_every_panel_and_the_table(tmp_path: Path) -> None:
    panels = _panels()
    svg = figures.write(tmp_path / "run.svg", panels).read_text()
    assert svg.count("<svg") == 1 and "bottleneck" in svg
    page = figures.write(tmp_path / "run.HTML", panels, title="a <run>", table=["objective 1 < 2"]).read_text()
    assert page.count("<svg") == len(panels) and "<title>a &lt;run&gt;</title>" in page
    assert "objective 1 &lt; 2" in page
    assert not any(ref in page for ref in ('src="', "<link", 'href="http'))  # self-contained
    # the stages' modules are the bars' hover text
    assert "<title>stage 3: overflow 5 of" in page and "layers.3.mlp" in page


def test_bad_suffix_and_missing_matplotlib_are_input_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InputError, match=r"\.png, \.svg, \.html"):
        figures.write(tmp_path / "run.pdf", _panels()[:1])
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    with pytest.raises(InputError, match=r"pip install 'gapstop\[plot\]'"):
        figures.require_matplotlib()


@pytest.mark.parametrize("suffix", [".png", ".html"])
def test_thousands_of_events_draw_in_well_under_5_s(tmp_path: Path, suffix: str) -> None:
    # a 10-minute run whose islands reported 5,000 improvements; the limit is 5 s
    ev = synthetic_events(5000, duration_s=600.0)
    t0 = cpu_s()  # drawing runs in this process: CPU seconds, which other processes' load does not stretch
    conv = convergence(ev, synthetic_result(ev), {"target_gap": 0.0})
    figures.write(tmp_path / f"run{suffix}", [figures.convergence_panel(conv), figures.stages_panel(_bars(64))])
    assert cpu_s() - t0 < 5.0
