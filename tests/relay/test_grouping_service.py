"""Grouping through a running service (SPEC §19): a storm of Alertmanager alerts is one page per
group at a webhook stand-in, joins after the page arrive as one paced follow-up, and the members
are `grouped` contracts naming their group (the hand-off to sessions only logs: pages are the
groups' fallbacks)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sentinel_hooks.callbacks.intake.intake import LoggingSink, message_key
from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import GroupRequest, MemberJoin
from sentinel_hooks.testing import FakeOpenAIServer
from tests.service.test_api import call
from tests.support import HeldModel, Sink, wait_for

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: 0}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 200
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
delivery: {{maxAttempts: 3, baseMs: 100, maxMs: 200, maxElapsedMs: 60000}}
targets: {{hook: {{type: webhook, url: "{url}"}}}}
"""

WATCHER = """\
id: am
strategy: webhook
format: alertmanager
deliveryTargets: [hook]
fire:
  eventName: alert
  group: {{by: [payload.labels.alertname], waitMs: {wait_ms}, intervalMs: {interval_ms}}}
"""

NAMES = ("HighCPU", "DiskFull", "OOMKilled", "NodeDown", "Latency")


def alert(n: int, name: str) -> dict[str, Any]:
    return {
        "status": "firing",
        "labels": {"alertname": name, "instance": f"node-{n}", "severity": "critical"},
        "annotations": {},
        "startsAt": "2026-03-01T10:00:00Z",
        "endsAt": "0001-01-01T00:00:00Z",
        "fingerprint": f"fp-{n}",
    }


async def post(service: Service, alerts: list[dict[str, Any]]) -> None:
    """POST one Alertmanager notification to the watcher's hook, over HTTP; it must be taken (202)."""
    body = {"version": "4", "status": "firing", "receiver": "sentinel", "alerts": alerts}
    status, answer = await call(service, "POST", "/hooks/ingest/am", body=body)
    assert 202 == status, answer


async def started(tmp_path: Path, sink: Sink, *, wait_ms: int = 500, interval_ms: int = 60_000) -> Service:
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(url=sink.url("/in")))
    (tmp_path / "watchers").mkdir()
    watcher = WATCHER.format(wait_ms=wait_ms, interval_ms=interval_ms)
    (tmp_path / "watchers" / "am.yaml").write_text(watcher)
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), sink=LoggingSink())
    await service.start()
    return service


