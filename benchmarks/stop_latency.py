"""Benchmark: how long a run takes to end after deciding to stop, as a user sees it.

Usage::

    python benchmarks/stop_latency.py [--data-dir ../shared/data/iopddl] [--only M S]
        [--stops target-gap SIGINT SIGTERM] [--backends threads ray] [--repeats 1]
        [--paths LABEL=ROOT ...] [--signal-after 15]

For each instance, backend (``threads``: the default local path; ``ray``: ``--workers 2``) and
stop, ``python ROOT/launch.py intraop solve INSTANCE ...`` runs in a process of its own:

* ``target-gap``: ``--target-gap`` 0.03 on M and 0.08 on S (the gaps of the issue that measured
  30-32 s before this was fixed), time limit 120 s / 240 s;
* ``SIGINT`` / ``SIGTERM``: the signal ``--signal-after`` seconds after the start, to the
  process alone (as a job runner sends it), time limit 120 s.

It reports the stop reason written in ``result.json``, the process's exit status, and two
latencies: ``decision -> exit`` (for a signal: from sending it; for the target gap: from the
final ``result.json`` write, which comes right after the decision) and ``final write ->
exit``. With ``--paths`` each checkout runs every case in turn, side by side. Not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GAPS = {"M": (0.03, 120), "S": (0.08, 240)}


def run_case(root: Path, instance: Path, stop: str, backend: str, signal_after: float, work: Path) -> dict:
    letter = instance.name.split("-")[-1].split(".")[0]
    gap, limit = GAPS.get(letter, (0.05, 120))
    rd = work / "rd"
    shutil.rmtree(rd, ignore_errors=True)
    args = [sys.executable, str(root / "launch.py"), "intraop", "solve", str(instance), "--quiet", "--run-dir", str(rd),
            "--time-limit", str(limit if stop == "target-gap" else 120)]
    if stop == "target-gap":
        args += ["--target-gap", str(gap)]
    if backend == "ray":
        args += ["--workers", "2"]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, cwd=work, env={**os.environ, "PYTHONPATH": str(root)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    t_sig = None
    if stop != "target-gap":
        try:
            proc.wait(timeout=signal_after)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, getattr(signal, stop))
            t_sig = time.time()
    try:
        _, err = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    t_exit, wall = time.time(), time.monotonic() - t0
    try:
        doc = json.loads((rd / "result.json").read_text())
        written = (rd / "result.json").stat().st_mtime
    except (OSError, ValueError):
        doc, written = {}, float("nan")
    decided = t_sig if t_sig is not None else written
    return {"reason": doc.get("stopped_because"), "rc": proc.returncode, "decision_to_exit_s": t_exit - decided,
            "write_to_exit_s": t_exit - written, "wall_s": wall, "elapsed_s": doc.get("elapsed_s"),
            "stderr": err.strip().splitlines()[-1:] if err.strip() else []}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", default=str(ROOT.parent / "shared" / "data" / "iopddl"))
    ap.add_argument("--only", nargs="+", default=["M", "S"])
    ap.add_argument("--stops", nargs="+", default=["target-gap", "SIGINT", "SIGTERM"])
    ap.add_argument("--backends", nargs="+", default=["threads", "ray"])
    ap.add_argument("--paths", nargs="+", default=[f"this={ROOT}"], help="LABEL=ROOT checkouts run side by side")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--signal-after", type=float, default=15.0)
    ap.add_argument("--out", default=None, help="also write the rows as JSON")
    a = ap.parse_args()
    paths = [(p.split("=", 1)[0], Path(p.split("=", 1)[1])) for p in a.paths]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for letter in a.only:
            inst = Path(a.data_dir) / f"asplos-2025-iopddl-{letter}.json.gz"
            for backend in a.backends:
                for stop in a.stops:
                    for rep in range(a.repeats):
                        for label, root in paths:
                            r = run_case(root, inst, stop, backend, a.signal_after, Path(tmp))
                            r.update(instance=letter, backend=backend, stop=stop, path=label, repeat=rep)
                            rows.append(r)
                            print(json.dumps(r), file=sys.stderr, flush=True)
    print("| instance | backend | stop | path | stopped_because | exit | decision -> exit (s) | final write -> exit (s) |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    keys = sorted({(r["instance"], r["backend"], r["stop"], r["path"]) for r in rows},
                  key=lambda k: (a.only.index(k[0]), a.backends.index(k[1]), a.stops.index(k[2]),
                                 [p[0] for p in paths].index(k[3])))
    for key in keys:
        rs = [r for r in rows if (r["instance"], r["backend"], r["stop"], r["path"]) == key]
        d = statistics.median(r["decision_to_exit_s"] for r in rs)
        w = statistics.median(r["write_to_exit_s"] for r in rs)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {key[3]} | {', '.join(sorted({str(r['reason']) for r in rs}))} | "
              f"{', '.join(sorted({str(r['rc']) for r in rs}))} | {d:.2f} | {w:.2f} |")
    if a.out:
        Path(a.out).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
