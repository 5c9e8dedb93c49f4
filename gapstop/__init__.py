"""gapstop: certified partitions of ML computation graphs.

The package's folders sit at the checkout's root (``engine/``, ``actors/``, ``cluster/``,
``problems/``, ``launch.py``); this folder holds relative links to them, so a checkout,
an installed wheel and static tools (mypy, pyright, an IDE) all see the same package
``gapstop`` with ``gapstop.engine``, ``gapstop.problems.pipeline``, ``gapstop.launch``, ...

The public API is an attribute imported on first use, so ``import gapstop`` stays light:
``gapstop.plan_pipeline`` and ``gapstop.PipelinePlan`` (``problems/pipeline/api.py``).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gapstop.problems.pipeline.api import PipelinePlan as PipelinePlan
    from gapstop.problems.pipeline.api import StagePlan as StagePlan
    from gapstop.problems.pipeline.api import plan_pipeline as plan_pipeline

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
