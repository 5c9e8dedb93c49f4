"""gapstop command line: ``python launch.py <problem> <command> ...`` (also the ``gapstop`` script).

Only parses options, loads the problem, and hands over to the solver/bound code;
no algorithm logic lives here. Bad input ends with a one-line ``error: ...`` on
stderr and exit code 2; a run that finds nothing feasible exits with 1.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any, Callable

import click

from engine.errors import InputError


def _user_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn InputError (and unreadable files) into one line on stderr and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as e:
            click.echo(f"error: {e}", err=True)
            sys.exit(2)

    return wrapper


def _write_json(path: str | None, doc: dict[str, Any]) -> None:
    text = json.dumps(doc, indent=1)
    if path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        tmp = p.with_name(p.name + ".tmp")
        tmp.write_text(text + "\n")
        tmp.replace(p)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """gapstop: partition ML computation graphs and certify how good the answer is."""


# ----------------------------------------------------------------------------- pipeline
@main.group()
def pipeline() -> None:
    """Max-throughput pipeline partitioning (MTPP)."""


# ----------------------------------------------------------------------------- intraop
@main.group()
def intraop() -> None:
    """Intra-operator sharding strategies (IOPDDL contest problem)."""


if __name__ == "__main__":
    main()
