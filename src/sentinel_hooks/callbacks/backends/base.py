"""The plug-in point for model backends: a neutral chat format, a Protocol, and a registry.

Sessions keep their transcript in one neutral shape; each backend translates it to its
wire format (OpenAI chat completions, Anthropic Messages) and back. A backend makes one
request and raises ``ModelError`` (``TransientModelError`` for network errors, timeouts, 429
and 5xx); the session owns retries (``core.retry``) and the turn limit.

The registry ``MODULES`` maps a ``models:`` entry's ``type`` to the module that builds its
backend (``create(name, spec, *, redactor)``, a ``BackendFactory``); modules are imported on
first use. The ``openai`` and ``anthropic`` backends speak HTTP through ``http.ModelHttp``
(aiohttp), not the vendors' SDKs (too much CPU per request). ``ScriptedBackend`` needs no
server and is the default; tests drive the others against the fake servers of ``sentinel_hooks.testing``, and
tests/contract/test_model_backends.py runs the contract against each.

Messages (plain dicts, JSON-serialisable, stored in transcripts as they are)::

    {"role": "system", "content": str}
    {"role": "user", "content": str}
    {"role": "assistant", "content": str | None,
     "toolCalls": [{"id": str, "name": str, "arguments": dict | str}]}
    {"role": "tool", "toolCallId": str, "name": str, "content": str}   # content: the JSON result as text
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, Protocol

from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.errors import SentinelError, TransientError

if TYPE_CHECKING:
    from sentinel_hooks.config.service import ModelSpec


class ModelError(SentinelError):
    """A model request failed, and will fail alike (a bad key, an unknown model, a refused request)."""


class TransientModelError(ModelError, TransientError):
    """A model request failed in a way that may pass (timeout, connection, 408, 409, 429, 5xx);
    the session tries the call again."""


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: its name, what it is for, and its JSON Schema."""

    name: str
    description: str
    parameters: dict[str, Any]

    @cached_property
    def chars(self) -> int:
        """The size of the spec as JSON (what it takes of a request's budget), computed once."""
        as_json = {"name": self.name, "description": self.description, "parameters": self.parameters}
        return len(json.dumps(as_json, ensure_ascii=False))


@dataclass(frozen=True)
class ToolCall:
    """A tool call the model asked for; ``arguments`` is the raw text when it was not valid JSON."""

    id: str
    name: str
    arguments: dict[str, Any] | str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True)
class ModelReply:
    """One assistant turn: text and/or tool calls, and the model name the server reported."""

    text: str | None
    tool_calls: list[ToolCall] = field(default_factory=list)
    model: str = ""
    usage: dict[str, int] = field(default_factory=dict)

    def to_message(self) -> dict[str, Any]:
        return {
            "role": "assistant",
            "content": self.text,
            "toolCalls": [c.to_json() for c in self.tool_calls],
        }


class ModelBackend(Protocol):
    """One configured model (an entry of ``models:``)."""

    name: str  # the entry's name in sentinel.yaml
    model: str  # the model name sent to the server ("scripted" for the scripted backend)
    max_turns: int

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        """One request: the assistant's turn for ``messages`` with ``tools`` offered (none: no
        tools key). Never retries; raises ``ModelError`` naming the entry, never the API key."""
        ...

    async def close(self) -> None:
        """Release connections; safe to call twice."""
        ...


class BackendFactory(Protocol):
    def __call__(self, name: str, spec: Any, *, redactor: Redactor | None = None) -> ModelBackend: ...


MODULES: dict[str, str] = {
    "openai": "sentinel_hooks.callbacks.backends.openai",
    "anthropic": "sentinel_hooks.callbacks.backends.anthropic",
    "scripted": "sentinel_hooks.callbacks.backends.scripted",
}


def create_backend(name: str, spec: ModelSpec, *, redactor: Redactor | None = None) -> ModelBackend:
    """The backend for the ``models:`` entry ``name``; ``redactor`` masks secrets in its errors."""
    module_name = MODULES[spec.type]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name != module_name:
            raise
        raise SentinelError(
            f"model {name!r}: the {spec.type} backend ({module_name}) is not available in this build"
        ) from exc
    factory: BackendFactory = module.create
    return factory(name, spec, redactor=redactor)


MAX_ERROR_DETAIL_CHARS = 300


def status_retryable(status: int) -> bool:
    """Whether an HTTP status may succeed on another try (timeout, conflict, rate limit, 5xx)."""
    return status in (408, 409, 429) or status >= 500


def status_hint(status: int, name: str) -> str:
    """The way out for the statuses a configuration mistake causes (``""`` for the others)."""
    if status in (401, 403):
        return f"; check models.{name}.apiKey"
    if status == 404:
        return f"; check models.{name}.model and baseUrl"
    return ""


def error_detail(body: object, fallback: str) -> str:
    """A server's own error message (``{"error": {"message": …}}`` and kin), shortened."""
    detail: object = body
    if isinstance(body, dict):
        inner = body.get("error", body)
        detail = inner.get("message", inner) if isinstance(inner, dict) else inner
    text = str(detail) if detail not in (None, "", {}) else fallback
    return text if len(text) <= MAX_ERROR_DETAIL_CHARS else text[: MAX_ERROR_DETAIL_CHARS - 3] + "..."
