"""Reading input documents and writing result documents safely."""

from __future__ import annotations

import gzip
import json
import os
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
