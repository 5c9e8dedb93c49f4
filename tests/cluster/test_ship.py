"""The code shipped to a cluster's workers is the package ``gapstop``, whatever the checkout's folder is called."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("ray")

from gapstop.cluster.connect import CODE_PACKAGES, ROOT, stage_code  # noqa: E402


def _modules(top: Path) -> set[str]:
    return {p.relative_to(top).as_posix() for p in top.rglob("*") if p.is_file() and "__pycache__" not in p.parts
            and p.suffix not in (".nbi", ".nbc", ".pyc")}


def test_the_staged_code_is_a_regular_package_named_gapstop_with_the_workers_packages(tmp_path: Path) -> None:
    pkg = stage_code(tmp_path)
    assert pkg == tmp_path / "gapstop" and (pkg / "__init__.py").is_file()
    want = {"__init__.py"} | {f"{d}/{m}" for d in CODE_PACKAGES for m in _modules(ROOT / d)}
    assert _modules(pkg) == want
    assert {"engine", "problems", "actors"} <= set(CODE_PACKAGES)
    assert "__path__" not in (pkg / "__init__.py").read_text()  # not the checkout's pointer to its root


@pytest.mark.ray
@pytest.mark.cluster  # a Ray instance of its own, in another process
def test_a_worker_imports_gapstop_from_the_shipped_code_only(tmp_path: Path) -> None:
    # a driver outside the checkout ships the staged folder as py_modules, as connect() does for
    # a cluster; its worker has no checkout on its path, so gapstop can only come from the shipment
    code = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
            "import tempfile\n"
            "from pathlib import Path\n"
            "import ray\n"
            "from gapstop.cluster.connect import stage_code\n"
            "pkg = stage_code(Path(tempfile.mkdtemp()))\n"
            "ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False,\n"
            "         runtime_env={'py_modules': [str(pkg)], 'excludes': ['__pycache__']})\n"
            "@ray.remote\n"
            "def where():\n"
            "    import sys\n"
            "    import gapstop.engine.records, gapstop.problems.pipeline.evaluate, gapstop.actors.coordinator\n"
            "    return [sys.modules[m].__file__ for m in ('gapstop.engine.records',\n"
            "            'gapstop.problems.pipeline.evaluate', 'gapstop.actors.coordinator')]\n"
            "print('\\n'.join(ray.get(where.remote())))\n"
            "ray.shutdown()\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    files = [Path(line) for line in res.stdout.split()]
    ends = ["gapstop/engine/records.py", "gapstop/problems/pipeline/evaluate.py", "gapstop/actors/coordinator.py"]
    assert len(files) == 3
    for f, end in zip(files, ends):
        assert not f.resolve().is_relative_to(ROOT.resolve()), f
        assert f.as_posix().endswith(end) and "runtime_resources" in f.parts, f
