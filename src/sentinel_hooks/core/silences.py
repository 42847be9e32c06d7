"""Silence matchers (SPEC.md §14): which fires a silence or a maintenance window mutes. Pure.

A matcher is a condition of §4 (``{path, op, value}``, the same operators, RE2 for ``matches``)
whose ``path`` names a fact of the fire rather than a place in an observation: one of
``MATCHER_FIELDS``, or ``payload.<path>`` into the observed payload. ``fire_facts`` turns a
callback envelope into those facts, so a watcher's fire, a manual fire, an ingested event and an
envelope POSTed to /hooks/sentinel are matched alike. ``changed`` is refused: a silence has no
previous observation to compare with.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import field_validator

from sentinel_hooks.core.checks import MatchMode, holds
from sentinel_hooks.core.conditions import Condition
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.core.paths import parse_path

MATCHER_FIELDS = ("watcherId", "eventName", "priority", "tags", "skillId", "strategy", "environment")
PAYLOAD_PREFIX = "payload."
PATHS_HELP = f"{', '.join(MATCHER_FIELDS)} or payload.<path>"


class Matcher(Condition):
    """``{path, op, value}``: one test of a fire's fact (``MATCHER_FIELDS``) or its payload."""

    @field_validator("path")
    @classmethod
    def _known_fact(cls, path: str) -> str:
        if path in MATCHER_FIELDS:
            return path
        if path.startswith(PAYLOAD_PREFIX) and len(path) > len(PAYLOAD_PREFIX):
            parse_path(path[len(PAYLOAD_PREFIX) :])
            return path
        raise ValueError(f"matcher path {path!r} is not one of {PATHS_HELP}")

    @field_validator("op")
    @classmethod
    def _not_changed(cls, op: str) -> str:
        if op == "changed":
            raise ValueError(
                "op 'changed' compares with a previous observation, which a silence does not have "
                "(use eq, neq, in, matches, …)"
            )
        return op


def fire_facts(envelope: Envelope) -> dict[str, Any]:
    """What a matcher's path names, for the fire ``envelope`` carries."""
    watcher = envelope.watcher
    return {
        "watcherId": watcher.id,
        "eventName": watcher.event_name,
        "priority": envelope.trigger.priority,
        "tags": list(watcher.tags),
        "skillId": watcher.skill_id,
        "strategy": watcher.strategy,
        "environment": envelope.mode.environment,
        "payload": envelope.payload,
    }


def matches(matchers: Sequence[Matcher], match: MatchMode, facts: dict[str, Any]) -> bool:
    """Whether ``matchers`` combined with ``match`` hold for ``facts``; no matchers match nothing
    (a silence always names what it mutes)."""
    return bool(matchers) and holds(matchers, match, facts)
