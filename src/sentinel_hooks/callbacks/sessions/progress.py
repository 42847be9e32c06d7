"""A hook session's progress checkpoint: where its callback's session stands.

Kept under ``session:{callbackId}`` as ``{"status": …}`` with what goes with it (the turns taken,
the approval waited for, the error). The session runner writes it in the step that writes the
transcript entries it follows; the queues read it at start, to resume only the sessions that
had not reached a final status.
"""

from __future__ import annotations

from typing import Any

from sentinel_hooks.relay.relay import progress_key
from sentinel_hooks.store.records import Contract

__all__ = ["FINAL", "progress", "progress_key"]

FINAL = frozenset({"done", "failed", "paused", "skipped"})
REJOINED = "rejoined"  # a group's ended session queued again for fires that joined after its page


def progress(contract: Contract, status: str, **extra: Any) -> dict[str, dict[str, Any]]:
    """The session's progress checkpoint, as ``checkpoints`` for a transcript write."""
    return {progress_key(contract.callback_id): {"status": status, **extra}}
