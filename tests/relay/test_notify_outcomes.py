"""One message per fire through a running service (SPEC.md §6.1): a notify whose first attempt
fails, several notifies, a notify that fails for good, and a session waiting for an approval."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from sentinel_hooks.callbacks.backends.base import ToolCall
from sentinel_hooks.callbacks.sessions.tools import Paused
from sentinel_hooks.service import Service
from sentinel_hooks.store.records import Contract, utc_ms
from tests.relay.rig import NOTIFY, kinds, started, toolbox
from tests.support import Sink, wait_for

ONE_S = timedelta(seconds=1)


async def contract_of(service: Service, callback_id: str) -> Contract:
    found = await service.store.get_contract(callback_id)
    assert found is not None
    return found


async def state_is(service: Service, callback_id: str, state: str) -> bool:
    return (await contract_of(service, callback_id)).state == state


def notify(message: str, call_id: str = "n") -> ToolCall:
    return ToolCall(call_id, "sentinel_act", {"action": "notify", "message": message})


async def test_a_notify_whose_first_attempt_gets_429_fulfils_on_the_retry(tmp_path: Path, sink: Sink) -> None:
    """The first attempt is refused with 429, the retry is accepted: the contract is fulfilled
    and people get the agent's message once, and no fallback ever."""
    sink.statuses = [429]
    sink.retry_after = "0"
    service = await started(tmp_path, sink, timeout_ms=1_500)
    try:
        box, contract = await toolbox(service)
        result = await box.execute(NOTIFY, history=[])
        assert (True, [], ["hook"], "notifying") == (
            result["ok"],
            result["delivered"],
            result["retrying"],
            result["contract"],
        )
        assert "do not send it again" in result["note"]
        await wait_for(lambda: state_is(service, contract.callback_id, "fulfilled"), what="fulfilled")
        assert [] == await service.store.claim_due(contract.deadline + timedelta(hours=1))
        assert ["notify", "notify"] == kinds(sink)  # the refused attempt and the accepted retry
        assert [] == sink.bodies("fallback")
    finally:
        await service.stop()


async def test_three_notifies_are_three_messages_with_their_own_keys(tmp_path: Path, sink: Sink) -> None:
    """Each notify of one callback reaches the target, under notify, notify.2, notify.3."""
    service = await started(tmp_path, sink, timeout_ms=20_000)
    try:
        box, contract = await toolbox(service)
        results = [await box.execute(notify(f"update {n}", f"n{n}"), history=[]) for n in (1, 2, 3)]
        assert [1, 2, 3] == [r["notify"] for r in results]
        assert all(r["delivered"] == ["hook"] for r in results)
        assert ["notify", "notify.2", "notify.3"] == kinds(sink)
        assert ["update 1", "update 2", "update 3"] == [b["message"] for b in sink.bodies()]
        assert "fulfilled" == (await contract_of(service, contract.callback_id)).state
    finally:
        await service.stop()


async def test_a_notify_refused_for_good_returns_the_contract_and_the_fallback_follows(
    tmp_path: Path, sink: Sink
) -> None:
    """A 400 is not retried: the contract is pending again, the fallback arrives within a second
    of the deadline, and the agent's message waits in a delivery_failure inbox item."""
    sink.statuses = [400]
    service = await started(tmp_path, sink, timeout_ms=600)
    try:
        box, contract = await toolbox(service)
        result = await box.execute(NOTIFY, history=[])
        assert (False, ["hook"], "pending") == (result["ok"], result["failed"], result["contract"])
        assert "fallback" in result["error"]
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        settled = await contract_of(service, contract.callback_id)
        assert settled.state == "fallback_sent"
        assert settled.settled_at is not None
        assert settled.settled_at <= settled.deadline + ONE_S
        failures = (await service.inbox.list(kind="delivery_failure")).items
        assert ["db-1 disk is fine again"] == [i.detail["delivery"]["message"]["text"] for i in failures]
    finally:
        await service.stop()


async def test_a_notify_failing_for_good_after_the_deadline_gets_the_fallback_at_once(
    tmp_path: Path, sink: Sink
) -> None:
    """503 on every attempt, the last one after the deadline: no fallback while a retry could
    succeed, then the fallback within a second of the final failure."""
    sink.statuses = [503, 503, 503]
    service = await started(tmp_path, sink, timeout_ms=200)
    try:
        box, contract = await toolbox(service)
        result = await box.execute(NOTIFY, history=[])
        assert (True, ["hook"]) == (result["ok"], result["retrying"])
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        failed = await service.store.list_deliveries(contract.callback_id)
        notify_failed_at = next(d.updated_at for d in failed if d.kind == "notify")
        settled = await contract_of(service, contract.callback_id)
        assert settled.settled_at is not None
        assert notify_failed_at > settled.deadline  # the deadline passed while it was being retried
        assert notify_failed_at <= settled.settled_at <= notify_failed_at + ONE_S
        assert ["notify", "notify", "notify", "fallback"] == kinds(sink)
    finally:
        await service.stop()


async def test_an_approval_pauses_the_deadline_and_the_agent_reports_after_it(
    tmp_path: Path, sink: Sink
) -> None:
    """While an approval is open the contract waits (no fallback at the deadline), the request
    reaches people at once, and after the decision the agent's report is delivered."""
    service = await started(tmp_path, sink, timeout_ms=400)
    try:
        box, contract = await toolbox(service)
        command = ToolCall("c", "sentinel_act", {"action": "run_command", "command": "true"})
        try:
            await box.execute(command, history=[])
            raise AssertionError("the policy should have asked for an approval")
        except Paused as paused:
            item_id = paused.item_id
        assert await state_is(service, contract.callback_id, "awaiting_approval")
        request = await wait_for(lambda: sink.bodies("escalation.0") or None, what="the approval request")
        assert f"sentinel approvals approve {item_id}" in request[0]["message"]
        past = contract.deadline + 2 * ONE_S  # two relay passes at least after the deadline
        await wait_for(lambda: service.clock.now() > past, what="time past the deadline")
        assert await state_is(service, contract.callback_id, "awaiting_approval")
        decided_at = utc_ms(service.clock.now())  # deadlines are kept to the millisecond
        await service.inbox.approve(item_id, actor="alice")
        resumed = await contract_of(service, contract.callback_id)
        assert "pending" == resumed.state
        assert resumed.deadline >= decided_at + timedelta(milliseconds=400)
        result = await box.execute(notify("restarted nginx, all good"), history=[])
        assert (["hook"], "fulfilled") == (result["delivered"], result["contract"])
        assert [] == sink.bodies("fallback")
    finally:
        await service.stop()


async def test_a_denied_approval_gives_a_fresh_deadline_then_the_fallback(tmp_path: Path, sink: Sink) -> None:
    """Denied, and the agent says nothing more: the fallback goes at the new deadline."""
    service = await started(tmp_path, sink, timeout_ms=300)
    try:
        box, contract = await toolbox(service)
        command = ToolCall("c", "sentinel_act", {"action": "run_command", "command": "true"})
        item_id = ""
        try:
            await box.execute(command, history=[])
        except Paused as paused:
            item_id = paused.item_id
        started_at = time.monotonic()
        await service.inbox.deny(item_id, actor="bob", note="not now")
        await wait_for(lambda: sink.bodies("fallback") or None, what="the fallback at the sink")
        settled = await contract_of(service, contract.callback_id)
        assert settled.settled_at is not None
        assert settled.deadline <= settled.settled_at <= settled.deadline + ONE_S
        assert time.monotonic() - started_at >= 0.25  # it waited for the new deadline
    finally:
        await service.stop()
