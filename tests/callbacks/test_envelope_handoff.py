"""The envelope travels once: a fire's session gets it from the intake in memory, not from the store.

A service runs over a real SQLite store whose class counts what the hook sessions read and write
(a subclass of ``SqliteStore``, put in the store registry for ``sqlite://`` URLs): a fire handed to
the local queue is run without reading its envelope back, while a session resumed after a
restart reads it from the store. A scripted session writes its transcript in two store steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.intake.intake import LoggingSink
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.service import Service
from sentinel_hooks.store import backends
from sentinel_hooks.store.base import CallbackView, Store, TranscriptTail
from sentinel_hooks.store.records import Contract
from sentinel_hooks.store.sqlite import SqliteStore
from tests.support import Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
notificationPayloadMode: none
targets:
  hook: {{type: webhook, url: "{sink}"}}
"""

WATCHERS = """\
watchers:
  - id: a
    strategy: webhook
    deliveryTargets: [hook]
    fire: {eventName: a_fired}
"""


class CountingStore(SqliteStore):
    """A real SQLite store that records which callbacks' envelopes it read and each transcript append."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.envelopes_read: list[str] = []
        self.appends: list[list[dict[str, Any]]] = []

    async def read_callback(
        self,
        callback_id: str,
        checkpoint_keys: Sequence[str],
        *,
        tail: TranscriptTail | None = None,
        envelope: bool = True,
    ) -> CallbackView:
        if envelope:
            self.envelopes_read.append(callback_id)
        return await super().read_callback(callback_id, checkpoint_keys, tail=tail, envelope=envelope)

    async def get_envelopes(self, callback_ids: Sequence[str]) -> dict[str, Envelope]:
        self.envelopes_read.extend(callback_ids)
        return await super().get_envelopes(callback_ids)

    async def append_transcript(
        self,
        session_key: str,
        entries: Sequence[dict[str, Any]],
        *,
        at: Any,
        checkpoints: Any = None,
        usage: Any = None,
    ) -> list[int]:
        self.appends.append(list(entries))
        return await super().append_transcript(
            session_key, entries, at=at, checkpoints=checkpoints, usage=usage
        )


Start = Callable[..., Awaitable[Service]]


@pytest.fixture
async def start(tmp_path: Path, sink: Sink, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Start]:
    """``start(sessions=True)`` → a started service over ``state.db`` (a ``CountingStore``);
    without sessions, accepted callbacks are only logged (their sessions wait for a restart)."""

    def counting(url: str, *, base_dir: Path, key_prefix: str) -> Store:
        return CountingStore(base_dir / url.partition(":///")[2])

    monkeypatch.setitem(backends.LOADERS, "sqlite", counting)
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(sink=sink.url("/in")))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHERS)
    async with contextlib.AsyncExitStack() as started:

        async def run(*, sessions: bool = True) -> Service:
            config = load_config(tmp_path / "sentinel.yaml", environ={})
            service = Service(config, sink=None if sessions else LoggingSink())
            await service.start()
            started.push_async_callback(service.stop)
            return service

        yield run


async def fire(service: Service) -> Contract:
    outcome = await service.manager.ingest("a", {"disk": 97})
    assert outcome.contract is not None
    return outcome.contract


def counted(service: Service) -> CountingStore:
    assert isinstance(service.store, CountingStore)
    return service.store


async def test_a_fire_s_session_does_not_read_its_envelope_back(start: Start, sink: Sink) -> None:
    """The local queue hands the session the envelope it was submitted with: none is read."""
    service = await start()
    contract = await fire(service)
    status = await wait_for(
        lambda: service.sessions.queue.finished.get(contract.callback_id), what="the session"
    )
    assert ("done", [], 1) == (status, counted(service).envelopes_read, len(sink.bodies("notify")))


async def test_a_session_resumed_after_a_restart_reads_its_envelope(start: Start, sink: Sink) -> None:
    """A callback accepted before a restart has no envelope in memory: its session reads it."""
    before = await start(sessions=False)
    contract = await fire(before)
    await before.stop()
    after = await start()
    status = await wait_for(
        lambda: after.sessions.queue.finished.get(contract.callback_id), what="the session"
    )
    notified = [body["message"] for body in sink.bodies("notify")]
    assert ("done", [contract.callback_id], 1) == (status, counted(after).envelopes_read, len(notified))


async def test_a_scripted_session_writes_its_transcript_in_two_steps(start: Start) -> None:
    """Request with the tool call, result with the last reply: the entries of four steps in two."""
    service = await start()
    contract = await fire(service)
    await wait_for(lambda: service.sessions.queue.finished.get(contract.callback_id), what="the session")
    steps = [
        [(e["kind"], e.get("message", {}).get("role")) for e in step] for step in counted(service).appends
    ]
    transcript = await service.store.get_transcript(contract.session_key)
    assert [
        [("model", None), ("message", "system"), ("message", "user"), ("message", "assistant")],
        [("message", "tool"), ("message", "assistant")],
    ] == steps
    assert [1, 2, 3, 4, 5, 6] == [e.seq for e in transcript]
