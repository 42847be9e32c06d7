"""Heartbeat watchers through a running service (SPEC.md §23): a crontab's real
``curl -fsS -m 10 --retry 5`` pings it; ``/start`` then ``/fail`` and a non-zero exit code fire
``terminal``; each missed period fires ``no_progress`` once; a success ping resolves the fires."""

from __future__ import annotations

import asyncio
import itertools
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract
from sentinel_hooks.testing import FakeOpenAIServer
from tests.cli.conftest import sentinel_command
from tests.service.test_api import call
from tests.service.test_resolved_before_page import slow_notify
from tests.support import Sink, wait_for

KEY = "hb-key-0123456789abcdef"
CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
targets:
  team: {{type: webhook, url: "{sink}"}}
"""
WATCHER = """\
id: backup
strategy: heartbeat
pingKey: "${{env:BACKUP_PING_KEY}}"
deliveryTargets: [team]
{extra}"""

Start = Callable[..., Awaitable[Service]]


@pytest.fixture
async def start(tmp_path: Path, sink: Sink) -> AsyncIterator[Start]:
    """``await start("periodMs: 1000\\n")`` → a started service with the heartbeat watcher."""
    running: list[Service] = []

    async def make(extra: str = "periodMs: 86400000\n") -> Service:
        (tmp_path / "sentinel.yaml").write_text(CONFIG.format(sink=sink.url("/t")))
        (tmp_path / "watchers").mkdir(exist_ok=True)
        (tmp_path / "watchers" / "backup.yaml").write_text(WATCHER.format(extra=extra))
        config = load_config(tmp_path / "sentinel.yaml", environ={"BACKUP_PING_KEY": KEY})
        service = Service(config)
        await service.start()
        running.append(service)
        return service

    yield make
    for service in running:
        await service.stop()


async def curl(url: str, *extra: str) -> subprocess.CompletedProcess[str]:
    """The crontab's ping, the real curl."""
    argv = ["curl", "-fsS", "-m", "10", "--retry", "5", *extra, url]
    return await asyncio.to_thread(subprocess.run, argv, capture_output=True, text=True, check=False)


async def contracts(service: Service) -> list[Contract]:
    return list((await service.store.list_contracts(watcher_id="backup")).items)


async def envelope_of(service: Service, contract: Contract) -> Envelope:
    return (await service.store.get_envelopes([contract.callback_id]))[contract.callback_id]


async def status(service: Service) -> dict[str, Any]:
    code, body = await call(service, "GET", "/api/v1/watchers/backup")
    assert 200 == code, body
    return dict(body["status"])


async def test_a_crontab_curl_pings_and_the_status_shows_it(start: Start) -> None:
    service = await start()
    before = await status(service)
    assert before["lastPingAt"] is None
    assert before["nextDueAt"] is not None
    done = await curl(f"{service.url}/hooks/ping/{KEY}")
    assert 0 == done.returncode, done.stderr
    assert '"kind": "success"' in done.stdout
    after = await status(service)
    assert after["lastPingAt"] is not None
    assert after["nextDueAt"] > before["nextDueAt"]
    assert (False, 0) == (after["firing"], after["fires"])
    assert [] == await contracts(service)


async def test_start_then_fail_fires_terminal_with_the_body(start: Start) -> None:
    service = await start()
    assert 0 == (await curl(f"{service.url}/hooks/ping/{KEY}/start")).returncode
    failed = await curl(f"{service.url}/hooks/ping/{KEY}/fail", "--data-raw", "disk full")
    assert 0 == failed.returncode, failed.stderr
    [contract] = await wait_for(lambda: contracts(service), what="the terminal fire")
    assert "terminal" == contract.trigger.kind
    envelope = await envelope_of(service, contract)
    payload = envelope.payload
    assert ("fail", None, "disk full") == (payload["status"], payload["exitCode"], payload["body"])
    assert payload["lastPingAt"] is not None
    assert (await status(service))["firing"]


