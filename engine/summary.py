"""The few lines a person at a terminal reads at the end of a run.

A result document holds everything (the intra-op one a strategy per node: 122 KB on a
33k-node instance); a terminal wants the certificate and where the rest is. The
command prints these lines when its stdout is a terminal and the document itself
otherwise (or with ``--format json``). Problem-specific rows (the pipeline's stage table)
are appended by the caller.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any


def _num(x: Any) -> str:
    if x is None:
        return "none"
    if isinstance(x, int) and not isinstance(x, bool):
        return f"{x:,}" if abs(x) < 10**15 else f"{x:.6e}"
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)
    return f"{x:.6g}"


def summary_lines(doc: dict[str, Any], objective_key: str = "objective") -> list[str]:
    """Objective, bound, gap, stop reason, wall time and the result file of result document ``doc``."""
    obj = doc.get(objective_key)
    gap = doc.get("gap")
    lb_method = doc.get("lower_bound_method")
    what = doc.get("graph") or doc.get("instance") or "?"
    head = f"{doc.get('problem', '?')} {what}" + (f"  k={doc['k']}" if "k" in doc else "")
    lines = [head,
             f"  {objective_key:<12}{_num(obj)}" + (f"  (found by {doc['found_by']})" if doc.get("found_by") else ""),
             f"  {'lower bound':<12}{_num(doc.get('lower_bound'))}" + (f"  ({lb_method})" if lb_method else ""),
             f"  {'gap':<12}{'unknown' if gap is None else f'{100 * gap:.4f} %'}",
             f"  {'stopped':<12}{doc.get('stopped_because')} after {doc.get('elapsed_s')} s"]
    if doc.get("run_dir"):
        lines.append(f"  {'result':<12}{Path(doc['run_dir']) / 'result.json'}")
    return lines
