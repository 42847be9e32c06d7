"""The audit record (SPEC.md §21): one change, who made it, through which face.

Every change a person or agent makes — watchers created, enabled, disabled or deleted, silences,
inbox moves, approvals, fires by hand, feedback, config reloads — is kept as an ``AuditEntry`` by
``AuditStore.add_audit`` and listed newest first. ``actor`` is who the service vouches for (a
token's or a person's name, else what the caller said); ``claimedActor`` what the caller said
when that is not the actor.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sentinel_hooks.core.roles import Via
from sentinel_hooks.store.records import Record, UtcMs

MAX_NOTE_CHARS = 2000
AuditAction = Literal[
    "watcher.create",
    "watcher.enable",
    "watcher.disable",
    "watcher.delete",
    "watcher.fire",
    "silence.create",
    "silence.expire",
    "inbox.ack",
    "inbox.resolve",
    "approval.approve",
    "approval.deny",
    "approval.expire",
    "feedback",
    "config.reload",
]


class AuditEntry(Record):
    """``{id, at, actor, claimedActor, via, action, target, note}``."""

    id: str = Field(min_length=1, max_length=64)
    at: UtcMs
    actor: str = Field(min_length=1, max_length=200)
    claimed_actor: str | None = Field(default=None, max_length=200)
    via: Via
    action: AuditAction
    target: str = Field(max_length=300)
    note: str | None = Field(default=None, max_length=MAX_NOTE_CHARS)
