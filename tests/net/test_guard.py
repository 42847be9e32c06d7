"""The connection guard: the host policy applied to sockets that other libraries open (net/guard.py)."""

from __future__ import annotations

import contextvars
import socket
import threading
from collections.abc import Iterator

import pytest

from sentinel_hooks.net.guard import ConnectionRefusedByPolicy, guarded
from sentinel_hooks.net.policy import HostPolicy
from tests.net.servers import received


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


def send_datagram(address: tuple[str, int]) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender:
        sender.sendto(b"<14>sentinel test", address)


def test_a_datagram_to_loopback_is_refused(datagrams: socket.socket) -> None:
    """UDP to 127.0.0.1, which the policy does not list: refused, nothing arrives."""
    port = datagrams.getsockname()[1]
    with guarded(HostPolicy(("localhost",))) as guard, pytest.raises(ConnectionRefusedByPolicy):
        send_datagram(("127.0.0.1", port))
    assert "'127.0.0.1' is not in allowedHosts" in guard.refusals[0]
    assert [] == received(datagrams)


def test_a_datagram_to_a_listed_name_is_refused(datagrams: socket.socket) -> None:
    """UDP to ``localhost`` (listed by name): the send resolves the name where no hook sees the
    address, so the datagram is refused and nothing arrives."""
    port = datagrams.getsockname()[1]
    with guarded(HostPolicy(("localhost",))) as guard, pytest.raises(ConnectionRefusedByPolicy):
        send_datagram(("localhost", port))
    assert "datagram to the name 'localhost'" in guard.refusals[0]
    assert [] == received(datagrams)


def test_sendmsg_is_checked_as_sendto(datagrams: socket.socket) -> None:
    """``sendmsg`` with an address: the same rule, nothing arrives."""
    with (
        guarded(HostPolicy(())) as guard,
        socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sender,
        pytest.raises(ConnectionRefusedByPolicy),
    ):
        sender.sendmsg([b"refused"], [], 0, datagrams.getsockname())
    assert 1 == len(guard.refusals)
    assert [] == received(datagrams)


def test_a_datagram_to_a_listed_address_is_sent(datagrams: socket.socket) -> None:
    """127.0.0.1 listed as a literal: the datagram goes (a listed address unlocks loopback)."""
    port = datagrams.getsockname()[1]
    with guarded(HostPolicy(("127.0.0.1",))) as guard:
        send_datagram(("127.0.0.1", port))
    assert ([], [b"<14>sentinel test"]) == (guard.refusals, received(datagrams))