async def with_agent(tmp_path: Path, sink: Sink, model: FakeOpenAIServer, *, interval_ms: int) -> Service:
    """A started service whose hook sessions ask ``model`` (its first reply: notify "CPU storm")."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "CPU storm"}).reply_text("done")
    config = CONFIG.format(url=sink.url("/in")).replace("TimeoutMs: 200\n", "TimeoutMs: 20000\n")
    config += f'models:\n  agent: {{type: openai, baseUrl: "{model.url}", model: m, timeoutMs: 10000}}\n'
    (tmp_path / "sentinel.yaml").write_text(config + "defaultHookModel: agent\n")
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "am.yaml").write_text(WATCHER.format(wait_ms=100, interval_ms=interval_ms))
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    await service.start()
    return service


def count_written(service: Service) -> list[int]:
    """The members each ``join_members`` call stored (the store's own method, counted on the way)."""
    written: list[int] = []
    join_members = service.store.join_members

    async def counted(group: GroupRequest, members: Sequence[MemberJoin]) -> list[str | None]:
        answers = await join_members(group, members)
        written.append(sum(answer is not None for answer in answers))
        return answers

    service.store.join_members = counted  # type: ignore[method-assign]
    return written


async def test_a_storm_of_200_alerts_over_5_alertnames_is_5_pages(tmp_path: Path, sink: Sink) -> None:
    """200 alerts in 10 notifications, grouped by alertname: five pages, each a group fallback that
    counts its 40 fires; 195 members read `grouped` with their group's id, and every one of them
    joined written out (``watchers.written``): in the first notification, each group's first
    fire is made whole and opens it, then the fires after it of its key join it."""
    service = await started(tmp_path, sink)
    written = count_written(service)
    try:
        for batch in range(10):
            alerts = [alert(n, NAMES[n % 5]) for n in range(batch * 20, batch * 20 + 20)]
            await post(service, alerts)
        assert 195 == sum(written), "every fire but each group's first joins written out"
        pages = await wait_for(lambda: (len(sink.bodies()) >= 5 and sink.bodies()) or None, what="5 pages")
        assert [True] * 5 == [body["page"] for body in pages]
        firsts = sorted(body["message"].split("\n")[0] for body in pages)
        assert [
            f"Sentinel: 40 fires of alert on am grouped by payload.labels.alertname={name} (normal) — "
            "no response from the agent within 0.7s."
            for name in sorted(NAMES)
        ] == firsts
        grouped = await service.store.list_contracts(state="grouped", limit=500)
        assert 195 == len(grouped.items)
        groups = {c.group_id for c in grouped.items}
        assert {body["callbackId"] for body in pages} == groups
        assert 195 == service.metrics.grouped.labels("am")._value.get()
    finally:
        await service.stop()
    assert 5 == len(sink.bodies()), "no second page after the fallbacks"


async def test_joins_after_the_page_are_one_follow_up(tmp_path: Path, sink: Sink) -> None:
    """Alerts joining after the group's page reach people once, together, as a follow-up
    (`page` false, `inReplyTo` the group) no earlier than intervalMs after the group opened."""
    service = await started(tmp_path, sink, wait_ms=100, interval_ms=3_000)
    try:
        await post(service, [alert(0, "HighCPU")])
        [page] = await wait_for(lambda: sink.bodies("fallback") or None, what="the page")
        await post(service, [alert(n, "HighCPU") for n in range(1, 4)])
        [follow_up] = await wait_for(lambda: sink.bodies("joined.1") or None, what="the follow-up")
        assert (False, page["callbackId"]) == (follow_up["page"], follow_up["inReplyTo"])
        assert follow_up["message"].startswith("3 more fires:\n")
        assert 2 == len(sink.bodies()), "one page and one follow-up"
    finally:
        await service.stop()


def resolved(alert_body: dict[str, Any]) -> dict[str, Any]:
    return {**alert_body, "status": "resolved", "endsAt": "2026-03-01T10:05:00Z"}


async def test_a_group_resolves_when_every_member_resolved(tmp_path: Path, sink: Sink) -> None:
    """Members' resolutions say nothing while others still fire; the last one settles the group
    `resolved` before its page, and its resolved line (notifyResolved) is the group's one page."""
    service = await started(tmp_path, sink, wait_ms=3_000)
    try:
        alerts = [alert(n, "HighCPU") for n in range(3)]
        await post(service, alerts)
        await post(service, [resolved(a) for a in alerts[:2]])
        _, listed = await call(service, "GET", "/api/v1/callbacks?state=pending")
        [group] = listed["items"]
        await post(service, [resolved(alerts[2])])
        [line] = await wait_for(lambda: sink.bodies("resolved") or None, what="the resolved line")
        assert (True, group["callbackId"]) == (line["page"], line["callbackId"])
        current = await service.store.get_contract(group["callbackId"])
        assert current is not None
        assert "resolved" == current.state
        await post(service, [alert(9, "HighCPU")])  # the group closed: a new one opens
        _, after = await call(service, "GET", "/api/v1/callbacks?state=pending")
        assert 1 == len(after["items"])
        assert group["callbackId"] != after["items"][0]["callbackId"]
    finally:
        await service.stop()
    assert 1 == len(sink.bodies()), "nothing for the members"


async def test_the_group_session_starts_after_the_wait_and_sees_every_member(
    tmp_path: Path, sink: Sink
) -> None:
    """With sessions running (the scripted model), the group's one session starts when waitMs
    ends, its first message lists every member's envelope, and the agent's notify is the page."""
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(url=sink.url("/in")).replace("200", "5000"))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "am.yaml").write_text(WATCHER.format(wait_ms=600, interval_ms=60_000))
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
    await service.start()
    try:
        await post(service, [alert(0, "HighCPU")])
        await post(service, [alert(n, "HighCPU") for n in range(1, 4)])
        [page] = await wait_for(lambda: sink.bodies("notify") or None, what="the agent's page")
        group = await service.store.get_contract(page["callbackId"])
        assert group is not None
        assert group.group is not None
        transcript = await service.store.get_transcript(group.session_key)
        first_user = next(
            e.entry["message"]["content"]
            for e in transcript
            if e.entry.get("kind") == "message" and e.entry["message"]["role"] == "user"
        )
        assert "a group of 4 fires" in first_user
        assert all(f'"instance":"node-{n}"' in first_user for n in range(4))
        started_at = transcript[0].at
        assert (started_at - group.created_at).total_seconds() >= 0.6
    finally:
        await service.stop()
    assert 1 == len([b for b in sink.bodies() if b["page"]])


