"""The records a run passes between its parts: bound job specs, island identities and the
session's status. Frozen dataclasses, picklable (they cross to Ray actors as they are).

:class:`JobSpec` and :class:`RunStatus` also read like the mappings they replace
(``spec["kind"]``, ``"j" in spec``, ``status["ub"]``), so a problem's code and a caller's
progress callback may use either form; they cannot be changed in place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any


class _ReadsLikeAMapping(Mapping[str, Any]):
    """Read access by field name. With ``_defaults_are_absent``, a field at its default value
    is absent, so the mapping is what was declared (``"j" in spec`` is False for a job that
    is not a member of a group, and ``dict(JobSpec("a", share=0.5)) == {"kind": "a", "share": 0.5}``)."""

    _defaults_are_absent = False

    def _present(self, f: dataclasses.Field[Any]) -> bool:
        if not self._defaults_are_absent:
            return True
        value = getattr(self, f.name)
        if f.default is not dataclasses.MISSING:
            return bool(value != f.default)
        if f.default_factory is not dataclasses.MISSING:
            return bool(value != f.default_factory())
        return True

    def __getitem__(self, key: str) -> Any:
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name == key and self._present(f):
                return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return (f.name for f in dataclasses.fields(self) if self._present(f))  # type: ignore[arg-type]

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass(frozen=True, eq=False)
class JobSpec(_ReadsLikeAMapping):
    """One bound job of a run, as a problem declares it and the plan hands it out
    (:class:`engine.plan.BoundPlan`).

    ``kind``: what the problem runs. ``share``: the fraction of the time left a queued job
    takes (None: all of it). ``j``/``group``: a member of a case split (the group's bound is the min over its
    members). ``dedicated``: owns bound slot 0 for the whole run; with ``head_start`` it asks
    for the cores to itself for its first seconds. ``fallback``: shares slot 0 with the queue
    once the dedicated job has ended. ``yield_when_stalled``: end once it stops making progress.
    Set by the plan when it hands the job out: ``head_start_s`` (the dedicated job's head start)
    and ``turn`` (the fallback's turns, from 0). ``options``: anything else the problem's job
    reads, JSON-serialisable.
    """

    _defaults_are_absent = True

    kind: str
    share: float | None = None
    j: int | None = None
    group: str | None = None
    dedicated: bool = False
    head_start: bool = False
    fallback: bool = False
    yield_when_stalled: bool = False
    head_start_s: float = 0.0
    turn: int = 0
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """Its kind, and its member index if any (``guess[3]``)."""
        return self.kind + ("" if self.j is None else f"[{self.j}]")

    def with_(self, **changes: Any) -> JobSpec:
        return dataclasses.replace(self, **changes)

    @staticmethod
    def of(spec: JobSpec | Mapping[str, Any]) -> JobSpec:
        """A spec from a problem: a JobSpec, or a mapping with the same keys (any other key
        goes to ``options``)."""
        if isinstance(spec, JobSpec):
            return spec
        names = {f.name for f in dataclasses.fields(JobSpec)} - {"options"}
        options = {**spec.get("options", {}), **{k: v for k, v in spec.items() if k not in names | {"options"}}}
        return JobSpec(**{k: v for k, v in spec.items() if k in names}, options=options)


@dataclass(frozen=True)
class Island:
    """Which search island a worker runs: ``index`` of ``count`` islands, started for the
    ``generation``-th time in its slot (0: the first start; a restart after a failure is 1, ...)."""

    index: int
    count: int = 1
    generation: int = 0


@dataclass(frozen=True, eq=False)
class RunStatus(_ReadsLikeAMapping):
    """What :meth:`engine.session.Session.poll` says of the run.

    ``stop``: the stop reason, or None while the run goes on. ``ub``/``lb``/``gap``: the
    incumbent's cost, the best bound and the certified gap (None until known). ``evals``:
    evaluations so far. ``elapsed``/``time_left``: seconds since the run's start and to its
    time limit (inf without one). ``nodes``: worker name -> node. ``hold``: the search workers
    are held (a head start). ``write_failures``: the run directory's failed writes, one line each.
    """

    stop: str | None
    ub: float | None
    lb: float | None
    gap: float | None
    evals: int
    elapsed: float
    time_left: float
    nodes: Mapping[str, str] = field(default_factory=dict)
    hold: bool = False
    write_failures: tuple[str, ...] = ()
