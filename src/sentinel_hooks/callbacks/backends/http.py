"""One model entry's HTTP client: POST a JSON body, get the JSON reply, or a ``ModelError``.

The ``openai`` and ``anthropic`` backends speak their wire formats through this instead of the
vendors' SDKs: building a request in the SDKs (typed-dict transforms, response model
construction, httpx) took 2.0-2.6 ms of CPU per request against 0.3 ms here, and a fire's
session makes at least two requests (bench/RESULTS.md, "Hook sessions").

One connection pool per model entry, opened on first use in the running loop, with no
connection limit of its own (aiohttp's default of 100 capped a 1 s model at 50 fires/s; the
session slots, ``hookConcurrency``, bound how many requests are in flight); no retries (the
session retries, STYLE habit 8). Errors are translated here, once (STYLE habit 5):

* no answer within ``timeoutMs`` → ``TransientModelError`` "no answer within N s (timeoutMs)";
* no connection → ``TransientModelError`` "cannot connect: …; is the server running?";
* an HTTP error status → ``ModelError`` (``TransientModelError`` for 408, 409, 429, 5xx) with
  the server's own message and, for 401/403/404, the key to check;
* a reply that is not a JSON object → ``TransientModelError``.

Every message names the entry (``where``) and passes through the entry's ``Redactor``, so an
API key a server echoes back is masked.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Mapping
from typing import Any

import aiohttp

from sentinel_hooks.callbacks.backends.base import (
    ModelError,
    ToolSpec,
    TransientModelError,
    error_detail,
    status_hint,
    status_retryable,
)
from sentinel_hooks.config.secrets import Redactor


class ModelHttp:
    """POSTs JSON to one URL with fixed headers (the entry's key among them)."""

    def __init__(
        self, *, url: str, headers: dict[str, str], timeout_ms: int, name: str, where: str, redactor: Redactor
    ) -> None:
        self.url = url
        self._headers = {"Content-Type": "application/json", "Accept": "application/json", **headers}
        self._timeout_ms = timeout_ms
        self._timeout = aiohttp.ClientTimeout(total=timeout_ms / 1000)
        self._name = name
        self._where = where
        self._redactor = redactor
        self._session: aiohttp.ClientSession | None = None

    async def post(self, body: dict[str, Any], *, encoded: Mapping[str, str] | None = None) -> dict[str, Any]:
        """One request; the decoded JSON object of a 2xx reply. Raises ``ModelError``.

        ``encoded`` holds more members of the body whose values are JSON text already (the
        tools, ``EncodedTools``); they follow ``body``'s own.
        """
        data = encode_body(body, encoded or {})
        try:
            async with self._open().post(self.url, data=data) as response:
                raw = await response.read()
                status = response.status
                reason = response.reason or ""
        except TimeoutError:
            raise TransientModelError(
                f"{self._where}: no answer within {self._timeout_ms / 1000:g} s (timeoutMs)"
            ) from None
        except aiohttp.ClientError as exc:
            cause = self._redactor.text(str(exc) or type(exc).__name__)
            raise TransientModelError(
                f"{self._where}: cannot connect: {cause}; is the server running?"
            ) from exc
        decoded = _decode(raw)
        if status >= 400:
            fallback = f"{status} {reason}".strip()
            detail = self._redactor.text(
                error_detail(decoded if decoded is not None else raw.decode(errors="replace"), fallback)
            )
            kind = TransientModelError if status_retryable(status) else ModelError
            raise kind(f"{self._where}: HTTP {status}: {detail}{status_hint(status, self._name)}")
        if not isinstance(decoded, dict):
            raise TransientModelError(f"{self._where}: the reply is not a JSON object")
        return decoded

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=0)  # hookConcurrency bounds the requests
            # the session's default headers: not merged into a new CIMultiDict on every request
            self._session = aiohttp.ClientSession(
                timeout=self._timeout, connector=connector, headers=self._headers
            )
        return self._session

    async def close(self) -> None:
        """Close the connection pool; safe to call twice (and before any request)."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()
            await asyncio.sleep(0)  # let the connector's transports close (no ResourceWarning)


def encode_body(body: dict[str, Any], encoded: Mapping[str, str]) -> bytes:
    """``body`` as JSON, with the members of ``encoded`` (name → JSON text) after its own."""
    text = json.dumps(body, ensure_ascii=False)
    if encoded:
        more = "".join(f", {json.dumps(name)}: {value}" for name, value in encoded.items())
        text = f"{text[:-1]}{more}}}" if body else f"{{{more[2:]}}}"
    return text.encode()


class EncodedTools:
    """The JSON text of a list of tool specs in one wire format, encoded once per list.

    The built-in specs are module constants (``tools.tool_specs``) and an MCP server's live as
    long as its offer, so every turn sends the same spec objects; encoding their schemas again
    was about 15 µs of CPU per request (bench/RESULTS.md, issue 18.6). Lists are told apart by
    the identity of their specs (frozen), which the cache keeps alive so an id stays theirs;
    at ``size`` lists it starts again.
    """

    def __init__(self, convert: Callable[[list[ToolSpec]], list[dict[str, Any]]], *, size: int = 64) -> None:
        self._convert = convert
        self._size = size
        self._texts: dict[tuple[int, ...], tuple[tuple[ToolSpec, ...], str]] = {}

    def text(self, tools: list[ToolSpec]) -> str:
        """``convert(tools)`` as JSON text."""
        key = tuple(map(id, tools))
        found = self._texts.get(key)
        if found is None:
            if len(self._texts) >= self._size:
                self._texts.clear()
            found = self._texts[key] = (tuple(tools), json.dumps(self._convert(tools), ensure_ascii=False))
        return found[1]


def _decode(raw: bytes) -> object:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
