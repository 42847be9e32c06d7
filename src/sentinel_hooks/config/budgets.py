"""Model pricing and budgets (SPEC.md §20): how much a fire, a watcher's day and the service's day
may spend on model calls, in tokens and in US dollars.

``budgets:`` in sentinel.yaml holds the service's (``perFire`` for every fire, ``perDay`` for the
service's UTC day); a watcher's ``fire.budget`` adds its own (``perFire`` for each of its fires,
``perDay`` for the watcher's day). A limit left ``null`` does not apply. ``pricing`` on a
``models:`` entry gives the dollars a call costs; without it a call costs nothing in dollars, so
only token limits bound it.
"""

from __future__ import annotations

from pydantic import Field

from sentinel_hooks.config.base import Spec

DEFAULT_FIRE_TOKENS = 200_000


class Pricing(Spec):
    """What a model's tokens cost, in US dollars per million tokens."""

    input_per_m_tok: float = Field(ge=0, alias="inputPerMTok")
    output_per_m_tok: float = Field(ge=0, alias="outputPerMTok")


class Limit(Spec):
    """One budget: at most ``tokens`` (input and output together) and ``usd``; null: no limit."""

    tokens: int | None = Field(default=None, ge=1)
    usd: float | None = Field(default=None, gt=0)

    @property
    def applies(self) -> bool:
        return self.tokens is not None or self.usd is not None


class Budgets(Spec):
    """``budgets:`` of sentinel.yaml: ``perFire`` for every fire, ``perDay`` for the service's UTC day."""

    per_fire: Limit = Field(default_factory=lambda: Limit(tokens=DEFAULT_FIRE_TOKENS))
    per_day: Limit = Field(default_factory=Limit)


class WatcherBudget(Spec):
    """``fire.budget`` of a watcher: ``perFire`` for each of its fires, ``perDay`` for its UTC day."""

    per_fire: Limit = Field(default_factory=Limit)
    per_day: Limit = Field(default_factory=Limit)