async def test_silences_act_on_each_fire_before_grouping(tmp_path: Path, sink: Sink) -> None:
    """A silenced alert is recorded `silenced`, outside any group; the others group as usual."""
    service = await started(tmp_path, sink, wait_ms=200)
    try:
        body = {
            "matchers": [{"path": "payload.labels.instance", "op": "eq", "value": "node-1"}],
            "durationMs": 600_000,
            "comment": "node-1 is being rebuilt",
        }
        status, _ = await call(service, "POST", "/api/v1/silences", body=body)
        assert 201 == status
        await post(service, [alert(n, "HighCPU") for n in range(3)])
        [page] = await wait_for(lambda: sink.bodies("fallback") or None, what="the page")
        assert page["message"].startswith("Sentinel: 2 fires of alert")
        _, muted = await call(service, "GET", "/api/v1/callbacks?state=silenced")
        [silenced] = muted["items"]
        assert (None, None) == (silenced["group"], silenced["groupId"])
    finally:
        await service.stop()


async def test_fires_joining_a_running_session_reach_it_as_a_new_message(tmp_path: Path, sink: Sink) -> None:
    """Alerts that join while the group's session waits for its model are handed to it before its
    next model call: a message naming how many joined, with their envelopes."""
    async with HeldModel() as model:
        service = await with_agent(tmp_path, sink, model, interval_ms=60_000)
        try:
            await post(service, [alert(0, "HighCPU")])
            await wait_for(model.held.wait, what="the group's session asking its model")
            await post(service, [alert(n, "HighCPU") for n in range(1, 3)])
            model.answer.set()
            await wait_for(lambda: len(model.requests) >= 2 or None, what="the session's second model call")
            second = json.dumps(model.requests[1]["messages"])
            assert "2 more fires (the group now holds 3)" in second
            assert all(f"node-{n}" in second for n in (1, 2))
        finally:
            await service.stop()


async def test_an_ended_group_session_runs_again_for_joins_after_the_page(tmp_path: Path, sink: Sink) -> None:
    """The group's session paged and ended; alerts that join later run it again under the same
    session key, with its earlier turns and a message naming the joins, and what its agent says
    then reaches people as a follow-up in the group's thread, never a second page."""
    async with FakeOpenAIServer() as model:
        service = await with_agent(tmp_path, sink, model, interval_ms=500)
        try:
            await post(service, [alert(0, "HighCPU")])
            [page] = await wait_for(lambda: sink.bodies() or None, what="the agent's page")
            group_id = page["callbackId"]
            assert (True, "CPU storm") == (page["page"], page["message"])
            await wait_for(lambda: service.sessions.queue.finished.get(group_id), what="the session's end")
            assert 2 == len(model.requests)
            model.reply_tool_call("sentinel_act", {"action": "notify", "message": "two more nodes"})
            model.reply_text("done")
            await post(service, [alert(n, "HighCPU") for n in range(1, 3)])
            said = await wait_for(
                lambda: [b for b in sink.bodies() if b["message"] == "two more nodes"] or None,
                what="the agent's follow-up after the joins",
            )
            assert (False, group_id) == (said[0]["page"], said[0]["inReplyTo"])
            third = json.dumps(model.requests[2]["messages"])
            assert "CPU storm" in third, "the session remembers its earlier turns"
            assert "2 more fires (the group now holds 3)" in third
            assert all(f"node-{n}" in third for n in (1, 2))
            joined = await wait_for(
                lambda: [b for b in sink.bodies() if b["message"].startswith("2 more fires:")] or None,
                what="the joins' follow-up",
            )
            assert (False, group_id) == (joined[0]["page"], joined[0]["inReplyTo"])
        finally:
            await service.stop()
    assert 1 == sum(1 for b in sink.bodies() if b["page"]), "one page per group"


