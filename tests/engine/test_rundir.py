"""The run directory's event log."""

from __future__ import annotations

import math
import random

import pyarrow as pa

from engine.rundir import EVENT_SCHEMA, _event_table


def _rows(rng: random.Random, n: int) -> list[dict]:
    words = ["", "upper", "lower", "driver:exact", "guess-the-bottleneck[3]", "héllo ✓", "x" * 300]
    return [{"t_s": rng.uniform(0, 1e4), "worker": rng.choice(words), "kind": rng.choice(words),
             "value": rng.choice([math.inf, -math.inf, 0.0, -1.5, rng.uniform(-1e9, 1e9), 6548641531]),
             "method": rng.choice(words), "status": rng.choice(words), "session": rng.randrange(0, 2 ** 31)}
            for _ in range(n)]


def test_event_table_matches_arrows_own_conversion() -> None:
    rng = random.Random(0)
    for n in (0, 1, 2, 17, 200):
        rows = _rows(rng, n)
        mine = _event_table(rows)
        mine.validate(full=True)
        assert mine.equals(pa.Table.from_pylist(rows, schema=EVENT_SCHEMA))
        assert mine.to_pylist() == rows


def test_writing_events_does_not_import_pandas(tmp_path) -> None:
    # pandas comes with OR-Tools; pyarrow's list conversion imports it (0.3 s of CPU),
    # which a run's first event would take from the head-start MIP
    import subprocess
    import sys
    from pathlib import Path

    code = ("import sys\n"
            "from engine.coordinator import Event\n"
            "from engine.rundir import RunDir, read_events\n"
            f"rd = RunDir({str(tmp_path / 'rd')!r}, {{'problem': 'x'}})\n"
            "for i in range(3):\n"
            "    rd.record_event(Event(0.5 * i, 'w', 'upper', 10.0 - i, 'm', 'feasible'))\n"
            "assert 'pandas' not in sys.modules, 'pandas imported'\n"
            "print(len(read_events(rd.path)))\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"
