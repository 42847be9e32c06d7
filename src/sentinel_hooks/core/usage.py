"""What model calls use (SPEC.md §20). Pure.

A model call's ``Usage`` is what the API reported (input and output tokens), or, when it
reported none, an estimate of characters ÷ 4 marked ``estimated``; with the model's prices, its
cost in US dollars. Calls are counted in the store (``UsageStore``) under the keys made here: the
fire (its callback), the watcher's UTC day, the service's UTC day, and each model entry's UTC day
(what ``sentinel status`` shows). Which budget a count spends is ``callbacks.sessions.budgets``'.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class Usage:
    """Tokens in and out and their cost (0 without pricing); what a call used or a scope spent."""

    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cost_usd + other.cost_usd,
        )

    def to_json(self) -> dict[str, Any]:
        """``{inputTokens, outputTokens, costUsd}``, as the API and the transcript show it."""
        return {
            "inputTokens": self.input_tokens,
            "outputTokens": self.output_tokens,
            "costUsd": round(self.cost_usd, 8),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Usage:
        return cls(
            int(data.get("inputTokens") or 0),
            int(data.get("outputTokens") or 0),
            float(data.get("costUsd") or 0.0),
        )


def estimate_tokens(value: object) -> int:
    """Characters ÷ 4 (rounded up) of ``value`` (text as it is, anything else as JSON)."""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return -(-len(text) // CHARS_PER_TOKEN)


def call_usage(
    reported: Mapping[str, int],
    *,
    request: object,
    reply_text: str | None,
    reply_calls: object,
    prices: tuple[float, float] | None,
) -> tuple[Usage, bool]:
    """A call's usage and whether it was estimated: the API's counts when it sent any, else
    characters ÷ 4 of the request and of the reply (its text and tool calls). ``prices`` are
    US dollars per million input and output tokens (None: no pricing, no cost)."""
    estimated = not reported
    if estimated:
        input_tokens = estimate_tokens(request)
        output_tokens = estimate_tokens(reply_text or "") + (
            estimate_tokens(reply_calls) if reply_calls else 0
        )
    else:
        input_tokens = int(reported.get("inputTokens", 0))
        output_tokens = int(reported.get("outputTokens", 0))
    cost = 0.0 if prices is None else (input_tokens * prices[0] + output_tokens * prices[1]) / 1_000_000
    return Usage(input_tokens, output_tokens, cost), estimated


def utc_day(at: datetime) -> str:
    """The UTC day of ``at`` as ``YYYY-MM-DD`` (day budgets start again at 00:00 UTC)."""
    return at.astimezone(UTC).date().isoformat()


def fire_key(callback_id: str) -> str:
    return f"fire:{callback_id}"


def watcher_day_key(watcher_id: str, day: str) -> str:
    return f"watcher-day:{day}:{watcher_id}"


def service_day_key(day: str) -> str:
    return f"service-day:{day}"


def model_day_key(model: str, day: str) -> str:
    return f"model-day:{day}:{model}"


def counted_keys(*, callback_id: str, watcher_id: str, day: str, model: str) -> list[str]:
    """The store keys a call of this fire counts against (whether or not a budget applies)."""
    return [
        fire_key(callback_id),
        watcher_day_key(watcher_id, day),
        service_day_key(day),
        model_day_key(model, day),
    ]
