"""Shipped code's kernels are cached per node, by the code's digest, not by where a Ray session unpacked it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("numba")

from gapstop.engine.jit_cache import MARKER, prune  # noqa: E402

KERNEL = textwrap.dedent("""\
    import numba


    @numba.njit(cache=True)
    def triple(x):
        return 3 * x
    """)

# a fresh interpreter: puts the locator in place for PKG, imports the kernel module, calls it,
# and prints whether it was loaded from the cache and which locator numba chose
RUN = textwrap.dedent("""\
    import json, sys
    from gapstop.engine.jit_cache import use_node_cache
    ok = use_node_cache(sys.argv[1], "d1g3st")
    sys.path.insert(0, sys.argv[2])
    import shippedpkg.sub.kern as m
    value = m.triple(7)
    print(json.dumps({"ok": ok, "value": value, "hits": sum(m.triple.stats.cache_hits.values()),
                      "misses": sum(m.triple.stats.cache_misses.values()),
                      "locator": type(m.triple._cache._impl._locator).__name__}))
    """)


def _session_copy(tmp: Path, name: str, kernel: str = KERNEL) -> Path:
    """The package as a Ray session would unpack it: under a folder of its own."""
    top = tmp / name
    sub = top / "shippedpkg" / "sub"
    sub.mkdir(parents=True)
    (top / "shippedpkg" / "__init__.py").write_text("")
    (sub / "__init__.py").write_text("")
    (sub / "kern.py").write_text(kernel)
    return top


def _run(top: Path, cache: Path) -> dict:
    env = {**os.environ, "NUMBA_CACHE_DIR": str(cache)}
    env.pop("PYTHONPATH", None)
    res = subprocess.run([sys.executable, "-c", RUN, str(top / "shippedpkg"), str(top)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    return json.loads(res.stdout.strip().splitlines()[-1])


def test_a_new_session_folder_loads_the_kernels_the_last_one_compiled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = _run(_session_copy(tmp_path, "session1"), cache)
    assert first == {"ok": True, "value": 21, "hits": 0, "misses": 1, "locator": "ShippedCodeLocator"}
    assert list((cache / "d1g3st" / "sub").glob("kern.triple-*.nbi"))
    second = _run(_session_copy(tmp_path, "session2"), cache)
    assert second["hits"] == 1 and second["misses"] == 0 and second["value"] == 21


def test_changed_source_under_the_same_digest_is_compiled_again(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _run(_session_copy(tmp_path, "session1"), cache)
    changed = _run(_session_copy(tmp_path, "session2", KERNEL.replace("3 * x", "4 * x")), cache)
    assert changed["value"] == 28 and changed["hits"] == 0


def test_the_default_locators_serve_files_outside_the_package(tmp_path: Path) -> None:
    top = _session_copy(tmp_path, "session1")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    code = RUN.replace('use_node_cache(sys.argv[1], "d1g3st")', 'use_node_cache(sys.argv[1] + "/elsewhere", "d1g3st")')
    res = subprocess.run([sys.executable, "-c", code, str(top / "shippedpkg"), str(top)],
                         env=env, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["ok"] and out["locator"] != "ShippedCodeLocator" and out["value"] == 21
    # no kernel was cached in the version's folder (it holds only the marker of its use)
    assert [p.name for p in (tmp_path / "cache" / "d1g3st").rglob("*")] == [MARKER]


def test_the_staged_package_puts_the_locator_in_place_on_import(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    from gapstop.cluster.connect import stage_code

    (tmp_path / "stage").mkdir()
    (tmp_path / "again").mkdir()
    pkg = stage_code(tmp_path / "stage")
    digest = code_digest_of_staged(pkg)
    code = textwrap.dedent(f"""\
        import sys
        sys.path.insert(0, {str(pkg.parent)!r})
        import gapstop
        from numba.core import caching
        impl = getattr(caching, "CacheImpl", None) or caching._CacheImpl
        print(gapstop.__file__, gapstop.CODE_DIGEST, impl._locator_classes[0].__name__)
        """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["NUMBA_CACHE_DIR"] = str(tmp_path / "cache")
    res = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    file, got_digest, first = res.stdout.split()
    assert Path(file).parent == pkg and got_digest == digest and first == "ShippedCodeLocator"
    assert (tmp_path / "cache" / digest / MARKER).is_file()   # this version's use is recorded
    # the digest names the code: another staging of the same code has the same one
    assert code_digest_of_staged(stage_code(tmp_path / "again")) == digest


def code_digest_of_staged(pkg: Path) -> str:
    text = (pkg / "__init__.py").read_text()
    return text.split('CODE_DIGEST = "', 1)[1].split('"', 1)[0]


def _version(root: Path, name: str, age_days: float, now: float, marked: bool = True) -> Path:
    d = root / name
    (d / "sub").mkdir(parents=True)
    (d / "sub" / "kern.nbi").write_text("x")
    if marked:
        (d / MARKER).touch()
        os.utime(d / MARKER, (now - age_days * 86400, now - age_days * 86400))
    return d


def test_prune_removes_only_old_marked_versions_beyond_the_most_recent(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    ages = {"a": 1, "b": 40, "c": 50, "d": 60, "e": 70, "f": 80, "g": 5}
    dirs = {name: _version(tmp_path, name, age, now) for name, age in ages.items()}
    other = _version(tmp_path, "someone-elses", 400, now, marked=False)   # e.g. another program's numba cache
    current = _version(tmp_path, "cur", 900, now)
    removed = prune(tmp_path, "cur", keep=4, min_age_s=30 * 86400, now=now)
    # kept: the current version, the 4 most recently used (a, g, b, c), and anything unmarked;
    # of the rest (d, e, f) all were unused for over 30 days
    assert sorted(p.name for p in removed) == ["d", "e", "f"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c", "cur", "g", "someone-elses"]
    assert other.exists() and current.exists() and dirs["c"].exists()


def test_prune_keeps_recently_used_versions_beyond_the_count(tmp_path: Path) -> None:
    now = 2_000_000_000.0
    for i, age in enumerate([1, 2, 3, 4, 5, 6, 29]):
        _version(tmp_path, f"v{i}", age, now)
    assert prune(tmp_path, "none", keep=2, min_age_s=30 * 86400, now=now) == []
    assert len(list(tmp_path.iterdir())) == 7
    assert prune(tmp_path / "missing", "none") == []
