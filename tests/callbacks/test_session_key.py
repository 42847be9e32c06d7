"""The session key (SPEC §5.1): made in one place, from the service settings and the watcher's group."""

from __future__ import annotations

from sentinel_hooks.callbacks.intake.intake import session_key
from sentinel_hooks.config.service import ServiceConfig


def test_a_watcher_without_a_group_has_its_own_session() -> None:
    """No group anywhere: ``{prefix}:watcher:{id}``."""
    assert "sentinel:hooks:watcher:eth" == session_key(ServiceConfig(), "eth")


def test_the_service_group_joins_every_watcher() -> None:
    """hookSessionGroup puts every watcher (and every external envelope) in one session."""
    service = ServiceConfig.model_validate({"hookSessionPrefix": "ops", "hookSessionGroup": "all"})
    assert ["ops:group:all", "ops:group:all"] == [session_key(service, w) for w in ("a", "b")]


def test_a_watchers_own_group_wins_over_the_service_group() -> None:
    """fire.sessionGroup comes before hookSessionGroup."""
    service = ServiceConfig.model_validate({"hookSessionGroup": "all"})
    assert "sentinel:hooks:group:db" == session_key(service, "eth", "db")
