"""The resolver the shared connector uses: resolve, then refuse forbidden addresses.

The check lives here, not before the request, because the connector connects to exactly
the addresses its resolver returns (and caches only those): a name that resolves to a
public address when checked and a private one when connected (DNS rebinding) cannot slip
between the two. If ANY address of a name is forbidden the whole name is refused, rather
than silently dropping the bad answers: a name that mixes public and private addresses is
either misconfigured or hostile.
"""

from __future__ import annotations

import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from sentinel_hooks.net.policy import HostPolicy


class CheckingResolver(AbstractResolver):
    """Wraps ``inner`` (the system resolver by default) and applies ``policy`` to every answer."""

    def __init__(self, policy: HostPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._owns_inner = inner is None
        self._inner: AbstractResolver = DefaultResolver() if inner is None else inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """The addresses of ``host``, all allowed; raises ``HostNotAllowed``/``PrivateAddressRefused``."""
        self._policy.check_host(host)
        results = await self._inner.resolve(host, port, family)
        self._policy.check_resolved(host, [result["host"] for result in results])
        return results

    async def close(self) -> None:
        """Close the wrapped resolver when this one created it."""
        if self._owns_inner:
            await self._inner.close()
