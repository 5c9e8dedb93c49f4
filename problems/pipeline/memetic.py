"""Memetic step for the pipeline islands: adjacent-stage moves on the elites.

Every few generations an island takes its best chromosomes, decodes each (Kahn +
SliceGraph), improves the partition with :func:`problems.pipeline.moves.local_search`
and an optimal re-split of the resulting order, alternately, and puts the result back
into its population as a chromosome whose Kahn order is that schedule. Improvements
then reach the coordinator as ordinary island incumbents (re-scored there), tagged
``via="moves"`` so the event log tells which piece found them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

from gapstop.problems.pipeline.decoder import SliceDecoder, Split
from gapstop.problems.pipeline.moves import local_search

if TYPE_CHECKING:
    from gapstop.problems.pipeline.search import PipelineSearch


@dataclass(frozen=True)
class TaggedSplit(Split):
    """A split with the search piece that found it (``""``: the island's BRKGA or random-T
    sampling; ``"polish"``: the split local search; ``"moves"``: the memetic step)."""

    via: str = ""


def order_keys(order: NDArray[np.int32]) -> NDArray[np.float64]:
    """Keys whose Kahn order (larger key first) is exactly the topological order ``order``."""
    n = len(order)
    keys = np.empty(n)
    keys[order] = 1.0 - np.arange(n) / n
    return keys


def improve_by_moves(decoder: SliceDecoder, split: Split, rng: np.random.Generator, rounds: int = 8) -> Split:
    """Alternate adjacent-stage moves and SliceGraph on the moved schedule while the value drops.

    The returned split's value is never above ``split.value`` (each re-split has the
    moved partition among its candidates: its stages are contiguous in the schedule).
    """
    best = split
    for _ in range(rounds):
        r = local_search(decoder.problem, best.blocks, best.order, decoder.k, rng)
        if not r.value < best.value:
            break
        nxt = decoder.slice(r.order)
        best = nxt if nxt.value <= r.value else Split(r.value, r.blocks, r.order, False)
    return best


def memetic_step(search: PipelineSearch, rng: np.random.Generator, n_elites: int = 3,
                 seen: set[bytes] | None = None) -> int:
    """Improve the island's ``n_elites`` best chromosomes by moves; inject the improved ones.

    ``seen``: digests of chromosomes already improved (skipped; updated here). Returns
    the number of chromosomes that improved.
    """
    keys, costs = search.ga.elites(n_elites)
    better = 0
    for row, cost in zip(keys, costs):
        digest = row.tobytes()
        if seen is not None:
            if digest in seen:
                continue
            seen.add(digest)
        res = improve_by_moves(search.decoder, search.decoder.decode(row), rng)
        if res.value < cost:
            nk = order_keys(res.order)
            value = float(search.decoder.values(nk[None, :])[0])
            search.ga.inject(nk[None, :], np.array([value]))
            if seen is not None:
                seen.add(nk.tobytes())
            better += 1
    return better


def accept_incumbent(search: PipelineSearch, cost: float, solution: dict[str, Any]) -> bool:
    """Put the run's incumbent (e.g. the exact MIP's) into the island as a chromosome.

    ``solution`` is the coordinator's canonical one (``order`` with the stages contiguous).
    Taken only when it beats the island's best, and once; the chromosome's Kahn order is
    ``solution["order"]``, so it decodes to ``cost`` or lower (up to rounding). Returns True
    if injected.
    """
    if not cost < min(search.ga.best_cost, search.rand.best_cost) or solution.get("order") is None:
        return False
    keys = order_keys(np.asarray(solution["order"], dtype=np.int32))
    # the same partition may decode a rounding error above ``cost`` (another summation order):
    # take each incumbent once, not at every step
    # (marked apart from the memetic step's own digests, so that the step still improves it)
    seen, digest = search._memetic_seen, b"incumbent:" + keys.tobytes()
    if digest in seen:
        return False
    seen.add(digest)
    value = float(search.decoder.values(keys[None, :])[0])
    search.ga.inject(keys[None, :], np.array([value]))
    return True
