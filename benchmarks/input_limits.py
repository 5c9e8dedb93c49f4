"""What the documented input limits guard against: times behind the chosen numbers.

Prints, side by side in one run:

* one ``numpy.linalg.eigh`` of a dense symmetric n x n matrix with one BLAS thread, as the
  spectral bound runs it, for n = 1,736 (lstm_lm_unrolled), 3,000 and 4,096
  (:data:`problems.pipeline.spectral.SPECTRAL_MAX_N`);
* the spectral bound's clique weight at degree 4,095: the plain Python double loop over the
  splits against the numpy version in :func:`problems.pipeline.spectral.clique_weight`;
* a cached load of an intra-op instance (content digests and checks included), median of 5.

Not a test. Usage::

    python benchmarks/input_limits.py [--instance PATH.json.gz]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gapstop.problems.intraop.io import load_problem  # noqa: E402
from gapstop.problems.pipeline.spectral import SPECTRAL_MAX_N, clique_weight  # noqa: E402
from tests.problems.pipeline.test_clique_weight import clique_weight_loop  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--instance", default="/work/shared/data/iopddl/asplos-2025-iopddl-A.json.gz")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with threadpool_limits(limits=1, user_api="blas"):
        for n in (1736, SPECTRAL_MAX_N, 2 * SPECTRAL_MAX_N):
            a = rng.random((n, n))
            a = a + a.T
            t = time.perf_counter()
            np.linalg.eigh(a)
            print(f"eigh n={n}: {time.perf_counter() - t:.2f} s")
    d, theta = 2 * SPECTRAL_MAX_N - 1, 0.75
    t = time.perf_counter()
    slow = clique_weight_loop(d, theta)
    t_loop = time.perf_counter() - t
    t = time.perf_counter()
    fast = clique_weight(d, theta)
    t_np = time.perf_counter() - t
    print(f"clique weight d={d}: loop {t_loop:.2f} s, numpy {t_np:.2f} s, same value: {slow == fast}")
    if Path(args.instance).exists():
        cache = tempfile.mkdtemp()
        load_problem(args.instance, cache_dir=cache)
        ts = []
        for _ in range(5):
            t = time.perf_counter()
            load_problem(args.instance, cache_dir=cache)
            ts.append(time.perf_counter() - t)
        print(f"cached load of {Path(args.instance).name}: median {sorted(ts)[2]:.3f} s")


if __name__ == "__main__":
    main()
