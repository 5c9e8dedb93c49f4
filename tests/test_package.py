"""One installed import name: the wheel holds the package ``gapstop`` only, an install of it runs
without the checkout, and a checkout imports itself as ``gapstop`` even next to an install."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from gapstop.problems.pipeline.io import load_graph
from tests.problems.pipeline import reference as ref

ROOT = Path(__file__).resolve().parents[1]
#: the folders installed under gapstop.*; everything else at the root stays in the checkout
INSTALLED = ("engine", "actors", "cluster", "problems")
EXAMPLE = ROOT / "examples" / "regal_like_60.json"


def _clean_env() -> dict[str, str]:
    """The environment without PYTHONPATH: a child then sees no checkout unless its own sys.path has one."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``pip wheel --no-deps .`` of a copy of the checkout (the build writes build/ and *.egg-info
    into its source folder): with this environment's setuptools if it can build wheels (no
    network needed), else in pip's isolated build environment, as a user's build runs."""
    tmp = tmp_path_factory.mktemp("wheel")
    src = tmp / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(".git", "__pycache__", "build", "*.egg-info", "runs",
                                                             ".cache", ".pytest_cache", "*.nbi", "*.nbc"))
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", str(src), "-w", str(tmp / "dist")]
    local = subprocess.run([*cmd, "--no-build-isolation", "--no-index"], capture_output=True, text=True,
                           env=_clean_env(), timeout=300)
    if local.returncode != 0:  # e.g. a venv's setuptools without bdist_wheel
        isolated = subprocess.run(cmd, capture_output=True, text=True, env=_clean_env(), timeout=600)
        assert isolated.returncode == 0, local.stderr[-2000:] + isolated.stderr[-2000:]
    (found,) = (tmp / "dist").glob("gapstop-*.whl")
    return found


def test_the_wheel_has_one_top_level_package_with_every_module_of_the_tree(wheel: Path) -> None:
    names = [n for n in zipfile.ZipFile(wheel).namelist() if not n.endswith("/")]
    tops = {n.split("/")[0] for n in names}
    (dist_info,) = tops - {"gapstop"}
    assert dist_info.startswith("gapstop-") and dist_info.endswith(".dist-info") and "gapstop" in tops
    # every module of the installed folders is there, under gapstop/, and nothing else but the chip
    # profiles: a subpackage missing from pyproject's list would be missing here
    want = {"gapstop/__init__.py", "gapstop/launch.py"} | {f"gapstop/{p.relative_to(ROOT).as_posix()}" for d in INSTALLED
                                     for p in (ROOT / d).rglob("*.py") if "__pycache__" not in p.parts}
    want |= {f"gapstop/problems/chips/{p.name}" for p in (ROOT / "problems" / "chips").iterdir() if p.is_file()}
    assert {n for n in names if n.startswith("gapstop/")} == want
    assert "gapstop/__init__.py" in names  # the package's own module: the public API's attributes
    init: dict[str, object] = {}
    exec(zipfile.ZipFile(wheel).read("gapstop/__init__.py").decode(), init)
    assert {"plan_pipeline", "PipelinePlan"} <= set(init["__all__"])  # type: ignore[arg-type]
    meta = zipfile.ZipFile(wheel)
    entry_points = meta.read(f"{dist_info}/entry_points.txt").decode()
    assert "gapstop = gapstop.launch:run" in entry_points.split("\n")
    assert meta.read(f"{dist_info}/top_level.txt").decode().split() == ["gapstop"]


def _venv(tmp_path: Path) -> Path:
    """A venv that sees the machine's packages (no downloads) but not the checkout."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    return venv / ("Scripts" if os.name == "nt" else "bin")


@pytest.mark.slow  # ~50 s on 2 shared cores (load 5): a venv, an install, and numba compiling the installed copy afresh
@pytest.mark.ray
def test_the_installed_wheel_solves_a_bundled_example_without_the_checkout(wheel: Path, tmp_path: Path) -> None:
    bin_dir = _venv(tmp_path)
    env = {**_clean_env(), "GAPSTOP_CACHE": str(tmp_path / "cache")}
    subprocess.run([str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps", "--no-index",
                    "--force-reinstall", str(wheel)], check=True, capture_output=True, env=env, timeout=300)
    code = ("import gapstop.engine as e, gapstop.launch as l, gapstop.problems.chip as c; "
            "print(e.__file__); print(l.__file__); print(c.CHIPS_DIR / 'tpu-v4.toml'); c.load_chip('tpu-v4'); "
            "import gapstop; assert gapstop.plan_pipeline.__module__ == 'gapstop.problems.pipeline.api'")
    where = subprocess.run([str(bin_dir / "python"), "-c", code], cwd=tmp_path, env=env, capture_output=True,
                           text=True, check=True).stdout.split()
    site = tmp_path / "venv"
    assert len(where) == 3 and all(Path(w).resolve().is_relative_to(site.resolve()) for w in where), where
    p = load_graph(EXAMPLE)
    # in threads, then on local Ray, whose workers must import the installed gapstop too; the run
    # stops at its first solution (any gap is within 99 %)
    for mode in (["--in-process"], []):
        out = tmp_path / "result.json"
        out.unlink(missing_ok=True)
        res = subprocess.run([str(bin_dir / "gapstop"), "pipeline", "solve", str(EXAMPLE), "-k", "4", "--time-limit",
                              "120", "--target-gap", "0.99", "--quiet", "--out", str(out), *mode],
                             cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        assert res.returncode == 0, res.stderr[-3000:]
        doc = json.loads(out.read_text())
        assert doc["problem"] == "pipeline" and doc["k"] == 4 and doc["stopped_because"] == "target-gap"
        # re-scored by the checkout's naive reference, which shares no code with the installed run
        stages = [[v for v in doc["order"] if doc["blocks"][v] == b] for b in range(max(doc["blocks"]) + 1)]
        assert sorted(v for s in stages for v in s) == list(range(p.n)) and len(stages) <= 4
        assert doc["objective"] == pytest.approx(max(ref.block_cost(p, s) for s in stages), rel=1e-9)
        assert doc["lower_bound"] <= doc["objective"]


def test_a_checkout_imports_itself_next_to_an_installed_gapstop(tmp_path: Path) -> None:
    # an installed gapstop sits in site-packages; put a broken one first
    # on PYTHONPATH: the checkout's processes must not take a single module from it
    fake = tmp_path / "site" / "gapstop"
    for sub in ("engine", "problems", "actors", "cluster"):
        (fake / sub).mkdir(parents=True)
        (fake / sub / "__init__.py").write_text("raise ImportError('the installed copy was imported')\n")
    (fake / "launch.py").write_text("raise ImportError('the installed copy was imported')\n")
    env = {**_clean_env(), "PYTHONPATH": str(tmp_path / "site")}
    res = subprocess.run([sys.executable, str(ROOT / "launch.py"), "pipeline", "solve", "--help"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "--time-limit" in res.stdout, res.stderr[-3000:]
    code = "import gapstop.engine.errors as e, gapstop.launch as l; print(e.__file__); print(l.__file__)"
    where = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=120)
    assert where.returncode == 0, where.stderr[-3000:]
    assert [Path(w).resolve() for w in where.stdout.split()] == [ROOT / "engine" / "errors.py", ROOT / "launch.py"]
    # and without the fake, a process with the checkout on PYTHONPATH (as Ray's local workers and
    # the tests' subprocesses have) imports the same files
    env["PYTHONPATH"] = str(ROOT)
    where = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
    assert [Path(w).resolve() for w in where.stdout.split()] == [ROOT / "engine" / "errors.py", ROOT / "launch.py"]
