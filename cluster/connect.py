"""The single place gapstop starts or joins Ray."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import ray

ROOT = Path(__file__).resolve().parents[1]
#: packages the workers import; shipped to a remote cluster with the job
CODE_PACKAGES = ("engine", "problems", "actors")


def connect(address: str | None = None, num_cpus: int | None = None, ship_code: bool | None = None,
            namespace: str | None = None) -> dict[str, Any]:
    """Start Ray locally (no address) or join a cluster (``"auto"``, ``"ray://host:10001"``, ``host:port``).

    Locally, Ray is sized to ``num_cpus`` (default: all cores) with no dashboard. On a
    cluster, the project's packages are shipped to the workers through the job's
    runtime environment (``ship_code``, default on for a remote address) so the cluster
    only needs Ray and the dependencies installed.

    Returns the cluster's resources (``{"CPU": ..., ...}``).
    """
    if ray.is_initialized():
        return dict(ray.cluster_resources())
    kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "namespace": namespace,
                              "logging_level": logging.WARNING}
    if address is None:
        kwargs.update(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False)
    else:
        kwargs["address"] = address
        if ship_code is None:
            ship_code = True
        if ship_code:
            kwargs["runtime_env"] = {"py_modules": [str(ROOT / p) for p in CODE_PACKAGES],
                                     "excludes": ["__pycache__", "*.nbi", "*.nbc"]}
    # Ray logs a WARNING on every start about token authentication being enabled; keep
    # the CLI's output to gapstop's own lines (errors still show).
    logging.getLogger("ray._private.authentication").setLevel(logging.ERROR)
    ray.init(**kwargs)
    return dict(ray.cluster_resources())
