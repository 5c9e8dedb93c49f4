"""The single place gapstop starts or joins Ray."""

from __future__ import annotations

import contextlib
import hashlib
import ipaddress
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator

import ray

log = logging.getLogger("gapstop")

#: the folder of the package ``gapstop``: a checkout's root, or site-packages/gapstop when installed
ROOT = Path(__file__).resolve().parents[1]
#: subpackages of ``gapstop`` the workers import; shipped to a remote cluster with the job
CODE_PACKAGES = ("engine", "problems", "actors")


def connect(address: str | None = None, num_cpus: int | None = None, ship_code: bool | None = None,
            namespace: str | None = None) -> dict[str, Any]:
    """Start Ray locally (no address) or join a cluster (``"auto"``, ``"ray://host:10001"``, ``host:port``).

    Locally, Ray is sized to ``num_cpus`` (default: all cores) with no dashboard, and all
    its services listen on the loopback address only (:func:`_loopback_only`). On a
    cluster, the project's packages are shipped to the workers through the job's
    runtime environment (``ship_code``, default on for a remote address) so the cluster
    only needs Ray and the dependencies installed.

    Returns the cluster's resources (``{"CPU": ..., ...}``).
    """
    if ray.is_initialized():
        return dict(ray.cluster_resources())
    staging = None
    kwargs: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": False, "namespace": namespace,
                              "logging_level": logging.WARNING}
    if address is None:
        kwargs.update(num_cpus=num_cpus or os.cpu_count() or 1, include_dashboard=False,
                      _node_ip_address="127.0.0.1")
    else:
        kwargs["address"] = address
        if ship_code is None:
            ship_code = True
        if ship_code:
            staging = tempfile.mkdtemp(prefix="gapstop-ship-")
            kwargs["runtime_env"] = {"py_modules": [str(stage_code(Path(staging)))],
                                     "excludes": ["__pycache__", "*.nbi", "*.nbc"]}
    # Ray logs a WARNING on every start about token authentication being enabled; keep
    # the CLI's output to gapstop's own lines (errors still show).
    logging.getLogger("ray._private.authentication").setLevel(logging.ERROR)
    if address is None:
        with _loopback_only():
            ray.init(**kwargs)
        node_ip = ray.util.get_node_ip_address()
        if not ipaddress.ip_address(node_ip).is_loopback:
            log.warning("local Ray listens on %s, not on the loopback address only", node_ip)
    else:
        try:
            ray.init(**kwargs)
        finally:  # ray.init has uploaded the shipped code by now
            if staging is not None:
                shutil.rmtree(staging, ignore_errors=True)
    return dict(ray.cluster_resources())


def stage_code(dest: Path) -> Path:
    """Copy the workers' packages to ``dest/gapstop`` for a runtime environment's ``py_modules``.

    Ray names a shipped folder by its basename, and a checkout's root may have any name, so
    the folder is staged under the import name: the workers then import ``gapstop.engine``
    and so on, as the driver does. The copy is a regular package (its own ``__init__.py``),
    so on a node that also has gapstop installed it is not merged with the installed one.
    Returns ``dest/gapstop``.
    """
    pkg = dest / "gapstop"
    pkg.mkdir()
    for name in CODE_PACKAGES:
        shutil.copytree(ROOT / name, pkg / name, ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc"))
    (pkg / "__init__.py").write_text(_SHIPPED_INIT.format(digest=code_digest(pkg)))
    return pkg


#: the shipped package's ``__init__``: its kernels are cached per node across Ray sessions
#: (:mod:`gapstop.engine.jit_cache`), which must be in place before any kernel module is imported
_SHIPPED_INIT = '''"""gapstop, as shipped to the workers of a cluster."""

CODE_DIGEST = "{digest}"


def _cache_kernels_on_the_node() -> None:
    import os

    try:
        from gapstop.engine.jit_cache import use_node_cache
        use_node_cache(os.path.dirname(__file__), CODE_DIGEST)
    except Exception:  # a numba without the hook: kernels are cached in the session's folder
        pass


_cache_kernels_on_the_node()
'''


def code_digest(pkg: Path) -> str:
    """SHA-256 of the files under ``pkg`` (their paths and contents), first 16 hex digits."""
    h = hashlib.sha256()
    for f in sorted(p for p in pkg.rglob("*") if p.is_file()):
        h.update(f.relative_to(pkg).as_posix().encode() + b"\0")
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _loopback_only() -> Iterator[None]:
    """Have a local ``ray.init`` use the loopback address as the node's address.

    Ray's GCS, raylet, object manager and workers bind to the node's address, which by
    default on Linux is the machine's network address (reachable from the network,
    guarded only by Ray's token authentication). ``_node_ip_address="127.0.0.1"`` alone is
    turned back into that address unless Ray treats the machine as a single-node
    install, as it does on Windows and macOS (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER``);
    that switch is read once, at Ray's import, so it is set here for the start only
    (a later ``connect(address)`` in the same process must still find its cluster).
    ``connect`` checks the outcome and warns if Ray ignored it.
    """
    from ray._private import ray_constants

    previous = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        yield
    finally:
        ray_constants.ENABLE_RAY_CLUSTER = previous
