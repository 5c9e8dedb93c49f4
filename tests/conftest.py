"""Every test runs in its own temporary directory: a command without ``--run-dir`` writes
``runs/<timestamp>`` below the working directory, which must not be the checkout."""

from __future__ import annotations

import signal

import pytest

# The Ctrl-C tests press Ctrl-C as a terminal does. A shell that starts the test run in the
# background without job control ignores SIGINT for it, and every process the tests start
# would inherit that: take Python's own handler back, as a run from a terminal has it.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
