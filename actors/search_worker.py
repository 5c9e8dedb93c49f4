"""Search worker actor: one island of a problem's key-based search, run in epochs.

One actor call (``run``) covers the whole run: epochs of ``epoch_s`` seconds of
decoding in compiled code, improvements and eval counts reported after each epoch,
elites exchanged with other islands every ``migrate_every`` epochs, and the
coordinator's stop flag checked between epochs. While the coordinator holds the
search workers (another job's head start), a worker waits between epochs: its
first epoch still runs, so seeded and early solutions are reported at once.
"""

from __future__ import annotations

import time
from typing import Any

import ray

from gapstop.engine.local_runner import source_name
from gapstop.problems import registry

#: how often a held search worker asks whether it may go on (seconds)
HOLD_POLL_S = 0.1


class SearchWorker:
    def __init__(self, problem_name: str, problem: Any, params: dict[str, Any], seed: int, index: int,
                 name: str) -> None:
        self.adapter = registry.get(problem_name)
        self.search = self.adapter.make_search(problem, params, seed, index)
        self.name = name

    def run(self, coord: Any, epoch_s: float = 0.5, migrate_every: int = 4, migrate_n: int = 3) -> int:
        """Search until the coordinator says stop; returns evaluations made."""
        coord.hello.remote(self.name, ray.get_runtime_context().get_node_id())
        total = 0
        epoch = 0
        while True:
            found: list[Any] = []
            n = self.search.step(epoch_s, lambda value, sol: found.append(sol))
            total += n
            epoch += 1
            if found:  # only the last (best) improvement of an epoch matters
                coord.report_solution.remote(self.adapter.to_solution(found[-1]), source_name(self.name, found[-1]))
            coord.report_evals.remote(self.name, n)
            if migrate_every and epoch % migrate_every == 0 and hasattr(self.search, "migrants"):
                keys, costs = self.search.migrants(migrate_n)
                mk, mc = ray.get(coord.exchange_migrants.remote(self.name, keys, costs, migrate_n))
                if len(mc):
                    self.search.accept_migrants(mk, mc)
            if migrate_every and epoch % migrate_every == 0 and hasattr(self.search, "accept_incumbent"):
                cost, sol = ray.get(coord.incumbent.remote())  # e.g. the exact MIP's: the island builds on it
                if sol is not None:
                    self.search.accept_incumbent(cost, sol)
            st = ray.get(coord.poll.remote())
            while st["stop"] is None and st["hold"]:  # another job has the CPUs for now
                time.sleep(HOLD_POLL_S)
                st = ray.get(coord.poll.remote())
            if st["stop"] is not None:
                return total
