"""Slack buttons through a running service (SPEC §21, §22), against a Slack Web API stand-in: a
page carries Ack/Resolve/Silence 1h/👍/👎, an approval request Approve/Deny; a signed click by a
person in ``people`` acts as them (via ``slack``, audited) and the message is updated in place;
the same click twice changes nothing the second time."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_hooks.config.loader import load_config
from sentinel_hooks.service import Service
from sentinel_hooks.store.audit import AuditEntry
from sentinel_hooks.store.records import InboxItem
from tests.api.slack_clicks import SIGNING_SECRET, WATCHER, buttons, click_body, project, slack_headers
from tests.delivery.slack_api import Posted, SlackApi, slack_api
from tests.service.conftest import stop_within
from tests.service.test_api import call
from tests.support import wait_for

__all__ = ["slack_api"]

INTERACTIONS = "/hooks/slack/interactions"
NO_FAN_OUT = "high, notificationPayloadMode: none, notifyResolved: true}"  # the page is the thread's root
PAGE_BUTTONS = {
    "sentinel.ack",
    "sentinel.resolve",
    "sentinel.silence_1h",
    "sentinel.feedback_up",
    "sentinel.feedback_down",
}

Make = Callable[..., Awaitable[Service]]


@pytest.fixture
async def make_service(tmp_path: Path, slack_api: SlackApi) -> AsyncIterator[Make]:
    """``await make_service(buttons=True)`` → a started Service whose ``ops`` target is the stand-in."""
    services: list[Service] = []

    async def make(*, buttons: bool = True, fan_out: bool = True) -> Service:
        watcher = WATCHER if fan_out else WATCHER.replace("high}", NO_FAN_OUT)
        project(tmp_path, slack_api.base(), buttons=buttons, watcher=watcher)
        service = Service(load_config(tmp_path / "sentinel.yaml", environ={}))
        await service.start()
        services.append(service)
        return service

    yield make
    for service in services:
        await stop_within(service)


async def paged(service: Service, api: SlackApi) -> tuple[str, Posted]:
    """Fire ``disk`` and wait for its page (the agent's notify) in Slack."""
    outcome = await service.manager.ingest("disk", {"used": 97})
    assert outcome.contract is not None
    callback_id = outcome.contract.callback_id

    def page() -> Posted | None:
        return next((m for m in api.messages if m.callback_id == callback_id and m.kind == "notify"), None)

    return callback_id, await wait_for(page, what="the page")


async def audit(service: Service) -> list[AuditEntry]:
    return (await service.store.list_audit(since=None, actor=None, limit=100)).items


async def click(service: Service, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    return await call(service, "POST", INTERACTIONS, raw=body, headers=headers or slack_headers(body))


async def test_a_page_carries_the_buttons_and_the_fan_out_line_none(
    make_service: Make, slack_api: SlackApi
) -> None:
    service = await make_service()
    callback_id, page = await paged(service, slack_api)
    [root] = [m for m in slack_api.roots() if m.callback_id == callback_id]
    assert (PAGE_BUTTONS, {callback_id}, {}) == (
        set(buttons(page)),
        set(buttons(page).values()),
        buttons(root),
    )


async def test_without_a_signing_secret_pages_carry_no_buttons(
    make_service: Make, slack_api: SlackApi
) -> None:
    """No slack.signingSecret: the output is as before, and the route takes no click."""
    service = await make_service(buttons=False)
    _, page = await paged(service, slack_api)
    assert ({}, ["section", "context"]) == (buttons(page), [b["type"] for b in page.blocks])
    body = b"payload=%7B%7D"
    assert 401 == (await click(service, body))[0]


async def test_an_ack_acts_as_the_person_and_updates_the_message(
    make_service: Make, slack_api: SlackApi
) -> None:
    """Alice's Ack acks the fire's item as alice via slack, audited; the message says so and keeps
    its buttons (an acked page may still be resolved)."""
    service = await make_service()
    callback_id, page = await paged(service, slack_api)
    status, reply = await click(service, click_body(page, "sentinel.ack"))
    assert (200, "ephemeral") == (status, reply["response_type"])
    [item] = (await service.store.list_inbox(kind="escalation")).items
    [entry] = await audit(service)
    assert ("acked", "alice", callback_id) == (item.status, item.actor, item.callback_id)
    assert ("alice", "slack", "inbox.ack", item.id) == (entry.actor, entry.via, entry.action, entry.target)
    status_text = [
        e["text"] for b in page.blocks if b.get("block_id") == "sentinel.status" for e in b["elements"]
    ]
    assert (1, True) == (page.updates, status_text[0].startswith("✔ acked by alice at "))
    assert PAGE_BUTTONS == set(buttons(page))


async def test_a_slow_slack_api_does_not_hold_the_answer_to_the_click(
    make_service: Make, slack_api: SlackApi
) -> None:
    """Slack shows a timeout after 3 s: the click is answered while chat.update still waits, and
    the message is updated once Slack's API answers."""
    service = await make_service()
    _, page = await paged(service, slack_api)
    slack_api.hold_updates = True
    status, reply = await click(service, click_body(page, "sentinel.ack"))
    assert (200, "ephemeral", 0) == (status, reply["response_type"], page.updates)
    slack_api.release_updates()
    await wait_for(lambda: page.updates == 1, what="the message updated after the answer")


async def test_the_same_click_twice_changes_nothing_the_second_time(
    make_service: Make, slack_api: SlackApi
) -> None:
    """A click delivered again (the same signed body) moves nothing, audits nothing, updates nothing."""
    service = await make_service()
    _, page = await paged(service, slack_api)
    body = click_body(page, "sentinel.ack")
    headers = slack_headers(body)
    assert 200 == (await click(service, body, headers))[0]
    before = (len(await audit(service)), page.updates, slack_api.calls.count("chat.update"))
    status, reply = await click(service, body, headers)
    assert (200, before) == (
        status,
        (len(await audit(service)), page.updates, slack_api.calls.count("chat.update")),
    )
    assert "acked" in reply["text"]
    assert [("U0ALICE01", reply["text"])] == [(user, text) for _, user, text in slack_api.ephemerals]


async def test_resolve_closes_the_page_and_its_buttons_go(make_service: Make, slack_api: SlackApi) -> None:
    """Resolve resolves the fire's item as alice; the page keeps its status line, not its buttons."""
    service = await make_service()
    _, page = await paged(service, slack_api)
    assert 200 == (await click(service, click_body(page, "sentinel.resolve")))[0]
    [item] = (await service.store.list_inbox(kind="escalation")).items
    assert ("resolved", {}) == (item.status, buttons(page))


async def test_feedback_counts_once_per_person_the_latest_winning(
    make_service: Make, slack_api: SlackApi
) -> None:
    """👍 twice is one feedback and one audit row; a 👎 after it replaces it (SPEC §22)."""
    service = await make_service()
    callback_id, page = await paged(service, slack_api)
    await click(service, click_body(page, "sentinel.feedback_up"))
    await click(service, click_body(page, "sentinel.feedback_up"))  # a second click, signed anew
    assert [("alice", True)] == [
        (f.person, f.useful) for f in (await service.store.get_feedback([callback_id]))[callback_id]
    ]
    await click(service, click_body(page, "sentinel.feedback_down"))
    feedback = (await service.store.get_feedback([callback_id]))[callback_id]
    assert ([("alice", False)], 2) == ([(f.person, f.useful) for f in feedback], len(await audit(service)))


async def test_silence_1h_silences_the_watcher_once(make_service: Make, slack_api: SlackApi) -> None:
    service = await make_service()
    _, page = await paged(service, slack_api)
    await click(service, click_body(page, "sentinel.silence_1h"))
    await click(service, click_body(page, "sentinel.silence_1h"))
    silences = (await service.silences.snapshot()).silences
    assert [("alice", "disk")] == [(s.created_by, s.matchers[0].value) for s in silences]
    assert ["silence.create"] == [e.action for e in await audit(service)]


async def approval_request(service: Service, api: SlackApi) -> tuple[InboxItem, Posted]:
    """An approval for a fire of ``disk``, and its request as Slack shows it (with its buttons)."""
    callback_id, _ = await paged(service, api)
    item = await service.inbox.create(
        "approval", severity="warning", reason="run df?", watcher_id="disk", callback_id=callback_id
    )

    def request() -> Posted | None:
        return next((m for m in api.messages if buttons(m).get("sentinel.approve") == item.id), None)

    return item, await wait_for(request, what="the approval request with its buttons")


async def test_deny_on_an_approval_request_denies_it(make_service: Make, slack_api: SlackApi) -> None:
    """Deny denies the approval as alice via slack; the request says so and loses its buttons."""
    service = await make_service()
    item, message = await approval_request(service, slack_api)
    assert 200 == (await click(service, click_body(message, "sentinel.deny")))[0]
    denied, _ = await service.inbox.get(item.id)
    [entry] = await audit(service)
    assert ("denied", "alice", "approval.deny", {}) == (
        denied.status,
        denied.actor,
        entry.action,
        buttons(message),
    )
    assert "⛔ denied by alice at" in json.dumps(message.blocks, ensure_ascii=False)


async def test_approve_on_an_approval_request_moves_the_approval(
    make_service: Make, slack_api: SlackApi
) -> None:
    """An approval request in Slack carries Approve/Deny on the approval; Approve approves it as
    alice and takes the buttons off."""
    service = await make_service()
    item, message = await approval_request(service, slack_api)
    assert {"sentinel.approve", "sentinel.deny"} == set(buttons(message))
    late_deny = click_body(message, "sentinel.deny")  # clicked on a copy shown before the update
    assert 200 == (await click(service, click_body(message, "sentinel.approve")))[0]
    approved, _ = await service.inbox.get(item.id)
    [entry] = await audit(service)
    assert ("approved", "alice", {}) == (approved.status, approved.actor, buttons(message))
    assert ("alice", "slack", "approval.approve") == (entry.actor, entry.via, entry.action)
    status, reply = await click(service, late_deny)
    assert (200, "approved") == (status, (await service.inbox.get(item.id))[0].status)
    assert 1 == len(await audit(service)), reply


async def test_a_page_that_is_the_thread_root_keeps_what_clicks_did(
    make_service: Make, slack_api: SlackApi
) -> None:
    """No fan-out line: the page is its thread's root. A click shows on the root's outcome line, a
    redraw of the root (the resolved line's) keeps it and the buttons; Resolve takes them off."""
    service = await make_service(fan_out=False)
    _, page = await paged(service, slack_api)
    assert page in slack_api.roots()
    await click(service, click_body(page, "sentinel.ack"))
    assert page.text.startswith("✅ handled by the agent · ✔ acked by alice at ")
    await service.manager.ingest("disk", {"used": 10})
    await wait_for(lambda: "· ✔ resolved —" in page.text, what="the root redrawn by the resolved line")
    assert ("✔ acked by alice" in page.text, PAGE_BUTTONS) == (True, set(buttons(page)))
    await click(service, click_body(page, "sentinel.resolve"))
    assert ("✔ resolved by alice" in page.text, {}) == (True, buttons(page))


async def test_no_secret_or_signature_shows_in_logs_or_answers(
    make_service: Make, slack_api: SlackApi, caplog: pytest.LogCaptureFixture
) -> None:
    """The signing secret, the signatures and the bot token appear in no log line and no answer."""
    caplog.set_level(logging.DEBUG)
    service = await make_service()
    _, page = await paged(service, slack_api)
    body = click_body(page, "sentinel.ack")
    good, bad = slack_headers(body), slack_headers(body, secret="a-wrong-secret-value")
    answers = [await click(service, body, good), await click(service, body, bad), await click(service, body)]
    seen = json.dumps(answers) + caplog.text
    assert 401 == answers[1][0]
    for secret in (SIGNING_SECRET, good["X-Slack-Signature"], bad["X-Slack-Signature"], "xoxb-test-token"):
        assert secret not in seen
