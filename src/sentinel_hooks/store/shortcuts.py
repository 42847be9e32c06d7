"""Single-record forms of the Store's batch steps, written once for every backend.

The Store contract has one method per step (``get_watcher_states``, ``get_envelopes``,
``get_checkpoints``, ``observations``, ``write_watcher_batch``), so each backend implements it
once; a caller that wants one record asks through these instead. Each is typed on the role it
calls (``store.base``), so any store or fake of that role answers it.
"""

from __future__ import annotations

from typing import Any

from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.store.base import CheckpointStore, ContractStore, WatcherStore
from sentinel_hooks.store.records import Observation


async def get_watcher_state(store: WatcherStore, watcher_id: str) -> dict[str, Any] | None:
    """The last state put for ``watcher_id``, or None."""
    return (await store.get_watcher_states([watcher_id])).get(watcher_id)


async def put_watcher_state(store: WatcherStore, watcher_id: str, state: dict[str, Any]) -> None:
    """Replace the state of ``watcher_id`` (the store does not merge or interpret it)."""
    await store.write_watcher_batch([], {watcher_id: state})


async def last_observation(store: WatcherStore, watcher_id: str) -> Observation | None:
    """The watcher's most recently recorded observation, or None."""
    newest = await store.observations(watcher_id, limit=1)
    return newest[0] if newest else None


async def get_envelope(store: ContractStore, callback_id: str) -> Envelope | None:
    """The envelope stored with the contract, or None."""
    return (await store.get_envelopes([callback_id])).get(callback_id)


async def get_checkpoint(store: CheckpointStore, session_key: str) -> dict[str, Any] | None:
    """The last checkpoint put for ``session_key``, or None."""
    return (await store.get_checkpoints([session_key])).get(session_key)
