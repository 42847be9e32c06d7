"""The ``openai`` backend: any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp).

It uses the official async SDK with the entry's ``baseUrl``, ``timeoutMs`` and no SDK retries
(the session retries, STYLE habit 8). Requests are never streamed: Ollama has lost tool calls
in streamed replies. Tool-call arguments that are not a JSON object are kept as the raw text,
so the session can tell the model exactly what was wrong (the session recovers tool calls a
small model wrote as JSON text, ``recovery.py``). SDK errors become ``ModelError`` whose message names
the model entry and the HTTP status, and never contains the API key.
"""

from __future__ import annotations

import json
from typing import Any, cast

import openai
from openai.types.chat import ChatCompletion, ChatCompletionMessageParam, ChatCompletionToolParam

from sentinel_hooks.callbacks.backends.base import (
    ModelError,
    ModelReply,
    SdkErrors,
    ToolCall,
    ToolSpec,
    TransientModelError,
    sdk_error,
)
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import OpenAIModel

NO_KEY = "none"  # local servers ignore the key, but the SDK wants one


class OpenAIBackend:
    """One ``type: openai`` entry of ``models:``; see ``ModelBackend`` for the contract."""

    def __init__(self, name: str, spec: OpenAIModel, *, redactor: Redactor | None = None) -> None:
        self.name = name
        self.model = spec.model
        self.max_turns = spec.max_turns
        self._spec = spec
        key = spec.api_key.get_secret_value() if spec.api_key is not None else NO_KEY
        self._redactor = Redactor([key]).merged(redactor or Redactor())
        self._client = openai.AsyncOpenAI(
            base_url=spec.base_url, api_key=key, timeout=spec.timeout_ms / 1000, max_retries=0
        )

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        """Send one chat-completions request (not streamed) and return the assistant turn."""
        try:
            completion = await self._client.chat.completions.create(
                model=self.model,
                messages=to_openai_messages(messages),
                tools=to_openai_tools(tools) if tools else openai.omit,
                temperature=self._spec.temperature if self._spec.temperature is not None else openai.omit,
                stream=False,
            )
        except openai.OpenAIError as exc:
            raise self._translate(exc) from exc
        return self._reply(completion)

    async def close(self) -> None:
        """Close the SDK's HTTP connection pool."""
        await self._client.close()

    def _reply(self, completion: ChatCompletion) -> ModelReply:
        if not completion.choices:
            raise TransientModelError(f"{self._where()}: the reply has no choices")
        message = completion.choices[0].message
        calls = [
            ToolCall(
                id=call.id or f"call-{n}",  # some local servers send no id
                name=call.function.name,
                arguments=parse_arguments(cast(object, call.function.arguments)),
            )
            for n, call in enumerate(message.tool_calls or [], start=1)
            if call.type == "function"
        ]
        usage: dict[str, int] = {}
        if completion.usage is not None:
            usage = {
                "inputTokens": completion.usage.prompt_tokens,
                "outputTokens": completion.usage.completion_tokens,
            }
        return ModelReply(text=message.content or None, tool_calls=calls, model=completion.model, usage=usage)

    def _where(self) -> str:
        return f"model {self.name!r} ({self.model} at {self._spec.base_url})"

    def _translate(self, exc: openai.OpenAIError) -> ModelError:
        errors = SdkErrors(openai.APITimeoutError, openai.APIConnectionError, openai.APIStatusError)
        return sdk_error(
            exc,
            errors,
            where=self._where(),
            name=self.name,
            timeout_ms=self._spec.timeout_ms,
            redactor=self._redactor,
        )


def to_openai_messages(messages: list[dict[str, Any]]) -> list[ChatCompletionMessageParam]:
    """Neutral transcript messages (see ``base.py``) as chat-completions messages."""
    wire: list[dict[str, Any]] = []
    for message in messages:
        role = message["role"]
        if role == "tool":
            wire.append(
                {"role": "tool", "tool_call_id": message["toolCallId"], "content": message["content"]}
            )
        elif role == "assistant":
            out: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
            calls = message.get("toolCalls") or []
            if calls:
                out["tool_calls"] = [
                    {
                        "id": call["id"],
                        "type": "function",
                        "function": {"name": call["name"], "arguments": arguments_text(call["arguments"])},
                    }
                    for call in calls
                ]
            elif out["content"] is None:
                out["content"] = ""
            wire.append(out)
        else:
            wire.append({"role": role, "content": message["content"]})
    return cast(list[ChatCompletionMessageParam], wire)


def to_openai_tools(tools: list[ToolSpec]) -> list[ChatCompletionToolParam]:
    """Tool specs as chat-completions function tools."""
    return [
        {
            "type": "function",
            "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
        }
        for tool in tools
    ]


def arguments_text(arguments: dict[str, Any] | str) -> str:
    """Arguments as the JSON text the wire format wants (raw text is sent back as it was)."""
    return arguments if isinstance(arguments, str) else json.dumps(arguments, ensure_ascii=False)


def parse_arguments(raw: object) -> dict[str, Any] | str:
    """Decoded arguments: a JSON object becomes a dict, anything else stays the raw text."""
    if isinstance(raw, dict):
        return cast(dict[str, Any], raw)  # some servers send an object instead of JSON text
    text = raw if isinstance(raw, str) else json.dumps(raw)
    if not text.strip():
        return {}
    try:
        decoded = json.loads(text)
    except json.JSONDecodeError:
        return text
    return cast(dict[str, Any], decoded) if isinstance(decoded, dict) else text


def create(name: str, spec: OpenAIModel, *, redactor: Redactor | None = None) -> OpenAIBackend:
    """The backend for a ``type: openai`` entry of ``models:``."""
    return OpenAIBackend(name, spec, redactor=redactor)
