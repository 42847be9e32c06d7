"""Tests for the exception tree: transient failures are told apart by type."""

from __future__ import annotations

import pytest

from sentinel_hooks.callbacks.backends.base import ModelError, TransientModelError
from sentinel_hooks.delivery.targets.base import DeliveryError, TransientDeliveryError, delivery_error
from sentinel_hooks.errors import SentinelError, StoreError, StoreUnavailable, TransientError
from sentinel_hooks.net.errors import (
    CertificateRejected,
    ConnectionFailed,
    ConnectTimeout,
    HostNotAllowed,
    HttpStatusError,
    NetError,
    NoSlot,
    RequestTimeout,
    TransientHttpStatusError,
    status_error,
)
from sentinel_hooks.watchers.strategy import (
    NoObservation,
    ObserveError,
    PollSkipped,
    TransientObserveError,
    observe_error,
)

TRANSIENT_TWINS = [
    (TransientObserveError, ObserveError),
    (NoObservation, ObserveError),
    (TransientDeliveryError, DeliveryError),
    (TransientModelError, ModelError),
    (TransientHttpStatusError, HttpStatusError),
    (ConnectionFailed, NetError),
    (ConnectTimeout, NetError),
    (RequestTimeout, NetError),
    (StoreUnavailable, StoreError),
]
PERMANENT = [ObserveError, PollSkipped, DeliveryError, ModelError, HttpStatusError, HostNotAllowed, NoSlot]


@pytest.mark.parametrize(("transient", "family"), TRANSIENT_TWINS)
def test_a_transient_error_belongs_to_its_family(transient: type[Exception], family: type[Exception]) -> None:
    """Each transient class is caught with its family and also as a TransientError."""
    assert (True, True) == (issubclass(transient, family), issubclass(transient, TransientError))


@pytest.mark.parametrize("permanent", PERMANENT)
def test_a_permanent_error_is_not_transient(permanent: type[Exception]) -> None:
    """The family bases and the failures that will not pass are no TransientError."""
    assert not issubclass(permanent, TransientError)


def test_retryable_mirrors_the_type() -> None:
    """``retryable`` is True exactly for transient errors."""
    assert (True, False, True) == (
        TransientDeliveryError("x").retryable,
        DeliveryError("x").retryable,
        StoreUnavailable("x").retryable,
    )


def test_a_rejected_certificate_is_not_transient() -> None:
    """A certificate that does not verify fails alike next time."""
    assert not isinstance(CertificateRejected("TLS certificate rejected"), TransientError)


@pytest.mark.parametrize(
    ("status", "transient"), [(500, True), (503, True), (408, True), (425, True), (429, True), (404, False)]
)
def test_status_error_picks_the_class(status: int, transient: bool) -> None:
    """5xx, 408, 425 and 429 make a TransientHttpStatusError, other statuses an HttpStatusError."""
    error = status_error(status, retry_after_s=3.0)
    assert (status, transient, 3.0) == (error.status, isinstance(error, TransientError), error.retry_after_s)


def test_observe_error_keeps_a_transient_failures_hint() -> None:
    """A transient NetError becomes a transient ObserveError with the same Retry-After."""
    error = observe_error("GET https://x: HTTP 429", like=status_error(429, retry_after_s=12.0))
    assert isinstance(error, TransientObserveError)
    assert 12.0 == error.retry_after_s


def test_observe_error_of_a_permanent_failure_is_permanent() -> None:
    """A 404 stays permanent as an ObserveError."""
    assert ObserveError is type(observe_error("GET https://x: HTTP 404", like=status_error(404)))


def test_delivery_error_follows_the_failure() -> None:
    """A connection failure is a transient delivery failure; a refused host a permanent one."""
    assert (TransientDeliveryError, DeliveryError) == (
        type(delivery_error("down", like=ConnectionFailed("refused"))),
        type(delivery_error("refused", like=HostNotAllowed("not allowed"))),
    )


def test_every_error_is_a_sentinel_error() -> None:
    """The tree has one root."""
    assert all(issubclass(kind, SentinelError) for pair in TRANSIENT_TWINS for kind in pair)
