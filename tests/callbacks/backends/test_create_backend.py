"""create_backend picks the implementation for a models: entry."""

from __future__ import annotations

import pytest

from sentinel_hooks.callbacks import backends
from sentinel_hooks.callbacks.backends import create_backend
from sentinel_hooks.callbacks.backends.anthropic import AnthropicBackend
from sentinel_hooks.callbacks.backends.openai import OpenAIBackend
from sentinel_hooks.config.service import AnthropicModel, OpenAIModel, ScriptedModel
from sentinel_hooks.errors import SentinelError


async def test_openai_entry_gives_openai_backend() -> None:
    """type: openai builds an OpenAIBackend with the entry's name, model and maxTurns."""
    spec = OpenAIModel.model_validate({"type": "openai", "model": "qwen2.5:7b", "maxTurns": 4})
    backend = create_backend("local", spec)
    await backend.close()
    assert (OpenAIBackend, "local", "qwen2.5:7b", 4) == (
        type(backend),
        backend.name,
        backend.model,
        backend.max_turns,
    )


async def test_anthropic_entry_gives_anthropic_backend() -> None:
    """type: anthropic builds an AnthropicBackend."""
    spec = AnthropicModel.model_validate({"type": "anthropic", "model": "claude-haiku-4-5"})
    backend = create_backend("claude", spec)
    await backend.close()
    assert (AnthropicBackend, "claude-haiku-4-5") == (type(backend), backend.model)


def test_scripted_entry_gives_scripted_backend() -> None:
    """type: scripted comes from the scripted module."""
    backend = create_backend("rules", ScriptedModel.model_validate({"type": "scripted"}))
    assert ("rules", "scripted") == (backend.name, backend.model)


def test_missing_scripted_module_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the scripted module the error names the model entry and the module."""
    monkeypatch.setattr(backends, "SCRIPTED_MODULE", "sentinel_hooks.callbacks.backends.no_such_module")
    with pytest.raises(SentinelError, match="model 'rules': the scripted backend"):
        create_backend("rules", ScriptedModel.model_validate({"type": "scripted"}))
