"""The coordinator actor: the run's :class:`engine.session.Session` in a Ray actor.

Thin: the session holds every decision and the run directory; this class only
resolves the problem's adapter by name and says which Ray node it runs on.
"""

from __future__ import annotations

from typing import Any

from gapstop.engine.session import Session
from gapstop.problems import registry


class CoordinatorActor(Session):
    """A :class:`~engine.session.Session` for the problem registered as ``problem_name``."""

    def __init__(self, problem_name: str, problem: Any, params: dict[str, Any], run_dir: str,
                 config: dict[str, Any], target_gap: float, time_limit_s: float, resume: bool = False) -> None:
        super().__init__(registry.get(problem_name), problem, params, run_dir, config, target_gap, time_limit_s,
                         resume=resume)

    def node(self) -> str:
        """The id of the Ray node this coordinator runs on ("" outside Ray)."""
        import ray

        return ray.get_runtime_context().get_node_id() if ray.is_initialized() else ""
