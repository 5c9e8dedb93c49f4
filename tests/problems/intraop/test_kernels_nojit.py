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
from gapstop.problems.intraop.penalty import PenaltySearch
relaxed.EXHAUSTIVE_LIMIT = 0  # exercise TRW-S and the forest descent, not enumeration
p = random_instance(30, 5, max_k=3, limit_quantile=0.5, edge_p=0.12)
prep = relaxed.prepare(p)
bests = []
for i, w0 in enumerate((0.1, 1.0, 10.0, 100.0)):
    s = PenaltySearch(prep, w0, 2 + i)
    for _ in range(6):
        s.iterate()
    if s.best() is not None:
        bests.append((s.best().cost, [int(x) for x in s.best().solution]))
print(json.dumps(min(bests) if bests else [None, None]))
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
