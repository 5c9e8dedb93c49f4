"""``report``: the certificate and the convergence table of a run directory, and its
figures (``report --plot``, ``solve --plot``). The problem's own panels (its plan) come
from its definition's ``plan_panels(doc, config, figures)``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from gapstop.engine.cli import user_errors
from gapstop.engine.errors import InputError


def _definition(name: Any) -> Any:
    from gapstop.problems import registry

    try:
        return registry.get(str(name))
    except KeyError:
        return None


def report_lines(run_dir: str | Path) -> list[str]:
    """The certificate and the convergence table of a run directory, as ``report`` prints them."""
    from gapstop.engine.plots import read_run
    from gapstop.engine.summary import summary_lines

    doc, events, _ = read_run(run_dir)
    lines = summary_lines(doc, "objective" if "objective" in doc else "cost")  # as a solve's summary
    if doc.get("block_costs"):
        lines.append("  stage costs " + ", ".join(f"{c:.6g}" for c in doc["block_costs"]))
    for b in doc.get("bounds", []):
        v = "-" if b["value"] is None else f"{b['value']:.6g}"
        lines.append(f"  bound {b['method']:<28} {v:>14}  {b['status']:<10} {b['wall_s']:8.2f}s  {b.get('solver', '')}")
    if events:
        lines.append(f"{'t_s':>9}  {'kind':<5}  {'value':>14}  {'method':<28} {'worker':<22} status")
        lines.extend(f"{e['t_s']:9.2f}  {e['kind']:<5}  {e['value']:14.6g}  {e['method']:<28} "
                     f"{e['worker']:<22} {e['status']}" for e in events)
    return lines


def check_plot(plot: str | None) -> None:
    """Refuse a ``--plot`` that cannot be written before any work starts (exit 2)."""
    if plot is not None:
        from gapstop.engine.figures import check_plot_path, require_matplotlib

        require_matplotlib()
        check_plot_path(plot)


def plot_run(run_dir: str | Path, plot: str) -> None:
    """Write the figures of a run directory to ``plot``: convergence, then the problem's plan
    (a plan that cannot be drawn, e.g. no feasible solution, is one line on stderr)."""
    from gapstop.engine import figures
    from gapstop.engine.plots import convergence, read_run

    figures.require_matplotlib()
    figures.check_plot_path(plot)
    doc, events, config = read_run(run_dir)
    title = f"{doc.get('problem')} {doc.get('graph') or doc.get('instance') or ''}" \
            + (f"  k={doc['k']}" if "k" in doc else "")
    panels = [figures.convergence_panel(convergence(events, doc, config), title)]
    try:
        definition = _definition(doc.get("problem"))
        if definition is not None and hasattr(definition, "plan_panels"):
            panels += definition.plan_panels(doc, config, figures)
    except InputError as e:
        click.echo(f"note: no plan figure: {e}", err=True)
    try:
        figures.write(plot, panels, title=title, table=report_lines(run_dir))
    except OSError as e:
        raise InputError(f"--plot: cannot write {plot}: {e}") from None


@click.command("report")
@click.argument("run_dir", type=click.Path(file_okay=False))
@click.option("--plot", type=click.Path(dir_okay=False), default=None,
              help="Also draw the run: FILE.png, .svg or .html (needs gapstop[plot]).")
@user_errors
def report(run_dir: str, plot: str | None) -> None:
    """Print the certificate and the convergence table of a run directory (and draw it with --plot)."""
    check_plot(plot)
    for line in report_lines(run_dir):
        click.echo(line)
    if plot is not None:
        plot_run(run_dir, plot)
