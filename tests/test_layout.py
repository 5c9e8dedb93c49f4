"""Architecture boundary: only actors/, cluster/ and launch.py may import ray."""

from __future__ import annotations

import ast
import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def test_engine_and_problems_never_import_ray() -> None:
    offenders = [str(p.relative_to(ROOT)) for pkg in ("engine", "problems") for p in (ROOT / pkg).rglob("*.py")
                 if "ray" in _imports(p)]
    assert offenders == []


def test_the_check_can_see_a_ray_import() -> None:
    assert "ray" in _imports(ROOT / "actors" / "__init__.py")


def test_a_local_run_never_imports_ray(tmp_path: Path) -> None:
    # a run without --address or --workers fits this process: Ray (0.7 s to import, 5-10 s to
    # start on a laptop) is neither imported nor started
    import subprocess
    import sys

    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from gapstop.launch import main\n"
            f"r = CliRunner().invoke(main, ['pipeline', 'solve', {str(ROOT / 'examples' / 'regal_like_60.json')!r}, "
            f"'-k', '2', '--time-limit', '3', '--quiet', '--run-dir', {str(tmp_path / 'rd')!r}])\n"
            "assert r.exit_code == 0, r.output\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'ray' or m.startswith('gapstop.actors')))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "[]"  # nor the actors' modules
    assert (tmp_path / "rd" / "result.json").exists()


def _declared_dependencies() -> list[str]:
    import re
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return [re.split(r"[<>=!~ \[;]", d, maxsplit=1)[0].lower() for d in deps]


def test_the_code_imports_only_declared_third_party_packages() -> None:
    import sys

    files = [p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "launch.py"]
    used = set().union(*(_imports(p) for p in files)) - {"gapstop"} - set(sys.stdlib_module_names)
    assert sorted(used - set(_declared_dependencies()) - set(_optional_extras())) == []


#: the folders installed as gapstop.<name> (with launch.py as gapstop.launch)
PACKAGES = ("engine", "problems", "actors", "cluster")


def test_the_code_imports_its_own_modules_under_the_one_import_name() -> None:
    # an import of engine, problems, ... as a top-level name works in a checkout by accident and
    # fails once installed, where only gapstop exists
    old = set(PACKAGES) | {"launch"}
    files = [p for d in (*PACKAGES, "tests", "benchmarks") for p in (ROOT / d).rglob("*.py")] + [ROOT / "launch.py"]
    assert files and {str(p.relative_to(ROOT)): sorted(_imports(p) & old) for p in files if _imports(p) & old} == {}
    assert _imports(ROOT / "tests" / "test_package.py") >= {"gapstop", "pytest"}  # the check sees imports


def test_the_package_folder_links_to_the_folders_at_the_root() -> None:
    # static tools (mypy, pyright, an IDE) resolve gapstop.engine through these links, as the
    # interpreter and the wheel's build do; a link to a folder that moved would break all three
    import gapstop

    links = {f.name: f for f in (ROOT / "gapstop").iterdir() if f.name not in ("__pycache__", "__init__.py")}
    assert sorted(links) == sorted([*PACKAGES, "launch.py"])
    assert all(f.is_symlink() and not Path(os.readlink(f)).is_absolute() and f.resolve() == ROOT / name
               for name, f in links.items())
    assert [Path(p).resolve() for p in gapstop.__path__] == [ROOT / "gapstop"]
    import gapstop.engine.errors as errors

    assert Path(errors.__file__).resolve() == ROOT / "engine" / "errors.py"


def _optional_extras() -> list[str]:
    """Packages of the optional extras that name one package each (``onnx``, ``torch``,
    ``matplotlib`` of the extra ``plot``)."""
    import re
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return sorted({re.split(r"[<>=!~ \[;]", reqs[0], maxsplit=1)[0].lower()
                   for reqs in extras.values() if len(reqs) == 1})


def test_optional_extras_are_imported_only_where_used() -> None:
    # a module-level import of an optional package would break the core for users without it
    own = {"engine", "problems", "actors", "cluster"}
    files = [p for pkg in own for p in (ROOT / pkg).rglob("*.py")] + [ROOT / "launch.py"]
    # the learned policy's torch modules are imported only after require_torch (problems/pipeline/rl)
    rl = ROOT / "problems" / "pipeline" / "rl"
    files = [p for p in files if rl not in p.parents or p.name in ("__init__.py", "features.py", "rollout.py")]
    optional = set(_optional_extras())
    assert optional >= {"onnx", "torch", "matplotlib"}
    top = {str(p.relative_to(ROOT)): {a.name.split(".")[0] for n in ast.parse(p.read_text()).body
                                      if isinstance(n, ast.Import) for a in n.names}
           | {n.module.split(".")[0] for n in ast.parse(p.read_text()).body
              if isinstance(n, ast.ImportFrom) and n.module and n.level == 0} for p in files}
    assert {f: sorted(m & optional) for f, m in top.items() if m & optional} == {}


def _minimum(dep: str) -> tuple[int, ...]:
    import re
    import tomllib

    for d in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        m = re.fullmatch(r"([A-Za-z0-9_-]+)>=([0-9.]+)", d.replace(" ", ""))
        if m and m.group(1).lower() == dep:
            return tuple(int(x) for x in m.group(2).split("."))
    raise AssertionError(f"{dep}: no '>=' minimum in pyproject.toml")


def _pins(text: str) -> dict[str, tuple[int, ...]]:
    import re

    return {m.group(1).lower(): tuple(int(x) for x in m.group(2).split("."))
            for m in re.finditer(r"\b([A-Za-z0-9_-]+)==([0-9]+(?:\.[0-9]+)*)\b", text)}


def test_the_cluster_configs_install_every_declared_dependency() -> None:
    # a package missing there fails only on a real cluster, at the first import on a worker;
    # each is pinned (driver and nodes must agree) to a version pyproject.toml allows
    declared = _declared_dependencies()
    launcher = [line for line in (ROOT / "cluster" / "cluster.yaml").read_text().splitlines() if "pip install" in line]
    kuberay = [line for line in (ROOT / "cluster" / "kuberay.yaml").read_text().splitlines() if "pip install" in line]
    assert launcher and kuberay
    in_image = {"ray"}  # the rayproject/ray image tag pins it
    for line in launcher + kuberay:
        pins = _pins(line)
        needed = [d for d in declared if not (line in kuberay and d in in_image)]
        assert [d for d in needed if d not in pins] == [], line
        assert [d for d in needed if pins[d] < _minimum(d)] == [], line


def test_the_cluster_configs_run_ray_with_token_authentication_and_no_open_dashboard() -> None:
    import re

    for name in ("cluster.yaml", "kuberay.yaml"):
        text = (ROOT / "cluster" / name).read_text()
        assert "0.0.0.0" not in text, name
        assert "RAY_AUTH_MODE" in text, name
    launcher = (ROOT / "cluster" / "cluster.yaml").read_text()
    starts = [line for line in launcher.splitlines() if "ray start" in line]
    assert len(starts) == 2 and all("RAY_AUTH_MODE=token" in line for line in starts)
    image = re.search(r"rayproject/ray:([0-9.]+)-", (ROOT / "cluster" / "kuberay.yaml").read_text())
    assert image and _pins(f"ray=={image.group(1)}")["ray"] >= _minimum("ray")
    assert _minimum("ray") >= (2, 52)  # the first Ray with token authentication
