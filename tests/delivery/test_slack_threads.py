"""One Slack thread per fire (SPEC.md §16): a bot-token target against a Slack Web API stand-in.

The first message of a callback starts a thread, later ones reply in it, and the root shows how
the fire ended. The thread lives in the store (a real SQLite), so another target object on the same
store (a restarted process) replies in it.
"""

from __future__ import annotations

import asyncio
import logging
import random
from dataclasses import replace
from typing import Any

import pytest

from sentinel_hooks.delivery.targets.base import DeliveryError, Message, TargetContext, TransientDeliveryError
from sentinel_hooks.delivery.targets.slack import SlackTarget
from sentinel_hooks.delivery.targets.slack_threads import FINDINGS, KeyedLocks, Thread, outcome_of, thread_key
from sentinel_hooks.store.shortcuts import get_checkpoint
from sentinel_hooks.store.sqlite.store import SqliteStore
from tests.contract.stores import Backend, durable_backend
from tests.delivery.conftest import MakeTarget, message
from tests.delivery.sinks import SLACK_WEBHOOK_PATH, Sink, json_reply
from tests.delivery.slack_api import SlackApi, slack_api
from tests.support import wait_for

__all__ = ["durable_backend", "slack_api"]

CID = "01JFIRE"


def bot(api: SlackApi) -> dict[str, Any]:
    return {"type": "slack", "token": "xoxb-1", "channel": "#ops", "apiBase": api.base()}


def msg(kind: str, text: str = "", callback_id: str = CID) -> Message:
    return message(callback_id=callback_id, kind=kind, text=text or f"the {kind} line")


def key(kind: str, callback_id: str = CID, target: str = "ops") -> str:
    return f"{callback_id}:{target}:{kind}"


@pytest.fixture
def threaded(context: TargetContext, memory_store: SqliteStore) -> TargetContext:
    """The target context with a store: what the service gives its targets."""
    return TargetContext(
        http=context.http, clock=context.clock, base_dir=context.base_dir, store=memory_store
    )


@pytest.fixture
def ops(make_target: MakeTarget, threaded: TargetContext, slack_api: SlackApi) -> SlackTarget:
    target = make_target(bot(slack_api), name="ops", ctx=threaded)
    assert isinstance(target, SlackTarget)
    return target


async def send(target: SlackTarget, kind: str, callback_id: str = CID, text: str = "") -> None:
    await target.send(msg(kind, text, callback_id), idempotency_key=key(kind, callback_id, target.name))


async def test_fanout_then_notify_is_one_root_and_a_reply(ops: SlackTarget, slack_api: SlackApi) -> None:
    """The fan-out line starts the thread; the agent's notify replies in it; the root then shows ✅."""
    await send(ops, "fanout", text="gas_high fired on eth-gas")
    await send(ops, "notify", text="Gas is 182 gwei")
    [root] = slack_api.roots()
    [reply] = slack_api.replies(root)
    assert ("fanout", "notify", "Gas is 182 gwei") == (root.kind, reply.kind, reply.text)
    assert "✅ handled by the agent — gas_high fired on eth-gas" == root.text
    assert {"type": "mrkdwn", "text": "*✅ handled by the agent*"} == root.blocks[0]["text"]


async def test_fallback_replies_and_marks_the_root(ops: SlackTarget, slack_api: SlackApi) -> None:
    """A fallback after the fan-out is a reply, and the root shows ⚠️ fallback."""
    await send(ops, "fanout")
    await send(ops, "fallback")
    [root] = slack_api.roots()
    assert (["fallback"], "⚠️ fallback — the fanout line") == (
        [m.kind for m in slack_api.replies(root)],
        root.text,
    )


async def test_resolved_replies_and_adds_to_the_root(ops: SlackTarget, slack_api: SlackApi) -> None:
    """Resolved after a handled fire: a third message in the thread; the root shows both outcomes."""
    await send(ops, "fanout")
    await send(ops, "notify")
    await send(ops, "resolved")
    [root] = slack_api.roots()
    assert (["notify", "resolved"], "✅ handled by the agent · ✔ resolved — the fanout line") == (
        [m.kind for m in slack_api.replies(root)],
        root.text,
    )


async def test_a_follow_up_after_the_fallback_replies_and_says_so_on_the_root(
    ops: SlackTarget, slack_api: SlackApi
) -> None:
    """The fallback is the root; the agent's follow-up replies in its thread and the root reads
    ⚠️ fallback — agent findings in thread (SPEC §6.4), and ✔ resolved is added after it."""
    await send(ops, "fallback", text="no response from the agent")
    follow_up = replace(msg("notify", "db-1 is out of disk"), follow_up=True)
    await ops.send(follow_up, idempotency_key=key("notify"))
    [root] = slack_api.roots()
    [reply] = slack_api.replies(root)
    assert ("db-1 is out of disk", f"{FINDINGS} — no response from the agent") == (reply.text, root.text)
    await send(ops, "resolved")
    assert f"{FINDINGS} · ✔ resolved — no response from the agent" == slack_api.roots()[0].text


