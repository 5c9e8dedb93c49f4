"""Accelerator profiles: the numbers a per-op roofline needs, each with its public source.

A profile is a small TOML (or JSON) file::

    name = "a100-sxm-80gb"
    memory_bandwidth = 2.039e12   # bytes/s, device memory
    link_bandwidth = 3.0e11       # bytes/s, one direction of the stage-to-stage link
    memory = 80000000000          # bytes per device (per stage)
    op_overhead = 0.0             # seconds added per op (optional, default 0)

    [peak_flops]                  # FLOP/s per numpy-style dtype name
    float32 = 1.95e13
    bfloat16 = 3.12e14

    [sources]                     # field -> public source of the number (optional for own files)
    peak_flops = "NVIDIA A100 Tensor Core GPU datasheet, ..."

Units: FLOP/s, bytes/s, bytes, seconds. Shipped profiles live in ``problems/chips/`` and
are named by their file stem (``load_chip("a100-sxm-80gb")``); any other argument is read
as a file path. Every defect raises :class:`~engine.errors.InputError` with one line
``FILE: FIELD: problem``.
"""

from __future__ import annotations

import json
import math
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from gapstop.engine.errors import InputError

#: the directory of the shipped profiles (package data)
CHIPS_DIR = Path(__file__).resolve().parent / "chips"


@dataclass(frozen=True)
class ChipProfile:
    """One accelerator as the roofline sees it.

    Attributes:
        name: profile name.
        peak_flops: dtype name -> peak FLOP/s (dense, no sparsity).
        memory_bandwidth: device memory bandwidth, bytes/s.
        link_bandwidth: bandwidth of one direction of the link between two stages, bytes/s.
        memory: device memory per stage, bytes.
        op_overhead: fixed seconds added to every op (launch/dispatch cost); 0 if not given.
        sources: field -> public source of the number.
    """

    name: str
    peak_flops: Mapping[str, float]
    memory_bandwidth: float
    link_bandwidth: float
    memory: int
    op_overhead: float = 0.0
    sources: Mapping[str, str] = field(default_factory=dict)

    def flops_per_s(self, dtype: str) -> float:
        """Peak FLOP/s for ``dtype``.

        Fallback when the profile lists no peak for ``dtype``: the smallest peak it lists,
        so a missing figure never makes an op look faster than any listed precision runs.
        """
        peak = self.peak_flops.get(dtype)
        return float(peak) if peak is not None else float(min(self.peak_flops.values()))


def shipped_profiles() -> list[str]:
    """Names of the profiles shipped in ``problems/chips/``."""
    return sorted(p.stem for p in CHIPS_DIR.glob("*.toml")) + sorted(p.stem for p in CHIPS_DIR.glob("*.json"))


def _positive(path: Path, fld: str, value: Any, *, integer: bool = False, allow_zero: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(f"{path}: {fld}: expected a number, got {json.dumps(value, default=str)}")
    if not math.isfinite(value):
        raise InputError(f"{path}: {fld}: not finite ({value})")
    if value < 0 or (value == 0 and not allow_zero):
        raise InputError(f"{path}: {fld}: must be {'>= 0' if allow_zero else '> 0'}, got {value}")
    if integer and not float(value).is_integer():
        raise InputError(f"{path}: {fld}: expected an integer number of bytes, got {value}")
    return value


def chip_from_dict(doc: Any, source: str | Path = "<dict>") -> ChipProfile:
    """Validate a parsed profile document; see the module docstring for the fields."""
    path = Path(str(source))
    if not isinstance(doc, dict):
        raise InputError(f"{path}: top level: expected a table/object")
    for key in ("name", "peak_flops", "memory_bandwidth", "link_bandwidth", "memory"):
        if key not in doc:
            raise InputError(f"{path}: {key}: missing")
    name = doc["name"]
    if not isinstance(name, str) or not name:
        raise InputError(f"{path}: name: expected a non-empty string, got {json.dumps(name, default=str)}")
    peaks = doc["peak_flops"]
    if not isinstance(peaks, dict) or not peaks:
        raise InputError(f"{path}: peak_flops: expected a non-empty table of dtype = FLOP/s")
    peak_flops = {str(k): float(_positive(path, f"peak_flops.{k}", v)) for k, v in peaks.items()}
    sources = doc.get("sources", {})
    if not isinstance(sources, dict):
        raise InputError(f"{path}: sources: expected a table of field = source")
    for k, v in sources.items():
        if not isinstance(v, str):
            raise InputError(f"{path}: sources.{k}: expected a string, got {json.dumps(v, default=str)}")
    known = {"name", "peak_flops", "memory_bandwidth", "link_bandwidth", "memory", "op_overhead", "sources"}
    extra = sorted(set(doc) - known)
    if extra:
        raise InputError(f"{path}: {extra[0]}: unknown field (expected one of {sorted(known)})")
    return ChipProfile(
        name=name, peak_flops=peak_flops,
        memory_bandwidth=float(_positive(path, "memory_bandwidth", doc["memory_bandwidth"])),
        link_bandwidth=float(_positive(path, "link_bandwidth", doc["link_bandwidth"])),
        memory=int(_positive(path, "memory", doc["memory"], integer=True)),
        op_overhead=float(_positive(path, "op_overhead", doc.get("op_overhead", 0.0), allow_zero=True)),
        sources=dict(sources))


def _read(path: Path) -> Any:
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise InputError(f"{path}: chip profile: cannot read ({e.strerror or e})") from None
    try:
        if path.suffix.lower() == ".json":
            return json.loads(raw)
        return tomllib.loads(raw.decode())
    except (ValueError, UnicodeDecodeError) as e:  # TOMLDecodeError and JSONDecodeError are ValueErrors
        kind = "JSON" if path.suffix.lower() == ".json" else "TOML"
        raise InputError(f"{path}: chip profile: not valid {kind} ({str(e).splitlines()[0]})") from None


def load_chip(spec: str) -> ChipProfile:
    """A shipped profile by name (e.g. ``"a100-sxm-80gb"``) or a profile file (TOML, or JSON by suffix)."""
    p = Path(spec)
    if not p.is_file():
        shipped = [CHIPS_DIR / f"{spec}.toml", CHIPS_DIR / f"{spec}.json"]
        found = [s for s in shipped if s.is_file()] if "/" not in spec and spec else []
        if not found:
            raise InputError(f"{spec}: chip profile: no such file and not a shipped profile "
                             f"(shipped: {', '.join(shipped_profiles())})")
        p = found[0]
    return chip_from_dict(_read(p), p)