async def test_an_exit_code_is_a_success_or_a_fail(start: Start) -> None:
    service = await start()
    assert 0 == (await curl(f"{service.url}/hooks/ping/{KEY}/0")).returncode
    assert [] == await contracts(service)
    assert 0 == (await curl(f"{service.url}/hooks/ping/{KEY}/3", "-X", "PUT")).returncode
    [contract] = await wait_for(lambda: contracts(service), what="the fail fire")
    envelope = await envelope_of(service, contract)
    assert ("terminal", 3) == (contract.trigger.kind, envelope.payload["exitCode"])
    assert 0 == (await curl(f"{service.url}/hooks/ping/{KEY}")).returncode
    assert not (await status(service))["firing"]


async def test_unknown_keys_bad_suffixes_and_large_bodies_are_refused(start: Start) -> None:
    service = await start()
    for path in (f"/hooks/ping/{KEY[:-1]}x", f"/hooks/ping/{KEY}/256", f"/hooks/ping/{KEY}/nope"):
        code, body = await call(service, "GET", path)
        assert (404, "not_found") == (code, body["error"]["code"]), path
    code, body = await call(service, "POST", f"/hooks/ping/{KEY}", raw=b"x" * (10 * 1024 + 1))
    assert 413 == code, body
    assert [] == await contracts(service)
    assert (await status(service))["lastPingAt"] is None


async def test_each_missed_period_fires_once_and_a_late_ping_resolves_them_all(
    start: Start, sink: Sink
) -> None:
    """Three periods pass with no ping: three ``no_progress`` fires, each with its own due time,
    callback and dedupe key; the late success ping resolves every one of them."""
    service = await start("periodMs: 400\ngraceMs: 100\n")
    fired = await wait_for(lambda: _at_least(service, 3), what="three overdue fires")
    envelopes = [await envelope_of(service, contract) for contract in fired]
    assert {"no_progress"} == {contract.trigger.kind for contract in fired}
    assert {("overdue", None)} == {(e.payload["status"], e.payload["lastPingAt"]) for e in envelopes}
    dues = sorted(datetime.fromisoformat(e.payload["dueAt"]) for e in envelopes)
    assert [timedelta(milliseconds=400)] * 2 == [b - a for a, b in itertools.pairwise(dues[:3])]
    assert len(fired) == len({c.callback_id for c in fired}) == len({c.dedupe_key for c in fired})
    shown = await status(service)
    assert (True, True) == (shown["firing"], shown["overdue"])
    assert 0 == (await curl(f"{service.url}/hooks/ping/{KEY}")).returncode
    after = await status(service)
    assert (False, False, "success") == (after["firing"], after["overdue"], after["lastPingKind"])
    opened = await contracts(service)
    await wait_for(
        lambda: len([b for b in sink.bodies() if "resolved" in b.get("message", "")]) == len(opened),
        what="a resolved line per fire",
    )
    again = await wait_for(lambda: _at_least(service, len(opened) + 1), what="the next missed period")
    assert {c.callback_id for c in opened} < {c.callback_id for c in again}


async def _at_least(service: Service, count: int) -> list[Contract] | None:
    found = await contracts(service)
    return found if len(found) >= count else None


async def test_the_last_ping_is_stored_and_is_the_next_fires_payload(start: Start) -> None:
    """The last ping's body and exit code survive a restart and are the overdue fire's payload."""
    service = await start("periodMs: 700\ngraceMs: 100\n")
    assert 0 == (await curl(f"{service.url}/hooks/ping/{KEY}/0", "--data-raw", "42 files")).returncode
    await service.stop()
    restarted = await start("periodMs: 700\ngraceMs: 100\n")
    shown = await status(restarted)
    assert ("success", 0) == (shown["lastPingKind"], shown["lastPingExitCode"])
    code, detail = await call(restarted, "GET", "/api/v1/watchers/backup")
    assert (200, "42 files") == (code, detail["runtime"]["lastPingBody"])
    fired = await wait_for(lambda: contracts(restarted), what="the overdue fire")
    payloads = [(await envelope_of(restarted, contract)).payload for contract in fired]
    assert {(0, "42 files", shown["lastPingAt"])} == {
        (p["exitCode"], p["body"], p["lastPingAt"]) for p in payloads
    }


