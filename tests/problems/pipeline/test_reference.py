"""The bundled brute-force optima (``data/optima.json``) are what the exhaustive search gives."""

from __future__ import annotations

import dataclasses

import pytest

from gapstop.problems.pipeline.generators import random_dag, regal_like
from tests.problems.pipeline import reference
from tests.problems.pipeline.test_bounds import KS, N_GRAPHS, _graph


def _sample() -> list[tuple[object, int]]:
    # every 25th graph of the bounds sweep (all sizes, memory or not, three bandwidths) and a few
    # communication-heavy regal_like graphs of 7 and 8 nodes, as the bound tests use them
    graphs = [_graph(i) for i in range(0, N_GRAPHS, 25)]
    graphs += [regal_like(200 + i, n=8) for i in range(0, 24, 8)] + [regal_like(300 + i, n=7) for i in range(3)]
    return [(p, k) for p in graphs for k in KS]


def test_the_table_holds_the_searched_optimum_of_a_sample() -> None:
    assert reference.OPTIMA_FILE.exists(), "regenerate with python -m tests.problems.pipeline.make_optima"
    for p, k in _sample():
        key = reference.optimum_key(p, k)
        assert key in reference._BUNDLED, (p.name, k)   # the table is current for these generators
        assert reference._BUNDLED[key] == reference.search(p, k), (p.name, k)


def test_the_key_tells_apart_what_the_optimum_depends_on() -> None:
    p = random_dag(6, 1, memory=True)
    keys = {reference.optimum_key(p, 3), reference.optimum_key(p, 2),
            reference.optimum_key(dataclasses.replace(p, bandwidth=p.bandwidth * 2), 3),
            reference.optimum_key(dataclasses.replace(p, memory=None), 3),
            reference.optimum_key(dataclasses.replace(p, memory=p.memory + 1), 3),
            reference.optimum_key(random_dag(6, 2, memory=True), 3)}
    assert len(keys) == 6
    assert reference.optimum_key(p, 3) == reference.optimum_key(random_dag(6, 1, memory=True), 3)


@pytest.mark.parametrize("k", KS)
def test_a_case_missing_from_the_table_is_searched(k: int, monkeypatch: pytest.MonkeyPatch) -> None:
    p = random_dag(5, 424242)
    monkeypatch.setattr(reference, "_BUNDLED", {})
    assert reference.brute_force(p, k) == reference.search(p, k)
    # and a wrong entry would be used as it is: which is why the sample above is searched again
    monkeypatch.setattr(reference, "_BUNDLED", {reference.optimum_key(p, k): -1.0})
    assert reference.brute_force(p, k) == -1.0
