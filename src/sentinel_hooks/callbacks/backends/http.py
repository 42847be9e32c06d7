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
from typing import Any

import aiohttp

from sentinel_hooks.callbacks.backends.base import (
    ModelError,
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

    async def post(self, body: dict[str, Any]) -> dict[str, Any]:
        """One request; the decoded JSON object of a 2xx reply. Raises ``ModelError``."""
        data = json.dumps(body, ensure_ascii=False).encode()
        try:
            async with self._open().post(self.url, data=data, headers=self._headers) as response:
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
            self._session = aiohttp.ClientSession(timeout=self._timeout, connector=connector)
        return self._session

    async def close(self) -> None:
        """Close the connection pool; safe to call twice (and before any request)."""
        session, self._session = self._session, None
        if session is not None and not session.closed:
            await session.close()
            await asyncio.sleep(0)  # let the connector's transports close (no ResourceWarning)


def _decode(raw: bytes) -> object:
    try:
        return json.loads(raw) if raw else None
    except ValueError:
        return None
