"""Escalation policies in sentinel.yaml (SPEC.md §15): who hears of an open inbox item, and when.

A policy is its steps, each ``afterMs`` after the item was created, in non-decreasing order, and
an optional ``repeatAfterMs`` that starts the steps over that long after the last one while the
item is still open (never sooner than a minute: a chain must not page several times a second).
Target names are checked against ``targets`` in ``config.crosscheck``.
"""

from __future__ import annotations

from pydantic import Field, field_validator

from sentinel_hooks.config.base import Name, NonNegativeMs, PositiveMs, Spec

REPEAT_FLOOR_MS = 60_000
"""The shortest ``repeatAfterMs`` (SPEC §15): anything quicker pages people several times a minute."""


class EscalationStep(Spec):
    """One step: ``targets`` hear of the item once it has been open for ``afterMs``."""

    after_ms: NonNegativeMs
    targets: list[Name] = Field(min_length=1)


class EscalationPolicySpec(Spec):
    """``escalationPolicies.NAME``: the steps of one chain."""

    steps: list[EscalationStep] = Field(min_length=1)
    repeat_after_ms: PositiveMs | None = None

    @field_validator("steps")
    @classmethod
    def _steps_in_time_order(cls, steps: list[EscalationStep]) -> list[EscalationStep]:
        for index in range(1, len(steps)):
            before, after = steps[index - 1].after_ms, steps[index].after_ms
            if after < before:
                raise ValueError(
                    f"step {index} has afterMs {after}, earlier than step {index - 1} ({before}); "
                    "list the steps in the order they go out (afterMs never decreasing)"
                )
        return steps

    @field_validator("repeat_after_ms")
    @classmethod
    def _repeat_no_sooner_than_a_minute(cls, repeat_after_ms: int | None) -> int | None:
        if repeat_after_ms is not None and repeat_after_ms < REPEAT_FLOOR_MS:
            raise ValueError(
                f"repeatAfterMs {repeat_after_ms} is below the floor of {REPEAT_FLOOR_MS} (one minute); "
                "a chain must not page several times a second: use 60000 or more, or null for no repeat"
            )
        return repeat_after_ms