async def test_a_follow_up_after_the_agents_page_keeps_the_root(
    ops: SlackTarget, slack_api: SlackApi
) -> None:
    """After the agent's own page (✅), a follow-up is one more reply and the root is not redrawn."""
    await send(ops, "fanout")
    await send(ops, "notify")
    await ops.send(replace(msg("notify.2"), follow_up=True), idempotency_key=key("notify.2"))
    [root] = slack_api.roots()
    assert (2, "✅ handled by the agent — the fanout line", 1) == (
        len(slack_api.replies(root)),
        root.text,
        root.updates,
    )


async def test_later_notifies_reply_without_repeating_the_outcome(
    ops: SlackTarget, slack_api: SlackApi
) -> None:
    """A second notify is one more reply; the root still says ✅ once, updated once."""
    await send(ops, "fanout")
    await send(ops, "notify")
    await send(ops, "notify.2")
    [root] = slack_api.roots()
    assert (["notify", "notify.2"], "✅ handled by the agent — the fanout line", 1) == (
        [m.kind for m in slack_api.replies(root)],
        root.text,
        root.updates,
    )


async def test_notify_first_starts_the_thread_showing_its_outcome(
    ops: SlackTarget, slack_api: SlackApi
) -> None:
    """With no fan-out, the notify is the root, posted with ✅ already (no update needed)."""
    await send(ops, "notify", text="Gas is 182 gwei")
    await send(ops, "resolved")
    [root] = slack_api.roots()
    assert (["resolved"], "✅ handled by the agent · ✔ resolved — Gas is 182 gwei") == (
        [m.kind for m in slack_api.replies(root)],
        root.text,
    )
    assert ["chat.postMessage", "chat.postMessage", "chat.update"] == slack_api.calls


async def test_escalation_step_replies_and_leaves_the_root(ops: SlackTarget, slack_api: SlackApi) -> None:
    """An escalation step of the fire's callback replies in its thread, also shown in the channel
    (it is there to reach people who have not answered); it says nothing about the outcome."""
    await send(ops, "fanout")
    await ops.send(msg("escalation.1"), idempotency_key="01JITEM:ops:escalation.1")
    await send(ops, "notify")
    [root] = slack_api.roots()
    assert ([("escalation.1", True), ("notify", False)], "✅ handled by the agent — the fanout line") == (
        [(m.kind, m.broadcast) for m in slack_api.replies(root)],
        root.text,
    )


@pytest.mark.parametrize("kind", ["resolved", "escalation.0"])
async def test_a_line_about_no_known_thread_posts_on_its_own(
    ops: SlackTarget, slack_api: SlackApi, memory_store: SqliteStore, kind: str
) -> None:
    """Resolved and escalation lines never start a thread: with none they post plainly, remember
    nothing, and a later fan-out of that id still starts one."""
    await send(ops, kind)
    assert None is await get_checkpoint(memory_store, thread_key("ops", CID))
    await send(ops, "fanout")
    assert ([kind, "fanout"], [None, None]) == (
        [m.kind for m in slack_api.messages],
        [m.thread_ts for m in slack_api.messages],
    )


async def test_two_messages_at_once_start_one_thread(ops: SlackTarget, slack_api: SlackApi) -> None:
    """The outbox sends in parallel: a notify sent while the fan-out is being posted waits for it
    and replies in its thread (without the per-callback lock both would be roots)."""
    slack_api.hold_posts = True
    fanout = asyncio.create_task(send(ops, "fanout"))
    await wait_for(lambda: slack_api.arrived == 1, what="the fan-out's post")
    notify = asyncio.create_task(send(ops, "notify"))
    # the notify either waits for the callback's lock, or (with no lock) reaches Slack too
    await wait_for(lambda: ops_waiting(ops) == 2 or slack_api.arrived == 2, what="the notify to wait or post")
    slack_api.release()
    await asyncio.gather(fanout, notify)
    [root] = slack_api.roots()
    assert (["notify"], 0) == ([m.kind for m in slack_api.replies(root)], ops_waiting(ops))


def ops_waiting(target: SlackTarget) -> int:
    """How many sends of ``CID`` hold or wait for the target's per-callback lock."""
    threads = target._threads  # the lock is internal; the test watches it to release Slack in time
    assert threads is not None
    return threads.locks.users(CID)


