"""One page, then follow-ups (SPEC §6.4): the first message that settles a contract pages
people; every later agent notify is delivered as a follow-up of it, never refused and never a
second page."""

from __future__ import annotations

import json
from pathlib import Path

from sentinel_hooks.relay.fallback import STILL_INVESTIGATING
from sentinel_hooks.relay.relay import progress_key
from sentinel_hooks.store.records import Delivery
from tests.relay.rig import NOTIFY, kinds, started, toolbox
from tests.service.test_api import call
from tests.support import Sink, wait_for


async def test_a_notify_after_the_fallback_is_delivered_as_a_follow_up(tmp_path: Path, sink: Sink) -> None:
    """The agent answers after its deadline: the fallback paged people, and the late notify
    reaches them as a follow-up (``page`` false, ``inReplyTo`` the callback), told so."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        box, contract = await toolbox(service)
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        result = await box.execute(NOTIFY, history=[])
        assert (True, "followup", ["hook"]) == (result["ok"], result["deliveredAs"], result["delivered"])
        [fallback] = sink.bodies("fallback")
        [follow_up] = sink.bodies("notify")
        assert (True, None) == (fallback["page"], fallback.get("inReplyTo"))
        assert (False, contract.callback_id) == (follow_up["page"], follow_up["inReplyTo"])
        current = await service.store.get_contract(contract.callback_id)
        assert current is not None
        assert "fallback_sent" == current.state
    finally:
        await service.stop()


async def test_the_agents_first_message_is_the_page_and_the_next_a_follow_up(
    tmp_path: Path, sink: Sink
) -> None:
    """In time, the first notify pages (``page`` true, contract fulfilled); the second keeps the
    notify numbering (``notify.2``) and is a follow-up."""
    service = await started(tmp_path, sink, timeout_ms=20_000)
    try:
        box, _ = await toolbox(service)
        first = await box.execute(NOTIFY, history=[])
        second = await box.execute(NOTIFY, history=[])
        assert ("fulfilled", None, "followup") == (
            first["contract"],
            first.get("deliveredAs"),
            second["deliveredAs"],
        )
        assert ["notify", "notify.2"] == kinds(sink)
        assert [True, False] == [body["page"] for body in sink.bodies()]
    finally:
        await service.stop()


async def test_a_follow_up_that_fails_is_retried_then_kept_in_the_inbox(tmp_path: Path, sink: Sink) -> None:
    """A follow-up is delivered durably: a 503 is retried, a lasting failure becomes a
    ``delivery_failure`` item, and the contract stays as the fallback left it."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        box, contract = await toolbox(service)
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        sink.statuses = [503, 503, 503]
        result = await box.execute(NOTIFY, history=[])
        assert (True, "followup", ["hook"]) == (result["ok"], result["deliveredAs"], result["retrying"])

        async def dead_letters() -> list[str] | None:
            page = await service.store.list_inbox(kind="delivery_failure")
            return [item.callback_id or "" for item in page.items] or None

        assert [contract.callback_id] == await wait_for(dead_letters, what="the dead letter")
        assert ["fallback", "notify", "notify", "notify"] == kinds(sink)
        current = await service.store.get_contract(contract.callback_id)
        assert current is not None
        assert "fallback_sent" == current.state
    finally:
        await service.stop()


async def test_a_follow_up_sent_again_after_a_crash_is_one_delivery(tmp_path: Path, sink: Sink) -> None:
    """The same notify handed over twice (a session resumed after kill -9 repeats it) keeps one
    delivery and one message at the target: the key is the notify's ordinal."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        box, contract = await toolbox(service)
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        await box.execute(NOTIFY, history=[])
        box.notified = 0  # as a resumed session counts it from a transcript without the result
        again = await box.execute(NOTIFY, history=[])
        assert (True, 1) == (again["ok"], again["notify"])
        deliveries: list[Delivery] = await service.store.list_deliveries(contract.callback_id)
        assert ["fallback", "notify"] == sorted(d.kind for d in deliveries)
        assert ["fallback", "notify"] == kinds(sink)
        assert [False] == [json.loads(r["raw"])["page"] for r in sink.received[1:]]
    finally:
        await service.stop()


async def test_a_target_without_follow_ups_is_left_out_of_them(tmp_path: Path, sink: Sink) -> None:
    """``followUps: false`` (the default of Apprise and incoming-webhook Slack): the fallback
    reaches the target, the follow-up does not, and the tool result names it."""
    quiet = f'quiet: {{type: webhook, url: "{sink.url("/quiet")}", followUps: false}}'
    service = await started(tmp_path, sink, timeout_ms=300, targets=quiet, watcher_targets="[hook, quiet]")
    try:
        box, _ = await toolbox(service)
        await wait_for(lambda: len(sink.bodies("fallback")) == 2 or None, what="both fallbacks")
        result = await box.execute(NOTIFY, history=[])
        assert (["hook"], ["quiet"]) == (result["delivered"], result["leftOut"])
        assert ["/in"] == [
            r["path"] for r in sink.received if r["headers"]["Idempotency-Key"].endswith("notify")
        ]
    finally:
        await service.stop()


async def test_the_fallback_says_the_agent_still_investigates(tmp_path: Path, sink: Sink) -> None:
    """A session still running at the deadline: the fallback ends with the line that promises
    its findings in the thread."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        _, contract = await toolbox(service)
        await service.store.put_checkpoint(progress_key(contract.callback_id), {"status": "running"})
        [fallback] = await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback")
        assert STILL_INVESTIGATING == fallback["message"].splitlines()[-1]
    finally:
        await service.stop()


async def test_the_fallback_of_a_finished_session_promises_nothing(tmp_path: Path, sink: Sink) -> None:
    """A session that ended without a notify: the fallback has no "still investigating" line."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        _, contract = await toolbox(service)
        await service.store.put_checkpoint(progress_key(contract.callback_id), {"status": "done"})
        [fallback] = await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback")
        assert STILL_INVESTIGATING not in fallback["message"]
    finally:
        await service.stop()


async def test_the_callback_shows_its_follow_ups(tmp_path: Path, sink: Sink) -> None:
    """``GET /api/v1/callbacks/{id}``: the follow-ups are among the deliveries (``page`` false,
    ``follow_up`` true) and the contract counts them (``followUps``)."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        box, contract = await toolbox(service)
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        await box.execute(NOTIFY, history=[])
        await box.execute(NOTIFY, history=[])
        status, shown = await call(service, "GET", f"/api/v1/callbacks/{contract.callback_id}")
        assert (200, 2) == (status, shown["callback"]["followUps"])
        marks = {d["kind"]: (d["message"]["page"], d["message"]["follow_up"]) for d in shown["deliveries"]}
        assert {"fallback": (True, False), "notify": (False, True), "notify.2": (False, True)} == marks
    finally:
        await service.stop()
