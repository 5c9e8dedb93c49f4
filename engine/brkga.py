"""Biased random-key genetic algorithm (Gonçalves & Resende 2011) in ask/tell form.

Each generation: the ``elite`` best chromosomes survive unchanged; ``mutants``
fresh uniform vectors are added; the rest are offspring of one elite and one
non-elite parent, each gene taken from the elite parent with probability
``rho``. Defaults follow Archer et al. 2024 (App. C.1): population 100.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from numpy.typing import NDArray

from gapstop.engine.search import BaseKeySearch, KeyBatch


class BRKGA(BaseKeySearch):
    """BRKGA over key vectors in [0, 1)^n_keys, minimising cost.

    Protocol: ``ask()`` returns the chromosomes of the current generation that have no
    cost yet (the whole first population, then only offspring and mutants);
    ``tell`` them; when every chromosome of the generation is told, the next
    generation is bred. ``inject`` replaces the worst chromosomes by given ones
    (seeds, migrants from other islands).

    Args:
        n_keys: chromosome length.
        rng: the only source of randomness (same seed, same run).
        population: chromosomes per generation.
        elite_frac, mutant_frac: fractions of elites and mutants.
        rho: probability that a child inherits the elite parent's gene.
        seeds: optional initial chromosomes, shape (s, n_keys), placed in generation 0.
    """

    def __init__(self, n_keys: int, rng: np.random.Generator, population: int = 100,
                 elite_frac: float = 0.2, mutant_frac: float = 0.1, rho: float = 0.7,
                 seeds: NDArray[np.float64] | None = None) -> None:
        super().__init__(n_keys, rng)
        if population < 3:
            raise ValueError("population must be >= 3")
        self.population = int(population)
        self.n_elite = max(1, int(math.ceil(elite_frac * population)))
        self.n_mutant = max(0, int(mutant_frac * population))
        if self.n_elite + self.n_mutant >= population:
            raise ValueError("elite + mutant fractions leave no room for offspring")
        if not 0.5 <= rho <= 1.0:
            raise ValueError("rho must be in [0.5, 1]")
        self.rho = float(rho)
        self.generation = 0
        self.pop = rng.random((population, n_keys))
        if seeds is not None and len(seeds):
            s = np.asarray(seeds, dtype=np.float64)[: population]
            self.pop[: len(s)] = s
        self.cost = np.full(population, np.nan)
        self._ids = self._new_ids(population)
        self._pending: set[int] = set()

    def ask(self, n: int | None = None) -> KeyBatch:
        todo = [i for i in range(self.population) if np.isnan(self.cost[i]) and i not in self._pending]
        self._pending.update(todo)
        keys = self.pop[todo].copy()
        keys.flags.writeable = False
        # chromosomes that do not beat the worst elite of the evaluated ones only need ranking as "not elite"
        told = self.cost[~np.isnan(self.cost)]
        cutoff = math.inf
        if self.generation > 0 and len(told) >= self.n_elite:
            cutoff = float(np.partition(told, self.n_elite - 1)[self.n_elite - 1])
        return KeyBatch(self._ids[todo], keys, cutoff=cutoff)

    def _tell(self, batch: KeyBatch, costs: NDArray[np.float64]) -> None:
        index = {int(i): j for j, i in enumerate(self._ids)}
        for bid, c in zip(batch.ids, costs):
            j = index.get(int(bid))
            if j is None or not np.isnan(self.cost[j]):
                continue  # stale or duplicate report: ignore (idempotent)
            self.cost[j] = c
            self._pending.discard(j)
        if not np.isnan(self.cost).any():
            self._evolve()

    def _evolve(self) -> None:
        order = np.argsort(self.cost, kind="stable")
        pop, cost, ids = self.pop[order], self.cost[order], self._ids[order]
        ne, nm, p = self.n_elite, self.n_mutant, self.population
        n_child = p - ne - nm
        a = self.rng.integers(0, ne, size=n_child)
        b = self.rng.integers(ne, p, size=n_child)
        take_elite = self.rng.random((n_child, self.n_keys)) < self.rho
        children = np.where(take_elite, pop[a], pop[b])
        mutants = self.rng.random((nm, self.n_keys))
        self.pop = np.vstack([pop[:ne], children, mutants])
        self.cost = np.concatenate([cost[:ne], np.full(n_child + nm, np.nan)])
        self._ids = np.concatenate([ids[:ne], self._new_ids(n_child + nm)])
        self._pending.clear()
        self.generation += 1

    def elites(self, n: int | None = None) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """The best ``n`` (default: all elites) evaluated chromosomes and their costs."""
        n = self.n_elite if n is None else n
        ok = np.nonzero(~np.isnan(self.cost))[0]
        best = ok[np.argsort(self.cost[ok], kind="stable")[:n]]
        return self.pop[best].copy(), self.cost[best].copy()

    def inject(self, keys: NDArray[np.float64], costs: NDArray[np.float64] | None = None) -> None:
        """Replace the worst members of the current generation by ``keys``.

        With ``costs`` they count as evaluated (migrants); without, they are asked next.
        Chromosomes handed out by ``ask`` and not yet told are never replaced.
        """
        keys = np.atleast_2d(np.asarray(keys, dtype=np.float64))
        free = [i for i in range(self.population) if i not in self._pending]
        # worst first: unevaluated count as worst of all
        rank = sorted(free, key=lambda i: -np.inf if np.isnan(self.cost[i]) else -self.cost[i])
        for row, i in enumerate(rank[: len(keys)]):
            self.pop[i] = keys[row]
            self.cost[i] = np.nan if costs is None else float(costs[row])
            self._ids[i] = self._new_ids(1)[0]
            if costs is not None and costs[row] < self.best_cost:
                self.best_cost = float(costs[row])
                self.best_keys = keys[row].copy()
        if not np.isnan(self.cost).any() and not self._pending:
            self._evolve()

    def state_dict(self) -> dict[str, Any]:
        s = super().state_dict()
        s.update(pop=self.pop.copy(), cost=self.cost.copy(), ids=self._ids.copy(), generation=self.generation)
        return s

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.pop = state["pop"].copy()
        self.cost = state["cost"].copy()
        self._ids = state["ids"].copy()
        self.generation = state["generation"]
        self._pending = set()
