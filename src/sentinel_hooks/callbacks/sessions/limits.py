"""How long a hook session may investigate (SPEC.md §6.4). Pure.

The deadline decides when people are paged, not when the agent stops: a session goes on after it,
up to ``hookSessionMaxMs`` (per watcher ``fire.sessionMaxMs``) of its own time, told from its
transcript (from its first entry, less the spans it waited for an approval), so a session resumed
after a restart keeps the time it had. Then it is stopped, and ``session stopped: <reason>`` is
its transcript's last entry.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from datetime import datetime, timedelta

from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.store.records import TranscriptEntry


@dataclass(frozen=True)
class Limit:
    """When a session must stop: ``stop_at`` on the service's clock, from a limit of ``limit_ms``
    of the session's own time."""

    stop_at: datetime
    limit_ms: int

    @property
    def reason(self) -> str:
        return f"it investigated for {self.limit_ms / 1000:g}s, its time limit (hookSessionMaxMs)"

    def left_s(self, now: datetime) -> float:
        """Seconds left before ``stop_at`` (0 or less: stop now)."""
        return (self.stop_at - now).total_seconds()


def session_limit_ms(watcher: AnyWatcher | None, service: ServiceConfig) -> int:
    """How long a callback's session may investigate: the watcher's ``fire.sessionMaxMs``, else
    ``hookSessionMaxMs``."""
    own = None if watcher is None else watcher.fire.session_max_ms
    return own if own is not None else service.hook_session_max_ms


def spent_ms(records: list[TranscriptEntry], now: datetime) -> float:
    """How much of its time limit a session used, told from its transcript: from its first entry
    to ``now``, less each wait for an approval (from a ``paused`` entry to the entry after it)."""
    if not records:
        return 0.0
    waited = timedelta()
    for entry, after in itertools.pairwise(records):
        if entry.entry.get("kind") == "status" and entry.entry.get("status") == "paused":
            waited += after.at - entry.at
    if records[-1].entry.get("kind") == "status" and records[-1].entry.get("status") == "paused":
        waited += now - records[-1].at  # resumed by its approval: nothing recorded since the pause
    return ((now - records[0].at) - waited).total_seconds() * 1000


def limit_for(
    watcher: AnyWatcher | None, service: ServiceConfig, records: list[TranscriptEntry], now: datetime
) -> Limit:
    """The limit of a session that starts or resumes ``now`` with these transcript entries."""
    limit_ms = session_limit_ms(watcher, service)
    return Limit(now + timedelta(milliseconds=limit_ms - spent_ms(records, now)), limit_ms)
