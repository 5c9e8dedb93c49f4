"""Graph loading: round trip, and one precise error per kind of bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gapstop.engine.errors import InputError
from gapstop.problems.pipeline.generators import random_dag, regal_like
from gapstop.problems.pipeline.io import load_graph, problem_to_dict, save_graph


def _doc(**over: Any) -> dict[str, Any]:
    d: dict[str, Any] = {"graph": {"name": "g", "nodes": {"work": [1.0, 2.0, 3.0], "size_param": [0, 1, 2],
                                                         "size_out": [4, 5, 6]},
                                   "edges": [[0, 1], [1, 2]]},
                         "bandwidth": 2.0, "memory": 10}
    for path, value in over.items():
        obj = d
        keys = path.split(".")
        for kk in keys[:-1]:
            obj = obj[kk]
        if value is _DEL:
            del obj[keys[-1]]
        else:
            obj[keys[-1]] = value
    return d


_DEL = object()


def _write(tmp_path: Path, doc: Any, name: str = "g.json") -> Path:
    p = tmp_path / name
    p.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return p


@pytest.mark.parametrize("over,pattern", [
    ({"graph.nodes.work": [1.0, -2.0, 3.0]}, r"graph\.nodes\.work\[1\]: negative"),
    ({"graph.nodes.work": [1.0, "x", 3.0]}, r"graph\.nodes\.work\[1\]: expected a number"),
    ({"graph.nodes.size_out": [1, 2]}, r"graph\.nodes\.size_out: has 2 entries, expected 3"),
    ({"graph.nodes.size_param": [0, 1.5, 2]}, r"graph\.nodes\.size_param\[1\]: expected an integer"),
    ({"graph.nodes.size_out": _DEL}, r"graph\.nodes\.size_out: missing"),
    ({"graph.edges": [[0, 1], [1, 7]]}, r"graph\.edges\[1\]: node index 7 out of range"),
    ({"graph.edges": [[0, 1], [2, 2]]}, r"graph\.edges\[1\]: self-loop on node 2"),
    ({"graph.edges": [[0, 1], [1, 2], [2, 0]]}, r"graph\.edges: the graph has a cycle: 0 -> 1 -> 2 -> 0"),
    ({"graph.edges": [[0, 1, 2]]}, r"graph\.edges\[0\]: expected \[u, v\]"),
    ({"bandwidth": 0}, r"bandwidth: must be a finite number > 0"),
    ({"bandwidth": _DEL}, r"bandwidth: missing"),
    ({"memory": -1}, r"memory: must be a non-negative integer"),
    ({"graph": _DEL}, r"graph: missing"),
])
def test_bad_input_is_named(tmp_path: Path, over: dict[str, Any], pattern: str) -> None:
    f = _write(tmp_path, _doc(**over))
    with pytest.raises(InputError, match=pattern) as e:
        load_graph(f)
    assert str(f) in str(e.value) and "\n" not in str(e.value)


def test_nan_and_inf_rejected(tmp_path: Path) -> None:
    text = json.dumps(_doc()).replace("[1.0, 2.0, 3.0]", "[1.0, NaN, 3.0]")
    with pytest.raises(InputError, match=r"work\[1\]: not finite"):
        load_graph(_write(tmp_path, text))
    text = json.dumps(_doc()).replace("[1.0, 2.0, 3.0]", "[Infinity, 2.0, 3.0]")
    with pytest.raises(InputError, match=r"work\[0\]: not finite"):
        load_graph(_write(tmp_path, text))


def test_not_json_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="not valid JSON"):
        load_graph(_write(tmp_path, "{nope"))
    with pytest.raises(InputError, match="cannot read file"):
        load_graph(tmp_path / "absent.json")


def test_duplicate_edges_are_one_tensor_edge(tmp_path: Path) -> None:
    p = load_graph(_write(tmp_path, _doc(**{"graph.edges": [[0, 1], [0, 1], [1, 2]]})))
    assert p.m == 2


@pytest.mark.parametrize("gz", [False, True])
def test_round_trip(tmp_path: Path, gz: bool) -> None:
    for prob in (random_dag(7, 3, memory=True), regal_like(5)):
        f = tmp_path / ("x.json.gz" if gz else "x.json")
        save_graph(prob, f)
        if gz:
            assert gzip.decompress(f.read_bytes())
        q = load_graph(f)
        assert problem_to_dict(q) == problem_to_dict(prob)
        assert np.array_equal(q.succ, prob.succ) and np.array_equal(q.pred_ptr, prob.pred_ptr)


def test_generators_are_deterministic() -> None:
    assert problem_to_dict(regal_like(11)) == problem_to_dict(regal_like(11))
    assert problem_to_dict(regal_like(11)) != problem_to_dict(regal_like(12))
    assert problem_to_dict(random_dag(6, 1)) == problem_to_dict(random_dag(6, 1))
