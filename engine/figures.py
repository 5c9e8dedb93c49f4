"""Drawing a run: the figures of ``report --plot`` with matplotlib, the optional extra ``gapstop[plot]``.

matplotlib is imported only inside these functions (and only after :func:`require_matplotlib`),
so the core install never needs it. Figures are drawn on ``matplotlib.figure.Figure`` objects
directly, never through pyplot: no GUI backend is touched and no global figure state is kept.

The data comes from :mod:`engine.plots` (convergence) and ``problems/<p>/plots.py`` (plans);
nothing here computes a cost. A figure is a list of :class:`Panel`: one file holds them all,
stacked (``.png``, ``.svg``), or one SVG each with the report's text table (``.html``, a
single self-contained file whose bars carry their stage's modules as hover text).
"""

from __future__ import annotations

import html
import io
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

import numpy as np

from gapstop.engine.errors import InputError

if TYPE_CHECKING:
    from gapstop.engine.plots import Convergence
    from gapstop.problems.intraop.plots import CostlyOps, MemoryProfile
    from gapstop.problems.pipeline.plots import ChipGraph, StageBars

#: the file kinds ``--plot`` writes, by suffix
SUFFIXES = (".png", ".svg", ".html")
#: every panel is this wide; a PNG is ``WIDTH_IN * DPI`` pixels wide
WIDTH_IN = 10.0
DPI = 100
INSTALL_HINT = "--plot needs matplotlib, the optional extra gapstop[plot]: pip install 'gapstop[plot]'"


