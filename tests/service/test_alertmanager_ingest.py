"""format: alertmanager through a running service (SPEC.md §16): each alert its own stream.

Notifications are POSTed as Alertmanager sends them; the scripted model notifies (or escalates)
and a local webhook receiver stands in for the team's channel.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.core.alertmanager import alert_callback_id
from sentinel_hooks.service import Service
from sentinel_hooks.store import Store, backends
from sentinel_hooks.store.shortcuts import get_watcher_state, last_observation
from sentinel_hooks.watchers import writeback
from tests.service.test_api import call
from tests.support import Sink, wait_for
from tests.watchers.test_writeback import CountingStore

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 20000
hookResponseDedupeWindowMs: {dedupe}
notificationPayloadMode: none
limits: {{maxAlertsPerRequest: {cap}}}
targets:
  team: {{type: webhook, url: "{sink}"}}
"""

WATCHER = """\
id: am
strategy: webhook
format: alertmanager
auth: {{bearerToken: "${{env:AM_TOKEN}}"}}
conditions: [{{path: labels.severity, op: eq, value: critical}}]
deliveryTargets: [team]
fire: {{eventName: prom_alert, messageTemplate: "{message}"{fire}}}
{extra}"""

PLAIN = """\
id: plain
strategy: webhook
auth: {bearerToken: "${env:AM_TOKEN}"}
conditions: [{path: status, op: eq, value: firing}]
deliveryTargets: [team]
"""

MESSAGE = "${payload.labels.alertname} on ${payload.labels.instance}"
TOKEN = "am-token-5c1d9e"
AUTH = {"Content-Type": "application/json", "Authorization": f"Bearer {TOKEN}"}
START = "2026-03-01T10:00:00.000000001Z"

Start = Callable[..., Awaitable[Service]]


def alert(
    instance: str, status: str = "firing", severity: str = "critical", starts: str = START, **more: Any
) -> dict[str, Any]:
    return {
        "status": status,
        "labels": {"alertname": "HighLoad", "instance": instance, "severity": severity},
        "annotations": {"summary": f"load on {instance}"},
        "startsAt": starts,
        "endsAt": "0001-01-01T00:00:00Z",
        "generatorURL": "http://127.0.0.1:9090/graph",
        "fingerprint": f"fp-{instance}",
        **more,
    }


def notification(*alerts: dict[str, Any]) -> dict[str, Any]:
    status = "firing" if any(a["status"] == "firing" for a in alerts) else "resolved"
    return {
        "version": "4",
        "groupKey": '{}:{alertname="HighLoad"}',
        "status": status,
        "receiver": "sentinel",
        "groupLabels": {"alertname": "HighLoad"},
        "commonLabels": {"alertname": "HighLoad"},
        "commonAnnotations": {},
        "externalURL": "http://127.0.0.1:9093",
        "alerts": list(alerts),
    }


@pytest.fixture
async def start(tmp_path: Path, sink: Sink) -> AsyncIterator[Start]:
    """``await start(fire=", escalate: true", extra="cooldownMs: 1000\\n", dedupe=0)`` → a service."""
    running: list[Service] = []

    async def make(*, fire: str = "", extra: str = "", dedupe: int = 0, cap: int = 1000) -> Service:
        config = CONFIG.format(sink=sink.url("/team"), dedupe=dedupe, cap=cap)
        (tmp_path / "sentinel.yaml").write_text(config)
        (tmp_path / "watchers").mkdir(exist_ok=True)
        text = WATCHER.format(fire=fire, extra=extra, message=MESSAGE)
        (tmp_path / "watchers" / "am.yaml").write_text(text)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={"AM_TOKEN": TOKEN}))
        await service.start()
        running.append(service)
        return service

    yield make
    for service in running:
        await service.stop()


async def push(service: Service, *alerts: dict[str, Any]) -> tuple[int, Any]:
    return await call(service, "POST", "/hooks/ingest/am", body=notification(*alerts), headers=AUTH)


