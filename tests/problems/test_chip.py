"""Chip profiles: the shipped files load and cite a source per number; bad files fail in one line."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from gapstop.engine.errors import InputError
from gapstop.problems.chip import CHIPS_DIR, ChipProfile, chip_from_dict, load_chip, shipped_profiles

GOOD = """name = "toy"
memory_bandwidth = 1.0e12
link_bandwidth = 1.0e11
memory = 1000
[peak_flops]
float32 = 1.0e13
bfloat16 = 4.0e13
"""


def _write(tmp_path: Path, text: str, name: str = "chip.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_shipped_profiles_load_and_cite_a_source_for_every_number() -> None:
    names = shipped_profiles()
    assert {"a100-sxm-80gb", "h100-sxm", "tpu-v4"} <= set(names)
    for name in names:
        chip = load_chip(name)
        assert chip.name == name
        for fld in ("peak_flops", "memory_bandwidth", "link_bandwidth", "memory"):
            assert chip.sources.get(fld, "").strip(), (name, fld)
        if chip.op_overhead:
            assert chip.sources.get("op_overhead"), name


def test_a100_numbers_match_the_datasheet() -> None:
    c = load_chip("a100-sxm-80gb")
    assert c.peak_flops["bfloat16"] == 312e12 and c.peak_flops["float32"] == 19.5e12
    assert c.memory_bandwidth == 2.039e12 and c.link_bandwidth == 300e9 and c.memory == 80 * 10**9
    assert c.op_overhead == 0.0


def test_profile_from_a_file_path_toml_and_json(tmp_path: Path) -> None:
    t = load_chip(str(_write(tmp_path, GOOD)))
    j = load_chip(str(_write(tmp_path, json.dumps(tomllib.loads(GOOD)), "chip.json")))
    assert t == j == ChipProfile("toy", {"float32": 1e13, "bfloat16": 4e13}, 1e12, 1e11, 1000)


def test_missing_dtype_falls_back_to_the_smallest_peak() -> None:
    c = chip_from_dict(tomllib.loads(GOOD))
    assert c.flops_per_s("bfloat16") == 4e13
    assert c.flops_per_s("int64") == 1e13


def _bad(doc_text: str, tmp_path: Path) -> str:
    p = _write(tmp_path, doc_text)
    with pytest.raises(InputError) as e:
        load_chip(str(p))
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(f"{p}: ")
    return msg


@pytest.mark.parametrize("line, field, problem", [
    ("memory_bandwidth = 1.0e12", "memory_bandwidth", "missing"),
    ("memory_bandwidth = 1.0e12", "memory_bandwidth: must be > 0", "memory_bandwidth = 0.0"),
    ("link_bandwidth = 1.0e11", "link_bandwidth: must be > 0", "link_bandwidth = -5.0"),
    ("link_bandwidth = 1.0e11", "link_bandwidth: not finite", "link_bandwidth = nan"),
    ("memory = 1000", "memory: expected a number", 'memory = "lots"'),
    ("memory = 1000", "memory: expected an integer", "memory = 10.5"),
    ("float32 = 1.0e13", "peak_flops.float32: not finite", "float32 = inf"),
    ("float32 = 1.0e13", "peak_flops.float32: must be > 0", "float32 = -1.0"),
    ('name = "toy"', "name: expected a non-empty string", "name = 3"),
])
def test_bad_field_fails_in_one_line_naming_it(tmp_path: Path, line: str, field: str, problem: str) -> None:
    text = GOOD.replace(line + "\n", "" if problem == "missing" else problem + "\n")
    msg = _bad(text, tmp_path)
    expect = f"{field}: missing" if problem == "missing" else field
    assert expect in msg


def test_overhead_may_be_zero_but_not_negative(tmp_path: Path) -> None:
    assert load_chip(str(_write(tmp_path, "op_overhead = 0.0\n" + GOOD))).op_overhead == 0.0
    assert "op_overhead: must be >= 0" in _bad("op_overhead = -1e-6\n" + GOOD, tmp_path)


def test_unknown_field_not_toml_and_missing_profile(tmp_path: Path) -> None:
    assert "memroy: unknown field" in _bad("memroy = 3\n" + GOOD, tmp_path)
    assert "not valid TOML" in _bad("name = \n", tmp_path)
    with pytest.raises(InputError, match=r"^no-such-chip: chip profile: no such file and not a shipped profile"):
        load_chip("no-such-chip")


def test_package_data_ships_every_profile() -> None:
    """A non-editable install copies only what pyproject's package-data names."""
    pyproject: dict[str, Any] = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    globs = pyproject["tool"]["setuptools"]["package-data"]["gapstop.problems"]
    files = {p.name for p in CHIPS_DIR.iterdir() if p.is_file()}
    covered = {p.name for g in globs for p in (CHIPS_DIR.parent).glob(g)}
    assert files and files == covered
