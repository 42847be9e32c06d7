"""The connection guard: the host policy applied to sockets that other libraries open (net/guard.py)."""

from __future__ import annotations

import contextvars
import socket
import threading
from collections.abc import Iterator

import pytest

from sentinel_hooks.net.guard import ConnectionRefusedByPolicy, guarded
from sentinel_hooks.net.policy import HostPolicy


@pytest.fixture
def listener() -> Iterator[int]:
    """A TCP listener on 127.0.0.1 (its port); connections are accepted by the kernel's backlog."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    yield server.getsockname()[1]
    server.close()


def connect(host: str, port: int) -> None:
    with socket.create_connection((host, port), timeout=2):
        pass


def in_thread(target: contextvars.Context, host: str, port: int) -> BaseException | None:
    """Connect from another thread running in ``target`` (as Apprise runs its sends)."""
    caught: list[BaseException] = []

    def run() -> None:
        try:
            target.run(connect, host, port)
        except BaseException as exc:
            caught.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(5)
    return caught[0] if caught else None


def test_a_listed_address_connects(listener: int) -> None:
    """127.0.0.1 listed as a literal: the connection is made."""
    with guarded(HostPolicy(("127.0.0.1",))) as guard:
        connect("127.0.0.1", listener)
    assert [] == guard.refusals


def test_a_name_not_in_allowed_hosts_is_refused_before_lookup(listener: int) -> None:
    """``localhost`` is not listed: refused at the lookup, with the reason recorded."""
    with guarded(HostPolicy(("127.0.0.1",))) as guard, pytest.raises(ConnectionRefusedByPolicy):
        connect("localhost", listener)
    assert "'localhost' is not in allowedHosts" in guard.refusals[0]


def test_a_listed_name_does_not_unlock_loopback(listener: int) -> None:
    """``localhost`` listed by name passes the lookup, but its loopback address is refused at connect."""
    with guarded(HostPolicy(("localhost",))) as guard, pytest.raises(ConnectionRefusedByPolicy):
        connect("localhost", listener)
    assert "loopback" in guard.refusals[-1]


def test_the_guard_follows_a_copied_context_into_a_thread(listener: int) -> None:
    """A worker thread running a copy of the guarded context is checked too."""
    with guarded(HostPolicy(())) as guard:
        error = in_thread(contextvars.copy_context(), "127.0.0.1", listener)
    assert isinstance(error, ConnectionRefusedByPolicy)
    assert 1 == len(guard.refusals)


def test_nothing_is_checked_outside_a_guard(listener: int) -> None:
    """Outside ``guarded`` (and in threads that did not copy a guarded context) sockets are untouched."""
    with guarded(HostPolicy(())):
        fresh = contextvars.Context()  # a thread of its own, not a copy of the guarded context
        assert None is in_thread(fresh, "127.0.0.1", listener)
    connect("127.0.0.1", listener)
