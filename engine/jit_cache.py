"""Where the compiled kernels of code shipped to a cluster are cached: a node-local folder named
by the code's digest, so that a new Ray session on the same node loads them instead of
compiling them again.

Numba caches a ``cache=True`` kernel next to its source file, keyed by the file's path. Code
shipped to a cluster (``cluster/connect.py``) is unpacked under the Ray session's own folder,
so every new session (a restarted cluster, a new local cluster) would compile every kernel
again on every node: 20-30 s of a worker's time on two cores before its first evaluation.
:func:`use_node_cache` (called by the shipped package's ``__init__``, before any kernel
module is imported) puts a locator in front of numba's own: for a source file inside the
shipped package it keeps the cache in ``ROOT/DIGEST/<the file's folder in the package>``,
where ``ROOT`` is ``$NUMBA_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/gapstop/numba`` (default
``~/.cache/gapstop/numba``), and stamps a source by its content. Numba's own index still
checks its version and the machine's CPU per entry, so a cache shared by unlike nodes is
safe. Files outside the package, an unwritable folder, or a numba without the hook: numba's
locators as before (compiled in the session's folder).

Each code version's folder carries a marker file, touched whenever a process puts the locator
in place; the folders of other versions beyond the :data:`KEEP_VERSIONS` most recently used
that have not been used for :data:`KEEP_UNUSED_DAYS` are removed then (:func:`prune`). Only
marked folders are ever removed: ``$NUMBA_CACHE_DIR`` may hold other programs' caches.
"""

from __future__ import annotations

import functools
import hashlib
import os
import shutil
import time
from pathlib import Path
from typing import Any

#: Kernel folders of code versions kept on a node whatever their age: the most recently used.
KEEP_VERSIONS = 4
#: A folder beyond those is removed once no process has used its version for this long. (About
#: 2-5 MB per version; a cluster redeployed daily would otherwise grow by a gigabyte a year.)
KEEP_UNUSED_DAYS = 30.0
#: The file that marks a folder as one of these (its mtime: the version's last use).
MARKER = ".gapstop-kernels"


def node_cache_root() -> Path:
    """The node-local folder under which shipped code's kernels are cached."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "gapstop" / "numba"


@functools.lru_cache(maxsize=None)
def _content_stamp(path: str) -> str:
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def make_locator(package_dir: str | Path, digest: str) -> type:
    """A numba cache locator class for source files under ``package_dir`` (the shipped
    package, whose contents hash to ``digest``)."""
    from numba.core import caching

    base = caching._CacheLocator
    pkg = os.path.realpath(package_dir)
    root = node_cache_root() / digest

    class ShippedCodeLocator(base):  # type: ignore[misc, valid-type]
        def __init__(self, py_func: Any, py_file: str) -> None:
            self._py_file = py_file
            self._lineno = py_func.__code__.co_firstlineno
            rel = os.path.relpath(os.path.dirname(os.path.realpath(py_file)), pkg)
            self._cache_path = str(root / rel)

        def get_cache_path(self) -> str:
            return self._cache_path

        def get_source_stamp(self) -> str:
            return _content_stamp(self._py_file)

        def get_disambiguator(self) -> str:
            return str(self._lineno)

        @classmethod
        def from_function(cls, py_func: Any, py_file: str) -> Any:
            real = os.path.realpath(py_file)
            if not os.path.isfile(real) or os.path.commonpath([real, pkg]) != pkg:
                return None
            self = cls(py_func, real)
            try:
                self.ensure_cache_path()
            except OSError:
                return None
            return self

    return ShippedCodeLocator


def prune(root: Path, current: str, *, keep: int = KEEP_VERSIONS, min_age_s: float = KEEP_UNUSED_DAYS * 86400.0,
          now: float | None = None) -> list[Path]:
    """Remove the kernel folders under ``root`` of versions other than ``current`` that are
    beyond the ``keep`` most recently used (the mtime of their :data:`MARKER`) and unused for
    ``min_age_s`` seconds. Folders without the marker are never touched; a folder that cannot
    be removed is left. Returns the folders removed."""
    now = time.time() if now is None else now
    used: list[tuple[float, Path]] = []
    try:
        entries = list(root.iterdir())
    except OSError:
        return []
    for d in entries:
        try:
            if d.name != current and d.is_dir() and not d.is_symlink():
                used.append(((d / MARKER).stat().st_mtime, d))
        except OSError:   # no marker: not ours
            continue
    used.sort(reverse=True)
    removed = []
    for last, d in used[keep:]:
        if now - last >= min_age_s:
            shutil.rmtree(d, ignore_errors=True)
            if not d.exists():
                removed.append(d)
    return removed


def _mark_used(root: Path, digest: str) -> None:
    """Create or touch this version's marker, then prune the others (best effort)."""
    try:
        folder = root / digest
        folder.mkdir(parents=True, exist_ok=True)
        (folder / MARKER).touch()
        prune(root, digest)
    except OSError:
        pass


def use_node_cache(package_dir: str | Path, digest: str) -> bool:
    """Have numba cache the kernels of ``package_dir`` in the node-local folder (module doc).

    Returns whether the locator is in place (False: this numba has no such hook, and kernels
    are cached as numba does by default)."""
    from numba.core import caching

    impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
    classes = getattr(impl, "_locator_classes", None)
    if not isinstance(classes, list) or not hasattr(caching, "_CacheLocator"):
        return False
    pkg = os.path.realpath(package_dir)
    classes[:] = [c for c in classes if getattr(c, "_gapstop_package", None) != pkg]
    locator = make_locator(pkg, digest)
    setattr(locator, "_gapstop_package", pkg)  # noqa: B010 - marks the class for the filter above
    classes.insert(0, locator)
    _mark_used(node_cache_root(), digest)
    return True
