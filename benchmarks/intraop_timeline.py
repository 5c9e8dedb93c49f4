"""Benchmark: where the wall clock of one ``launch.py intraop solve`` run goes (Ray by default).

Usage::

    python benchmarks/intraop_timeline.py INSTANCE [--time-limit 60] [--seed 0] [--in-process]

Runs the command in a subprocess with a run directory and prints, in seconds from the
subprocess's launch: when the coordinator started (``config.json``'s mtime: imports, loading,
Ray's start-up and the coordinator actor), every accepted improvement (``events.parquet``,
whose ``t_s`` counts from the coordinator's start), the result file's last write and the
process's exit; then the search iterations (``evaluations``) per second of search time.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("instance", type=Path)
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--in-process", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rd, out = Path(tmp) / "run", Path(tmp) / "r.json"
        cmd = [sys.executable, str(ROOT / "launch.py"), "intraop", "solve", str(args.instance), "--time-limit",
               str(args.time_limit), "--seed", str(args.seed), "--quiet", "--out", str(out), "--run-dir", str(rd)]
        if args.in_process:
            cmd.append("--in-process")
        t0 = time.time()
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        t_exit = time.time() - t0
        doc = json.loads(out.read_text()) if out.exists() else {}
        print(f"exit code {proc.returncode}; stderr: {proc.stderr.strip()[-300:]}")
        if (rd / "config.json").exists():
            import pyarrow.parquet as pq

            t_coord = (rd / "config.json").stat().st_mtime - t0
            print(f"{'coordinator started':28} {t_coord:8.2f}")
            events = pq.read_table(rd / "events.parquet").to_pylist() if (rd / "events.parquet").exists() else []
            for e in events:
                print(f"{e['kind'] + ' ' + e['method'][:20]:28} {t_coord + e['t_s']:8.2f}  {e['value']:.6g}  "
                      f"{e['worker']}")
            print(f"{'result.json last written':28} {(rd / 'result.json').stat().st_mtime - t0:8.2f}")
        print(f"{'--out last written':28} {out.stat().st_mtime - t0 if out.exists() else float('nan'):8.2f}")
        print(f"{'process exit':28} {t_exit:8.2f}")
        print(f"cost {doc.get('cost')}, lower bound {doc.get('lower_bound')}, stopped {doc.get('stopped_because')}, "
              f"evaluations {doc.get('evaluations', doc.get('iterations'))}, workers {doc.get('workers')}")


if __name__ == "__main__":
    main()