async def test_each_matching_firing_alert_fires_once(start: Start, sink: Sink) -> None:
    """Two critical alerts of one notification are two fires (a warning none); Alertmanager's
    repeats of the group fire nothing more and are not counted."""
    service = await start()
    group = (alert("web-1"), alert("web-2"), alert("db-1", severity="warning"))
    first = await push(service, *group)
    repeats = [await push(service, *group) for _ in range(3)]
    assert (202, {"accepted": True, "fired": 2}) == first
    assert [(202, {"accepted": True, "fired": 0})] * 3 == repeats
    notes = await wait_for(
        lambda: len(sink.bodies("notify")) == 2 and sink.bodies("notify"), what="2 notifies"
    )
    assert {"HighLoad on web-1", "HighLoad on web-2"} == {body["message"] for body in notes}
    expected_ids = {alert_callback_id("am", alert(i)) for i in ("web-1", "web-2")}
    assert expected_ids == {body["callbackId"] for body in notes}
    page = await service.store.list_contracts(watcher_id="am")
    _, shown = await call(service, "GET", "/api/v1/watchers/am", headers=AUTH)
    assert (2, 2) == (len(page.items), shown["status"]["fires"])


async def test_every_alert_is_an_observation_with_its_group(start: Start) -> None:
    """The last observation is the last alert, carrying the group's keys."""
    service = await start()
    await push(service, alert("web-1"), alert("db-1", severity="warning"))
    last = await last_observation(service.store, "am")
    assert last is not None
    picked = {key: last.value[key] for key in ("fingerprint", "receiver", "groupKey", "externalURL")}
    assert {
        "fingerprint": "fp-db-1",
        "receiver": "sentinel",
        "groupKey": '{}:{alertname="HighLoad"}',
        "externalURL": "http://127.0.0.1:9093",
    } == picked


async def test_resolved_alert_sends_one_resolved_line_in_its_fire(start: Start, sink: Sink) -> None:
    """A resolved alert sends the resolved line under its fire's callback id (it joins that
    fire's thread), saying how long it fired; Alertmanager resending it sends nothing more."""
    service = await start()
    await push(service, alert("web-1"), alert("web-2"))
    await wait_for(lambda: len(sink.bodies("notify")) == 2, what="the two notifies")
    done = alert("web-1", "resolved", endsAt="2026-03-01T10:04:12.000000001Z")
    answers = [await push(service, done) for _ in range(2)]
    [line] = await wait_for(lambda: sink.bodies("resolved"), what="the resolved line")
    assert [(202, {"accepted": True, "fired": 0})] * 2 == answers
    assert (
        "Sentinel: prom_alert on am resolved after 4m 12s (alert HighLoad).",
        alert_callback_id("am", alert("web-1")),
    ) == (line["message"], line["callbackId"])
    deliveries = await service.store.list_deliveries(line["callbackId"])
    assert 1 == sum(1 for delivery in deliveries if delivery.kind == "resolved")


async def test_resolved_alert_that_never_fired_sends_nothing(start: Start, sink: Sink) -> None:
    """A resolved warning (it never matched) and an unknown resolved alert send no line."""
    service = await start()
    await push(service, alert("db-1", severity="warning"))
    await push(service, alert("db-1", "resolved", severity="warning"), alert("ghost", "resolved"))
    ids = [alert_callback_id("am", alert(i)) for i in ("db-1", "ghost")]
    assert [[], []] == [await service.store.list_deliveries(i) for i in ids]


async def test_the_same_alert_firing_again_after_resolving_fires_again(start: Start, sink: Sink) -> None:
    """A new startsAt is a new firing of the alert: it fires, under a new callback id."""
    service = await start()
    await push(service, alert("web-1"))
    await push(service, alert("web-1", "resolved", endsAt="2026-03-01T10:05:00Z"))
    again = await push(service, alert("web-1", starts="2026-03-01T11:00:00Z"))
    assert (202, {"accepted": True, "fired": 1}) == again
    notes = await wait_for(
        lambda: len(sink.bodies("notify")) == 2 and sink.bodies("notify"), what="2 notifies"
    )
    assert 2 == len({body["callbackId"] for body in notes})


async def test_resolved_alert_resolves_its_fires_escalation_items(start: Start, sink: Sink) -> None:
    """The escalation an alert's session opened is resolved by actor `source` when the alert resolves;
    another alert's item stays open."""
    service = await start(fire=", escalate: true")
    await push(service, alert("web-1"), alert("web-2"))

    async def open_items() -> list[Any]:
        page = await service.store.list_inbox(status="open", kind="escalation")
        return page.items if len(page.items) == 2 else []

    items = await wait_for(open_items, what="two escalation items")
    await push(service, alert("web-1", "resolved", endsAt="2026-03-01T10:01:00Z"))
    by_callback = {item.callback_id: item.id for item in items}
    closed, history = await service.inbox.get(by_callback[alert_callback_id("am", alert("web-1"))])
    still, _ = await service.inbox.get(by_callback[alert_callback_id("am", alert("web-2"))])
    assert ("resolved", "source", "open") == (closed.status, history[-1].actor, still.status)


