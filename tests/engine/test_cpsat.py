"""engine.cpsat: CP-SAT's module without pandas, and still whole.

Each check runs in a fresh interpreter: whether pandas is loaded depends on what the
process imported before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _run(code: str) -> dict:
    res = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout.strip().splitlines()[-1])


_LOAD = """
import json, sys
from gapstop.engine import cpsat
cm = cpsat.load()
out = {"pandas_after_load": "pandas" in sys.modules}
m = cm.CpModel()
x = m.new_int_var(0, 10, "x")
m.add(x >= 3)
m.minimize(x)
s = cm.CpSolver()
out["status_optimal"] = s.solve(m) == cm.OPTIMAL
out["x"] = s.value(x)
from ortools.sat.python import cp_model
out["same_module"] = cp_model is cm
import pandas as pd
out["real_pandas"] = cm.pd.Series is pd.Series and cm.pd.Index is pd.Index
series = m.new_int_var_series("y", pd.Index(range(3)), 0, 5)
out["series"] = [type(series).__name__, len(series)]
print(json.dumps(out))
"""


def test_load_leaves_pandas_out_and_the_module_whole() -> None:
    out = _run(_LOAD)
    assert out["pandas_after_load"] is False
    assert out["status_optimal"] is True and out["x"] == 3
    assert out["same_module"] is True  # a later plain import gets the same module
    # the pandas helpers still work once the user imports pandas: the module's pd is the real one
    assert out["real_pandas"] is True
    assert out["series"] == ["Series", 3]


def test_load_after_pandas_is_the_usual_import() -> None:
    out = _run("""
import json, sys
import pandas
from gapstop.engine import cpsat
cm = cpsat.load()
print(json.dumps({"pd_is_pandas": cm.pd is pandas}))
""")
    assert out["pd_is_pandas"] is True


def test_the_pipeline_mip_and_the_intraop_bound_do_not_import_pandas() -> None:
    out = _run("""
import json, sys
import gapstop.problems.pipeline.bounds
import gapstop.problems.pipeline.constraints
import gapstop.problems.intraop._bound_cpsat
from gapstop.problems.intraop.bounds import lower_bound
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.pipeline.bounds import exact_bound
from gapstop.problems.pipeline.io import load_graph
b = exact_bound(load_graph("examples/regal_like_60.json"), 2, 20.0)
ib = lower_bound(random_instance(8, 0, max_k=3, limit_quantile=0.2), "exact", 20.0)
print(json.dumps({"pandas": "pandas" in sys.modules, "status": b.status, "intraop": [ib.status, ib.solver]}))
""")
    assert out["pandas"] is False
    # both CP-SAT models ran through the module loaded without pandas
    assert out["status"] == "optimal"
    assert out["intraop"] == ["optimal", "cp-sat"]
