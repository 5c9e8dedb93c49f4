"""Regenerate ``data/optima.json``: the brute-force optimum of every (graph, k) the tests ask for.

Runs the test files that call :func:`tests.problems.pipeline.reference.brute_force`, slow tests
included, with the table switched off, and writes every optimum they searched for::

    python -m tests.problems.pipeline.make_optima

Run it after adding brute-force cases or changing a graph generator (a case that is missing
from the table is still searched, only slower). It takes as long as the slow run of those files.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.problems.pipeline.reference import OPTIMA_FILE, RECORD_ENV

ROOT = Path(__file__).resolve().parents[3]


def users() -> list[str]:
    """The test files that use the brute-force reference."""
    out = []
    for f in sorted((ROOT / "tests").rglob("test_*.py")):
        text = f.read_text()
        if "brute_force" in text and ("pipeline import reference" in text or "pipeline.reference" in text):
            out.append(str(f.relative_to(ROOT)))
    return out


def main() -> int:
    OPTIMA_FILE.parent.mkdir(exist_ok=True)
    new = OPTIMA_FILE.with_suffix(".new")
    new.unlink(missing_ok=True)
    env = {**os.environ, RECORD_ENV: str(new)}
    # -m "": every test, slow ones included; failures do not stop the recording
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-m", "", "-p", "no:cacheprovider", *users()],
                         cwd=ROOT, env=env)
    if not new.exists():
        print("nothing recorded", file=sys.stderr)
        return 1
    new.replace(OPTIMA_FILE)
    print(f"wrote {OPTIMA_FILE} (pytest exit code {res.returncode})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
