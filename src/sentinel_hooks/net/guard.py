"""The host policy for connections that libraries open themselves (Apprise's notifiers).

Every request Sentinel makes goes through ``SafeHttp``, whose resolver applies the host policy
to the addresses it connects to. Apprise cannot use it: its notifiers send with ``requests`` and
``smtplib`` in Apprise's own worker threads and accept no connector. Python's audit hooks
(PEP 578) see every name lookup (``socket.getaddrinfo``), every connect (``socket.connect``) and
every datagram sent to an address (``socket.sendto``, ``socket.sendmsg``) in the process, whichever
library makes it, so one hook applies the same ``HostPolicy`` there: a name must be in
allowedHosts, and the address connected or sent to must be public unless listed (or
``allowPrivateNetworks``). A datagram is checked as a lookup and a connect at once: its address
must be an IP literal that passes both, since a name given to ``sendto`` is resolved where no hook
sees the address (the apprise target refuses UDP notifiers at load anyway, ``config.apprise_urls``;
this keeps any datagram a library sends inside the policy).

The hook is installed once, on first use, and stays (audit hooks cannot be removed); it does
nothing unless the running context holds a ``Guard``, which ``guarded`` sets around a library
call. Apprise runs each send in a worker thread with a copy of the caller's context
(``contextvars.copy_context``), so the guard follows the send into that thread and nothing
else in the process is affected. A refused connection raises ``ConnectionRefusedByPolicy`` (an
``OSError``, which HTTP and SMTP clients report as a failed connection) and is recorded in the
guard, so the caller can tell a refusal (permanent) from a network failure (transient).

Not covered: a library that goes through a proxy from the environment connects to the proxy,
so only the proxy's host is checked (``requests`` honours ``HTTPS_PROXY``).
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from sentinel_hooks.config.hosts import normalise_ip
from sentinel_hooks.net.errors import NetError
from sentinel_hooks.net.policy import HostPolicy

_CURRENT: ContextVar[Guard | None] = ContextVar("sentinel_connection_guard", default=None)
_INET = (socket.AF_INET, socket.AF_INET6)
_SENDS = ("socket.sendto", "socket.sendmsg")


class ConnectionRefusedByPolicy(PermissionError):
    """A connection the host policy refuses (an ``OSError``, so clients treat it as a failed connect)."""


@dataclass
class Guard:
    """The policy for one guarded call, and the refusals it made (in order)."""

    policy: HostPolicy
    refusals: list[str] = field(default_factory=list)

    def check_name(self, host: Any) -> None:
        """A name about to be resolved (or an IP literal about to be used) must be allowed."""
        if host is None:
            return
        text = host.decode("ascii", "replace") if isinstance(host, bytes) else str(host)
        try:
            self.policy.check_host(text)
        except NetError as exc:
            self._refuse(exc.reason)

    def check_connect(self, sock: Any, address: Any) -> None:
        """The address about to be connected to must pass the private-address rule."""
        if getattr(sock, "family", None) not in _INET or not isinstance(address, tuple) or not address:
            return  # a Unix socket (a local notifier such as D-Bus) reaches no host
        ip = normalise_ip(str(address[0]).split("%", 1)[0])
        if ip is None:
            self._refuse(f"connection to {address[0]!r}, which is not an IP address")
            return
        category = self.policy.address_refusal(ip)
        if category is not None:
            self._refuse(
                f"address {ip} is {category}; refused (set allowPrivateNetworks: true, "
                "or list the address itself in allowedHosts)"
            )

    def check_send(self, sock: Any, address: Any) -> None:
        """A datagram about to be sent to ``address``: the name rule and the address rule at once."""
        if getattr(sock, "family", None) not in _INET or not isinstance(address, tuple) or not address:
            return  # a connected socket (its connect was checked) or a Unix socket
        self.check_name(address[0])
        if normalise_ip(str(address[0]).split("%", 1)[0]) is None:
            self._refuse(
                f"datagram to the name {address[0]!r}, whose address cannot be checked "
                "(it is resolved inside the send); send to an IP address listed in allowedHosts"
            )
        self.check_connect(sock, address)

    def _refuse(self, reason: str) -> None:
        self.refusals.append(reason)
        raise ConnectionRefusedByPolicy(reason)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    """The audit hook: cheap for every other event, the policy for lookups, connects and sends."""
    if event == "socket.getaddrinfo":
        guard = _CURRENT.get()
        if guard is not None:
            guard.check_name(args[0])
    elif event == "socket.connect":
        guard = _CURRENT.get()
        if guard is not None:
            guard.check_connect(args[0], args[1])
    elif event in _SENDS:
        guard = _CURRENT.get()
        if guard is not None:
            guard.check_send(args[0], args[1])


@cache
def _install() -> None:
    """Install the audit hook, once per process."""
    sys.addaudithook(_audit)


@contextmanager
def guarded(policy: HostPolicy) -> Iterator[Guard]:
    """Apply ``policy`` to every connection made in this context (and in worker threads that run
    with a copy of it) until the block ends."""
    _install()
    guard = Guard(policy)
    token = _CURRENT.set(guard)
    try:
        yield guard
    finally:
        _CURRENT.reset(token)
