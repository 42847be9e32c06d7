"""`evm-call` against a JSON-RPC server on 127.0.0.1 that checks the call data it receives."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from aiohttp import web
from eth_utils.crypto import keccak
from pydantic import ValidationError
from yarl import URL

from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.watcher import WATCHER_ADAPTER, EvmCallWatcher
from sentinel_hooks.watchers.strategies import evm_call
from sentinel_hooks.watchers.strategies.evm_call import EvmCall
from sentinel_hooks.watchers.strategy import ObserveError
from tests.net.servers import OpenHttp, Serve
from tests.watchers.strategies.conftest import MakeContext

TOKEN = "0x" + "11" * 20
HOLDER = "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaed"  # EIP-55's first example, lowercased
HOLDER_CHECKSUMMED = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed"
BALANCE = 2**200 + 1  # far past float precision: must arrive exact
BALANCE_OF = "70a08231"  # keccak256("balanceOf(address)")[:4], as every ERC-20 tool knows it


def word(hex_digits: str) -> str:
    """A 32-byte ABI word holding ``hex_digits`` right-aligned."""
    return hex_digits.rjust(64, "0")


class RpcServer:
    """A JSON-RPC endpoint: answers by selector with canned results and records each request."""

    def __init__(self, answers: dict[str, dict[str, Any]], status: int = 200) -> None:
        self.answers = answers
        self.status = status
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        if self.status != 200:
            return web.Response(status=self.status, text="node overloaded")
        data: str = body["params"][0]["data"]
        answer = self.answers.get(data[2:10], {"error": {"code": -32601, "message": "unknown selector"}})
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], **answer})


async def start(
    server: RpcServer,
    serve: Serve,
    open_http: OpenHttp,
    make_context: MakeContext,
    evm: dict[str, Any],
    *,
    url: Callable[[URL], str] = str,
    redactor: Redactor | None = None,
) -> EvmCall:
    """An evm-call strategy on ``server`` (served on 127.0.0.1) reading ``evm``."""
    app = web.Application()
    app.router.add_post("/rpc", server.handle)
    running = await serve(app)
    spec = WATCHER_ADAPTER.validate_python(
        {
            "id": "evm",
            "strategy": "evm-call",
            "endpoint": url(running.make_url("/rpc")),
            "intervalMs": 1000,
            "evmCall": {"to": TOKEN, **evm},
        }
    )
    return evm_call.create(cast(EvmCallWatcher, spec), make_context(await open_http(), redactor=redactor))


def balance_server() -> RpcServer:
    return RpcServer({BALANCE_OF: {"result": "0x" + word(f"{BALANCE:x}")}})


async def test_balance_of_is_called_with_selector_and_address(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """The request is eth_call to `to` with selector + the padded address, at blockTag latest."""
    server = balance_server()
    strategy = await start(
        server, serve, open_http, make_context, {"signature": "balanceOf(address)(uint256)", "args": [HOLDER]}
    )
    await strategy.poll()
    (sent,) = server.requests
    expected_params = [{"to": TOKEN, "data": "0x" + BALANCE_OF + word(HOLDER[2:])}, "latest"]
    assert ("2.0", "eth_call", expected_params) == (sent["jsonrpc"], sent["method"], sent["params"])


async def test_balance_is_observed_as_an_exact_integer(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A uint256 output is the observation's value, exact, and the only entry of outputs."""
    strategy = await start(
        balance_server(),
        serve,
        open_http,
        make_context,
        {"signature": "balanceOf(address)(uint256)", "args": [HOLDER]},
    )
    observed = await strategy.poll()
    assert {"value": BALANCE, "outputs": [BALANCE]} == observed.value


