"""The numba kernels interpreted as plain Python give the same search result as compiled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


ROOT = Path(__file__).resolve().parents[3]
SCRIPT = """
import json
import gapstop.problems.intraop.relaxed as relaxed
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.runner import solve
relaxed.EXHAUSTIVE_LIMIT = 0  # exercise TRW-S and the forest descent, not enumeration
p = random_instance(30, 5, max_k=3, limit_quantile=0.5, edge_p=0.12)
r = solve(p, time_limit_s=600, seed=2, max_iterations=6)
print(json.dumps([r["cost"], r["solution"]]))
"""


def _run(disable_jit: bool) -> list:
    env = dict(os.environ, PYTHONPATH=str(ROOT), NUMBA_DISABLE_JIT="1" if disable_jit else "0")
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_interpreted_kernels_match_compiled():
    compiled, interpreted = _run(False), _run(True)
    assert compiled[0] is not None
    assert compiled == interpreted
