"""Sessions go on after the deadline (SPEC §6.4): up to ``hookSessionMaxMs`` of their own time
(approval waits not counted), then stopped with ``session stopped: <reason>`` in the transcript;
one cut off by kill -9 after its page resumes, and its follow-up arrives once."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.callbacks.sessions.limits import spent_ms
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.relay.fallback import STILL_INVESTIGATING
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import TranscriptEntry
from tests.relay.test_relay_crash import http, ready, start
from tests.service.test_process import free_port
from tests.support import HeldModel, Sink, wait_for

CONFIG = """\
store: "{store}"
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 300
hookSessionMaxMs: {max_ms}
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  slow: {{type: openai, baseUrl: "{model_url}", model: slow-model, timeoutMs: 30000}}
defaultHookModel: slow
delivery: {{maxAttempts: 3, baseMs: 50, maxMs: 200}}
targets:
  hook: {{type: webhook, url: "{url}"}}
"""
WATCHER = "id: w\nstrategy: webhook\ndeliveryTargets: [hook]\n"
FINDING = "the replication slot 'old_replica' holds 40 GB of WAL"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
async def held_model() -> AsyncIterator[HeldModel]:
    async with HeldModel() as server:
        yield server
        server.answer.set()


@pytest.fixture
def redis_db() -> int:
    """This module's own database of the tests' redis-server (asked for by the Redis variant only)."""
    return 10


def write_project(
    tmp_path: Path, *, port: int, max_ms: int, model: HeldModel, sink: Sink, store: str = "sqlite:///state.db"
) -> Path:
    config = tmp_path / "sentinel.yaml"
    text = CONFIG.format(store=store, port=port, max_ms=max_ms, model_url=model.url, url=sink.url("/in"))
    config.write_text(text)
    (tmp_path / "watchers").mkdir(exist_ok=True)
    (tmp_path / "watchers" / "w.yaml").write_text(WATCHER)
    return config


def entry(seconds: float, **fields: Any) -> TranscriptEntry:
    return TranscriptEntry(seq=1, at=T0 + timedelta(seconds=seconds), entry=fields)


def test_time_waiting_for_an_approval_is_not_counted() -> None:
    """From the first entry to now, less the span from a ``paused`` entry to the next one."""
    records = [
        entry(0, kind="message"),
        entry(2, kind="status", status="paused"),
        entry(62, kind="message"),
    ]
    assert 5_000 == spent_ms(records, T0 + timedelta(seconds=65))


def test_a_session_still_paused_counts_nothing_since_its_pause() -> None:
    """Resumed by its approval with nothing recorded since the pause: the wait is not counted."""
    records = [entry(0, kind="message"), entry(3, kind="status", status="paused")]
    assert 3_000 == spent_ms(records, T0 + timedelta(seconds=100))


async def test_a_session_past_its_time_limit_is_stopped_and_says_why(
    tmp_path: Path, sink: Sink, held_model: HeldModel
) -> None:
    """The model never answers; after ``hookSessionMaxMs`` the session ends, and its transcript's
    last entry is ``session stopped: <reason>``; the fallback paged people meanwhile."""
    config = write_project(tmp_path, port=0, max_ms=1500, model=held_model, sink=sink)
    service = Service(load_config(config, environ={}))
    await service.start()
    try:
        outcome = await service.manager.ingest("w", {"disk": 97})
        assert outcome.contract is not None
        contract = outcome.contract

        async def last_entry() -> dict[str, Any] | None:
            entries = await service.store.get_transcript(contract.session_key)
            last = entries[-1].entry if entries else {}
            return last if last.get("status") == "stopped" else None

        stopped = await wait_for(last_entry, what="the session stopped")
        assert stopped["text"].startswith("session stopped: it investigated for 1.5s")
        [fallback] = sink.bodies("fallback")
        assert STILL_INVESTIGATING == fallback["message"].splitlines()[-1]
    finally:
        await service.stop()


@pytest.mark.slow
@pytest.mark.parametrize("store", ["sqlite", pytest.param("redis", marks=pytest.mark.redis)])
async def test_kill_9_after_the_page_resumes_the_session_and_its_follow_up_arrives_once(
    tmp_path: Path, sink: Sink, held_model: HeldModel, store: str, request: pytest.FixtureRequest
) -> None:
    """The fallback went out while the agent was thinking; the service is killed; restarted, the
    session resumes from its transcript and the agent's finding reaches people once, as a
    follow-up of the fallback."""
    held_model.reply_tool_call("sentinel_act", {"action": "notify", "message": FINDING}).reply_text("done")
    port = free_port()
    store_url = "sqlite:///state.db" if store == "sqlite" else request.getfixturevalue("redis_url")
    config = write_project(tmp_path, port=port, max_ms=600_000, model=held_model, sink=sink, store=store_url)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "service.log"
    proc = start(config, log)
    try:
        await wait_for(lambda: ready(base), timeout_s=60, what="the service")
        status, answer = await http("POST", f"{base}/api/v1/watchers/w/fire", {"payload": {"disk": 97}})
        assert 202 == status
        callback_id = answer["callbackId"]  # type: ignore[index]
        await wait_for(lambda: held_model.held.is_set() or None, what="the agent thinking")
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback")

        async def recorded() -> bool:
            # killed between the sink's answer and the outcome's write, the outbox would send the
            # fallback again under its key (at least once, deduplicated by Idempotency-Key)
            _, found = await http("GET", f"{base}/api/v1/callbacks/{callback_id}")
            return any(d["state"] == "delivered" for d in found["deliveries"])  # type: ignore[index]

        await wait_for(recorded, what="the fallback's outcome recorded")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)

        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=60, what="the restarted service")
        # on Redis the killed replica's session is taken over once its membership lapses
        [follow_up] = await wait_for(
            lambda: sink.bodies("notify") or None, timeout_s=30, what="the follow-up"
        )
        assert (FINDING, False, callback_id) == (
            follow_up["message"],
            follow_up["page"],
            follow_up["inReplyTo"],
        )

        async def shown() -> dict[str, Any] | None:
            _, found = await http("GET", f"{base}/api/v1/callbacks/{callback_id}")
            entries = [e["entry"] for e in found["transcript"]]  # type: ignore[index]
            done = any(e.get("kind") == "message" and e["message"].get("content") == "done" for e in entries)
            return found if done else None  # type: ignore[return-value]

        found = await wait_for(shown, timeout_s=45, what="the resumed session's end")
        assert ("fallback_sent", 1) == (found["callback"]["state"], found["callback"]["followUps"])
        assert ["fallback", "notify"] == [
            r["headers"]["Idempotency-Key"].rsplit(":", 1)[1] for r in sink.received
        ]
        assert [True, False] == [json.loads(r["raw"])["page"] for r in sink.received]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
