"""``SafeHttp``: the one outbound HTTP client every strategy and every delivery goes through.

It owns a single ``aiohttp.ClientSession`` whose sized connector resolves names through
``CheckingResolver``, so the allowlist and private-address rule of SPEC.md §2.1 hold for
the addresses actually connected to. On top of that: redirects are never followed (also
refused by a trace hook for ``ws_connect``, which would otherwise follow them), bodies are
read up to a byte limit, every call has a timeout, cookies are never kept, proxies from
the environment are ignored, and every failure is a ``net.errors.NetError``.

Non-2xx answers are returned, not raised: callers decide (``raise_for_status`` helps).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from types import SimpleNamespace, TracebackType
from typing import Any, Literal, Self

import aiohttp
from aiohttp.abc import AbstractResolver

from sentinel_hooks import __version__
from sentinel_hooks.clock import Clock, SystemClock
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.net.body import media_type
from sentinel_hooks.net.errors import RedirectRefused
from sentinel_hooks.net.policy import HTTP_SCHEMES, WS_SCHEMES, HostPolicy
from sentinel_hooks.net.resolver import CheckingResolver
from sentinel_hooks.net.response import HttpResponse, read_limited, refuse_redirect
from sentinel_hooks.net.translate import translated

DNS_CACHE_TTL_S = 10
USER_AGENT = f"sentinel-hooks/{__version__}"
WebSocket = aiohttp.ClientWebSocketResponse[Literal[True]]


async def _refuse_followed_redirect(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestRedirectParams
) -> None:
    """Trace hook: aiohttp is about to follow a redirect (only ``ws_connect`` lets it); refuse."""
    params.response.close()
    raise RedirectRefused(params.response.status, params.response.headers.get("Location"))


class SafeHttp:
    """Policy-checked, size- and time-bounded HTTP over one shared connection pool.

    Use as ``async with SafeHttp(...) as http:`` or call ``start()``/``close()``.
    ``resolver`` replaces the system resolver underneath the policy check (tests use it).
    """

    def __init__(
        self,
        *,
        allowed_hosts: Sequence[str],
        allow_private_networks: bool,
        max_response_bytes: int,
        request_timeout_s: float,
        pool_size: int = 256,
        resolver: AbstractResolver | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.policy = HostPolicy(tuple(allowed_hosts), allow_private_networks)
        self.max_response_bytes = max_response_bytes
        self.request_timeout_s = request_timeout_s
        self._pool_size = pool_size
        self._inner_resolver = resolver
        self._clock: Clock = clock or SystemClock()
        self._resolver: CheckingResolver | None = None
        self._session: aiohttp.ClientSession | None = None

    @classmethod
    def from_config(cls, config: ServiceConfig, *, clock: Clock | None = None) -> SafeHttp:
        """A client applying ``config``'s allowedHosts, allowPrivateNetworks and limits."""
        return cls(
            allowed_hosts=config.allowed_hosts,
            allow_private_networks=config.allow_private_networks,
            max_response_bytes=config.limits.max_response_bytes,
            request_timeout_s=config.limits.request_timeout_ms / 1000,
            clock=clock,
        )

    async def start(self) -> None:
        """Open the session (idempotent); must run inside the event loop that will use it."""
        if self._session is not None:
            return
        self._resolver = CheckingResolver(self.policy, self._inner_resolver)
        connector = aiohttp.TCPConnector(
            limit=self._pool_size,
            limit_per_host=0,
            use_dns_cache=True,
            ttl_dns_cache=DNS_CACHE_TTL_S,
            resolver=self._resolver,
        )
        trace = aiohttp.TraceConfig()
        trace.on_request_redirect.append(_refuse_followed_redirect)
        self._session = aiohttp.ClientSession(
            connector=connector,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout_s),
            cookie_jar=aiohttp.DummyCookieJar(),
            trust_env=False,
            trace_configs=[trace],
            headers={"User-Agent": USER_AGENT},
        )

    async def close(self) -> None:
        """Close the session, its connections and the resolver (idempotent)."""
        session, resolver = self._session, self._resolver
        self._session = self._resolver = None
        if session is not None:
            await session.close()
        if resolver is not None:
            await resolver.close()

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        """The shared session, for SDKs that take one (e.g. ``slack_sdk``); only after ``start()``.

        Requests made on it still go through the checking resolver and the redirect trace
        hook, but skip ``check_url``, the byte limit and the timeout: callers add those.
        """
        return self._require_session()

    def _require_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise RuntimeError("SafeHttp is not started: call start() or use 'async with'")
        return self._session

    async def request(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        json: Any = None,
        data: str | bytes | None = None,
        timeout_s: float | None = None,
        max_bytes: int | None = None,
    ) -> HttpResponse:
        """Send one request and read the whole answer (any status) within ``timeout_s``.

        Raises ``NetError``: refused host/address, redirect, body over ``max_bytes``
        (default ``max_response_bytes``), timeout (default ``request_timeout_s``), connection failure.
        """
        method = method.upper()
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        limit = self.max_response_bytes if max_bytes is None else max_bytes
        connect_s = min(timeout, self.request_timeout_s)
        client_timeout = aiohttp.ClientTimeout(total=timeout, sock_connect=connect_s)
        with translated(method, url, timeout_s=timeout):
            session = self._require_session()
            target = self.policy.check_url(url, HTTP_SCHEMES)
            async with (
                asyncio.timeout(timeout),
                session.request(
                    method,
                    target,
                    headers=headers,
                    json=json,
                    data=data,
                    allow_redirects=False,
                    timeout=client_timeout,
                ) as answer,
            ):
                refuse_redirect(answer)
                body = await read_limited(answer, limit)
                return HttpResponse(
                    method=method,
                    url=url,
                    status=answer.status,
                    headers=answer.headers,
                    content_type=media_type(answer.headers.get("Content-Type")),
                    charset=answer.charset,
                    body=body,
                    received_at=self._clock.now(),
                )

    @asynccontextmanager
    async def stream(
        self,
        method: str,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float | None = None,
        idle_timeout_s: float | None = None,
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """An open response to read incrementally (SSE): no total timeout.

        ``timeout_s`` (default ``request_timeout_s``) bounds connecting and waiting for the
        headers; ``idle_timeout_s`` bounds each wait for more data (None: no bound). 3xx is
        refused; other statuses are yielded. Failures inside the block become ``NetError``.
        """
        method = method.upper()
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        client_timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=idle_timeout_s)
        with translated(method, url):
            session = self._require_session()
            target = self.policy.check_url(url, HTTP_SCHEMES)
            async with asyncio.timeout(timeout):
                answer = await session.request(
                    method, target, headers=headers, allow_redirects=False, timeout=client_timeout
                )
            try:
                refuse_redirect(answer)
                yield answer
            finally:
                answer.close()

    async def ws_connect(
        self,
        url: str,
        *,
        headers: Mapping[str, str] | None = None,
        heartbeat_s: float | None = None,
        timeout_s: float | None = None,
        max_bytes: int | None = None,
    ) -> WebSocket:
        """Open a WebSocket (``ws://``/``wss://``, same host rules); the caller closes it.

        Messages are capped at ``max_bytes`` (default ``max_response_bytes``); ``heartbeat_s`` sends pings and
        closes the socket when no pong comes back. ``timeout_s`` bounds the handshake.
        """
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        with translated("GET", url, timeout_s=timeout):
            session = self._require_session()
            target = self.policy.check_url(url, WS_SCHEMES)
            async with asyncio.timeout(timeout):
                return await session.ws_connect(
                    target,
                    headers=headers,
                    heartbeat=heartbeat_s,
                    max_msg_size=self.max_response_bytes if max_bytes is None else max_bytes,
                    timeout=aiohttp.ClientWSTimeout(ws_close=timeout),
                )
