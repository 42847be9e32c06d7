"""Import openclaw-sentinel watchers (SPEC.md §16): ``sentinel import openclaw FILE``.

``source`` recognises the upstream JSON, ``convert`` maps each watcher (``templates`` and
``evm`` handle the parts whose syntax or shape differ, ``targets`` the hints for delivery
targets), and ``render`` writes the watcher file. All of it is pure: the CLI reads and writes.
"""

from __future__ import annotations

from sentinel_hooks.config.openclaw.convert import Conversion, Note, convert_watcher
from sentinel_hooks.config.openclaw.render import visible, watcher_yaml
from sentinel_hooks.config.openclaw.source import NotOpenclawError, read_watchers

__all__ = [
    "Conversion",
    "NotOpenclawError",
    "Note",
    "convert_watcher",
    "read_watchers",
    "visible",
    "watcher_yaml",
]
