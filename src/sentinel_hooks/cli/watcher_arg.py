"""Resolve the WATCHER argument of ``sentinel test``: a watcher file, or an id in the config.

Only what the watcher needs is loaded and validated: sentinel.yaml, the skills, and the
watcher's own file (for an id: the watcher files that contain it). ``sentinel validate``
checks the whole project.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sentinel_hooks.config.loader import (
    IssueCollector,
    config_path,
    load_config,
    load_one_watcher,
    load_watcher_file,
    load_without_watchers,
)
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServiceConfig
from sentinel_hooks.config.watcher import AnyWatcher
from sentinel_hooks.errors import ConfigError, SentinelError


@dataclass(frozen=True)
class ResolvedWatcher:
    spec: AnyWatcher
    service: ServiceConfig
    base_dir: Path
    redactor: Redactor


def resolve_watcher(argument: str, config: str | None) -> ResolvedWatcher:
    """A file path is loaded on its own (checked against the config when there is one)."""
    path = config_path(config, os.environ)
    candidate = Path(argument)
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        return _from_file(candidate, path if (config or path.exists()) else None)
    one = load_one_watcher(path, argument)
    if one is not None:
        return ResolvedWatcher(one.watchers[0].spec, one.service, one.base_dir, one.redactor)
    loaded = load_config(path)  # not found by its text: the whole project says why
    found = loaded.watcher(argument)
    if found is None:
        known = ", ".join(w.spec.id for w in loaded.watchers) or "none"
        raise SentinelError(
            f"no watcher {argument!r} in {path} (known: {known}); or pass a watcher file path"
        )
    return ResolvedWatcher(found.spec, loaded.service, loaded.base_dir, loaded.redactor)


def _from_file(file: Path, config: Path | None) -> ResolvedWatcher:
    if not file.is_file():
        raise SentinelError(f"watcher file {str(file)!r} not found")
    if config is not None:
        base = load_without_watchers(config)
        service, skills, base_dir, redactor = (base.service, base.skills, base.base_dir, base.redactor)
    else:
        service, skills, base_dir, redactor = (
            ServiceConfig(),
            {},
            file.absolute().parent,
            Redactor(),
        )
    collector = IssueCollector()
    watchers = load_watcher_file(
        file,
        environ=os.environ,
        service=service if config is not None else None,
        skills=skills,
        base_dir=base_dir,
        collector=collector,
    )
    if collector.issues:
        raise ConfigError(collector.issues)
    if len(watchers) != 1:
        ids = ", ".join(w.spec.id for w in watchers) or "none"
        raise SentinelError(f"{file} holds {len(watchers)} watchers ({ids}); name one by id with -c CONFIG")
    return ResolvedWatcher(watchers[0].spec, service, base_dir, redactor.merged(Redactor(collector.secrets)))
