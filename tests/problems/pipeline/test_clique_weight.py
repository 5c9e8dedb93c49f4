"""The spectral bound's clique weight, vectorised over the split counts, against the plain loop."""

from __future__ import annotations

import math

import pytest

from gapstop.problems.pipeline.spectral import clique_weight
from tests.timing import cpu_s


def clique_weight_loop(d: int, theta: float) -> float:
    """The definition, one (g0, p) pair at a time in Python integers and floats (also timed
    by ``benchmarks/input_limits.py``)."""
    alpha = 2.0 * theta / d
    beta = math.inf
    for g0 in range(d):
        rest = d - g0
        for p in range(1, rest + 1):
            q, extra = divmod(rest, p)
            squares = extra * (q + 1) ** 2 + (p - extra) * q * q + g0 * g0
            pairs = (d * d - squares) // 2
            if pairs > 0:
                beta = min(beta, (1 + p - alpha * rest) / pairs)
    return 0.0 if beta == math.inf else max(0.0, beta * (1.0 - 1e-12))


@pytest.mark.parametrize("theta", [0.3, 0.75, 1.0])
def test_same_value_as_the_loop_to_the_last_bit(theta: float) -> None:
    for d in [*range(1, 41), 97, 256]:
        assert clique_weight(d, theta) == clique_weight_loop(d, theta), d


def test_fast_at_twice_the_largest_degree_the_bound_meets() -> None:
    from gapstop.problems.pipeline.spectral import SPECTRAL_MAX_N

    t = cpu_s()  # CPU seconds, which other processes' load does not stretch
    clique_weight(2 * SPECTRAL_MAX_N - 1, 0.61)   # a theta no other test caches
    # 0.2-0.7 s at d = 4,095; the Python loop took 4.5-23 s (2 vCPU shared with other jobs)
    assert cpu_s() - t < 5.0
