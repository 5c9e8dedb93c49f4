"""Reading input documents, writing result documents safely, naming run directories."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable

from engine.errors import InputError


def write_json_atomic(path: str | Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` as JSON via a temporary file and rename, so readers never see half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(doc, indent=1) + "\n")
        tmp.replace(p)
    except BaseException:
        with contextlib.suppress(OSError):  # a full disk: do not leave half a file behind
            tmp.unlink(missing_ok=True)
        raise


class WriteFailures:
    """Write failures (full disk, read-only or missing directory) as one line each, not as a crash.

    A run must not lose its best result because a file could not be written: callers
    write through :meth:`write_json` (or call :meth:`failed` from their own ``except
    OSError``) and go on. The first failure in each directory is one line,
    ``warning: cannot write FILE: REASON; the run goes on``, passed to ``emit`` (default:
    stderr) and kept in :attr:`lines`; later failures there (a full disk or a read-only run
    directory fails every file in it) are only counted. Thread-safe.
    """

    def __init__(self, emit: Callable[[str], None] | None = None) -> None:
        self.lines: list[str] = []
        self.count = 0
        self._dirs: set[str] = set()
        self._lock = threading.Lock()
        self._emit = emit if emit is not None else _to_stderr

    def failed(self, path: str | Path, error: OSError) -> None:
        with self._lock:
            self.count += 1
            where = str(Path(path).parent)
            if where in self._dirs:
                return
            self._dirs.add(where)
            line = f"warning: cannot write {path}: {error.strerror or error}; the run goes on"
            self.lines.append(line)
        self._emit(line)

    def write_json(self, path: str | Path, doc: dict[str, Any]) -> bool:
        """:func:`write_json_atomic`; False (and reported) if it failed."""
        try:
            write_json_atomic(path, doc)
            return True
        except OSError as e:
            self.failed(path, e)
            return False


def _to_stderr(line: str) -> None:
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # stderr itself is gone: nothing more can be said
        pass


def parse_json_bytes(path: str | Path, raw: bytes) -> Any:
    """Parse JSON bytes, gunzipping them first if they start with the gzip magic.

    Raises:
        InputError: one line naming ``path``: not gzip, or not JSON.
    """
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
        return json.loads(raw)
    except (OSError, EOFError) as e:
        raise InputError(f"{path}: not a valid gzip file: {e}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: not valid JSON: {e}") from None


def read_json_file(path: str | Path) -> Any:
    """Read a ``.json`` or ``.json.gz`` file; every failure is a one-line InputError naming it."""
    try:
        raw = Path(path).read_bytes()
    except OSError as e:
        raise InputError(f"{path}: cannot read file: {e.strerror or e}") from None
    return parse_json_bytes(path, raw)


def file_digest(path: str | Path) -> str:
    """sha256 of a file's bytes (identifies the problem a run directory belongs to)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def default_run_dir(root: str | Path = "runs") -> Path:
    """``runs/<UTC timestamp>``, made unique with a suffix if it exists."""
    base = Path(root) / time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    p, i = base, 1
    while p.exists():
        p = base.with_name(f"{base.name}-{i}")
        i += 1
    return p
