"""Grouping settings (SPEC.md §19): sentinel.yaml's ``grouping`` and a watcher's ``fire.group``.

``grouping`` is the default of every watcher; a watcher's ``fire.group`` overrides it key by key
(a key it leaves out is sentinel.yaml's). ``by: []`` (the default) means no grouping: one contract
per fire. ``by`` paths are envelope paths (``core.grouping.check_by_path``), checked at load.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from sentinel_hooks.config.base import Name, NonNegativeMs, PositiveMs, Spec, key_problems
from sentinel_hooks.core.grouping import GroupRule, check_by_path


def _checked_by(paths: list[str] | None, where: str) -> list[str] | None:
    if paths is None:
        return None
    problems: list[tuple[tuple[str | int, ...], str]] = []
    seen: set[str] = set()
    for index, path in enumerate(paths):
        try:
            check_by_path(path)
        except ValueError as exc:
            problems.append(((index,), str(exc)))
        if path in seen:
            problems.append(((index,), f"{path!r} is listed twice; list each path once"))
        seen.add(path)
    if problems:
        raise key_problems(where, problems)
    return paths


class GroupingSpec(Spec):
    """``grouping:`` of sentinel.yaml: every watcher's default."""

    by: list[str] = Field(default_factory=list)
    wait_ms: NonNegativeMs = 30000
    interval_ms: PositiveMs = 300000
    max_fires: int = Field(default=1000, ge=1)

    @field_validator("by")
    @classmethod
    def _envelope_paths(cls, paths: list[str]) -> list[str]:
        return _checked_by(paths, "grouping.by") or []


class FireGroupSpec(Spec):
    """``fire.group`` of a watcher: what it changes of ``grouping`` (null keys: sentinel.yaml's),
    and the group's ``name`` (default: the watcher id), which watchers may share."""

    by: list[str] | None = None
    wait_ms: NonNegativeMs | None = None
    interval_ms: PositiveMs | None = None
    max_fires: int | None = Field(default=None, ge=1)
    name: Name | None = None

    @field_validator("by")
    @classmethod
    def _envelope_paths(cls, paths: list[str] | None) -> list[str] | None:
        return _checked_by(paths, "fire.group.by")


def group_rule(watcher_id: str, service: GroupingSpec, own: FireGroupSpec | None) -> GroupRule | None:
    """How ``watcher_id``'s fires are grouped, or None when its ``by`` is empty (no grouping)."""
    own = own or FireGroupSpec()
    by = own.by if own.by is not None else service.by
    if not by:
        return None
    return GroupRule(
        name=own.name or watcher_id,
        by=tuple(by),
        wait_ms=own.wait_ms if own.wait_ms is not None else service.wait_ms,
        interval_ms=own.interval_ms if own.interval_ms is not None else service.interval_ms,
        max_fires=own.max_fires if own.max_fires is not None else service.max_fires,
    )
