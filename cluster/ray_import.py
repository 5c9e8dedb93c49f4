"""Ray, imported for a driver that handles its own signals.

Ray's core worker installs a C++ failure-signal handler in every process it starts in, the
driver included. In the driver it catches SIGTERM too: it prints a stack trace and ends the
process with status 1, so a run stopped by a job runner during Ray's start lost its answer
and said nothing useful. The handler is read from the environment when Ray is first imported
(``RAY_DISABLE_FAILURE_SIGNAL_HANDLER``); :func:`import_ray` sets it for that import only, so
Ray's own processes, started later, keep their crash reports.
"""

from __future__ import annotations

import os
import sys
from typing import Any

_VAR = "RAY_DISABLE_FAILURE_SIGNAL_HANDLER"


def import_ray() -> Any:
    """``import ray``, without the failure-signal handler in this process if Ray is not yet imported."""
    if "ray" in sys.modules:
        return sys.modules["ray"]
    before = os.environ.get(_VAR)
    os.environ[_VAR] = "1"
    try:
        import ray
    finally:
        if before is None:
            del os.environ[_VAR]
        else:
            os.environ[_VAR] = before
    return ray
