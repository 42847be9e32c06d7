"""A stand-in for PagerDuty's Events API v2 on 127.0.0.1: ``POST /v2/enqueue``, answered as PagerDuty does.

A valid event gets ``202 {"status": "success", "message": "Event processed", "dedup_key"}``; an event
PagerDuty would refuse (wrong routing key, unknown action, a trigger without summary, source or
a known severity, a summary over 1024 characters) gets ``400 {"status": "invalid event", "message",
"errors"}`` — and, like a careless server, the error quotes the routing key it was given, so tests
can check that the target never shows it. It keeps alerts by dedup_key (triggered, resolved), so
a test reads what an on-call person would see. ``answer_next`` makes the next requests answer a
given status (429, 500 …) with optional headers.

With ``limit_per_minute`` set it enforces PagerDuty's rate limit as the real API does: an event past
that many accepted in the last 60 s of ``clock`` (the test's controllable clock, else wall time) for
its routing key gets 429 and is not ingested; ``accepted_at`` holds each ingested event's instant,
``throttled`` counts the 429s.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from sentinel_hooks.clock import Clock, SystemClock

ROUTING_KEY = "R0ut1ngKeyR0ut1ngKeyR0ut1ngKey12"  # 32 characters, as PagerDuty's are
SEVERITIES = ("critical", "error", "warning", "info")


@dataclass
class Alert:
    """One alert, by dedup_key: its trigger events and whether it was resolved."""

    dedup_key: str
    triggers: list[dict[str, Any]] = field(default_factory=list)
    resolved: bool = False


@dataclass
class PagerDutyApi:
    events: list[dict[str, Any]] = field(default_factory=list)  # every valid event, in order
    requests: int = 0
    alerts: dict[str, Alert] = field(default_factory=dict)
    answers: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    server: TestServer | None = None
    limit_per_minute: int | None = None
    clock: Clock = field(default_factory=SystemClock)
    accepted_at: list[datetime] = field(default_factory=list)
    throttled: int = 0

    def most_in_a_minute(self) -> int:
        """The most events ingested in any 60 s window (each starting at an ingested event)."""
        times = sorted(self.accepted_at)
        return max((sum(1 for t in times if s <= t < s + timedelta(seconds=60)) for s in times), default=0)

    def _over_limit(self) -> bool:
        if self.limit_per_minute is None:
            return False
        since = self.clock.now() - timedelta(seconds=60)
        return sum(1 for t in self.accepted_at if t > since) >= self.limit_per_minute

    def base(self) -> str:
        assert self.server is not None
        return str(self.server.make_url("")).rstrip("/")

    def answer_next(self, status: int, times: int = 1, headers: dict[str, str] | None = None) -> None:
        self.answers += [(status, headers or {})] * times

    def actions(self) -> list[tuple[str, str]]:
        """(event_action, dedup_key) of every valid event, in order."""
        return [(e["event_action"], e["dedup_key"]) for e in self.events]

    async def _enqueue(self, request: web.Request) -> web.StreamResponse:
        self.requests += 1
        if self.answers:
            status, headers = self.answers.pop(0)
            return web.json_response({"status": "unavailable"}, status=status, headers=headers)
        try:
            event = json.loads(await request.read())
        except ValueError:
            return _invalid("Event object is invalid", ["body is not JSON"])
        errors = _problems(event)
        if errors:
            return _invalid("Event object is invalid", errors)
        if self._over_limit():
            self.throttled += 1
            return web.json_response(
                {
                    "status": "throttle event",
                    "message": "Requests for this service are arriving too quickly.",
                },
                status=429,
            )
        self.events.append(event)
        self.accepted_at.append(self.clock.now())
        alert = self.alerts.setdefault(event["dedup_key"], Alert(event["dedup_key"]))
        if event["event_action"] == "trigger":
            alert.triggers.append(event)
            alert.resolved = False
        elif event["event_action"] == "resolve":
            alert.resolved = True
        body = {"status": "success", "message": "Event processed", "dedup_key": event["dedup_key"]}
        return web.json_response(body, status=202)

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v2/enqueue", self._enqueue)
        self.server = TestServer(app, host="127.0.0.1")
        await self.server.start_server()

    async def close(self) -> None:
        if self.server is not None:
            await self.server.close()


def _problems(event: Any) -> list[str]:
    if not isinstance(event, dict):
        return ["event must be an object"]
    key = event.get("routing_key")
    if key != ROUTING_KEY:
        return [f"Invalid routing key {key!r}"]  # quoting it, as a careless server would
    action = event.get("event_action")
    if action not in ("trigger", "acknowledge", "resolve"):
        return [f"'event_action' is invalid: {action!r}"]
    if not isinstance(event.get("dedup_key"), str) or not 0 < len(event["dedup_key"]) <= 255:
        return ["'dedup_key' must be 1 to 255 characters"]
    if action != "trigger":
        return []
    payload = event.get("payload")
    if not isinstance(payload, dict):
        return ["'payload' is missing"]
    errors = [f"'payload.{k}' is missing" for k in ("summary", "source", "severity") if not payload.get(k)]
    if payload.get("severity") not in SEVERITIES:
        errors.append(f"'payload.severity' must be one of {', '.join(SEVERITIES)}")
    if len(str(payload.get("summary", ""))) > 1024:
        errors.append("'payload.summary' is longer than 1024 characters")
    if "custom_details" in payload and not isinstance(payload["custom_details"], dict):
        errors.append("'payload.custom_details' must be an object")
    return errors


def _invalid(message: str, errors: list[str]) -> web.StreamResponse:
    return web.json_response({"status": "invalid event", "message": message, "errors": errors}, status=400)


@pytest.fixture
async def pagerduty_api() -> AsyncIterator[PagerDutyApi]:
    """The Events API stand-in, started on 127.0.0.1 (``pagerduty_api.base()`` is its apiBase)."""
    api = PagerDutyApi()
    await api.start()
    yield api
    await api.close()
