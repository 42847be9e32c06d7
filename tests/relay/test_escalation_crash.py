"""kill -9 between two escalation steps of a real `sentinel run` on SQLite: after the restart the
next step still arrives, exactly once, at its time (SPEC §15)."""

from __future__ import annotations

import json
import signal
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from tests.relay.test_relay_crash import http, ready, start
from tests.service.test_process import free_port
from tests.support import Sink, wait_for

pytestmark = pytest.mark.slow

STEP_2_MS = 6000

CONFIG = """\
store: "sqlite:///state.db"
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 600000
notificationPayloadMode: none
limits: {{requestTimeoutMs: 2000}}
targets:
  quiet: {{type: file, path: quiet.jsonl}}
  first: {{type: webhook, url: "{url}/first"}}
  second: {{type: webhook, url: "{url}/second"}}
  third: {{type: webhook, url: "{url}/third"}}
escalationPolicies:
  chain:
    steps:
      - {{afterMs: 0, targets: [first]}}
      - {{afterMs: 1500, targets: [second]}}
      - {{afterMs: {step_2}, targets: [third]}}
"""
WATCHER = "id: vault\nstrategy: webhook\ndeliveryTargets: [quiet]\nescalationPolicy: chain\n"
WATCHER += "fire: {eventName: vault_low, escalate: true}\n"


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    server = Sink()
    await server.start()
    yield server
    await server.stop()


def stamped(sink: Sink) -> list[tuple[str, datetime]]:
    """(Idempotency-Key, arrival) of every request answered 2xx, in order."""
    return [(r["headers"]["Idempotency-Key"], r["at"]) for r in sink.received if r["status"] < 300]


async def test_kill_9_between_steps_then_the_next_step_arrives_once(tmp_path: Path, sink: Sink) -> None:
    """The session escalates; SIGKILL right after step 1 arrives; restart: step 2 arrives once, on time."""
    original = sink.handler

    async def record_time(request):  # type: ignore[no-untyped-def]
        response = await original(request)
        sink.received[-1]["at"] = datetime.now(UTC)
        return response

    sink.handler = record_time
    port = free_port()
    config = tmp_path / "sentinel.yaml"
    config.write_text(CONFIG.format(port=port, url=sink.url("").rstrip("/"), step_2=STEP_2_MS))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "vault.yaml").write_text(WATCHER)
    base = f"http://127.0.0.1:{port}"
    log = tmp_path / "service.log"

    proc = start(config, log)
    try:
        await wait_for(lambda: ready(base), timeout_s=60, what="the service")
        status, _ = await http("POST", f"{base}/api/v1/watchers/vault/fire", {"payload": {"health": 1.05}})
        assert 202 == status
        await wait_for(
            lambda: any(key.endswith(":second:escalation.1") for key, _ in stamped(sink)),
            timeout_s=45,
            what="step 1",
        )
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        [(key_0, _)] = [(k, at) for k, at in stamped(sink) if k.endswith(":escalation.0")]
        item_id = key_0.split(":", 1)[0]

        proc = start(config, log)
        await wait_for(lambda: ready(base), timeout_s=60, what="the restarted service")
        back_at = datetime.now(UTC)  # a restart slower than step 2's delay (a loaded machine) sends it now
        step_2 = f"{item_id}:third:escalation.2"
        await wait_for(lambda: any(k == step_2 for k, _ in stamped(sink)), timeout_s=45, what="step 2")
        _, shown = await http("GET", f"{base}/api/v1/inbox/{item_id}")
        created_at = datetime.fromisoformat(shown["item"]["createdAt"])  # type: ignore[index]
        # let the outbox run a few more passes: nothing more may arrive for step 2
        await wait_for(lambda: reached(base, item_id, 2), timeout_s=30, what="the API to show step 2 sent")
        keys = [k for k, _ in stamped(sink)]
        assert 1 == keys.count(step_2), keys
        arrived = dict(stamped(sink))[step_2]
        due = created_at + timedelta(milliseconds=STEP_2_MS)
        assert timedelta(0) <= arrived - due, (arrived, due)
        assert arrived - max(due, back_at) <= timedelta(seconds=1), (arrived, due, back_at)
        assert {f"{item_id}:first:escalation.0", f"{item_id}:second:escalation.1", step_2} == set(keys)
        bodies = [json.loads(r["raw"]) for r in sink.received]
        assert all(b["watcherId"] == "vault" for b in bodies)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=15)


async def reached(base: str, item_id: str, step: int) -> bool:
    _, shown = await http("GET", f"{base}/api/v1/inbox/{item_id}")
    chain = shown["item"]["escalation"]  # type: ignore[index]
    return bool(chain and chain["step"] == step)
