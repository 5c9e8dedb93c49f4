"""The ask/tell contract of random-key searches.

A search proposes batches of key vectors in [0, 1)^n_keys and is told their costs
(lower is better). It never evaluates anything itself, runs no loop, does no I/O
and knows nothing of threads or Ray: :func:`engine.driver.run_ask_tell` drives it,
inside an island's step.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True)
class KeyBatch:
    """Candidates handed out by ``ask``.

    Attributes:
        ids: int64[b], identifiers unique within the search.
        keys: float64[b, n_keys], read-only.
        cutoff: costs at or above this value need not be exact: the decoder may return
            any achievable cost that is ``>= cutoff`` for such a candidate (it cannot
            change what the search does with it). ``inf``: every cost must be exact.
    """

    ids: NDArray[np.int64]
    keys: NDArray[np.float64]
    cutoff: float = math.inf

    def __len__(self) -> int:
        return len(self.ids)


class BaseKeySearch(ABC):
    """Base class: keeps the best (cost, keys) seen and the ask/tell bookkeeping."""

    def __init__(self, n_keys: int, rng: np.random.Generator) -> None:
        if n_keys < 1:
            raise ValueError("n_keys must be >= 1")
        self.n_keys = int(n_keys)
        self.rng = rng
        self._next_id = 0
        self.best_cost = math.inf
        self.best_keys: NDArray[np.float64] | None = None
        self.n_told = 0

    def _new_ids(self, b: int) -> NDArray[np.int64]:
        ids = np.arange(self._next_id, self._next_id + b, dtype=np.int64)
        self._next_id += b
        return ids

    @abstractmethod
    def ask(self, n: int | None = None) -> KeyBatch:
        """Next candidates; ``n`` is a size hint (searches with generations may ignore it)."""

    def tell(self, batch: KeyBatch, costs: NDArray[np.float64]) -> None:
        """Report the costs of a batch from ``ask`` (NaN counts as +inf)."""
        c = np.asarray(costs, dtype=np.float64)
        if c.shape != (len(batch),):
            raise ValueError(f"expected {len(batch)} costs, got shape {c.shape}")
        c = np.where(np.isnan(c), math.inf, c)
        self.n_told += len(c)
        if len(c):
            i = int(np.argmin(c))
            if c[i] < self.best_cost:
                self.best_cost = float(c[i])
                self.best_keys = batch.keys[i].copy()
        self._tell(batch, c)

    def _tell(self, batch: KeyBatch, costs: NDArray[np.float64]) -> None:
        """Algorithm-specific part of ``tell``; by default nothing beyond the best-so-far above."""
        return None

    def best(self) -> tuple[float, NDArray[np.float64] | None]:
        """Best (cost, keys) told so far; cost never increases over time."""
        return self.best_cost, self.best_keys

    def state_dict(self) -> dict[str, Any]:
        """Picklable state, for checkpoints and migration between processes."""
        return {"n_keys": self.n_keys, "rng": self.rng.bit_generator.state, "next_id": self._next_id,
                "best_cost": self.best_cost, "best_keys": self.best_keys, "n_told": self.n_told}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.rng.bit_generator.state = state["rng"]
        self._next_id = state["next_id"]
        self.best_cost = state["best_cost"]
        self.best_keys = state["best_keys"]
        self.n_told = state["n_told"]


class RandomKeys(BaseKeySearch):
    """Random-T: i.i.d. uniform key vectors (Archer et al. 2024, App. C.1)."""

    def __init__(self, n_keys: int, rng: np.random.Generator, batch_size: int = 64) -> None:
        super().__init__(n_keys, rng)
        self.batch_size = batch_size

    def ask(self, n: int | None = None) -> KeyBatch:
        b = int(n or self.batch_size)
        keys = self.rng.random((b, self.n_keys))
        keys.flags.writeable = False
        # only improvements on the best matter to a random sampler
        return KeyBatch(self._new_ids(b), keys, cutoff=self.best_cost)