async def test_different_callbacks_get_different_threads(ops: SlackTarget, slack_api: SlackApi) -> None:
    """Each fire is its own thread; a notify joins the thread of its own callback."""
    await send(ops, "fanout", callback_id="01JA")
    await send(ops, "fanout", callback_id="01JB")
    await send(ops, "notify", callback_id="01JA")
    first, second = slack_api.roots()
    assert (["01JA"], [], "01JA") == (
        [m.callback_id for m in slack_api.replies(first)],
        slack_api.replies(second),
        first.callback_id,
    )


async def test_a_restart_or_another_replica_keeps_the_thread(
    make_target: MakeTarget, context: TargetContext, slack_api: SlackApi, durable_backend: Backend
) -> None:
    """The root's ts is in the store (SQLite file, Redis): each message sent by a new process
    (new store and target objects over the same data) replies in the thread the first one started."""
    for kind in ("fanout", "notify", "resolved"):
        store = durable_backend.make()
        await store.open()
        try:
            ctx = TargetContext(
                http=context.http, clock=context.clock, base_dir=context.base_dir, store=store
            )
            target = make_target(bot(slack_api), name="ops", ctx=ctx)
            await target.send(msg(kind), idempotency_key=key(kind))
        finally:
            await store.close()
    [root] = slack_api.roots()
    assert (["notify", "resolved"], "✅ handled by the agent · ✔ resolved — the fanout line") == (
        [m.kind for m in slack_api.replies(root)],
        root.text,
    )


@pytest.mark.parametrize("kinds", [["fanout"], ["fanout", "notify"]])
async def test_a_delivery_sent_again_is_not_posted_again(
    ops: SlackTarget, slack_api: SlackApi, kinds: list[str]
) -> None:
    """A delivery whose post was recorded in its thread (the outbox then lost track of it and sent
    it again with the same key) is not posted twice, whether it was the root or a reply."""
    for kind in kinds:
        await send(ops, kind)
    await send(ops, kinds[-1])
    assert kinds == [m.kind for m in slack_api.messages]


async def test_a_failed_root_update_does_not_fail_the_message(
    ops: SlackTarget, slack_api: SlackApi, caplog: pytest.LogCaptureFixture
) -> None:
    """chat.update answering ok: false is logged; the reply is delivered, and its retry posts nothing."""
    slack_api.fail_updates = "cant_update_message"
    await send(ops, "fanout")
    with caplog.at_level(logging.WARNING, logger="sentinel_hooks.delivery.targets.slack"):
        await send(ops, "notify")
    await send(ops, "notify")
    [root] = slack_api.roots()
    assert (["notify"], "the fanout line") == ([m.kind for m in slack_api.replies(root)], root.text)
    assert any("cant_update_message" in r.getMessage() for r in caplog.records)
    assert "xoxb-1" not in caplog.text


async def test_an_unreadable_thread_is_retried_and_nothing_is_posted(
    make_target: MakeTarget, context: TargetContext, slack_api: SlackApi
) -> None:
    """When the store cannot be read, the send fails as transient before posting anything."""
    store = SqliteStore.in_memory()  # never opened: every read fails
    ctx = TargetContext(http=context.http, clock=context.clock, base_dir=context.base_dir, store=store)
    target = make_target(bot(slack_api), name="ops", ctx=ctx)
    with pytest.raises(TransientDeliveryError, match="thread could not be read"):
        await target.send(msg("fanout"), idempotency_key=key("fanout"))
    assert [] == slack_api.calls


@pytest.mark.parametrize(
    ("answer", "status", "transient"),
    [
        ({"ok": False, "error": "ratelimited"}, 429, True),
        ({"ok": False, "error": "internal_error"}, 200, True),
        ({"ok": False, "error": "channel_not_found"}, 200, False),
    ],
)
async def test_a_threaded_post_keeps_the_error_mapping(
    make_target: MakeTarget,
    threaded: TargetContext,
    slack: Sink,
    answer: dict[str, Any],
    status: int,
    transient: bool,
) -> None:
    """Slack's ok: false answers and 429 mean the same with threads as without."""
    slack.reply = json_reply(answer, status=status, headers={"Retry-After": "3"} if status == 429 else None)
    spec = {"type": "slack", "token": "xoxb-1", "channel": "#ops", "apiBase": slack.url("/api/")}
    with pytest.raises(DeliveryError) as caught:
        await make_target(spec, name="ops", ctx=threaded).send(msg("fanout"), idempotency_key=key("fanout"))
    assert transient == isinstance(caught.value, TransientDeliveryError)
    if status == 429:
        assert 3 == caught.value.retry_after_s  # type: ignore[attr-defined]


async def test_a_refused_reply_is_retried_into_the_same_thread(ops: SlackTarget, slack_api: SlackApi) -> None:
    """A reply Slack refused for now raises as transient and is not remembered: its retry replies."""
    await send(ops, "fanout")
    slack_api.fail_posts = "internal_error"
    with pytest.raises(TransientDeliveryError):
        await send(ops, "notify")
    slack_api.fail_posts = None
    await send(ops, "notify")
    [root] = slack_api.roots()
    assert (["notify"], "✅ handled by the agent — the fanout line") == (
        [m.kind for m in slack_api.replies(root)],
        root.text,
    )


