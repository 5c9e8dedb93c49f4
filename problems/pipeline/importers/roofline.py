"""Per-op cost on a chip profile, and the pipeline graph document an importer writes.

Roofline per op, in microseconds (the time unit of imported graphs)::

    work = 1e6 * (max(flops / peak(dtype), bytes / memory_bandwidth) + op_overhead)

with ``peak`` from :meth:`problems.chip.ChipProfile.flops_per_s`. Views (kind ``"view"``)
move no data and cost 0, overhead included. The stage-to-stage bandwidth of the graph is the
profile's link bandwidth in bytes/µs, its per-stage memory the profile's memory.
"""

from __future__ import annotations

import importlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from gapstop.engine.errors import InputError
from gapstop.problems.chip import ChipProfile

#: the op kinds of the ``graph.nodes.ops`` metadata
KINDS = ("gemm", "conv", "elementwise", "reduction", "norm", "softmax", "pool", "embedding", "view", "other",
         "unknown")
US_PER_S = 1e6


def optional_import(module: str, hint: str) -> Any:
    """An optional extra's module, imported on first use; ``InputError(hint)`` (how to install it) if absent."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise InputError(hint) from None


def classify(op: str, table: tuple[tuple[set[str], str], ...]) -> str:
    """The kind of the first ``(names, kind)`` row whose names hold ``op``; ``"unknown"`` if none."""
    return next((kind for names, kind in table if op in names), "unknown")


def op_work_us(chip: ChipProfile, kind: str, flops: float, nbytes: int, dtype: str) -> float:
    """Roofline time of one op in µs (0 for views)."""
    if kind == "view":
        return 0.0
    t = max(flops / chip.flops_per_s(dtype), nbytes / chip.memory_bandwidth) + chip.op_overhead
    return US_PER_S * t


@dataclass
class GraphBuilder:
    """Collects nodes (one tensor-producing op each) and their edges into a graph document.

    ``add`` returns the node index; ``edge`` records that node ``v`` reads ``u``'s output.
    """

    chip: ChipProfile
    names: list[str] = field(default_factory=list)
    work: list[float] = field(default_factory=list)
    size_param: list[int] = field(default_factory=list)
    size_out: list[int] = field(default_factory=list)
    ops: list[dict[str, Any] | None] = field(default_factory=list)
    edges: set[tuple[int, int]] = field(default_factory=set)
    unknown: Counter[str] = field(default_factory=Counter)

    def add(self, op: dict[str, Any], size_param: int, size_out: int, dtype: str) -> int:
        if op["kind"] == "unknown":
            self.unknown[op["op"]] += 1
        self.names.append(op["name"])
        self.work.append(op_work_us(self.chip, op["kind"], op["flops"], op["bytes"], dtype))
        self.size_param.append(int(size_param))
        self.size_out.append(int(size_out))
        self.ops.append(op)
        return len(self.names) - 1

    def edge(self, u: int, v: int) -> None:
        if u != v:
            self.edges.add((u, v))

    def document(self, name: str, meta: dict[str, Any]) -> dict[str, Any]:
        """The pipeline graph document (see :mod:`problems.pipeline.io`)."""
        return {"graph": {"name": name,
                          "nodes": {"names": self.names, "work": self.work, "size_param": self.size_param,
                                    "size_out": self.size_out, "ops": self.ops},
                          "edges": [list(e) for e in sorted(self.edges)]},
                "bandwidth": self.chip.link_bandwidth / US_PER_S,
                "memory": int(self.chip.memory),
                "meta": {**meta, "chip": self.chip.name, "time_unit": "us",
                         "total_flops": float(sum(o["flops"] for o in self.ops if o)),
                         "unknown_ops": dict(sorted(self.unknown.items()))}}

    def warning(self, source: str) -> str | None:
        """One line listing the unknown op types with their counts, or None."""
        if not self.unknown:
            return None
        listed = ", ".join(f"{op} x{c}" for op, c in sorted(self.unknown.items()))
        return (f"warning: {source}: {sum(self.unknown.values())} ops of unknown type, charged as memory-bound "
                f"by their bytes: {listed}")