async def test_tuple_outputs_are_decoded_to_json(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """(uint256,bool,address) decodes to [int, bool, checksummed address]."""
    result = "0x" + word("7") + word("1") + word(HOLDER[2:])
    server = RpcServer({keccak(text="status()")[:4].hex(): {"result": result}})
    evm = {"signature": "status() returns (uint256,bool,address)"}
    strategy = await start(server, serve, open_http, make_context, evm)
    observed = await strategy.poll()
    assert {"value": 7, "outputs": [7, True, HOLDER_CHECKSUMMED]} == observed.value


async def test_block_tag_is_sent_as_given(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """blockTag is the second eth_call parameter."""
    server = balance_server()
    evm = {"signature": "balanceOf(address)(uint256)", "args": [HOLDER], "blockTag": "0x10"}
    await (await start(server, serve, open_http, make_context, evm)).poll()
    assert "0x10" == server.requests[0]["params"][1]


async def test_rpc_error_is_an_observe_error_naming_code_and_message(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A JSON-RPC error object becomes a retryable ObserveError with its code, message and data."""
    reverted = {"error": {"code": 3, "message": "execution reverted", "data": "0x08c379a0"}}
    server = RpcServer({BALANCE_OF: reverted})
    strategy = await start(
        server, serve, open_http, make_context, {"signature": "balanceOf(address)(uint256)", "args": [HOLDER]}
    )
    with pytest.raises(ObserveError) as caught:
        await strategy.poll()
    assert (True, True) == (
        "RPC error 3: execution reverted (data 0x08c379a0)" in str(caught.value),
        caught.value.retryable,
    )


async def test_http_error_status_is_a_retryable_observe_error(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """A 503 from the node is an ObserveError the runner retries."""
    server = RpcServer({}, status=503)
    strategy = await start(server, serve, open_http, make_context, {"signature": "totalSupply()(uint256)"})
    with pytest.raises(ObserveError, match="HTTP 503") as caught:
        await strategy.poll()
    assert caught.value.retryable


async def test_empty_result_is_a_non_retryable_decode_error(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """ "0x" (no contract at `to`) does not decode as the outputs: a clear, non-retryable error."""
    server = RpcServer({BALANCE_OF: {"result": "0x"}})
    strategy = await start(
        server, serve, open_http, make_context, {"signature": "balanceOf(address)(uint256)", "args": [HOLDER]}
    )
    with pytest.raises(ObserveError, match="no data") as caught:
        await strategy.poll()
    assert caught.value.retryable is False


def test_args_that_do_not_fit_are_refused_when_the_watcher_loads() -> None:
    """An argument the signature cannot encode is a load error at its index, not a poll failure."""
    with pytest.raises(ValidationError) as caught:
        WATCHER_ADAPTER.validate_python(
            {
                "id": "evm",
                "strategy": "evm-call",
                "endpoint": "https://rpc.example.com",
                "intervalMs": 1000,
                "evmCall": {"to": TOKEN, "signature": "balanceOf(address)(uint256)", "args": ["nope"]},
            }
        )
    [error] = caught.value.errors()
    assert (
        ("evm-call", "evmCall", "args", 0),
        "'nope' does not fit address: expected 0x and 40 hex digits",
    ) == (
        error["loc"],
        error["msg"],
    )


async def test_secret_in_the_endpoint_is_masked_in_errors(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """An API key in the endpoint URL (from ${env:…}) never shows in the error message."""
    server = RpcServer({BALANCE_OF: {"error": {"code": -32000, "message": "header not found"}}})
    evm = {"signature": "balanceOf(address)(uint256)", "args": [HOLDER]}
    strategy = await start(
        server,
        serve,
        open_http,
        make_context,
        evm,
        url=lambda u: str(u.with_query(key="s3cret-api-key")),
        redactor=Redactor(["s3cret-api-key"]),
    )
    with pytest.raises(ObserveError) as caught:
        await strategy.poll()
    assert (False, True) == ("s3cret-api-key" in str(caught.value), "key=***" in str(caught.value))


async def test_host_outside_allowed_hosts_is_refused_without_retry(
    serve: Serve, open_http: OpenHttp, make_context: MakeContext
) -> None:
    """The safe HTTP client's refusals arrive as non-retryable ObserveErrors; nothing is sent."""
    server = balance_server()
    evm = {"signature": "balanceOf(address)(uint256)", "args": [HOLDER]}
    strategy = await start(
        server, serve, open_http, make_context, evm, url=lambda u: str(u.with_host("localhost"))
    )
    with pytest.raises(ObserveError) as caught:
        await strategy.poll()
    assert (False, []) == (caught.value.retryable, server.requests)