async def escalated_then_resolved(service: Service) -> Any:
    """Fire web-1 (its session escalates), wait for the escalation item, resolve the alert: the item."""
    await push(service, alert("web-1"))

    async def one_item() -> list[Any]:
        return (await service.store.list_inbox(status="open", kind="escalation")).items

    [item] = await wait_for(one_item, what="the escalation item")
    await push(service, alert("web-1", "resolved", endsAt="2026-03-01T10:01:00Z"))
    return item


async def test_an_item_resolved_by_its_alert_is_audited_via_source(start: Start, sink: Sink) -> None:
    """The audit trail covers inbox moves from every source (SPEC §21): actor and via `source`."""
    service = await start(fire=", escalate: true")
    item = await escalated_then_resolved(service)
    [entry] = (await service.store.list_audit(since=None, actor=None, limit=10)).items
    assert ("source", "source", "inbox.resolve", item.id) == (
        entry.actor,
        entry.via,
        entry.action,
        entry.target,
    )


async def test_notify_resolved_false_sends_no_line_but_closes_items(start: Start, sink: Sink) -> None:
    """fire.notifyResolved: false silences the resolved line; the source still closes the items."""
    service = await start(fire=", escalate: true, notifyResolved: false")
    item = await escalated_then_resolved(service)
    closed, _ = await service.inbox.get(item.id)
    kinds = {delivery.kind for delivery in await service.store.list_deliveries(item.callback_id or "")}
    assert ("resolved", False) == (closed.status, "resolved" in kinds)


async def test_a_body_that_is_not_a_notification_is_400_and_stores_nothing(start: Start) -> None:
    """A JSON body without alerts (or with a broken alert) says what is wrong and stores nothing."""
    service = await start()
    plain = await call(service, "POST", "/hooks/ingest/am", body={"level": "crit"}, headers=AUTH)
    broken = notification(alert("web-1"))
    broken["alerts"][0]["status"] = "pending"
    bad = await call(service, "POST", "/hooks/ingest/am", body=broken, headers=AUTH)
    assert [(400, "invalid_alerts", "alerts"), (400, "invalid_alerts", "alerts[0].status")] == [
        (status, body["error"]["code"], body["error"]["details"]["path"]) for status, body in (plain, bad)
    ]
    assert "not an Alertmanager webhook body" in bad[1]["error"]["message"]
    assert await last_observation(service.store, "am") is None


async def test_a_notification_without_alerts_is_accepted_and_fires_nothing(start: Start) -> None:
    """A notification whose ``alerts`` list is empty (a receiver test, a template sending none) is a
    202 that fires nothing, before the watcher's first alert and after it, not a 500."""
    service = await start()
    empty = notification()
    before = await call(service, "POST", "/hooks/ingest/am", body=empty, headers=AUTH)
    await push(service, alert("web-1"))
    after = await call(service, "POST", "/hooks/ingest/am", body=empty, headers=AUTH)
    assert [(202, {"accepted": True, "fired": 0})] * 2 == [before, after]
    last = await last_observation(service.store, "am")
    assert last is not None
    assert "fp-web-1" == last.value["fingerprint"]


async def test_more_alerts_than_the_cap_is_413_and_stores_nothing(start: Start, sink: Sink) -> None:
    """limits.maxAlertsPerRequest: a notification of more alerts is refused whole with a JSON error
    that names the count and the limit; nothing is observed, fired or counted. One of exactly the
    cap is taken."""
    service = await start(cap=3)
    over = await push(service, *(alert(f"web-{i}") for i in range(4)))
    assert 413 == over[0]
    assert ("too_many_alerts", {"alerts": 4, "maxAlertsPerRequest": 3}) == (
        over[1]["error"]["code"],
        over[1]["error"]["details"],
    )
    assert "limits.maxAlertsPerRequest" in over[1]["error"]["message"]
    assert await last_observation(service.store, "am") is None
    assert [] == (await service.store.list_contracts(watcher_id="am")).items
    assert (202, {"accepted": True, "fired": 3}) == await push(
        service, *(alert(f"web-{i}") for i in range(3))
    )


async def test_the_alert_cap_leaves_json_pushes_alone(tmp_path: Path, start: Start) -> None:
    """A ``format: json`` push is one observation whatever it holds: a body with more ``alerts``
    than the cap (an Alertmanager body sent to a json watcher) is taken as one event."""
    (tmp_path / "watchers").mkdir(exist_ok=True)
    (tmp_path / "watchers" / "plain.yaml").write_text(PLAIN)
    service = await start(cap=2)
    body = notification(*(alert(f"web-{i}") for i in range(5)))
    answer = await call(service, "POST", "/hooks/ingest/plain", body=body, headers=AUTH)
    assert (202, {"accepted": True, "fired": True}) == answer
    last = await last_observation(service.store, "plain")
    assert last is not None
    assert 5 == len(last.value["alerts"])


