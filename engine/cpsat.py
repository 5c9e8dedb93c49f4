"""OR-Tools' CP-SAT Python module, imported without pandas.

``ortools.sat.python.cp_model`` imports pandas at its top for its ``*_series`` helpers
(``new_int_var_series`` and the like), which gapstop never calls. pandas is two thirds of
the module's import: 0.35 s of CPU with it, 0.11 s without (docs/decisions/0003-cpsat-without-pandas.md). That
import is on the critical path of every run that the exact MIP proves within seconds (the
MIP cannot start before it), and of every bound actor's start.

:func:`load` imports the module through the normal import machinery (module locks
included), with one difference: the module's own ``import pandas`` gets a stand-in whose
attributes are empty placeholder classes, which is all the module's top level needs
(type aliases and annotations). Nothing else sees the stand-in: it is handed out by the
module's private copy of the builtins, not through ``sys.modules``. After the import the
module's ``pd`` is a proxy that imports the real pandas at its first use, so the
``*_series`` helpers still work. If pandas or the module is already imported, nothing
changes.
"""

from __future__ import annotations

import builtins
import importlib
import sys
import threading
import types
from typing import Any

_MODULE = "ortools.sat.python.cp_model"
_lock = threading.Lock()


class _LazyPandas(types.ModuleType):
    """pandas, imported at the first attribute read."""

    def __getattr__(self, name: str) -> Any:
        return getattr(importlib.import_module("pandas"), name)


class _StandIn(types.ModuleType):
    """pandas while the module's top level runs: any attribute is a placeholder class of that name."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        placeholder = type(name, (), {"__module__": "pandas"})
        setattr(self, name, placeholder)
        return placeholder


class _Loader:
    """The module's own loader, run with builtins whose ``__import__`` gives the stand-in for pandas."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.stand_in = _StandIn("pandas")

    def _import(self, name: str, globals: Any = None, locals: Any = None, fromlist: Any = (),
                level: int = 0) -> Any:
        if name == "pandas" and level == 0 and "pandas" not in sys.modules:
            return self.stand_in
        return builtins.__import__(name, globals, locals, fromlist, level)

    def create_module(self, spec: Any) -> Any:
        return self.inner.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        own = dict(builtins.__dict__)
        own["__import__"] = self._import
        module.__dict__["__builtins__"] = own
        self.inner.exec_module(module)
        if module.__dict__.get("pd") is self.stand_in:
            module.__dict__["pd"] = _LazyPandas("pandas")
        own["__import__"] = builtins.__import__  # later imports inside the module: the usual ones

    def __getattr__(self, name: str) -> Any:  # get_source, get_code, ...: the module's own loader
        return getattr(self.inner, name)


class _Finder:
    """Finds the module as usual and wraps its loader (installed only while :func:`load` runs)."""

    @staticmethod
    def find_spec(name: str, path: Any = None, target: Any = None) -> Any:
        if name != _MODULE:
            return None
        for finder in sys.meta_path:
            if finder is _Finder or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is None or not hasattr(spec.loader, "exec_module"):
                    return spec
                spec.loader = _Loader(spec.loader)  # type: ignore[assignment]  # a Loader by duck typing
                return spec
        return None


def load() -> types.ModuleType:
    """The ``ortools.sat.python.cp_model`` module (imported once, without pandas when it can be)."""
    module = sys.modules.get(_MODULE)
    if module is not None:
        return module
    with _lock:
        if _MODULE in sys.modules or "pandas" in sys.modules:
            return importlib.import_module(_MODULE)
        sys.meta_path.insert(0, _Finder)
        try:
            return importlib.import_module(_MODULE)
        finally:
            sys.meta_path.remove(_Finder)
