"""Roles and who acts (SPEC.md §21): what each role may do, and the identity a change is recorded with.

``viewer`` reads; ``operator`` also acks, resolves, approves, denies, fires, gives feedback and manages
silences; ``admin`` also creates, enables, disables and deletes watchers. Each role may do what the
roles before it may.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Role = Literal["viewer", "operator", "admin"]
ROLES: tuple[Role, ...] = get_args(Role)
Via = Literal["api", "cli", "web", "mcp", "slack", "source"]
VIAS: tuple[Via, ...] = get_args(Via)


def allows(role: Role, needed: Role) -> bool:
    """Whether ``role`` may do what needs ``needed``."""
    return ROLES.index(role) >= ROLES.index(needed)


@dataclass(frozen=True)
class Who:
    """Who made a change: ``actor`` is recorded (a token's or a person's name when the service knows
    it), ``claimed_actor`` what the caller said it was when that is not the actor (a header,
    ``--actor``, a silence's ``createdBy``), ``via`` the face it came through."""

    actor: str
    claimed_actor: str | None = None
    via: Via = "api"
    named: bool = False  # the actor is a token's or a person's name the service vouches for

    def claiming(self, said: str | None) -> Who:
        """``self`` when the caller names someone (``said``): the named actor stays and ``said`` is
        kept beside it; an actor the service does not vouch for is replaced by ``said``."""
        if said is None or said == self.actor:
            return self
        if self.named:
            return Who(self.actor, said, self.via, named=True)
        return Who(said, None, self.via)