def require_matplotlib() -> None:
    """Raise :class:`InputError` (one line: how to install it) unless matplotlib imports."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise InputError(INSTALL_HINT) from None


def check_plot_path(path: str | Path) -> Path:
    """``path`` if its suffix names a kind :func:`write` writes, else :class:`InputError`."""
    p = Path(path)
    if p.suffix.lower() not in SUFFIXES:
        raise InputError(f"--plot: {p}: the suffix must be one of {', '.join(SUFFIXES)}")
    return p


@dataclass(frozen=True)
class Panel:
    """One figure: its title, height (inches) and a function drawing it on a figure-like
    (a Figure or a SubFigure), which returns hover texts by the gid of the artist they belong to."""

    title: str
    height_in: float
    draw: Callable[[Any], dict[str, str]] = field(repr=False)


def size_px(panels: Sequence[Panel]) -> tuple[int, int]:
    """(width, height) in pixels of the PNG that :func:`write` makes of ``panels``."""
    return round(WIDTH_IN * DPI), round(sum(p.height_in for p in panels) * DPI)


# ----------------------------------------------------------------------------- panels
def _gap_floor(gap: np.ndarray, target: float | None) -> float:
    """Where a gap of 0 (proven optimal) sits on the log axis: a decade below the smallest
    positive gap or target shown, and at most 1e-6."""
    pos = [g for g in gap[np.isfinite(gap)] if g > 0]
    if target:
        pos.append(target)
    return float(min([1e-6, *pos])) / 10


def convergence_panel(conv: Convergence, title: str = "") -> Panel:
    """Best objective and best lower bound against wall time, the gap on a log secondary
    axis, every improvement marked by the job that found it, the target gap and the stop."""

    def draw(fig: Any) -> dict[str, str]:
        ax = fig.add_subplot(1, 1, 1)
        end = conv.end_s
        markers = "osD^v<>ph*"
        jobs = sorted(set(conv.upper.job) | set(conv.lower.job),
                      key=lambda j: -(conv.upper.job.count(j) + conv.lower.job.count(j)))
        # a run with many replaced workers: the legend names the busiest jobs, the rest share a marker
        shown = {j: markers[i] for i, j in enumerate(jobs[:len(markers) - 1])}
        for curve, colour, name in ((conv.upper, "tab:red", "best objective"),
                                    (conv.lower, "tab:blue", "best lower bound")):
            if not len(curve.t_s):
                continue
            t = np.append(curve.t_s, max(end, curve.t_s[-1]))
            v = np.append(curve.value, curve.value[-1])
            ax.step(t, v, where="post", color=colour, lw=1.6, label=name)
            job = np.asarray(curve.job, dtype=object)
            for j in jobs:
                sel = job == j
                if sel.any():
                    ax.scatter(curve.t_s[sel], curve.value[sel], s=22, color=colour, zorder=3,
                               marker=shown.get(j, "."), edgecolors="black", linewidths=0.4)
        for j, m in shown.items():
            ax.scatter([], [], marker=m, color="white", edgecolors="black", label=j)
        if len(jobs) > len(shown):
            ax.scatter([], [], marker=".", color="grey", label=f"{len(jobs) - len(shown)} other jobs")
        for s in conv.sessions_s:
            ax.axvline(s, color="grey", ls=":", lw=1)
        ax.axvline(end, color="black", lw=1)
        ax.annotate(f"stopped: {conv.stopped_because}", (end, 0.0), xycoords=("data", "axes fraction"),
                    xytext=(-4, 4), textcoords="offset points", ha="right", va="bottom", fontsize=9)
        ax.set_xlabel("wall time (s)")
        ax.set_ylabel("objective / bound")
        ax.set_xlim(0, end * 1.02 if end > 0 else 1.0)
        ax2 = ax.twinx()
        gap = conv.gap
        if len(gap):
            floor = _gap_floor(gap, conv.target_gap)
            g = np.where(np.isfinite(gap), np.maximum(gap, floor), np.nan)
            ax2.step(np.append(conv.gap_t_s, max(end, conv.gap_t_s[-1])), np.append(g, g[-1]), where="post",
                     color="tab:green", lw=1, alpha=0.8, label="gap")
            ax2.set_yscale("log")
            if conv.target_gap:
                ax2.axhline(conv.target_gap, color="tab:green", ls="--", lw=1, label=f"target gap {conv.target_gap:g}")
            elif gap[-1] == 0:
                ax2.axhline(floor, color="tab:green", ls="--", lw=1, label="gap 0 (proven optimal)")
        ax2.set_ylabel("gap 1 - bound/objective (log)", color="tab:green")
        lines = ax.get_legend_handles_labels()
        more = ax2.get_legend_handles_labels()
        ax.legend(lines[0] + more[0], lines[1] + more[1], fontsize=7, loc="upper right",
                  bbox_to_anchor=(1.0, 0.9), ncols=2)
        ax.set_title(f"convergence{f': {title}' if title else ''}", fontsize=10, loc="left")
        return {}

    return Panel("convergence", 4.0, draw)


def _modules_text(mods: Sequence[str], width: int = 46) -> str:
    """The modules as fit in ``width`` characters, then how many there are in all."""
    text = ", ".join(mods) or "-"
    return text if len(text) <= width else text[:width - 8].rsplit(",", 1)[0] + f", ... ({len(mods)})"


def stages_panel(bars: StageBars, unit: str = "", side_table: bool = True) -> Panel:
    """One stacked bar per stage (compute, communication, overflow), the bottleneck marked,
    and each stage's modules in a side table (and as hover text in HTML)."""

    def draw(fig: Any) -> dict[str, str]:
        p = len(bars.cost)
        if side_table:
            ax, tab = fig.subplots(1, 2, width_ratios=[3, 2])
        else:
            ax, tab = fig.add_subplot(1, 1, 1), None
        x = np.arange(p)
        bottom = np.zeros(p)
        hover: dict[str, str] = {}
        for part, colour in (("compute", "tab:blue"), ("communication", "tab:orange"), ("overflow", "tab:red")):
            h = getattr(bars, part)
            rects = ax.bar(x, h, bottom=bottom, color=colour, label=part, width=0.7)
            for s, r in enumerate(rects):
                gid = f"stage-{s}-{part}"
                r.set_gid(gid)
                hover[gid] = (f"stage {s}: {part} {h[s]:.6g} of {bars.cost[s]:.6g}; {bars.ops[s]} ops; "
                              f"modules: {', '.join(bars.modules[s]) or '-'}")
            bottom = bottom + h
        b = bars.bottleneck
        if p:
            ax.annotate("bottleneck", (b, bars.cost[b]), xytext=(0, 4), textcoords="offset points",
                        ha="center", fontsize=8, fontweight="bold")
            ax.bar([b], [bars.cost[b]], width=0.78, fill=False, edgecolor="black", lw=1.5)
        ax.set_xticks(x, [str(s) for s in x] if p <= 32 else [str(s) if s % max(1, p // 16) == 0 else "" for s in x])
        if p:
            ax.set_ylim(0, float(bars.cost.max()) * 1.12 or 1.0)
        ax.set_xlabel("stage")
        ax.set_ylabel(f"stage cost{f' ({unit})' if unit else ''}")
        ax.legend(fontsize=7, loc="lower right")
        ax.set_title(f"pipeline plan: {p} stages" + ("" if bars.source == "evaluator" else " (from result.json)"),
                     fontsize=10, loc="left")
        if tab is not None:
            tab.axis("off")
            rows = min(p, 16)
            lines = [f"{s:>3}  {bars.ops[s]:>4} ops  {_modules_text(bars.modules[s])}" for s in range(rows)]
            if p > rows:
                lines.append(f"... {p - rows} more stages")
            tab.text(0, 1, "stage  ops  modules\n" + "\n".join(lines), va="top", ha="left", family="monospace",
                     fontsize=7, transform=tab.transAxes)
        return hover

    return Panel("pipeline plan", 4.0, draw)


def chips_panel(graph: ChipGraph, bars: StageBars) -> Panel:
    """The chips on a circle (clockwise, the ring's direction), each edge of the stage graph
    an arrow whose width grows with the bytes sent; the bottleneck chip is outlined."""

    def draw(fig: Any) -> dict[str, str]:
        ax = fig.add_subplot(1, 1, 1)
        c = graph.chips
        ang = np.pi / 2 - 2 * np.pi * np.arange(c) / max(c, 1)
        xy = np.column_stack([np.cos(ang), np.sin(ang)])
        top = float(graph.bytes.max()) if len(graph.bytes) else 1.0
        if graph.ring:  # the ring's own links, under the stage graph's edges
            ring = np.linspace(0, 2 * np.pi, 200)
            ax.plot(np.cos(ring), np.sin(ring), color="lightgrey", lw=6, zorder=0)
        for (a, b), nb in zip(graph.edges.tolist(), graph.bytes.tolist()):
            bend = 0.0 if (b - a) % c == 1 else 0.25  # ring neighbours straight, the rest curved
            ax.annotate("", xy=xy[b], xytext=xy[a],
                        arrowprops={"arrowstyle": "-|>", "lw": 0.6 + 2.4 * nb / top, "color": "tab:purple",
                                    "shrinkA": 14, "shrinkB": 14, "connectionstyle": f"arc3,rad={bend}"})
        cost = bars.cost if len(bars.cost) == c else np.full(c, np.nan)
        ax.scatter(xy[:, 0], xy[:, 1], s=900, color="white", zorder=3,
                   edgecolors=["tab:red" if i == bars.bottleneck else "grey" for i in range(c)],
                   linewidths=[2.5 if i == bars.bottleneck else 1.0 for i in range(c)])
        for i in range(c):
            ax.text(xy[i, 0], xy[i, 1], f"{i}\n{cost[i]:.4g}", ha="center", va="center", fontsize=7 if c <= 16 else 5,
                    zorder=4)
        ax.set_aspect("equal")
        ax.set_xlim(-1.4, 1.4)
        ax.set_ylim(-1.25, 1.25)
        ax.axis("off")
        kind = "ring" if graph.ring else "stage graph"
        # the axes are square: a title above them would be cut, so the figure-like holds it
        fig.suptitle(f"chips ({kind}, clockwise) with their stage costs, bottleneck in red; "
                     f"{len(graph.edges)} stage-graph edges, width ~ bytes sent", fontsize=10, x=0.12, ha="left")
        return {}

    return Panel("chips", 4.5, draw)


def memory_panel(prof: MemoryProfile) -> Panel:
    """Usage per time step of the chosen plan against the usage limit, peak marked."""

    def draw(fig: Any) -> dict[str, str]:
        ax = fig.add_subplot(1, 1, 1)
        t = np.arange(len(prof.usage))
        u = prof.usage.astype(np.float64)
        ax.fill_between(t, u, step="mid", color="tab:blue", alpha=0.35)
        ax.step(t, u, where="mid", color="tab:blue", lw=1, label="usage of the chosen plan")
        if prof.limit is not None:
            ax.axhline(prof.limit, color="tab:red", ls="--", lw=1.2, label=f"usage limit {prof.limit:,}")
        if len(u):
            k = prof.peak_step
            name = f" ({prof.step_names[k]})" if prof.step_names else ""
            share = f", {100 * u[k] / prof.limit:.1f}% of the limit" if prof.limit else ""
            ax.annotate(f"peak {int(prof.usage[k]):,} at step {k}{name}{share}", (k, u[k]), xytext=(0, 6),
                        textcoords="offset points", ha="center" if 0.2 < k / max(len(u), 1) < 0.8 else
                        ("left" if k < len(u) / 2 else "right"), fontsize=8)
            top = max(u.max(), prof.limit or 0.0)
            low = float(u.min())
            if low > 0.5 * top:
                # resident parameters make a high floor: show the steps' differences, not the floor
                ax.set_ylim(low - 0.25 * (top - low), top + 0.12 * (top - low))
                ax.text(0.005, 0.02, "(the axis does not start at 0)", transform=ax.transAxes, fontsize=7)
            else:
                ax.set_ylim(0, top * 1.12 if top > 0 else 1.0)
        ax.set_xlabel("time step")
        ax.set_ylabel("usage")
        ax.legend(fontsize=7, loc="lower right")
        ax.set_title("intra-op plan: memory per time step", fontsize=10, loc="left")
        return {}

    return Panel("memory", 3.5, draw)


def costly_panel(ops: CostlyOps) -> Panel:
    """The costliest ops' costs (strategy plus incoming edges), named by their configuration."""

    def draw(fig: Any) -> dict[str, str]:
        ax = fig.add_subplot(1, 1, 1)
        r = len(ops.node)
        y = np.arange(r)[::-1]
        ax.barh(y, ops.cost, color="tab:purple")
        ax.set_yticks(y, [lab if len(lab) <= 60 else lab[:57] + "..." for lab in ops.label], fontsize=7)
        shown = float(ops.cost.sum())
        share = f" ({100 * shown / ops.total:.1f}% of the total {ops.total:,})" if ops.total else ""
        ax.set_xlabel("cost: strategy + incoming edges")
        ax.set_title(f"costliest {r} ops{share}", fontsize=10, loc="left")
        fig.subplots_adjust(left=0.45, right=0.97, bottom=0.16)
        return {}

    return Panel("costliest ops", 3.5, draw)


# ----------------------------------------------------------------------------- files
def _svg_with_titles(svg: str, hover: dict[str, str]) -> str:
    """Give the SVG's groups named by gid a ``<title>`` child: a browser shows it on hover."""
    for gid, text in hover.items():
        svg = svg.replace(f'<g id="{gid}">', f'<g id="{gid}"><title>{html.escape(text)}</title>', 1)
    return svg


def _figure(width_in: float, height_in: float) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width_in, height_in), dpi=DPI, layout=None)


def _html(panels: Sequence[Panel], title: str, table: Sequence[str]) -> str:
    parts = []
    for p in panels:
        fig = _figure(WIDTH_IN, p.height_in)
        hover = p.draw(fig)
        buf = io.StringIO()
        fig.savefig(buf, format="svg", metadata={"Date": None})
        svg = buf.getvalue()
        parts.append(f"<figure>{_svg_with_titles(svg[svg.index('<svg'):], hover)}</figure>")
    return ("<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>" + html.escape(title) + "</title>"
            "<style>body{font-family:sans-serif;max-width:1040px;margin:auto}pre{font-size:12px;overflow-x:auto}"
            "figure{margin:0}</style></head><body>\n<h1>" + html.escape(title) + "</h1>\n" + "\n".join(parts)
            + "\n<h2>report</h2>\n<pre>" + html.escape("\n".join(table)) + "</pre>\n</body></html>\n")


def write(path: str | Path, panels: Sequence[Panel], *, title: str = "gapstop run",
          table: Sequence[str] = ()) -> Path:
    """Write ``panels`` to ``path``, the kind chosen by its suffix (see the module docstring).

    ``.png``/``.svg``: the panels stacked in one figure, :func:`size_px` pixels for a PNG.
    ``.html``: one inline SVG per panel and ``table`` (the report's lines) in one file.
    The file is written through a temporary file and a rename, so it is never half there.

    Raises:
        InputError: matplotlib is missing, or the suffix is none of :data:`SUFFIXES`.
    """
    require_matplotlib()
    p = check_plot_path(path)
    kind = p.suffix.lower()[1:]
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(f".{p.name}.{os.getpid()}.tmp")
    try:
        if kind == "html":
            tmp.write_text(_html(panels, title, table), encoding="utf-8")
        else:
            fig = _figure(WIDTH_IN, sum(q.height_in for q in panels))
            subs = fig.subfigures(len(panels), 1, height_ratios=[q.height_in for q in panels], squeeze=False)[:, 0]
            for sub, q in zip(subs, panels):
                q.draw(sub)
            # no bbox_inches="tight": the PNG is exactly size_px(panels)
            fig.savefig(tmp, format=kind, dpi=DPI, metadata={"Software": None} if kind == "png" else {"Date": None})
        tmp.replace(p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return p
