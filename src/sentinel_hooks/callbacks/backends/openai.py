"""The ``openai`` backend: any OpenAI-compatible chat-completions server (OpenAI, Ollama, vLLM, llama.cpp).

One ``POST {baseUrl}/chat/completions`` per turn through ``http.ModelHttp`` (aiohttp; not the
SDK, whose request building cost 2.6 ms of CPU per request), with the entry's ``timeoutMs`` and
no retries (the session retries, STYLE habit 8). Requests are never streamed: Ollama has lost
tool calls in streamed replies. Tool-call arguments that are not a JSON object are kept as the
raw text, so the session can tell the model exactly what was wrong (the session recovers tool
calls a small model wrote as JSON text, ``recovery.py``). Errors are ``ModelError`` whose
message names the model entry and the HTTP status, and never contains the API key.
"""

from __future__ import annotations

import json
from typing import Any, cast

from sentinel_hooks.callbacks.backends.base import ModelReply, ToolCall, ToolSpec, TransientModelError
from sentinel_hooks.callbacks.backends.http import EncodedTools, ModelHttp
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import OpenAIModel

NO_KEY = "none"  # local servers ignore the key, but some want the header


class OpenAIBackend:
    """One ``type: openai`` entry of ``models:``; see ``ModelBackend`` for the contract."""

    def __init__(self, name: str, spec: OpenAIModel, *, redactor: Redactor | None = None) -> None:
        self.name = name
        self.model = spec.model
        self.max_turns = spec.max_turns
        self._spec = spec
        key = spec.api_key.get_secret_value() if spec.api_key is not None else NO_KEY
        self._http = ModelHttp(
            url=spec.base_url.rstrip("/") + "/chat/completions",
            headers={"Authorization": f"Bearer {key}"},
            timeout_ms=spec.timeout_ms,
            name=name,
            where=self._where(),
            redactor=Redactor([key]).merged(redactor or Redactor()),
        )
        self._tools = EncodedTools(to_openai_tools)

    async def complete(self, messages: list[dict[str, Any]], tools: list[ToolSpec]) -> ModelReply:
        """Send one chat-completions request (not streamed) and return the assistant turn."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(messages),
            "stream": False,
        }
        if self._spec.temperature is not None:
            body["temperature"] = self._spec.temperature
        encoded = {"tools": self._tools.text(tools)} if tools else None
        return self._reply(await self._http.post(body, encoded=encoded))

    async def close(self) -> None:
        """Close the HTTP connection pool."""
        await self._http.close()

    def _reply(self, completion: dict[str, Any]) -> ModelReply:
        choices = completion.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise TransientModelError(f"{self._where()}: the reply has no choices")
        message = choices[0].get("message")
        if not isinstance(message, dict):
            raise TransientModelError(f"{self._where()}: the reply's first choice has no message")
        calls = [
            ToolCall(
                id=str(call.get("id") or f"call-{n}"),  # some local servers send no id
                name=str(function.get("name", "")),
                arguments=parse_arguments(function.get("arguments")),
            )
            for n, call in enumerate(message.get("tool_calls") or [], start=1)
            if isinstance(call, dict)
            and call.get("type", "function") == "function"
            and isinstance(function := call.get("function"), dict)
        ]
        usage: dict[str, int] = {}
        reported = completion.get("usage")
        if isinstance(reported, dict):
            usage = {
                "inputTokens": int(reported.get("prompt_tokens") or 0),
                "outputTokens": int(reported.get("completion_tokens") or 0),
            }
        content = message.get("content")
        return ModelReply(
            text=content if isinstance(content, str) and content else None,
            tool_calls=calls,
            model=str(completion.get("model") or ""),
            usage=usage,
        )

    def _where(self) -> str:
        return f"model {self.name!r} ({self.model} at {self._spec.base_url})"


def to_openai_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
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
    return wire


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
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
    if raw is None:
        return {}
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