async def test_webhook_slack_cannot_thread(
    make_target: MakeTarget, threaded: TargetContext, slack: Sink
) -> None:
    """An incoming webhook posts each message of a callback plainly (no thread_ts), as before."""
    target = make_target({"type": "slack", "webhookUrl": slack.url(SLACK_WEBHOOK_PATH)}, ctx=threaded)
    for kind in ("fanout", "notify", "resolved"):
        await target.send(msg(kind), idempotency_key=key(kind))
    bodies = [r.json() for r in slack.received]
    assert (3, [False] * 3) == (len(bodies), ["thread_ts" in b for b in bodies])


def test_a_checkpoint_without_a_thread_reads_as_none() -> None:
    """A checkpoint that is not a thread (hand-edited, another version) starts a new one."""
    assert [None, None, None] == [
        Thread.from_json({}),
        Thread.from_json({"channel": "C", "ts": "1", "root": {"text": "no other fields"}}),
        Thread.from_json({"channel": "C", "ts": 1, "root": {}}),
    ]


def test_a_thread_round_trips_through_json() -> None:
    """What is stored is what is read back."""
    thread = Thread.started("C0OPS", "1.1", msg("notify"), key("notify")).replied(
        key("resolved"), "1.2", "resolved"
    )
    assert thread == Thread.from_json(thread.to_json())


async def test_keyed_locks_are_dropped_when_free() -> None:
    """A lock lives only while someone holds or waits for it (one per callback being sent, not ever)."""
    locks = KeyedLocks()
    async with locks.hold("a"):
        assert 1 == locks.users("a")
    assert 0 == locks.users("a")
    assert {} == locks._locks


@pytest.mark.parametrize("seed", range(4))
async def test_many_callbacks_sent_at_once_in_any_order_keep_their_threads(
    ops: SlackTarget, slack_api: SlackApi, seed: int
) -> None:
    """Stress: the messages of 12 callbacks (fan-out, two notifies, fallback or resolved, some sent
    twice as a retry would) all at once, shuffled. Each callback ends with one root, each delivery
    key is posted once, and its root shows exactly the outcomes of what was posted in its thread."""
    rng = random.Random(seed)
    sends: list[tuple[str, str]] = []
    for n in range(12):
        kinds = ["fanout", "notify", rng.choice(["notify.2", "fallback"])]
        kinds += [k for k in kinds if rng.random() < 0.3]  # sent again with the same key
        sends += [(f"01JC{n:02d}", kind) for kind in kinds]
    rng.shuffle(sends)
    await asyncio.gather(*(send(ops, kind, callback_id=cid) for cid, kind in sends))
    for cid in {cid for cid, _ in sends}:
        [root] = [m for m in slack_api.roots() if m.callback_id == cid]
        posted = [root.kind] + [m.kind for m in slack_api.replies(root)]
        expected = {kind for c, kind in sends if c == cid}
        shown = {o for o in (outcome_of(k) for k in posted) if o}
        assert (sorted(expected), shown) == (
            sorted(posted),
            set(root.text.split(" — ")[0].split(" · ")) if shown else set(),
        ), cid


@pytest.mark.parametrize(
    ("sent", "carries"),
    [
        (message(kind="notify", page=True), "sentinel.page:ops"),
        (message(kind="fallback", page=True), "sentinel.page:ops"),
        (message(kind="notify.2", follow_up=True), None),
        (message(kind="fanout"), None),
        (message(kind="resolved", page=True), None),
        (
            message(kind="escalation.0", event_name="approval", extra={"inboxItemId": "AP1"}),
            "sentinel.approval:ops",
        ),
        (message(kind="escalation.0", event_name="escalation", extra={"inboxItemId": "ES1"}), None),
    ],
)
async def test_with_a_signing_secret_pages_and_approval_requests_carry_buttons(
    make_target: MakeTarget, context: TargetContext, slack_api: SlackApi, sent: Message, carries: str | None
) -> None:
    """With ``slack.signingSecret`` (``slack_buttons``): a page (notify or fallback) and an approval
    request carry their buttons; follow-ups, fan-out lines, resolved lines and other escalation steps
    none (SPEC §21)."""
    target = make_target(bot(slack_api), name="ops", ctx=replace(context, slack_buttons=True))
    await target.send(sent, idempotency_key=key(sent.kind))
    [posted] = slack_api.messages
    expected = [carries] if carries else []
    assert expected == [b["block_id"] for b in posted.blocks if b["type"] == "actions"]
