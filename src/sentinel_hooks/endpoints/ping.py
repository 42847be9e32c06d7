"""Heartbeat ping endpoints (SPEC.md §23): ``/hooks/ping/{pingKey}`` and its ``/start``,
``/fail`` and ``/{exitCode}`` forms, Healthchecks.io's conventions, so a crontab's
``curl -fsS -m 10 --retry 5 https://sentinel.example/hooks/ping/$KEY`` works. Any method; no
token: the key is the secret."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sentinel_hooks.endpoints.base import Answer, ApiModel, Body, Endpoint, PathId

MAX_PING_BODY = 10 * 1024


class PingAnswer(ApiModel):
    """The ping was recorded."""

    ok: Literal[True]
    kind: Literal["success", "start", "fail"] = Field(description="what the ping said")
    fired: bool = Field(description="whether it fired (a fail ping)")


_KEY = PathId("key", "the heartbeat watcher's pingKey (16 characters or more)")
_BODY = Body(
    str,
    MAX_PING_BODY,
    about="optional; any text of any content type (e.g. the job's output), kept as the fire's `body`",
    required=False,
)

PING = Endpoint(
    "ping",
    "POST",
    "/hooks/ping/{key}",
    "a heartbeat's success ping (any method)",
    "hooks",
    (Answer(200, "recorded", PingAnswer),),
    ids=(_KEY,),
    body=_BODY,
    auth="open",
    errors=(404, 409),
    any_method=True,
)

PING_SUFFIX = Endpoint(
    "pingSuffix",
    "POST",
    "/hooks/ping/{key}/{suffix}",
    "a heartbeat's `start` or `fail` ping, or its job's exit code (0 success, else fail; any method)",
    "hooks",
    (Answer(200, "recorded", PingAnswer),),
    ids=(_KEY, PathId("suffix", "start, fail or an exit code 0 to 255")),
    body=_BODY,
    auth="open",
    errors=(404, 409),
    any_method=True,
)

ENDPOINTS = (PING, PING_SUFFIX)