async def test_wrong_token_is_401(start: Start) -> None:
    """Alertmanager without the watcher's bearer token is refused."""
    service = await start()
    headers = {"Content-Type": "application/json", "Authorization": "Bearer nope"}
    status, _ = await call(
        service, "POST", "/hooks/ingest/am", body=notification(alert("a")), headers=headers
    )
    assert 401 == status


async def test_repeats_after_a_restart_still_fire_nothing(start: Start, sink: Sink) -> None:
    """The fire of an alert is found by its callback id in the store, so a repeat after a restart
    (or on another replica) does not wake the agent again; its resolved line still arrives."""
    service = await start()
    await push(service, alert("web-1"))
    await wait_for(lambda: sink.bodies("notify"), what="the first notify")
    await service.stop()
    again = await start()
    assert (202, {"accepted": True, "fired": 0}) == await push(again, alert("web-1"))
    await push(again, alert("web-1", "resolved", endsAt="2026-03-01T10:00:30Z"))
    [line] = await wait_for(lambda: sink.bodies("resolved"), what="the resolved line")
    assert "resolved after 30s" in line["message"]


async def test_an_explicit_dedupe_key_template_wins(start: Start, sink: Sink) -> None:
    """dedupeKeyTemplate by alertname: a second instance inside the window is deduped (not
    counted), and its resolve sends no line (nothing was sent for it)."""
    service = await start(fire=', dedupeKeyTemplate: "${payload.labels.alertname}"', dedupe=60000)
    assert (202, {"accepted": True, "fired": 1}) == await push(service, alert("web-1"), alert("web-2"))
    contracts = (await service.store.list_contracts(watcher_id="am")).items
    deduped = [c.callback_id for c in contracts if c.state == "deduped"]
    await push(service, alert("web-2", "resolved", endsAt="2026-03-01T10:01:00Z"))
    await push(service, alert("web-1", "resolved", endsAt="2026-03-01T10:02:00Z"))
    [line] = await wait_for(lambda: sink.bodies("resolved"), what="web-1's resolved line")
    web = [alert_callback_id("am", alert(i)) for i in ("web-1", "web-2")]
    assert (2, [web[1]], web[0]) == (len(contracts), deduped, line["callbackId"])


async def test_a_cooldown_holds_alerts_back_until_a_repeat_after_it(start: Start, sink: Sink) -> None:
    """cooldownMs is the watcher's: a second alert inside it is held back (no callback), and
    fires on a repeat of it that arrives after the cooldown."""
    service = await start(extra="cooldownMs: 400\n")
    assert (202, {"accepted": True, "fired": 1}) == await push(service, alert("web-1"), alert("web-2"))

    async def repeat_fires() -> bool:
        _, answer = await push(service, alert("web-1"), alert("web-2"))
        return bool(answer["fired"] == 1)

    await wait_for(repeat_fires, timeout_s=5, interval_s=0.05, what="web-2 firing after the cooldown")
    notes = await wait_for(
        lambda: len(sink.bodies("notify")) == 2 and sink.bodies("notify"), what="2 notifies"
    )
    assert {"HighLoad on web-1", "HighLoad on web-2"} == {body["message"] for body in notes}


async def test_the_bearer_token_is_masked_where_the_watcher_is_shown(start: Start) -> None:
    """auth.bearerToken from ${env:…} reads *** in the API's watcher definition."""
    service = await start()
    status, shown = await call(service, "GET", "/api/v1/watchers/am", headers=AUTH)
    assert (200, {"bearerToken": "***"}, False) == (status, shown["watcher"]["auth"], TOKEN in str(shown))


