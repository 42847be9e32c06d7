"""The ``anthropic`` backend: the Anthropic Messages API with tool use.

One ``POST {baseUrl}/v1/messages`` per turn through ``http.ModelHttp`` (aiohttp; not the SDK,
whose request building costs about as much CPU as the rest of a session). The neutral
transcript is translated to what the Messages API requires: system messages go to the
``system`` parameter, assistant tool calls become ``tool_use`` blocks, tool results become
``tool_result`` blocks of a user message, and consecutive messages of one role are merged (the
API wants user and assistant turns to alternate). No retries (the session retries), no
streaming; errors become ``ModelError`` naming the model entry and the status, never the key.
"""

from __future__ import annotations

import json
from typing import Any

from sentinel_hooks.callbacks.backends.base import ModelReply, ToolCall, ToolSpec, TransientModelError
from sentinel_hooks.callbacks.backends.http import EncodedTools, ModelHttp
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import AnthropicModel

MAX_TOKENS = 1024
API_VERSION = "2023-06-01"
NO_KEY = "none"
RAW_ARGUMENTS_KEY = "_raw"  # tool_use input must be an object; raw text arguments are wrapped in it


class AnthropicBackend:
    """One ``type: anthropic`` entry of ``models:``; see ``ModelBackend`` for the contract."""

    def __init__(self, name: str, spec: AnthropicModel, *, redactor: Redactor | None = None) -> None:
        self.name = name
        self.model = spec.model
        self.max_turns = spec.max_turns
        self._spec = spec
        key = spec.api_key.get_secret_value() if spec.api_key is not None else NO_KEY
        self._http = ModelHttp(
            url=spec.base_url.rstrip("/") + "/v1/messages",
            headers={"x-api-key": key, "anthropic-version": API_VERSION},
            timeout_ms=spec.timeout_ms,
            name=name,
            where=self._where(),
            redactor=Redactor([key]).merged(redactor or Redactor()),
        )
        self._tools = EncodedTools(to_anthropic_tools)

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        """Send one Messages request (not streamed) and return the assistant turn."""
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system" and m["content"])
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": MAX_TOKENS,
            "messages": to_anthropic_messages(messages),
        }
        if system:
            body["system"] = system
        if self._spec.temperature is not None:
            body["temperature"] = self._spec.temperature
        encoded = {"tools": self._tools.text(tools)} if tools else None
        return self._reply(await self._http.post(body, encoded=encoded))

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self._http.close()

    def _reply(self, message: dict[str, Any]) -> ModelReply:
        content = message.get("content")
        if not isinstance(content, list):
            raise TransientModelError(f"{self._where()}: the reply has no content")
        blocks = [block for block in content if isinstance(block, dict)]
        texts = [str(b["text"]) for b in blocks if b.get("type") == "text" and b.get("text")]
        calls = [
            ToolCall(
                id=str(b.get("id", "")), name=str(b.get("name", "")), arguments=dict(b.get("input") or {})
            )
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        reported = message.get("usage")
        usage: dict[str, int] = {}
        if isinstance(reported, dict):
            usage = {
                "inputTokens": int(reported.get("input_tokens") or 0),
                "outputTokens": int(reported.get("output_tokens") or 0),
            }
        return ModelReply(
            text="\n".join(texts) or None,
            tool_calls=calls,
            model=str(message.get("model") or ""),
            usage=usage,
        )

    def _where(self) -> str:
        return f"model {self.name!r} ({self.model} at {self._spec.base_url})"


def to_anthropic_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Neutral transcript messages (see ``base.py``) as alternating Messages-API turns."""
    turns: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "system":
            continue
        blocks = _blocks(message)
        if not blocks:
            continue  # the API refuses empty turns and empty text blocks
        wire_role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == wire_role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": wire_role, "content": blocks})
    return turns


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """The content blocks of one neutral message."""
    if message["role"] == "tool":
        return [{"type": "tool_result", "tool_use_id": message["toolCallId"], "content": message["content"]}]
    blocks: list[dict[str, Any]] = []
    if message.get("content"):
        blocks.append({"type": "text", "text": message["content"]})
    for call in message.get("toolCalls") or []:
        blocks.append({"type": "tool_use", "id": call["id"], "name": call["name"], "input": _input(call)})
    return blocks


def _input(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call["arguments"]
    if isinstance(arguments, dict):
        return arguments
    try:
        decoded = json.loads(arguments)
    except json.JSONDecodeError:
        decoded = None
    return decoded if isinstance(decoded, dict) else {RAW_ARGUMENTS_KEY: arguments}


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    """Tool specs as Messages-API tools."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def create(name: str, spec: AnthropicModel, *, redactor: Redactor | None = None) -> AnthropicBackend:
    """The backend for a ``type: anthropic`` entry of ``models:``."""
    return AnthropicBackend(name, spec, redactor=redactor)
