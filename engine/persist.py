"""Reading input documents, writing result documents safely, naming run directories."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import time
import zlib
from pathlib import Path
from typing import Any

from engine.errors import InputError


def write_json_atomic(path: str | Path, doc: dict[str, Any]) -> None:
    """Write ``doc`` as JSON via a temporary file and rename, so readers never see half a file."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n")
    tmp.replace(p)


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
