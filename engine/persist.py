"""Reading input documents, writing result documents safely, naming run directories."""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import os
import sys
import threading
import time
import zlib
from pathlib import Path
from typing import Any, Callable

from gapstop.engine.errors import InputError


def write_json_atomic(path: str | Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` as JSON via a temporary file and rename, so readers never see half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    # one temporary name per thread: the deadline's watchdog may write the file the run's own
    # finish is writing
    tmp = p.with_name(f".{p.name}.{os.getpid()}.{threading.get_ident()}.tmp")
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


#: Largest input document accepted, in bytes after decompression (1 GiB, ten times the
#: largest public contest instance): parsing holds several times this in Python objects, so
#: a larger file, or a small gzip file that inflates past it, is refused before it exhausts
#: memory. ``GAPSTOP_MAX_INPUT_BYTES`` overrides it.
MAX_INPUT_BYTES = 1 << 30

_CHUNK = 1 << 20


def max_input_bytes() -> int:
    """:data:`MAX_INPUT_BYTES`, or ``$GAPSTOP_MAX_INPUT_BYTES`` if set (a positive integer)."""
    env = os.environ.get("GAPSTOP_MAX_INPUT_BYTES")
    if env is None:
        return MAX_INPUT_BYTES
    try:
        value = int(env)
    except ValueError:
        value = 0
    if value < 1:
        raise InputError(f"GAPSTOP_MAX_INPUT_BYTES: expected a positive integer, got {env!r}")
    return value


def _limit(cap: int) -> str:
    return f"the input size limit of {cap} bytes (GAPSTOP_MAX_INPUT_BYTES)"


def _gunzip_capped(path: str | Path, raw: bytes, cap: int) -> bytes:
    """Decompress ``raw`` in chunks, refusing it as soon as the output passes ``cap`` bytes."""
    parts, total = [], 0
    with gzip.GzipFile(fileobj=io.BytesIO(raw)) as f:
        while chunk := f.read(_CHUNK):
            total += len(chunk)
            if total > cap:
                raise InputError(f"{path}: decompresses to more than {_limit(cap)}")
            parts.append(chunk)
    return b"".join(parts)


def parse_json_bytes(path: str | Path, raw: bytes) -> Any:
    """Parse JSON bytes, gunzipping them first if they start with the gzip magic.

    Raises:
        InputError: one line naming ``path``: not gzip, not JSON (an integer of more
            digits than Python converts counts as such), larger than :func:`max_input_bytes`
            once decompressed, or nested too deeply to parse.
    """
    cap = max_input_bytes()
    try:
        if raw[:2] == b"\x1f\x8b":
            raw = _gunzip_capped(path, raw, cap)
        if len(raw) > cap:
            raise InputError(f"{path}: larger than {_limit(cap)}")
        return json.loads(raw)
    except InputError:
        raise
    except (OSError, EOFError, zlib.error) as e:
        raise InputError(f"{path}: not a valid gzip file: {e}") from None
    except ValueError as e:  # also UnicodeDecodeError, and Python's cap on an integer's digits
        raise InputError(f"{path}: not valid JSON: {str(e).split(';')[0]}") from None
    except RecursionError:
        raise InputError(f"{path}: JSON nested too deeply to parse") from None


def read_input_bytes(path: str | Path) -> bytes:
    """A file's bytes, refusing files larger than :func:`max_input_bytes` before reading them.

    Raises:
        InputError: one line naming ``path``: unreadable or too large.
    """
    cap = max_input_bytes()
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size > cap:
                raise InputError(f"{path}: {size} bytes, larger than {_limit(cap)}")
            raw = f.read(cap + 1)   # st_size can understate (a pipe, a growing file)
    except OSError as e:
        raise InputError(f"{path}: cannot read file: {e.strerror or e}") from None
    if len(raw) > cap:
        raise InputError(f"{path}: larger than {_limit(cap)}")
    return raw


def read_json_file(path: str | Path) -> Any:
    """Read a ``.json`` or ``.json.gz`` file; every failure is a one-line InputError naming it."""
    return parse_json_bytes(path, read_input_bytes(path))


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