async def test_a_fire_whose_group_closed_meanwhile_opens_the_next_one_whole(
    tmp_path: Path, sink: Sink
) -> None:
    """maxFires 2: the second notification's fires are offered as joins of the group the first
    filled (the lean path), refused, and offered whole: one opens the next group with its own
    message (what `callbacks show` explains), the other joins it; two pages, no fire lost."""
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(url=sink.url("/in")))
    (tmp_path / "watchers").mkdir()
    watcher = WATCHER.format(wait_ms=300, interval_ms=60_000).replace(
        "intervalMs: 60000", "intervalMs: 60000, maxFires: 2"
    )
    (tmp_path / "watchers" / "am.yaml").write_text(watcher)
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), sink=LoggingSink())
    await service.start()
    try:
        await post(service, [alert(0, "HighCPU"), alert(1, "HighCPU")])
        await post(service, [alert(2, "HighCPU"), alert(3, "HighCPU")])
        pages = await wait_for(lambda: (len(sink.bodies()) >= 2 and sink.bodies()) or None, what="2 pages")
        openers = {body["callbackId"] for body in pages}
        grouped = (await service.store.list_contracts(state="grouped", limit=10)).items
        assert 2 == len(openers)
        assert sorted(openers) == sorted({c.group_id for c in grouped})
        assert 2 == len(grouped)
        messages = await service.store.get_checkpoints([message_key(c) for c in openers])
        assert 2 == len(messages)
        for opener in openers:
            contract = await service.store.get_contract(opener)
            assert contract is not None
            assert contract.group is not None
            assert 2 == len(contract.group.members)
    finally:
        await service.stop()


SHARED = """\
id: {id}
strategy: webhook
format: alertmanager
deliveryTargets: [hook]
fire:
  eventName: alert
  priority: {priority}
  group: {{name: storm, by: [payload.labels.alertname], waitMs: 300, intervalMs: 60000}}
"""


async def normal_then_critical(tmp_path: Path, config: str, *, sink: LoggingSink | None = None) -> Service:
    """A started service with two watchers sharing a group (`name`), ``calm`` (normal) and ``loud``
    (critical), into which a normal fire of ``calm`` opens the group and a critical one of ``loud``
    joins it (each POSTed over HTTP, taken with 202)."""
    (tmp_path / "sentinel.yaml").write_text(config)
    (tmp_path / "watchers").mkdir()
    for watcher_id, priority in (("calm", "normal"), ("loud", "critical")):
        (tmp_path / "watchers" / f"{watcher_id}.yaml").write_text(
            SHARED.format(id=watcher_id, priority=priority)
        )
    service = Service(load_config(tmp_path / "sentinel.yaml", environ={}), sink=sink)
    await service.start()
    body = {"version": "4", "status": "firing", "receiver": "sentinel"}
    for n, watcher_id in enumerate(("calm", "loud")):
        alerts = {**body, "alerts": [alert(n, "HighCPU")]}
        status, _ = await call(service, "POST", f"/hooks/ingest/{watcher_id}", body=alerts)
        assert 202 == status
    return service


async def test_a_group_pages_with_the_most_urgent_priority_of_its_members(tmp_path: Path, sink: Sink) -> None:
    """Two watchers share a group (`name`): a normal fire opens it and a critical one joins. The group's
    fallback says critical on its first line and is delivered as critical (what PagerDuty's severity
    and Slack's colour follow), not as the first fire's normal."""
    config = CONFIG.format(url=sink.url("/in"))
    service = await normal_then_critical(tmp_path, config, sink=LoggingSink())
    try:
        [page] = await wait_for(lambda: sink.bodies("fallback") or None, what="the group's page")
        assert "critical" == page["priority"]
        assert page["message"].startswith("Sentinel: 2 fires of alert on calm grouped by ")
        assert "(critical) — no response from the agent" in page["message"].split("\n")[0]
        members = page["message"].split("\n")[1:]
        assert 2 == len(members)
        assert members[0].startswith("• normal: ")
        assert members[1].startswith("• critical: ")
    finally:
        await service.stop()


async def test_a_group_session_s_notify_pages_with_the_most_urgent_priority(
    tmp_path: Path, sink: Sink, model: FakeOpenAIServer
) -> None:
    """As the fallback does, the group's agent pages with the priority of its most urgent member
    (a critical fire that joined a group a normal one opened), not the first fire's."""
    model.reply_tool_call("sentinel_act", {"action": "notify", "message": "CPU storm"}).reply_text("done")
    config = CONFIG.format(url=sink.url("/in")).replace("TimeoutMs: 200\n", "TimeoutMs: 20000\n")
    config += f'models:\n  agent: {{type: openai, baseUrl: "{model.url}", model: m, timeoutMs: 10000}}\n'
    service = await normal_then_critical(tmp_path, config + "defaultHookModel: agent\n")
    try:
        [page] = await wait_for(lambda: sink.bodies("notify") or None, what="the agent's page")
        assert ("CPU storm", "critical") == (page["message"], page["priority"])
    finally:
        await service.stop()