async def test_a_silenced_alert_is_recorded_once_and_fires_after_it(start: Start, sink: Sink) -> None:
    """Under a silence an alert is one silenced callback however often it is sent; its first
    repeat after the silence fires it under its own id (the edge is kept, SPEC §14)."""
    service = await start()
    body = {
        "matchers": [{"path": "payload.labels.instance", "op": "eq", "value": "web-1"}],
        "durationMs": 3_600_000,
        "comment": "maintenance on web-1",
    }
    status, made = await call(service, "POST", "/api/v1/silences", body=body, headers=AUTH)
    assert 201 == status, made
    muted = [await push(service, alert("web-1")) for _ in range(3)]
    contracts = (await service.store.list_contracts(watcher_id="am")).items
    own_id = alert_callback_id("am", alert("web-1"))
    assert [(202, {"accepted": True, "fired": 0})] * 3 == muted
    assert [(f"{own_id}.silenced", "silenced")] == [(c.callback_id, c.state) for c in contracts]
    await call(service, "DELETE", f"/api/v1/silences/{made['silence']['id']}", headers=AUTH)
    assert (202, {"accepted": True, "fired": 1}) == await push(service, alert("web-1"))
    [note] = await wait_for(lambda: sink.bodies("notify"), what="the notify after the silence")
    await push(service, alert("web-1", "resolved", endsAt="2026-03-01T10:09:00Z"))
    [line] = await wait_for(lambda: sink.bodies("resolved"), what="the resolved line")
    assert (own_id, own_id) == (note["callbackId"], line["callbackId"])


async def test_a_notification_waits_for_no_write_back_window(
    start: Start, sink: Sink, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A notification's alerts are one batch whose writes go out at once: with the write-back's
    gathering window at 60 s, a notification of 50 new alerts and three more after it are
    answered within seconds (each alert used to sit out two windows: 100 minutes here)."""
    monkeypatch.setattr(writeback, "BUSY_WINDOW_S", 60.0)
    service = await start()
    async with asyncio.timeout(30):
        first = await push(service, *(alert(f"web-{i}") for i in range(50)))
        more = [await push(service, alert(f"db-{i}")) for i in range(3)]
    assert (202, {"accepted": True, "fired": 50}) == first
    assert [(202, {"accepted": True, "fired": 1})] * 3 == more
    history = await service.store.observations("am", limit=60)
    expected = [f"fp-db-{i}" for i in (2, 1, 0)] + [f"fp-web-{i}" for i in range(49, -1, -1)]
    assert expected == [o.value["fingerprint"] for o in history]  # newest first, in order
    _, shown = await call(service, "GET", "/api/v1/watchers/am", headers=AUTH)
    assert 53 == shown["status"]["fires"]


async def test_a_notification_s_observations_and_state_are_one_write(
    start: Start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The alerts of a notification and the state their fires left go to the store in one write
    (after the alerts were judged), not one before and one after."""

    def counting(url: str, *, base_dir: Path, key_prefix: str) -> Store:
        return CountingStore(base_dir / url.partition(":///")[2])

    monkeypatch.setitem(backends.LOADERS, "sqlite", counting)
    service = await start()
    store = service.store
    assert isinstance(store, CountingStore)
    store.batches.clear()
    assert (202, {"accepted": True, "fired": 2}) == await push(service, alert("web-1"), alert("web-2"))
    shown = await get_watcher_state(service.store, "am")
    assert ([2 + 1], 2) == (store.batches, (shown or {}).get("fires"))  # two alerts and the state


async def test_fire_once_stops_a_notification_after_its_first_fire(start: Start, sink: Sink) -> None:
    """fireOnce: the first matching alert of a notification fires, the rest fire nothing, and the
    watcher is disabled durably (a restart keeps it disabled)."""
    service = await start(extra="fireOnce: true\n")
    answer = await push(service, alert("web-1"), alert("web-2"), alert("web-3"))
    assert (202, {"accepted": True, "fired": 1}) == answer
    assert ["fireOnce"] == [(await get_watcher_state(service.store, "am") or {}).get("disabledReason")]
    assert (409, "disabled") == await _status_code(service, alert("web-4"))


async def _status_code(service: Service, *alerts: dict[str, Any]) -> tuple[int, str]:
    status, body = await push(service, *alerts)
    return status, body["error"]["code"]


async def test_an_alert_twice_in_one_notification_is_judged_in_order(start: Start, sink: Sink) -> None:
    """The batch keeps the alerts' order: the same alert twice fires once, and an alert firing then
    resolved in one notification fires and sends its resolved line in that fire."""
    service = await start()
    assert (202, {"accepted": True, "fired": 1}) == await push(service, alert("web-1"), alert("web-1"))
    resolved = alert("web-2", "resolved", endsAt="2026-03-01T10:05:00Z")
    assert (202, {"accepted": True, "fired": 1}) == await push(service, alert("web-2"), resolved)
    [line] = await wait_for(lambda: sink.bodies("resolved"), what="the resolved line")
    assert alert_callback_id("am", alert("web-2")) == line["callbackId"]
    assert 2 == len((await service.store.list_contracts(watcher_id="am")).items)
