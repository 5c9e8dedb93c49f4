"""A checkout as the package ``gapstop``: this folder is not code.

Installed, the checkout's folders are the package ``gapstop`` (``gapstop.engine``,
``gapstop.problems.pipeline``, ``gapstop.launch``, ...; pyproject.toml maps them). In a
checkout they sit at its root, so any process with the root on ``sys.path`` (``python
launch.py``, pytest, ``PYTHONPATH=<checkout>``, and the local Ray workers, to which Ray
passes the driver's script directory and working directory) finds this package first; it
points ``gapstop`` at the root. A regular package wins over the namespace package an
install leaves in site-packages, wherever each is on ``sys.path``, so a checkout's process
never mixes in an installed gapstop.

The public API is an attribute imported on first use, so ``import gapstop`` stays light:
``gapstop.plan_pipeline`` and ``gapstop.PipelinePlan`` (``problems/pipeline/api.py``).
"""

import os

__path__ = [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))]

_API = {"plan_pipeline": "gapstop.problems.pipeline.api", "PipelinePlan": "gapstop.problems.pipeline.api",
        "StagePlan": "gapstop.problems.pipeline.api"}
__all__ = sorted(_API)


def __getattr__(name: str) -> object:
    if name in _API:
        import importlib

        return getattr(importlib.import_module(_API[name]), name)
    raise AttributeError(f"module 'gapstop' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API])
