"""The command line's process: one OpenBLAS thread unless the user sets otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# what the command line's process has loaded once launch.py has run: numpy's OpenBLAS, and SciPy's
# when numba's first call imports it (SciPy installed)
_PROBE = """
import json, launch, numpy
try:
    import scipy.linalg.cython_blas
except ImportError:
    pass
from threadpoolctl import threadpool_info
print(json.dumps([p["num_threads"] for p in threadpool_info() if p["internal_api"] == "openblas"]))
"""


def _openblas_threads(env_value: str | None) -> list[int]:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS",
                                                             "OMP_NUM_THREADS")}
    if env_value is not None:
        env["OPENBLAS_NUM_THREADS"] = env_value
    res = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_openblas_gets_one_thread_by_default() -> None:
    threads = _openblas_threads(None)
    if not threads:
        pytest.skip("numpy here is not built on OpenBLAS")
    assert threads == [1] * len(threads)


@pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="needs two cores to tell two threads from one")
def test_a_users_openblas_setting_is_kept() -> None:
    threads = _openblas_threads("2")
    if not threads:
        pytest.skip("numpy here is not built on OpenBLAS")
    assert threads == [2] * len(threads)
