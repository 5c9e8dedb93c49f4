"""A learned proposal policy for the constraint solver (Xie et al. 2022, §4).

GraphSAGE + a per-node chip head (:mod:`.policy`), trained with PPO (:mod:`.ppo`)
through :class:`~problems.pipeline.constraints.ConstraintSolver`, pre-trained on a corpus
(:mod:`.pretrain`) and run as a search island (:mod:`.island`).

Everything but :mod:`.features` needs torch, the optional extra ``gapstop[rl]``; this
package itself imports no torch, and :func:`require_torch` turns its absence into one line.
"""

from __future__ import annotations

from typing import Any

from gapstop.engine.errors import InputError

#: how to get the extra, said in one line when it is missing
INSTALL_HINT = ("the learned policy needs torch: pip install 'gapstop[rl]' "
                "(CPU-only machines: pip install torch==2.13.0)")


def require_torch() -> Any:
    """Import and return torch, or raise :class:`InputError` saying how to install it."""
    try:
        import torch
    except ImportError:
        raise InputError(INSTALL_HINT) from None
    return torch
