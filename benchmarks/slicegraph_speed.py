"""SliceGraph decode speed and peak memory (a benchmark script, not a test).

    python benchmarks/slicegraph_speed.py [--reps 7] [--sizes 500,1000,2000,5000] [--ks 2,8,16,64]

For each n, a fresh subprocess builds a model-like graph (generators.model_like, with
a 32 MiB stage memory so overflow is live) and a REGAL-like graph of the same size,
compiles the kernels (numba cache), then times one Kahn + SliceGraph decode of a
random key vector at a time, without a cutoff (the exact optimum of the order),
single-threaded. Prints the median ms per decode over --reps key vectors and the
process's peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def child(n: int, ks: list[int], reps: int) -> None:
    sys.path.insert(0, str(ROOT))
    import numpy as np

    from gapstop.problems.pipeline.decoder import SliceDecoder
    from gapstop.problems.pipeline.generators import model_like, regal_like

    out = []
    for name, prob in (("model-like", model_like(n, 0)), ("regal-like", regal_like(0, n=n, family="er"))):
        for k in ks:
            d = SliceDecoder(prob, k)
            rng = np.random.default_rng(1)
            d.values(rng.random((1, n)))  # compile / load cache
            ts = []
            for _ in range(reps):
                keys = rng.random((1, n))
                t = time.perf_counter()
                d.values(keys)
                ts.append(time.perf_counter() - t)
            out.append({"graph": name, "n": n, "m": prob.m, "k": k, "ms": 1000 * float(np.median(ts))})
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"rows": out, "peak_rss_mb": rss_mb}))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--sizes", default="500,1000,2000,5000")
    ap.add_argument("--ks", default="2,8,16,64")
    ap.add_argument("--child", type=int, default=None)
    a = ap.parse_args()
    ks = [int(x) for x in a.ks.split(",")]
    if a.child is not None:
        child(a.child, ks, a.reps)
        return
    print(f"{'graph':<11} {'n':>5} {'m':>6} {'k':>3} {'ms/decode':>10} {'peak RSS MB':>12}")
    for n in [int(x) for x in a.sizes.split(",")]:
        res = subprocess.run([sys.executable, __file__, "--child", str(n), "--reps", str(a.reps), "--ks", a.ks],
                             capture_output=True, text=True, check=True)
        doc = json.loads(res.stdout.strip().splitlines()[-1])
        for r in doc["rows"]:
            print(f"{r['graph']:<11} {r['n']:>5} {r['m']:>6} {r['k']:>3} {r['ms']:>10.2f} {doc['peak_rss_mb']:>12.0f}")


if __name__ == "__main__":
    main()
