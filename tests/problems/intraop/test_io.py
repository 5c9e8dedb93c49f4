"""Loader: one-line errors that name the field, infeasibility detection, and the array cache."""

from __future__ import annotations

import copy
import gzip
import json
import time
from pathlib import Path

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.problems.intraop.evaluate import evaluate
from gapstop.problems.intraop.generators import random_instance
from gapstop.problems.intraop.io import default_cache_dir, load_problem, problem_from_dict, problem_to_dict

DATA = Path(__file__).parent / "data"
EXAMPLE = json.loads((DATA / "example.json").read_text())


def _mutated(edit):
    doc = copy.deepcopy(EXAMPLE)
    edit(doc["problem"])
    return doc


def _set(path, value):
    def edit(p):
        obj = p
        for key in path[:-1]:
            obj = obj[key]
        obj[path[-1]] = value
    return edit


BAD = [
    ("intervals-len", _set(["nodes", "intervals"], [[30, 70]]), "problem.nodes.costs: has 5 entries, expected 1"),
    ("usages-row-len", _set(["nodes", "usages", 2], [15, 20]), "problem.nodes.usages[2]: has 2 entries, expected 3"),
    ("edge-costs-len", _set(["edges", "costs", 1], [50, 10]), "problem.edges.costs[1]: has 2 entries, expected 3"),
    ("edge-count", _set(["edges", "costs"], [[30, 40]]), "problem.edges.costs: has 1 entries, expected 5"),
    ("node-out-of-range", _set(["edges", "nodes", 3], [2, 5]), "problem.edges.nodes[3]: node index out of range"),
    ("node-negative", _set(["edges", "nodes", 0], [-1, 1]), "problem.edges.nodes[0]: node index out of range"),
    ("negative-usage", _set(["nodes", "usages", 1], [25, -3]), "problem.nodes.usages[1][1]: negative"),
    ("float-cost", _set(["nodes", "costs", 3], [85, 75.5]), "problem.nodes.costs[3][1]: expected a non-negative integer"),
    ("string-edge-cost", _set(["edges", "costs", 0], [30, "x"]), "problem.edges.costs[0][1]: expected a non-negative integer"),
    ("huge-cost", _set(["edges", "costs", 0], [30, 2**64]), "problem.edges.costs[0][1]: 18446744073709551616 is outside"),
    ("bool-cost", _set(["nodes", "costs", 0], [True]), "problem.nodes.costs[0][0]"),
    ("reversed-interval", _set(["nodes", "intervals", 4], [150, 110]), "problem.nodes.intervals[4]: [150, 110]"),
    ("negative-interval", _set(["nodes", "intervals", 0], [-1, 70]), "problem.nodes.intervals[0]"),
    ("short-interval", _set(["nodes", "intervals", 0], [30]), "problem.nodes.intervals[0]: expected two integers"),
    ("no-strategies", _set(["nodes", "costs", 0], []), "problem.nodes.costs[0]: node has no strategies"),
    ("limit-type", _set(["usage_limit"], "50"), "problem.usage_limit: expected a non-negative integer"),
    ("missing-edges", lambda p: p.pop("edges"), "problem.edges: missing"),
    ("edge-not-pair", _set(["edges", "nodes", 2], [1, 3, 4]), "problem.edges.nodes[2]: expected two integers"),
    ("infeasible", _set(["usage_limit"], 49), "at time step 50 the least possible usage is 50 > usage_limit 49"),
]


@pytest.mark.parametrize("name, edit, needle", BAD, ids=[b[0] for b in BAD])
def test_bad_input_names_the_field(tmp_path, name, edit, needle):
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(_mutated(edit)))
    with pytest.raises(InputError) as e:
        load_problem(f, cache=False)
    msg = str(e.value)
    assert needle in msg and str(f) in msg and "\n" not in msg


def test_not_json_and_not_gzip(tmp_path):
    f = tmp_path / "x.json"
    f.write_text("{nope")
    with pytest.raises(InputError, match="not valid JSON"):
        load_problem(f, cache=False)
    g = tmp_path / "x.json.gz"
    g.write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(InputError, match="gzip"):
        load_problem(g, cache=False)


def test_gzip_and_plain_give_the_same_problem(tmp_path):
    g = tmp_path / "example.json.gz"
    g.write_bytes(gzip.compress((DATA / "example.json").read_bytes()))
    a, b = load_problem(g, cache=False), load_problem(DATA / "example.json", cache=False)
    assert problem_to_dict(a) == problem_to_dict(b) == EXAMPLE
    assert a.name == "example" and a.usage_limit == 50


def test_dict_round_trip_random():
    for seed in range(10):
        p = random_instance(6, seed, forbidden_p=0.1, self_loops=True)
        q = problem_from_dict(problem_to_dict(p))
        assert problem_to_dict(q) == problem_to_dict(p)


def test_cache_round_trip(tmp_path):
    p = random_instance(30, 1, max_k=5)
    f = tmp_path / "inst.json"
    f.write_text(json.dumps(problem_to_dict(p)))
    cache = tmp_path / "cache"
    first = load_problem(f, cache_dir=cache)
    files = list(cache.glob("*.npz"))
    assert len(files) == 1
    f.write_text("this would not parse")  # a different file: new hash, no stale hit
    with pytest.raises(InputError):
        load_problem(f, cache_dir=cache)
    f.write_text(json.dumps(problem_to_dict(p)))
    second = load_problem(f, cache_dir=cache)
    assert problem_to_dict(second) == problem_to_dict(first)
    for a in ("node_ptr", "node_cost", "edge_cost", "start", "end", "edge_u", "edge_v"):
        assert not getattr(second, a).flags.writeable
    sol = [0] * p.n
    assert evaluate(second, sol) == evaluate(first, sol)


def test_damaged_cache_is_rebuilt(tmp_path):
    cache = tmp_path / "cache"
    load_problem(DATA / "example.json", cache_dir=cache)
    (file,) = cache.glob("*.npz")
    file.write_bytes(b"junk")
    assert load_problem(DATA / "example.json", cache_dir=cache).usage_limit == 50


def test_cache_dir_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("GAPSTOP_CACHE", str(tmp_path))
    assert default_cache_dir() == tmp_path / "intraop"
    load_problem(DATA / "example.json")
    assert len(list((tmp_path / "intraop").glob("*.npz"))) == 1
    monkeypatch.delenv("GAPSTOP_CACHE")
    assert default_cache_dir() == Path.home() / ".cache" / "gapstop" / "intraop"


SHARED_A = Path(__file__).resolve().parents[4] / "shared" / "data" / "iopddl" / "asplos-2025-iopddl-A.json.gz"


@pytest.mark.skipif(not SHARED_A.exists(), reason="shared contest data not available")
def test_instance_a_loads_fast_from_cache(tmp_path):
    load_problem(SHARED_A, cache_dir=tmp_path)
    t = time.perf_counter()
    p = load_problem(SHARED_A, cache_dir=tmp_path)
    assert time.perf_counter() - t < 1.0
    assert (p.n, p.m) == (34932, 54801)
    assert np.all(p.end >= p.start)
