"""The proposal policy: GraphSAGE features and a per-node chip head (Xie et al. 2022, §4.1).

``P(y^(t) | G) = prod_i p(y_i^(t) | h_G, y^(t-1))`` (eq. 7): T iterations, each sampling
all nodes at once (non-autoregressive) from a distribution that sees the previous
iteration's assignment. Here the previous assignment enters the GraphSAGE input (as the
chip's position on the ring), so that through message passing a node's next choice sees
its neighbours' last ones; a head read only by the node itself could not coordinate them.

Shapes: a batch of B assignments of one graph with n nodes onto C chips gives logits
``float[B, n, C]``. The head scores chip j of C by a dot product with a Fourier embedding
of j / (C - 1), so one network serves every C (and every n): its distributions always
cover exactly chips 0..C-1.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn

from gapstop.problems.pipeline.rl.features import N_ASSIGN, N_STATIC, GraphInputs


@dataclass(frozen=True)
class PolicyConfig:
    """Network sizes (defaults: the paper's 8 GraphSAGE layers of 128; 2-layer head).

    Attributes:
        layers: GraphSAGE layers.
        width: hidden size of every layer and of the head.
        iterations: T, refinements per proposal (eq. 7).
        frequencies: Fourier frequencies of the chip embedding.
    """

    layers: int = 8
    width: int = 128
    iterations: int = 2
    frequencies: int = 8


class GraphTensors:
    """One graph's inputs as torch tensors (built once per graph, reused by every call)."""

    def __init__(self, g: GraphInputs) -> None:
        self.n, self.chips = g.n, g.chips
        self.x = torch.from_numpy(g.x)
        self.pred = torch.sparse_coo_tensor(np.stack([g.pred_rows, g.pred_cols]), torch.from_numpy(g.pred_vals),
                                            (g.n, g.n), check_invariants=True).coalesce()
        self.succ = torch.sparse_coo_tensor(np.stack([g.succ_rows, g.succ_cols]), torch.from_numpy(g.succ_vals),
                                            (g.n, g.n), check_invariants=True).coalesce()
        j = torch.arange(g.chips, dtype=torch.float32) / max(1, g.chips - 1)
        self.chip_pos = j


def _mean_over(adj: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
    """Row-normalised sparse ``adj`` (n, n) times every batch member of h (B, n, W)."""
    b, n, w = h.shape
    flat = h.permute(1, 0, 2).reshape(n, b * w)
    return torch.sparse.mm(adj, flat).reshape(n, b, w).permute(1, 0, 2)


class SageLayer(nn.Module):
    """``h + relu(LN(W_self h + W_pred mean_pred(h) + W_succ mean_succ(h)))``: GraphSAGE with
    mean aggregation, predecessors and successors kept apart (the direction matters on a ring)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.own = nn.Linear(width, width)
        self.from_pred = nn.Linear(width, width, bias=False)
        self.from_succ = nn.Linear(width, width, bias=False)
        self.norm = nn.LayerNorm(width)

    def forward(self, h: torch.Tensor, g: GraphTensors) -> torch.Tensor:
        z = self.own(h) + self.from_pred(_mean_over(g.pred, h)) + self.from_succ(_mean_over(g.succ, h))
        return h + torch.relu(self.norm(z))


class Policy(nn.Module):
    """GraphSAGE feature network, a 2-layer chip head and a value head.

    :meth:`forward` maps previous assignments to logits and values; :meth:`propose`
    runs the T iterations; :meth:`log_prob` scores stored trajectories (for PPO).
    """

    def __init__(self, config: PolicyConfig | None = None) -> None:
        super().__init__()
        self.config = config or PolicyConfig()
        w = self.config.width
        self.embed = nn.Linear(N_STATIC + N_ASSIGN, w)
        self.layers = nn.ModuleList(SageLayer(w) for _ in range(self.config.layers))
        self.head = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w))
        self.chip_embed = nn.Linear(2 + 2 * self.config.frequencies, w)
        self.value_head = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, 1))

    def chip_features(self, g: GraphTensors) -> torch.Tensor:
        """float[C, 2 + 2F]: position j/(C-1), its complement, sin/cos(m pi j/(C-1)) for m = 1..F."""
        p = g.chip_pos
        m = torch.arange(1, self.config.frequencies + 1, dtype=torch.float32)
        ang = math.pi * p[:, None] * m[None, :]
        return torch.cat([p[:, None], 1 - p[:, None], torch.sin(ang), torch.cos(ang)], dim=1)

    def forward(self, g: GraphTensors, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Logits float[B, n, C] and values float[B] for previous assignments ``prev``
        (long[B, n], -1 where there is none yet: the first iteration)."""
        b = prev.shape[0]
        pos = torch.where(prev >= 0, prev.float() / max(1, g.chips - 1), torch.zeros(()))
        assigned = (prev >= 0).float()
        feats = torch.cat([g.x.expand(b, -1, -1), pos[..., None], assigned[..., None]], dim=-1)
        h = torch.relu(self.embed(feats))
        for layer in self.layers:
            h = layer(h, g)
        logits = self.head(h) @ self.chip_embed(self.chip_features(g)).T / math.sqrt(self.config.width)
        value = self.value_head(h.mean(dim=1)).squeeze(-1)
        return logits, value

    @torch.no_grad()
    def propose(self, g: GraphTensors, count: int, generator: torch.Generator | None = None
                ) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
        """Sample ``count`` trajectories of T iterations.

        Returns:
            ys: int64[count, T, n], the assignment of every iteration (the last is the proposal);
            probs: float64[count, n, C], the last iteration's distributions (for SAMPLE).
        """
        prev = torch.full((count, g.n), -1, dtype=torch.long)
        ys = []
        probs = None
        for _ in range(self.config.iterations):
            logits, _ = self(g, prev)
            probs = torch.softmax(logits, dim=-1)
            flat = probs.reshape(-1, g.chips)
            prev = torch.multinomial(flat, 1, generator=generator).reshape(count, g.n)
            ys.append(prev)
        assert probs is not None
        return torch.stack(ys, dim=1).numpy().astype(np.int64), probs.double().numpy()

    def log_prob(self, g: GraphTensors, ys: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Per-decision log-probabilities float[B, T, n] of trajectories ``ys`` (long[B, T, n]),
        the mean entropy per decision float[B], and the values float[B] of the first state."""
        b, t, n = ys.shape
        prev = torch.cat([torch.full((b, 1, n), -1, dtype=torch.long), ys[:, :-1]], dim=1).reshape(b * t, n)
        logits, value = self(g, prev)
        logp_all = torch.log_softmax(logits, dim=-1)
        logp = logp_all.gather(-1, ys.reshape(b * t, n, 1)).reshape(b, t, n)
        entropy = -(logp_all.exp() * logp_all).sum(-1).reshape(b, t * n).mean(-1)
        return logp, entropy, value.reshape(b, t)[:, 0]


def save_policy(policy: Policy, path: str, extra: dict[str, Any] | None = None) -> None:
    """Write the state dict and the config (plus ``extra`` metadata) to ``path``."""
    torch.save({"config": asdict(policy.config), "state": policy.state_dict(), "extra": extra or {}}, path)


def load_policy(path: str) -> tuple[Policy, dict[str, Any]]:
    """Read a policy written by :func:`save_policy`; returns it (eval mode) and its metadata.

    Raises:
        InputError: the file is missing or is not a policy file.
    """
    from gapstop.engine.errors import InputError

    try:
        doc = torch.load(path, map_location="cpu", weights_only=True)
        policy = Policy(PolicyConfig(**doc["config"]))
        policy.load_state_dict(doc["state"])
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except Exception as e:  # a corrupt or foreign file: one line, not a traceback
        raise InputError(f"{path}: not a policy file ({type(e).__name__}: {str(e)[:120]})") from None
    policy.eval()
    return policy, dict(doc.get("extra", {}))
