"""Which Store a ``store:`` URL names: a registry from URL scheme to the loader of its backend.

A loader imports its backend only when a URL names it, so a process loads the database library
it uses and no other, and ``import sentinel_hooks.store`` loads neither ``sqlite3`` nor ``redis``.
A new backend is a sub-package with a Store and one entry in ``LOADERS``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from sentinel_hooks.errors import StoreUnavailable
from sentinel_hooks.store.base import Store
from sentinel_hooks.store.urls import redacted_url

ACCEPTED_FORMS = (
    "sqlite:///relative/path.db (relative to the config directory)",
    "sqlite:////absolute/path.db",
    "redis://host:6379/0 (rediss:// for TLS)",
    "memory:// (tests only: SQLite in memory, nothing survives a restart)",
)


class UnsupportedUrl(ValueError):
    """A URL of a known scheme in a form its backend does not take; the message is the hint."""


class Loader(Protocol):
    """Makes the (unopened) Store of ``url``, importing its backend; ``UnsupportedUrl`` when the
    URL's form is wrong for its scheme."""

    def __call__(self, url: str, *, base_dir: Path, key_prefix: str) -> Store: ...


def _after_scheme(url: str) -> str:
    return url.partition("://")[2]


def _sqlite(url: str, *, base_dir: Path, key_prefix: str) -> Store:
    """``sqlite:///rel/path.db`` under ``base_dir``, ``sqlite:////abs/path.db`` as it is."""
    rest = _after_scheme(url)
    if not rest.startswith("/") or not rest.strip("/"):
        raise UnsupportedUrl("a sqlite URL has three slashes before a relative path, four before an absolute")
    from sentinel_hooks.store.sqlite import SqliteStore  # loaded only for a URL that names it

    path = Path(rest[1:])
    return SqliteStore(path if path.is_absolute() else base_dir / path)


def _memory(url: str, *, base_dir: Path, key_prefix: str) -> Store:
    """``memory://``: SQLite in memory, for tests."""
    if _after_scheme(url):
        raise UnsupportedUrl("memory:// takes nothing after the scheme")
    from sentinel_hooks.store.sqlite import SqliteStore  # loaded only for a URL that names it

    return SqliteStore.in_memory()


def _redis(url: str, *, base_dir: Path, key_prefix: str) -> Store:
    """``redis://`` and ``rediss://`` (TLS), keys under ``key_prefix``."""
    from sentinel_hooks.store.redis import RedisStore  # loaded only for a URL that names it

    return RedisStore(url, key_prefix=key_prefix)


LOADERS: dict[str, Loader] = {"sqlite": _sqlite, "memory": _memory, "redis": _redis, "rediss": _redis}


def open_store(url: str, *, base_dir: Path, key_prefix: str = "sentinel:") -> Store:
    """The Store that ``url`` names (call ``await store.open()`` before using it).

    ``sqlite:///rel/path.db`` is relative to ``base_dir``, ``sqlite:////abs/path.db`` absolute;
    ``redis://`` / ``rediss://`` keys go under ``key_prefix``. Raises ``StoreUnavailable``,
    listing the accepted forms, for any other URL.
    """
    scheme, sep, _ = url.partition("://")
    loader = LOADERS.get(scheme.lower()) if sep else None
    hint = ""
    if loader is not None:
        try:
            return loader(url, base_dir=base_dir, key_prefix=key_prefix)
        except UnsupportedUrl as exc:
            hint = f" ({exc})"
    raise StoreUnavailable(
        f"store URL {redacted_url(url)!r} is not supported{hint}; use one of: " + "; ".join(ACCEPTED_FORMS)
    )
