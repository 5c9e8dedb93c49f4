"""Every test runs in its own temporary directory: a command without ``--run-dir`` writes
``runs/<timestamp>`` below the working directory, which must not be the checkout."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
