"""Convergence data (engine/plots.py): monotone curves, the last upper bound is the objective."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.engine.plots import convergence, read_run


def synthetic_events(n: int, seed: int = 0, duration_s: float = 600.0, integer: bool = False) -> list[dict]:
    """``n`` events over ``duration_s``: both bounds wander towards 1000 from either side, with
    non-improving values in between (a merged or resumed log); 12 jobs report them."""
    rng = np.random.default_rng(seed)
    t = np.sort(rng.uniform(0, duration_s, n))
    rows = []
    for i, ti in enumerate(t):
        kind = "upper" if rng.random() < 0.5 else "lower"
        x = 1000 + (1 if kind == "upper" else -1) * 500 * np.exp(-ti / 60) * rng.uniform(0.5, 1.5)
        v = int(x * 1000) if integer else float(x)
        rows.append({"t_s": float(ti), "worker": f"search-{i % 12}" if kind == "upper" else f"bound-{i % 3}:lagr",
                     "kind": kind, "value": v, "method": "brkga" if kind == "upper" else "lagrangian",
                     "status": "feasible", "session": 0 if ti < duration_s / 2 else 1})
    rows.append({"t_s": 1.0, "worker": "search-0", "kind": "error", "value": 0.0, "method": "x", "status": "boom",
                 "session": 0})
    return rows


def synthetic_result(events: list[dict], key: str = "objective") -> dict:
    ub = min(e["value"] for e in events if e["kind"] == "upper")
    lb = max(e["value"] for e in events if e["kind"] == "lower")
    return {"problem": "pipeline", key: ub, "lower_bound": lb, "stopped_because": "time-limit",
            "elapsed_s": max(e["t_s"] for e in events) + 1.0}


@pytest.mark.parametrize("integer", [False, True])
def test_curves_are_monotone_and_end_at_the_result(integer: bool) -> None:
    ev = synthetic_events(3000, integer=integer)
    doc = synthetic_result(ev, "cost" if integer else "objective")
    c = convergence(ev, doc, {"target_gap": 0.01})
    assert np.all(np.diff(c.upper.value) < 0) and np.all(np.diff(c.lower.value) > 0)
    assert np.all(np.diff(c.upper.t_s) >= 0) and np.all(np.diff(c.lower.t_s) >= 0)
    assert c.upper.value[-1] == float(doc.get("objective", doc.get("cost")))
    assert c.lower.value[-1] == float(doc["lower_bound"])
    assert len(c.upper.job) == len(c.upper.value) and set(c.upper.job) <= {f"search-{i}" for i in range(12)}
    assert c.target_gap == 0.01 and c.stopped_because == "time-limit" and c.end_s == doc["elapsed_s"]
    assert len(c.sessions_s) == 1 and 290 < c.sessions_s[0] < 310
    # the gap never rises (both bounds only improve) and is the last one's relative gap
    g = c.gap[np.isfinite(c.gap)]
    assert np.all(np.diff(g) <= 0)
    assert g[-1] == pytest.approx((c.upper.value[-1] - c.lower.value[-1]) / c.upper.value[-1])


def test_exact_integer_gap_is_not_lost_to_float_rounding() -> None:
    big = 10**19
    ev = [{"t_s": 0.0, "worker": "a", "kind": "upper", "value": big + 1, "method": "m", "status": "s", "session": 0},
          {"t_s": 1.0, "worker": "b", "kind": "lower", "value": big, "method": "m", "status": "s", "session": 0}]
    c = convergence(ev, {"cost": big + 1, "lower_bound": big})
    assert c.gap[-1] > 0  # float(big + 1) == float(big), yet the bound is not proven equal


def test_empty_log_and_missing_fields() -> None:
    c = convergence([], {"objective": None, "stopped_because": "time-limit", "elapsed_s": 3.0})
    assert len(c.upper.t_s) == len(c.lower.t_s) == len(c.gap) == 0
    assert c.objective is None and c.target_gap is None and c.end_s == 3.0


def test_read_run_refuses_a_directory_without_result(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no result"):
        read_run(tmp_path)
    (tmp_path / "result.json").write_text("[1]")
    with pytest.raises(InputError, match="not a result"):
        read_run(tmp_path)
    (tmp_path / "result.json").write_text(json.dumps({"objective": 1.0}))
    doc, events, config = read_run(tmp_path)
    assert doc == {"objective": 1.0} and events == [] and config is None
