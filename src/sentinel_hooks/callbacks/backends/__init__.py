"""Model backends by ``type``: ``create_backend`` builds the one a ``models:`` entry names.

The SDK-backed modules are imported on first use, so a deployment that only uses the
``scripted`` backend never loads the ``openai`` or ``anthropic`` packages.
"""

from __future__ import annotations

import importlib

from sentinel_hooks.callbacks.backends.base import ModelBackend, ModelError, ModelReply, ToolCall, ToolSpec
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import AnthropicModel, OpenAIModel, ScriptedModel
from sentinel_hooks.errors import SentinelError

__all__ = ["ModelBackend", "ModelError", "ModelReply", "ToolCall", "ToolSpec", "create_backend"]

SCRIPTED_MODULE = "sentinel_hooks.callbacks.backends.scripted"


def create_backend(
    name: str, spec: OpenAIModel | AnthropicModel | ScriptedModel, *, redactor: Redactor | None = None
) -> ModelBackend:
    """The backend for the ``models:`` entry ``name``; ``redactor`` masks secrets in its errors."""
    if isinstance(spec, OpenAIModel):
        from sentinel_hooks.callbacks.backends.openai import OpenAIBackend

        return OpenAIBackend(name, spec, redactor=redactor)
    if isinstance(spec, AnthropicModel):
        from sentinel_hooks.callbacks.backends.anthropic import AnthropicBackend

        return AnthropicBackend(name, spec, redactor=redactor)
    try:
        scripted = importlib.import_module(SCRIPTED_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != SCRIPTED_MODULE:
            raise
        raise SentinelError(
            f"model {name!r}: the scripted backend ({SCRIPTED_MODULE}) is not available in this build"
        ) from exc
    backend: ModelBackend = scripted.create(name, spec)
    return backend
