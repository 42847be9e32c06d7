"""Model backends by ``type``: ``create_backend`` builds the one a ``models:`` entry names.

The Protocol, the neutral chat format and the registry live in ``base.py``.
"""

from __future__ import annotations

from sentinel_hooks.callbacks.backends.base import (
    MODULES,
    ModelBackend,
    ModelError,
    ModelReply,
    ToolCall,
    ToolSpec,
    TransientModelError,
    create_backend,
)

__all__ = [
    "MODULES",
    "ModelBackend",
    "ModelError",
    "ModelReply",
    "ToolCall",
    "ToolSpec",
    "TransientModelError",
    "create_backend",
]
