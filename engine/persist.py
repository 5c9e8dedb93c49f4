"""Reading input documents, writing result documents safely, naming run directories."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import time
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
