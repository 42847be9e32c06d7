"""`sentinel run` with 120 watchers firing while their webhook target refuses connections for 60 s:
once it is back, every fire reaches it exactly once (the agent's message or the fallback, never
both, none lost), within 30 s of the recovery."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.service.test_process import Running, free_port
from tests.support import wait_until

pytestmark = pytest.mark.slow

WATCHERS = 120
OUTAGE_S = 60.0
RECOVERY_BOUND_S = 30.0

CONFIG = """\
store: sqlite:///.sentinel/state.db
server: {{host: 127.0.0.1, port: {port}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 5000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
hookConcurrency: 16
models: {{rules: {{type: scripted}}}}
delivery: {{maxAttempts: 40, baseMs: 500, maxMs: 5000, maxElapsedMs: 600000}}
targets:
  hook: {{type: webhook, url: "http://127.0.0.1:{sink_port}/in"}}
"""


def watchers() -> str:
    """Half the agents notify (the scripted model), half stay silent (they only escalate)."""
    lines = ["watchers:"]
    for n in range(WATCHERS):
        silent = n % 2 == 1
        name = f"quiet-{n}" if silent else f"talk-{n}"
        fire = "{eventName: job_failed, escalate: true}" if silent else "{eventName: job_failed}"
        lines.append(f"  - {{id: {name}, strategy: webhook, deliveryTargets: [hook], fire: {fire}}}")
    return "\n".join(lines) + "\n"


class Received:
    """What the target received: (arrival time, Idempotency-Key, body), thread-safe."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.items: list[tuple[float, str, dict[str, Any]]] = []

    def add(self, key: str, body: dict[str, Any]) -> None:
        with self.lock:
            self.items.append((time.monotonic(), key, body))

    def snapshot(self) -> list[tuple[float, str, dict[str, Any]]]:
        with self.lock:
            return list(self.items)


def serve(port: int, received: Received) -> ThreadingHTTPServer:
    """The webhook target, back up: a plain HTTP server on 127.0.0.1 that accepts everything."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            received.add(self.headers.get("Idempotency-Key", ""), body)
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: Any) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


@pytest.fixture
def target() -> Iterator[tuple[int, Received, list[ThreadingHTTPServer]]]:
    servers: list[ThreadingHTTPServer] = []
    yield free_port(), Received(), servers
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.mark.timeout(240)
def test_a_target_down_for_a_minute_then_back_gets_every_fire_once(
    tmp_path: Path, target: tuple[int, Received, list[ThreadingHTTPServer]]
) -> None:
    """120 fires, the target refusing connections for 60 s, then back: no fire with two
    outcomes, none lost, all delivered within 30 s of the recovery."""
    sink_port, received, servers = target
    port = free_port()
    (tmp_path / "sentinel.yaml").write_text(CONFIG.format(port=port, sink_port=sink_port))
    (tmp_path / "watchers").mkdir()
    (tmp_path / "watchers" / "all.yaml").write_text(watchers())
    service = Running(tmp_path / "sentinel.yaml", port)
    service.start()
    try:
        down_since = time.monotonic()
        for n in range(WATCHERS):
            name = f"quiet-{n}" if n % 2 else f"talk-{n}"
            status, body = service.call("POST", f"/hooks/ingest/{name}", {"job": n})
            assert (202, 1) == (status, body["fired"]), body
        contracts = wait_until(lambda: all_contracts(service, WATCHERS), timeout_s=30, what="120 contracts")
        wait_until(
            lambda: time.monotonic() - down_since >= OUTAGE_S, timeout_s=OUTAGE_S + 5, what="the outage"
        )
        servers.append(serve(sink_port, received))
        back_at = time.monotonic()
        wait_until(
            lambda: len(heard(received)) >= WATCHERS,
            timeout_s=RECOVERY_BOUND_S + 15,
            what="a message for every fire",
        )
        settled = wait_until(
            lambda: final_states(service, WATCHERS), timeout_s=30, what="every contract final"
        )
        outcomes = heard(received)
        both = {cid: kinds for cid, kinds in outcomes.items() if len(kinds) != 1}
        assert {} == both, f"fires with two outcomes: {both}"
        assert {c["callbackId"] for c in contracts} == set(outcomes), "a fire was lost"
        talked = {cid for cid, kinds in outcomes.items() if kinds == {"notify"}}
        assert all(c["watcherId"].startswith("talk-") for c in contracts if c["callbackId"] in talked)
        assert len(talked) == WATCHERS // 2, "every agent that notified was heard (no fallback instead)"
        assert {"fulfilled", "fallback_sent"} == set(settled.values())
        latest = max(at for at, _, _ in received.snapshot())
        assert latest - back_at <= RECOVERY_BOUND_S, f"the last message came {latest - back_at:.1f} s late"
    finally:
        service.kill()


def all_contracts(service: Running, count: int) -> list[dict[str, Any]] | None:
    status, body = service.call("GET", "/api/v1/callbacks?limit=500")
    items: list[dict[str, Any]] = body["items"] if status == 200 else []
    return items if len(items) >= count else None


def final_states(service: Running, count: int) -> dict[str, str] | None:
    items = all_contracts(service, count) or []
    states = {c["callbackId"]: c["state"] for c in items}
    done = states and all(s in ("fulfilled", "fallback_sent") for s in states.values())
    return states if done else None


def heard(received: Received) -> dict[str, set[str]]:
    """Per callback, which kinds of message reached the target (by distinct key)."""
    found: dict[str, set[str]] = {}
    for _, key, body in received.snapshot():
        kind = key.rsplit(":", 1)[-1].split(".")[0]
        if kind in ("notify", "fallback"):
            found.setdefault(str(body["callbackId"]), set()).add(kind)
    return found
