"""The Redis backend: one server shared by every replica. See ``store``."""

from __future__ import annotations

from sentinel_hooks.store.redis.store import RedisStore

__all__ = ["RedisStore"]
