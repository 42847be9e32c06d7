"""``SafeHttp``: the one outbound HTTP client every strategy and every delivery goes through.

It owns a single ``aiohttp.ClientSession`` whose connector resolves names through
``CheckingResolver``, so the allowlist and private-address rule of SPEC.md §2.1 hold for
the addresses actually connected to. At most ``pool_size`` requests run at once: a request
first takes a slot, and only then does its timeout start, so a burst of requests waits its
turn instead of timing out in a queue (and failing, and being retried, and growing the
queue). A caller that cannot wait for ever passes ``start_within_s`` and gets ``NoSlot``.
Streams and WebSockets (long-lived, one per subscribed watcher) take no slot.

On top of that: redirects are never followed (``request`` and ``stream`` never ask aiohttp to;
``ws_connect`` and SDKs given ``session`` go through a second session on the same connector
whose trace hook refuses them — kept off the request path, where aiohttp's tracing would cost
every poll a few signal dispatches), bodies are read up to a byte limit,
every call has a timeout, cookies are never kept, proxies from the environment are
ignored, and every failure is a ``net.errors.NetError``. The host rules are decided once
per scheme and host (``HostPolicy.check_parsed`` is a pure function of them) and remembered.

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
from yarl import URL

from sentinel_hooks import __version__
from sentinel_hooks.clock import Clock, SystemClock
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.net.body import media_type
from sentinel_hooks.net.errors import NoSlot, RedirectRefused
from sentinel_hooks.net.policy import HTTP_SCHEMES, WS_SCHEMES, HostPolicy, parse_url
from sentinel_hooks.net.resolver import CheckingResolver
from sentinel_hooks.net.response import HttpResponse, read_limited, refuse_redirect
from sentinel_hooks.net.translate import translated

DNS_CACHE_TTL_S = 10
ALLOWED_ORIGINS_MAX = 10_000  # remembered verdicts (one per scheme and host); cleared when full
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
        self._guarded: aiohttp.ClientSession | None = None  # same connector + redirect trace hook
        self._slots = asyncio.Semaphore(pool_size)
        self._allowed: set[tuple[str, str | None, tuple[str, ...]]] = set()
        self._timeouts: dict[float, aiohttp.ClientTimeout] = {}

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
            limit=0,  # requests are bounded by the slots; streams hold one connection each
            limit_per_host=0,
            use_dns_cache=True,
            ttl_dns_cache=DNS_CACHE_TTL_S,
            resolver=self._resolver,
        )
        trace = aiohttp.TraceConfig()
        trace.on_request_redirect.append(_refuse_followed_redirect)
        settings: dict[str, Any] = {
            "connector": connector,
            "timeout": aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout_s),
            "cookie_jar": aiohttp.DummyCookieJar(),
            "trust_env": False,
            "headers": {"User-Agent": USER_AGENT},
        }
        self._session = aiohttp.ClientSession(**settings)
        self._guarded = aiohttp.ClientSession(**settings, connector_owner=False, trace_configs=[trace])

    async def close(self) -> None:
        """Close the session, its connections and the resolver (idempotent)."""
        session, guarded, resolver = self._session, self._guarded, self._resolver
        self._session = self._guarded = self._resolver = None
        if guarded is not None:
            await guarded.close()
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
        return self._require_guarded()

    def _require_guarded(self) -> aiohttp.ClientSession:
        if self._guarded is None:
            raise RuntimeError("SafeHttp is not started: call start() or use 'async with'")
        return self._guarded

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
        start_within_s: float | None = None,
    ) -> HttpResponse:
        """Send one request and read the whole answer (any status) within ``timeout_s``.

        The timeout starts once the request holds a slot; ``start_within_s`` bounds the wait
        for one (None: wait as long as it takes).

        Raises ``NetError``: refused host/address, redirect, body over ``max_bytes``
        (default ``max_response_bytes``), timeout (default ``request_timeout_s``), connection
        failure, ``NoSlot`` (no slot within ``start_within_s``; nothing was sent).
        """
        method = method.upper()
        timeout = self.request_timeout_s if timeout_s is None else timeout_s
        limit = self.max_response_bytes if max_bytes is None else max_bytes
        client_timeout = self._connect_timeout(min(timeout, self.request_timeout_s))
        with translated(method, url, timeout_s=timeout):
            session = self._require_session()
            target = self._checked_url(url, HTTP_SCHEMES)
            await self._take_slot(start_within_s)
            try:
                return await self._send(
                    session, method, url, target, headers, json, data, timeout, client_timeout, limit
                )
            finally:
                self._slots.release()

    async def _take_slot(self, within_s: float | None) -> None:
        """Wait for a request slot (at most ``within_s``, else ``NoSlot``)."""
        if not self._slots.locked():
            await self._slots.acquire()  # free: no waiting, no timer
            return
        try:
            async with asyncio.timeout(within_s):
                await self._slots.acquire()
        except TimeoutError:
            raise NoSlot(
                f"did not start: all {self._pool_size} request slots stayed busy for {within_s:g} s"
            ) from None

    def _connect_timeout(self, connect_s: float) -> aiohttp.ClientTimeout:
        """aiohttp's timeout for connecting only: the whole request is bounded by ``asyncio.timeout``."""
        found = self._timeouts.get(connect_s)
        if found is None:
            found = self._timeouts[connect_s] = aiohttp.ClientTimeout(total=None, sock_connect=connect_s)
        return found

    def _checked_url(self, url: str, schemes: tuple[str, ...]) -> URL:
        """``url`` parsed and checked against the host rules, whose verdict is remembered per
        scheme and host (the policy is fixed for the client's life).

        The rules are pure functions of the scheme and host, so only the parse is left per
        request, as any client makes (aiohttp would parse the text itself); the addresses
        actually connected to are still checked on every connection by the resolver. Parsed
        URLs were remembered before, per URL: about 530 bytes each, 53 MB at 100,000 polled
        watchers, and past the bound every poll of a million watchers missed anyway.
        """
        target = parse_url(url)
        key = (target.scheme, target.raw_host, schemes)
        if key not in self._allowed:
            self.policy.check_parsed(target, schemes)  # a refusal raises and is not remembered
            if len(self._allowed) >= ALLOWED_ORIGINS_MAX:
                self._allowed.clear()
            self._allowed.add(key)
        return target

    async def _send(
        self,
        session: aiohttp.ClientSession,
        method: str,
        url: str,
        target: URL,
        headers: Mapping[str, str] | None,
        json: Any,
        data: str | bytes | None,
        total_s: float,
        client_timeout: aiohttp.ClientTimeout,
        limit: int,
    ) -> HttpResponse:
        """The request itself, within ``total_s`` (the caller holds a slot)."""
        async with (
            asyncio.timeout(total_s),
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
            target = self._checked_url(url, HTTP_SCHEMES)
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
            session = self._require_guarded()
            target = self.policy.check_url(url, WS_SCHEMES)
            async with asyncio.timeout(timeout):
                return await session.ws_connect(
                    target,
                    headers=headers,
                    heartbeat=heartbeat_s,
                    max_msg_size=self.max_response_bytes if max_bytes is None else max_bytes,
                    timeout=aiohttp.ClientWSTimeout(ws_close=timeout),
                )
