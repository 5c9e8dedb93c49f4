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
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path
from typing import Any


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

    base = getattr(caching, "_CacheLocator")
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
    locator._gapstop_package = pkg
    classes.insert(0, locator)
    return True
