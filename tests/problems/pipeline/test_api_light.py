"""``import gapstop`` stays light: the API is an attribute loaded on first use, and it loads
without torch (which it imports only when called). Runs without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_api_is_a_lazy_attribute_that_needs_torch_only_when_called() -> None:
    code = ("import sys\n"
            "sys.modules['torch'] = None  # as if torch were not installed\n"
            "import gapstop\n"
            "assert 'gapstop.problems.pipeline.api' not in sys.modules\n"
            "assert 'plan_pipeline' in dir(gapstop) and 'PipelinePlan' in gapstop.__all__\n"
            "from gapstop.engine.errors import InputError\n"
            "plan = gapstop.plan_pipeline\n"
            "assert gapstop.PipelinePlan.__module__ == 'gapstop.problems.pipeline.api'\n"
            "try:\n"
            "    plan(object(), (), 2, 'a100-sxm-80gb')\n"
            "except InputError as e:\n"
            "    print(e)\n"
            "try:\n"
            "    gapstop.no_such_name\n"
            "except AttributeError as e:\n"
            "    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines() == ["the torch importer needs PyTorch: pip install 'gapstop[torch]' (or pip install "
                                     "torch)", "module 'gapstop' has no attribute 'no_such_name'"]
