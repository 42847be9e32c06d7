"""The retention loop (``Pruner``): passes in bounded steps, metrics, and nothing to do when disabled."""

from __future__ import annotations

from datetime import timedelta

from pydantic import TypeAdapter

from sentinel_hooks.clock import FakeClock
from sentinel_hooks.config.service import RetentionSpec
from sentinel_hooks.config.targets import TargetSpec
from sentinel_hooks.delivery.targets.pagerduty import resolved_prefix
from sentinel_hooks.delivery.targets.slack_threads import thread_key, thread_prefix
from sentinel_hooks.metrics import Metrics
from sentinel_hooks.retention import Ages, Pruner, target_checkpoints
from sentinel_hooks.store import Settlement, Store
from tests.contract.stores import T0, contract, envelope
from tests.support import wait_for

SPECS: TypeAdapter[dict[str, TargetSpec]] = TypeAdapter(dict[str, TargetSpec])


async def store_with_old_contracts(store: Store, n: int) -> Store:
    """``store`` with ``n`` contracts expired at T0 + 30 s."""
    for i in range(n):
        made = contract(f"c{i}", created=i)
        await store.accept_contract(made, envelope(made.callback_id))
        await store.settle_contracts([Settlement(made.callback_id, "expired")], at=made.deadline)
    return store


async def test_a_pass_works_through_the_backlog_in_batches_and_counts_it(memory_store: Store) -> None:
    """Five old contracts, batches of two: one pass deletes all five; the metric says five."""
    store, metrics = await store_with_old_contracts(memory_store, 5), Metrics()
    clock = FakeClock(T0 + timedelta(days=31))
    pruner = Pruner(store, clock, Ages.from_spec(RetentionSpec()), metrics=metrics, batch=2, pause_s=0)
    done = await pruner.prune()
    assert (5, False, []) == (done.contracts, done.more, (await store.list_contracts()).items)
    assert 5 == metrics.pruned.labels("contracts")._value.get()


async def test_the_background_loop_prunes_without_being_asked(memory_store: Store) -> None:
    """Started, the pruner makes its first pass after ``first_pass_s``."""
    store = await store_with_old_contracts(memory_store, 3)
    pruner = Pruner(
        store, FakeClock(T0 + timedelta(days=31)), Ages(callbacks=timedelta(days=1)), first_pass_s=0
    )
    pruner.start()
    try:
        await wait_for(lambda: _empty(store), what="the first pass")
    finally:
        await pruner.stop()


async def _empty(store: Store) -> bool:
    return not (await store.list_contracts()).items


async def test_with_every_limit_zero_nothing_is_pruned(memory_store: Store) -> None:
    """retention with all zeros: the pruner is disabled, and a pass deletes nothing."""
    zeros = {
        "callbacksDays": 0,
        "inboxClosedDays": 0,
        "observationsPerWatcher": 0,
        "transcriptsDays": 0,
        "auditDays": 0,
    }
    store = await store_with_old_contracts(memory_store, 1)
    pruner = Pruner(
        store, FakeClock(T0 + timedelta(days=365)), Ages.from_spec(RetentionSpec.model_validate(zeros))
    )
    assert (False, 0) == (pruner.enabled, (await pruner.prune()).contracts)


async def test_slack_threads_go_with_their_callback(memory_store: Store) -> None:
    """A bot-token Slack target's thread checkpoint is pruned with its callback; a webhook Slack
    target keeps none, and another callback's thread stays."""
    store = await store_with_old_contracts(memory_store, 1)
    targets = SPECS.validate_python(
        {
            "ops": {"type": "slack", "token": "xoxb-1", "channel": "#ops"},
            "hook": {"type": "slack", "webhookUrl": "https://hooks.slack.com/services/T/B/X"},
        }
    )
    assert (thread_prefix("ops"),) == target_checkpoints(targets)
    for key in (thread_key("ops", "c0"), thread_key("ops", "elsewhere")):
        await store.put_checkpoint(key, {"ts": "1.1"})
    pruner = Pruner(
        store,
        FakeClock(T0 + timedelta(days=31)),
        Ages.from_spec(RetentionSpec()),
        callback_checkpoints=target_checkpoints(targets),
    )
    await pruner.prune()
    kept = await store.get_checkpoints([thread_key("ops", "c0"), thread_key("ops", "elsewhere")])
    assert [thread_key("ops", "elsewhere")] == list(kept)


def test_pagerduty_resolved_marks_go_with_their_callback() -> None:
    """A PagerDuty target's resolved dedup_keys are checkpoints named after the callback: pruned with it."""
    targets = SPECS.validate_python({"pd": {"type": "pagerduty", "routingKey": "k" * 32}})
    assert (resolved_prefix("pd"),) == target_checkpoints(targets)
