"""Architecture boundary: only actors/, cluster/ and launch.py may import ray."""

from __future__ import annotations

import ast
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
