"""What `sentinel run` writes to its log for /mcp calls and for requests aiohttp cannot parse: no
line per MCP call, one WARNING line with the cause per malformed request (not an ERROR whose
message is a caret), and errors that are not a client's fault still at ERROR."""

from __future__ import annotations

import json
import logging
import signal
import socket
import sys
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from aiohttp.http_exceptions import BadHttpMessage

from sentinel_hooks.logs import JsonFormatter, MalformedRequestFilter
from tests.service.test_process import Running, make_project

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"},
    },
}
MALFORMED = [
    b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Bad: a\x01b\r\nContent-Length: 0\r\n\r\n",
    b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n",
]


def log_entries(service: Running) -> list[dict[str, Any]]:
    lines = service.log.read_text().splitlines()
    return [json.loads(line) for line in lines if line.startswith("{")]


def mcp_call(service: Running) -> dict[str, Any]:
    request = urllib.request.Request(
        service.url + "/mcp",
        data=json.dumps(INITIALIZE).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json, text/event-stream"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        answer: dict[str, Any] = json.loads(response.read())
        return answer


def raw_status_line(service: Running, request: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", service.port), timeout=10) as connection:
        connection.sendall(request)
        return connection.recv(4096).split(b"\r\n", 1)[0]


@pytest.mark.slow
def test_mcp_calls_and_malformed_requests_log_one_clear_line_or_none(tmp_path: Path) -> None:
    """Three /mcp calls log nothing ("Terminating session: None" was one INFO line each); each
    malformed request is one WARNING line naming the cause, never an ERROR ending in a caret."""
    service = make_project(tmp_path)
    service.start()
    try:
        answers = [mcp_call(service)["result"]["serverInfo"]["name"] for _ in range(3)]
        statuses = [raw_status_line(service, request) for request in MALFORMED]
    finally:
        assert 0 == service.kill(signal.SIGTERM)
    entries = log_entries(service)
    mcp_lines = [e for e in entries if e["logger"].startswith("mcp.")]
    aiohttp_lines = [
        (e["level"], e["message"], e.get("error")) for e in entries if e["logger"] == "aiohttp.server"
    ]
    assert (["sentinel"] * 3, [b"HTTP/1.0 400 Bad Request"] * 2, [], 2) == (
        answers,
        statuses,
        mcp_lines,
        len(aiohttp_lines),
    ), service.log.read_text()
    assert [
        (
            "warning",
            "Error handling request from 127.0.0.1: malformed request refused with 400: " + cause,
            None,
        )
        for cause in ("Invalid header value char", "Invalid character in Content-Length")
    ] == aiohttp_lines


def record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord(
        "aiohttp.server", logging.ERROR, __file__, 1, "Error handling request from %s", ("10.0.0.1",), info
    )


def test_a_server_error_of_aiohttp_stays_an_error_with_its_cause() -> None:
    """Only parse errors are quieted: another exception aiohttp logs stays ERROR, with its type
    and message on one line."""
    entry = record(RuntimeError("handler broke\nsecond line"))
    MalformedRequestFilter().filter(entry)
    formatted = json.loads(JsonFormatter().format(entry))
    assert ("error", "RuntimeError: handler broke second line") == (formatted["level"], formatted["error"])


def test_a_parse_error_is_one_warning_line() -> None:
    """A parser error becomes a WARNING with the cause and no traceback."""
    entry = record(BadHttpMessage("Invalid header value char:\n\n  b'X: \\x01'\n     ^"))
    MalformedRequestFilter().filter(entry)
    formatted = json.loads(JsonFormatter().format(entry))
    cause = "malformed request refused with 400: Invalid header value char"
    expected = {"level": "warning", "message": f"Error handling request from 10.0.0.1: {cause}"}
    assert expected == {key: formatted[key] for key in ("level", "message", "error") if key in formatted}
