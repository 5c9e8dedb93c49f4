"""The run directory's event log."""

from __future__ import annotations

import json
import math
import random

import pyarrow as pa

from gapstop.engine.records import exact_text
from gapstop.engine.rundir import EVENT_SCHEMA, _event_table


def _rows(rng: random.Random, n: int) -> list[dict]:
    words = ["", "upper", "lower", "driver:exact", "guess-the-bottleneck[3]", "héllo ✓", "x" * 300]
    rows = [{"t_s": rng.uniform(0, 1e4), "worker": rng.choice(words), "kind": rng.choice(words),
             "value": rng.choice([math.inf, -math.inf, 0.0, -1.5, rng.uniform(-1e9, 1e9), 6548641531]),
             "method": rng.choice(words), "status": rng.choice(words), "session": rng.randrange(0, 2 ** 31)}
            for _ in range(n)]
    for r in rows:
        r["value_exact"] = exact_text(r["value"])
    return rows


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
            "from gapstop.engine.coordinator import Event\n"
            "from gapstop.engine.rundir import RunDir, read_events\n"
            f"rd = RunDir({str(tmp_path / 'rd')!r}, {{'problem': 'x'}})\n"
            "for i in range(3):\n"
            "    rd.record_event(Event(0.5 * i, 'w', 'upper', 10.0 - i, 'm', 'feasible'))\n"
            "assert 'pandas' not in sys.modules, 'pandas imported'\n"
            "print(len(read_events(rd.path)))\n")
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "3"


BIG = 2**60 + 1  # float(BIG) == 2**60: a float round-trip loses the last unit


def _coordinator(rd, on: bool = True):
    from gapstop.engine.coordinator import Coordinator, integral
    from gapstop.engine.stopping import standard

    return Coordinator(integral(lambda s: (s, s)), standard(0.0, 1e9),
                       on_event=rd.record_event if on else None, on_incumbent=rd.record_incumbent if on else None)


def test_integer_values_survive_resume_exactly(tmp_path) -> None:
    from gapstop.engine.records import Bound
    from gapstop.engine.rundir import RunDir, read_events

    cfg = {"problem": "x", "problem_digest": "d", "params": {}}
    rd = RunDir(tmp_path / "rd", cfg)
    coord = _coordinator(rd)
    coord.offer_solution(BIG + 3, "w")
    coord.offer_bound(Bound("lagrangian", BIG, "bound-only", 0.0))
    for j, v in ((1, BIG + 2), (2, BIG)):
        coord.offer_bound(Bound(f"guess[{j}]", v, "feasible", 0.0, detail={"group": "g", "member": j, "members": 2}))
    rd.checkpoint(coord, 1.0)

    rd2 = RunDir(tmp_path / "rd", cfg, resume=True)
    back = _coordinator(rd2)
    rd2.restore_into(back)
    assert back.lb == BIG and isinstance(back.lb, int)
    assert back.bounds["lagrangian"].value == BIG and back.bounds["g"].value == BIG
    assert back.member_bounds("g") == {1: BIG + 2, 2: BIG}
    assert back.ub == BIG + 3 and back.gap > 0 and back.stop_reason() is None
    assert back.offer_bound(Bound("exact", BIG + 3, "optimal", 0.0))  # one unit more still counts
    assert back.stop_reason() == "optimal"
    events = read_events(rd2.path)
    assert [(e["kind"], e["value"], e["session"]) for e in events] == [
        ("upper", BIG + 3, 0), ("lower", BIG, 0), ("upper", BIG + 3, 1), ("lower", BIG, 1), ("lower", BIG + 3, 1)]
    assert all(isinstance(e["value"], int) for e in events)


def test_event_logs_without_the_exact_column_are_still_read_and_resumed(tmp_path) -> None:
    import pyarrow.parquet as pq

    from gapstop.engine.rundir import RunDir, read_events

    cfg = {"problem": "x", "problem_digest": "d", "params": {}}
    rd = RunDir(tmp_path / "rd", cfg)
    coord = _coordinator(rd)
    coord.offer_solution(12, "w")
    rd.checkpoint(coord, 1.0)
    ev = rd.path / "events.parquet"
    pq.write_table(pq.read_table(ev).drop(["value_exact"]), ev)  # as written before the column existed
    assert [e["value"] for e in read_events(rd.path)] == [12.0]
    rd2 = RunDir(tmp_path / "rd", cfg, resume=True)
    back = _coordinator(rd2)
    rd2.restore_into(back)
    back.offer_solution(11, "w")
    assert [(e["value"], e["session"]) for e in read_events(rd2.path)] == [(12.0, 0), (12, 1), (11, 1)]


def test_exact_text_round_trips_every_number_kind() -> None:
    import numpy as np

    from gapstop.engine.records import exact_value

    for x in (0, -3, 2**53 + 1, 2**64 + 1, 10**30, np.int64(2**62 + 1), 0.1, 1e300, -0.0, math.inf, -math.inf,
              np.float64(6548641531.5)):
        back = exact_value(exact_text(x))
        assert back == x and type(back) is (int if isinstance(x, (int, np.integer)) else float), x
    assert math.isnan(exact_value(exact_text(math.nan)))


def _plain_coordinator(tmp_path):
    from gapstop.engine.coordinator import Coordinator
    from gapstop.engine.stopping import standard

    return Coordinator(lambda s: (float(s), int(s)), standard(0.0, 60.0))


def test_a_failed_write_is_one_line_per_directory_and_nothing_raises(tmp_path, monkeypatch) -> None:
    import errno

    from gapstop.engine import rundir as rundir_module
    from gapstop.engine.coordinator import Event
    from gapstop.engine.persist import WriteFailures
    from gapstop.engine.records import Incumbent
    from gapstop.engine.rundir import RunDir

    blocker = tmp_path / "file"
    blocker.write_text("")  # a run dir below a regular file cannot be created, even by root
    lines: list[str] = []
    rd = RunDir(blocker / "rd", {"problem": "x"}, write_failures=WriteFailures(emit=lines.append))
    inc = Incumbent(cost=5, solution=[1], source="s", t_s=0.0)
    for _ in range(3):
        rd.record_incumbent(inc)
        rd.record_event(Event(0.0, "w", "upper", 5.0, "m", "feasible"))
        rd.checkpoint(_plain_coordinator(tmp_path), 1.0)
        rd.write_result({"cost": 5})
    assert len(lines) == 1 and "\n" not in lines[0]
    assert lines[0].startswith(f"warning: cannot write {blocker / 'rd' / 'config.json'}: ")
    assert rd.write_failures.count == 1 + 4 * 3

    # a full disk, then space again: the next write catches up
    rd = RunDir(tmp_path / "ok", {"problem": "x"}, write_failures=WriteFailures(emit=lines.append))
    real = rundir_module.write_json_atomic

    def full(path, doc):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(rundir_module, "write_json_atomic", full)
    rd.write_result({"cost": 5})
    assert len(lines) == 2 and "No space left on device" in lines[-1] and not (tmp_path / "ok" / "result.json").exists()
    monkeypatch.setattr(rundir_module, "write_json_atomic", real)
    rd.write_result({"cost": 4})
    assert json.loads((tmp_path / "ok" / "result.json").read_text()) == {"cost": 4}
