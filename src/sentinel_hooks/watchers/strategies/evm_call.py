"""The `evm-call` strategy (SPEC.md §3): a contract's view function read over JSON-RPC ``eth_call``.

Each ``poll()`` POSTs ``{"jsonrpc": "2.0", "method": "eth_call", "params": [{to, data},
blockTag]}`` to the watcher's ``endpoint`` through the service's ``SafeHttp``; ``data`` is the
4-byte selector of the canonical signature followed by the ABI-encoded ``args`` (``evm_abi``).

The observation, shaped for conditions::

    {"value": <first output, or null when the function returns nothing>,
     "outputs": [<every output, in order>]}

so ``balanceOf(address)(uint256)`` is watched with ``path: value`` and the ``bool`` of
``(uint256,bool,address)`` with ``path: outputs.1``. Integers are exact JSON integers
(a ``uint256`` is never rounded through a float), addresses EIP-55 checksummed strings, bytes
``0x`` hex, tuples and arrays lists.

Failures are ``ObserveError``: transport and HTTP status errors keep ``SafeHttp``'s hints; a
JSON-RPC error object names its code and message (retryable: the chain may move on); arguments
that do not fit the signature, or a result that does not decode, are not retryable.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from sentinel_hooks.config.watcher import EvmCallWatcher
from sentinel_hooks.core.evm_abi import (
    AbiError,
    Signature,
    call_data,
    decode_outputs,
    parse_signature,
)
from sentinel_hooks.net.errors import NetError
from sentinel_hooks.net.response import HttpResponse, raise_for_status
from sentinel_hooks.watchers.strategies.http_request import observe_failure
from sentinel_hooks.watchers.strategy import Observed, ObserveError, StrategyContext, TransientObserveError

_DATA_SHOWN_CHARS = 200


class EvmCall:
    """Reads one view function of one contract on each poll."""

    def __init__(self, watcher: EvmCallWatcher, context: StrategyContext) -> None:
        self._watcher = watcher
        self._context = context
        self._ids = itertools.count(1)
        self._signature: Signature | None = None
        self._data: str | None = None
        self._setup_error: str | None = None
        spec = watcher.evm_call
        try:
            self._signature = parse_signature(spec.signature)
            self._data = "0x" + call_data(self._signature, spec.args).hex()
        except AbiError as exc:
            self._setup_error = f"evmCall {spec.signature!r}: {exc}"

    @property
    def call_data(self) -> str | None:
        """The ``data`` sent with every call (``0x`` hex), or None if the args do not fit."""
        return self._data

    async def poll(self) -> Observed:
        """Call the function once and decode what it returns."""
        if self._signature is None or self._data is None:
            raise ObserveError(self._setup_error or "evmCall is not usable")
        spec = self._watcher.evm_call
        request = {
            "jsonrpc": "2.0",
            "id": next(self._ids),
            "method": "eth_call",
            "params": [{"to": spec.to, "data": self._data}, spec.block_tag],
        }
        redactor = self._context.redactor
        try:
            response = await self._context.http.request(
                "POST",
                self._watcher.endpoint,
                json=request,
                timeout_s=self._watcher.timeout_ms / 1000,
                max_bytes=self._context.limits.max_response_bytes,
            )
            raise_for_status(response)
        except NetError as exc:
            raise observe_failure(exc, redactor) from exc
        result = self._result(response)
        try:
            outputs = decode_outputs(self._signature, result)
        except AbiError as exc:
            raise ObserveError(f"{self._where()}: {exc}") from exc
        value = {"value": outputs[0] if outputs else None, "outputs": outputs}
        return Observed(value=value, at=self._context.clock.now())

    async def close(self) -> None:
        """Nothing of its own to close (the HTTP client is the service's)."""

    def _result(self, response: HttpResponse) -> bytes:
        """The ``result`` bytes of a JSON-RPC answer; ``ObserveError`` for an error object or junk."""
        try:
            answer = json.loads(response.body)
        except ValueError as exc:
            raise TransientObserveError(f"{self._where()}: the answer is not JSON") from exc
        if not isinstance(answer, dict):
            raise TransientObserveError(f"{self._where()}: the answer is not a JSON-RPC object")
        error = answer.get("error")
        if error is not None:
            raise TransientObserveError(
                self._context.redactor.text(f"{self._where()}: {_rpc_error_text(error)}")
            )
        result = answer.get("result")
        if not isinstance(result, str) or not result.startswith("0x"):
            raise TransientObserveError(
                f"{self._where()}: the answer has no hex 'result' (got {result!r:.80})"
            )
        try:
            return bytes.fromhex(result[2:])
        except ValueError as exc:
            raise TransientObserveError(f"{self._where()}: 'result' is not hex: {result!r:.80}") from exc

    def _where(self) -> str:
        endpoint = self._context.redactor.text(self._watcher.endpoint)
        return f"eth_call {self._watcher.evm_call.signature} on {self._watcher.evm_call.to} via {endpoint}"


def _rpc_error_text(error: Any) -> str:
    if not isinstance(error, dict):
        return f"RPC error {error!r:.200}"
    text = f"RPC error {error.get('code')}: {error.get('message')}"
    data = error.get("data")
    if isinstance(data, str) and data:
        text += f" (data {data[:_DATA_SHOWN_CHARS]}{'…' if len(data) > _DATA_SHOWN_CHARS else ''})"
    return text


def create(watcher: EvmCallWatcher, context: StrategyContext) -> EvmCall:
    """The poll strategy for an ``evm-call`` watcher."""
    return EvmCall(watcher, context)
