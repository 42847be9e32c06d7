"""The policies each orchestrator retries with, as SPEC §3, §5.2 and §6.2 state them."""

from __future__ import annotations

import random

from sentinel_hooks.callbacks.sessions.session import MODEL_BACKOFF
from sentinel_hooks.cluster.connection import FIRST_COMMAND_BACKOFF
from sentinel_hooks.config.service import DeliverySpec
from sentinel_hooks.config.watcher import RetrySpec
from sentinel_hooks.core.retry import Backoff
from sentinel_hooks.delivery.dispatch import RECORD_SENT_BACKOFF, delivery_backoff
from sentinel_hooks.outages import STORE_RETRY
from sentinel_hooks.watchers.retries import watcher_backoff


def test_a_watcher_retries_with_full_jitter_from_its_retry() -> None:
    """retry {maxRetries: 8, baseMs: 500, maxMs: 30000}: nine attempts, full jitter, a hint up to 300 s."""
    spec = RetrySpec.model_validate({"maxRetries": 8, "baseMs": 500, "maxMs": 30000})
    expected = Backoff(base_s=0.5, cap_s=30.0, jitter="full", max_attempts=9, retry_after_cap_s=300.0)
    assert expected == watcher_backoff(spec)


def test_a_watchers_retry_after_is_capped_at_ten_times_max_ms() -> None:
    """A source asking for an hour is waited for 10 x maxMs."""
    policy = watcher_backoff(RetrySpec.model_validate({"maxRetries": 3, "baseMs": 100, "maxMs": 2000}))
    assert 20.0 == policy.delay_s(1, random.Random(0), retry_after_s=3600)


def test_a_delivery_retries_with_equal_jitter_from_delivery() -> None:
    """delivery {maxAttempts: 5, baseMs: 1000, maxMs: 60000}: five attempts, equal jitter, hints in full."""
    spec = DeliverySpec.model_validate({"maxAttempts": 5, "baseMs": 1000, "maxMs": 60000})
    expected = Backoff(base_s=1.0, cap_s=60.0, jitter="equal", max_attempts=5)
    assert expected == delivery_backoff(spec)


def test_recording_an_accepted_send_is_tried_three_times_within_half_a_second() -> None:
    """A send the target took is recorded in 3 tries, equal jitter under 0.2 s then 0.4 s."""
    assert Backoff(base_s=0.2, cap_s=0.4, jitter="equal", max_attempts=3) == RECORD_SENT_BACKOFF


def test_a_model_call_is_tried_three_times_within_half_a_second_to_eight() -> None:
    """Model calls: 3 attempts, full jitter under 0.5 s doubling to 8 s."""
    assert Backoff(base_s=0.5, cap_s=8.0, jitter="full", max_attempts=3) == MODEL_BACKOFF


def test_a_cluster_clients_first_command_is_tried_three_times_at_once() -> None:
    """Three attempts, no pause between them (each is bounded by its command timeout)."""
    rng = random.Random(0)
    assert (3, [0.0, 0.0]) == (
        FIRST_COMMAND_BACKOFF.max_attempts,
        [FIRST_COMMAND_BACKOFF.delay_s(n, rng) for n in (1, 2)],
    )


def test_a_loop_on_a_failing_store_backs_off_from_half_a_second_to_five() -> None:
    """The outbox, the relay, the session queue, the subscription: equal jitter under 0.5 s doubling
    to 5 s, for as long as the store fails."""
    assert Backoff(base_s=0.5, cap_s=5.0, jitter="equal") == STORE_RETRY
