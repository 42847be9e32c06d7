"""The ``anthropic`` backend: the Anthropic Messages API with tool use, through the official async SDK.

The neutral transcript is translated to what the Messages API requires: system messages go to
the ``system`` parameter, assistant tool calls become ``tool_use`` blocks, tool results become
``tool_result`` blocks of a user message, and consecutive messages of one role are merged (the
API wants user and assistant turns to alternate). No SDK retries (the session retries), no
streaming; errors become ``ModelError`` naming the model entry and the status, never the key.
"""

from __future__ import annotations

import json
from typing import Any, cast

import anthropic
from anthropic.types import Message, MessageParam, ToolParam

from sentinel_hooks.callbacks.backends.base import (
    ModelError,
    ModelReply,
    SdkErrors,
    ToolCall,
    ToolSpec,
    sdk_error,
)
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import AnthropicModel

MAX_TOKENS = 1024
NO_KEY = "none"  # passing a key stops the SDK from looking for credentials on disk
RAW_ARGUMENTS_KEY = "_raw"  # tool_use input must be an object; raw text arguments are wrapped in it


class AnthropicBackend:
    """One ``type: anthropic`` entry of ``models:``; see ``ModelBackend`` for the contract."""

    def __init__(self, name: str, spec: AnthropicModel, *, redactor: Redactor | None = None) -> None:
        self.name = name
        self.model = spec.model
        self.max_turns = spec.max_turns
        self._spec = spec
        key = spec.api_key.get_secret_value() if spec.api_key is not None else NO_KEY
        self._redactor = Redactor([key]).merged(redactor or Redactor())
        self._client = anthropic.AsyncAnthropic(
            base_url=spec.base_url, api_key=key, timeout=spec.timeout_ms / 1000, max_retries=0
        )

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        """Send one Messages request (not streamed) and return the assistant turn."""
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system" and m["content"])
        extra = {"temperature": self._spec.temperature} if self._spec.temperature is not None else None
        try:
            message = await self._client.messages.create(
                model=self.model,
                max_tokens=MAX_TOKENS,
                system=system or anthropic.omit,
                messages=to_anthropic_messages(messages),
                tools=to_anthropic_tools(tools) if tools else anthropic.omit,
                extra_body=extra,
            )
        except anthropic.AnthropicError as exc:
            raise self._translate(exc) from exc
        return self._reply(message)

    async def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        await self._client.close()

    def _reply(self, message: Message) -> ModelReply:
        texts = [block.text for block in message.content if block.type == "text" and block.text]
        calls = [
            ToolCall(id=block.id, name=block.name, arguments=dict(block.input))
            for block in message.content
            if block.type == "tool_use"
        ]
        usage = {"inputTokens": message.usage.input_tokens, "outputTokens": message.usage.output_tokens}
        return ModelReply(text="\n".join(texts) or None, tool_calls=calls, model=message.model, usage=usage)

    def _where(self) -> str:
        return f"model {self.name!r} ({self.model} at {self._spec.base_url})"

    def _translate(self, exc: anthropic.AnthropicError) -> ModelError:
        errors = SdkErrors(anthropic.APITimeoutError, anthropic.APIConnectionError, anthropic.APIStatusError)
        return sdk_error(
            exc,
            errors,
            where=self._where(),
            name=self.name,
            timeout_ms=self._spec.timeout_ms,
            redactor=self._redactor,
        )


def to_anthropic_messages(messages: list[dict[str, Any]]) -> list[MessageParam]:
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
    return cast(list[MessageParam], turns)


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


def to_anthropic_tools(tools: list[ToolSpec]) -> list[ToolParam]:
    """Tool specs as Messages-API tools."""
    return [
        {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
        for tool in tools
    ]


def create(name: str, spec: AnthropicModel, *, redactor: Redactor | None = None) -> AnthropicBackend:
    """The backend for a ``type: anthropic`` entry of ``models:``."""
    return AnthropicBackend(name, spec, redactor=redactor)
