"""What the DAG freedom buys on imported models (a script, not a test).

    python benchmarks/import_plans.py [--ks 4,8,16] [--time-limit 30] [--chip a100-sxm-80gb] [--batch 1] [--models ...]

For each bundled ONNX file (examples/onnx) and each k, runs in separate processes

    python launch.py import onnx MODEL --chip CHIP --batch N --out GRAPH
    python launch.py pipeline solve GRAPH -k K --contiguous --time-limit S --out c.json
    python launch.py pipeline solve GRAPH -k K --time-limit S --out r.json     (Ray local; --in-process: threads)

and prints the contiguous optimum (exact among plans contiguous in the model's execution
order), the unrestricted best found and the best unrestricted lower bound of either run, and
the ratios contiguous / unrestricted best and contiguous / bound (the most the restriction
can cost).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(*args: str) -> None:
    subprocess.run([sys.executable, str(ROOT / "launch.py"), *args], check=True, cwd=ROOT,
                   stdout=subprocess.DEVNULL)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ks", default="4,8,16")
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--chip", default="a100-sxm-80gb")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--in-process", action="store_true", help="run the unrestricted solves without Ray")
    ap.add_argument("--models", default="bert_base,gpt2,resnet50")
    args = ap.parse_args()
    print("| model | k | contiguous optimum (µs) | unrestricted best (µs) | unrestricted bound (µs) "
          "| contiguous / best | contiguous / bound | unrestricted gap |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            graph = Path(tmp) / f"{model}.json.gz"
            _run("import", "onnx", str(ROOT / "examples" / "onnx" / f"{model}.onnx"), "--chip", args.chip,
                 "--batch", str(args.batch), "--out", str(graph))
            for k in (int(x) for x in args.ks.split(",")):
                c_out, r_out = Path(tmp) / "c.json", Path(tmp) / "r.json"
                _run("pipeline", "solve", str(graph), "-k", str(k), "--contiguous", "--time-limit",
                     str(args.time_limit), "--out", str(c_out))
                _run("pipeline", "solve", str(graph), "-k", str(k), "--time-limit", str(args.time_limit),
                     "--quiet", "--run-dir", str(Path(tmp) / f"run-{model}-{k}"), "--out", str(r_out),
                     *(["--in-process"] if args.in_process else []))
                c, r = json.loads(c_out.read_text()), json.loads(r_out.read_text())
                bound = max(b for b in (c["lower_bound"], r["lower_bound"]) if b is not None)
                best = min(r["objective"], c["objective"])
                print(f"| {model} | {k} | {c['objective']:.2f} | {best:.2f} | {bound:.2f} "
                      f"| {c['objective'] / best:.4f} | {c['objective'] / bound:.4f} | {1 - bound / best:.2%} |",
                      flush=True)


if __name__ == "__main__":
    main()