async def test_a_period_fired_but_not_recorded_is_not_fired_again(start: Start) -> None:
    """The crash window between a period's fire and the state's write: the period is taken again,
    its callback id is the same, so no second fire goes out and the one made is an open fire."""
    service = await start("periodMs: 2000\n")
    await wait_for(lambda: contracts(service), what="the overdue fire")
    runner = service.manager.get("backup")
    async with runner.lock:  # the state as it was before the last fire: its write was lost
        fired = runner.state
        assert fired.beat_missed_at is not None
        lost = fired.evolve(
            beat_missed_at=fired.beat_missed_at - timedelta(seconds=2),
            beat_fires=fired.beat_fires[:-1],
            fires=fired.fires - 1,
        )
        runner.state = lost
    assert await runner.heartbeat().overdue()
    made = [(await envelope_of(service, c)).payload["dueAt"] for c in await contracts(service)]
    assert len(made) == len(set(made)), "a period fired twice"
    again = runner.state
    assert again.beat_missed_at is not None
    assert again.beat_missed_at >= fired.beat_missed_at
    assert {i for i, _ in fired.beat_fires} <= {i for i, _ in again.beat_fires}
    assert again.fires >= fired.fires


async def test_the_api_refuses_a_heartbeat_with_a_ping_key_in_use(start: Start) -> None:
    """A watcher created through the API may not take another heartbeat's pingKey (409, key unsaid)."""
    service = await start()
    created = {
        "id": "copy",
        "strategy": "heartbeat",
        "pingKey": KEY,
        "periodMs": 60000,
        "deliveryTargets": ["team"],
    }
    code, body = await call(service, "POST", "/api/v1/watchers", body=created)
    assert (409, "conflict") == (code, body["error"]["code"]), body
    assert "same pingKey as watcher 'backup'" in body["error"]["message"]
    assert KEY not in str(body)


OTHER_KEY = "other-key-0123456789abcdef"
API_HEARTBEAT = {
    "id": "copy",
    "strategy": "heartbeat",
    "pingKey": OTHER_KEY,
    "periodMs": 60000,
    "deliveryTargets": ["team"],
}
CLASHING_FILE = f"""\
id: other
strategy: heartbeat
pingKey: {OTHER_KEY}
periodMs: 60000
deliveryTargets: [team]
"""


CLASH = (
    "other.yaml:1: pingKey: heartbeat watchers 'other' and 'copy' (created through the API) have the "
    "same pingKey; give each its own (a ping could not tell them apart)"
)


async def api_heartbeat_then_clashing_file(start: Start, tmp_path: Path, *, restart: bool) -> Service:
    """A service with the heartbeat ``copy`` created through the API, then the watcher file
    ``other.yaml`` with the same pingKey written (while it runs, or while it is down)."""
    service = await start()
    code, body = await call(service, "POST", "/api/v1/watchers", body=API_HEARTBEAT)
    assert 201 == code, body
    if restart:
        await service.stop()
    (tmp_path / "watchers" / "other.yaml").write_text(CLASHING_FILE)
    return await start() if restart else service


def pinged(service: Service) -> str | None:
    """The id of the watcher a ping to ``OTHER_KEY`` reaches."""
    runner = service.manager.by_ping_key(OTHER_KEY)
    return None if runner is None else runner.id


async def test_a_reload_refuses_a_file_taking_an_api_heartbeats_ping_key(
    start: Start, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watcher file that takes the pingKey of a heartbeat created through the API is refused at
    the reload, at its file:line, naming both watchers and never the key; pings still reach the
    API-created one."""
    monkeypatch.setenv("BACKUP_PING_KEY", KEY)  # what the reload reads the files with
    service = await api_heartbeat_then_clashing_file(start, tmp_path, restart=False)
    assert await service.reload() is None
    refused = [r.getMessage() for r in caplog.records if "reload refused" in r.getMessage()]
    assert [f"reload refused: {tmp_path}/watchers/{CLASH}"] == refused
    assert OTHER_KEY not in caplog.text
    assert "copy" == pinged(service)


async def test_a_restart_skips_an_api_heartbeat_whose_ping_key_a_file_took(
    start: Start, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A watcher file added while the service was down with the pingKey of a heartbeat created
    through the API: at the restart the API-created one is skipped with an error at the file's
    line naming both (never the key), and the file's watcher takes the pings."""
    service = await api_heartbeat_then_clashing_file(start, tmp_path, restart=True)
    skipped = [r.getMessage() for r in caplog.records if "skipped" in r.getMessage()]
    assert [f"API-created watcher copy skipped: {tmp_path}/watchers/{CLASH}"] == skipped
    assert OTHER_KEY not in caplog.text
    assert "other" == pinged(service)


async def test_sentinel_status_shows_a_line_per_heartbeat(start: Start, tmp_path: Path) -> None:
    """`sentinel status` (a subprocess against the running service): the last ping, when and
    what it said, the next due time, and whether it is overdue."""
    service = await start("periodMs: 86400000\n")
    assert 0 == (await curl(f"{service.url}/hooks/ping/{KEY}/start")).returncode
    shown = await status(service)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    argv = [*sentinel_command(), "status", "--url", service.url, "-c", str(tmp_path / "sentinel.yaml")]
    done = await asyncio.to_thread(
        subprocess.run, argv, capture_output=True, text=True, check=False, env={**env, "COLUMNS": "250"}
    )
    assert 0 == done.returncode, done.stderr
    line = (
        f"heartbeat backup: last ping {shown['lastPingAt']} (start), next due {shown['nextDueAt']}, on time"
    )
    assert line in done.stdout.splitlines()


async def test_max_run_after_a_start_fires_running_too_long(start: Start) -> None:
    service = await start("periodMs: 86400000\nmaxRunMs: 300\n")
    code, _ = await call(service, "POST", f"/hooks/ping/{KEY}/start")
    assert 200 == code
    [contract] = await wait_for(lambda: contracts(service), what="the overrun fire")
    envelope = await envelope_of(service, contract)
    assert ("no_progress", "running too long") == (contract.trigger.kind, envelope.payload["status"])


async def test_a_ping_before_the_page_settles_the_fire_resolved(
    tmp_path: Path, sink: Sink, model: FakeOpenAIServer
) -> None:
    """The agent is still working on the overdue fire when the late ping comes: the contract
    settles ``resolved`` (SPEC §6.4) and the agent's late notify goes nowhere."""
    answered = slow_notify(model)
    text = CONFIG.format(sink=sink.url("/t")) + (
        f'models:\n  local: {{type: openai, baseUrl: "{model.url}", model: m, timeoutMs: 60000}}\n'
    )
    (tmp_path / "sentinel.yaml").write_text(text)
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "backup.yaml").write_text(WATCHER.format(extra="periodMs: 1000\n"))
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={"BACKUP_PING_KEY": KEY}))
    await service.start()
    try:
        await wait_for(lambda: contracts(service), what="the overdue fire")
        await wait_for(lambda: model.requests, what="the agent to start thinking")
        code, _ = await call(service, "GET", f"/hooks/ping/{KEY}")
        assert 200 == code
        opened = await contracts(service)  # a busy machine may have passed a second period: each resolves
        settled = [await service.store.get_contract(contract.callback_id) for contract in opened]
        assert ["resolved"] * len(opened) == [contract.state if contract else None for contract in settled]
        answered.set()
        line = await wait_for(
            lambda: [b["message"] for b in sink.bodies() if "resolved" in b.get("message", "")],
            what="the resolved line",
        )
        assert line[0].startswith("Sentinel: backup on backup fired at ")
    finally:
        await service.stop()
