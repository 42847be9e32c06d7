"""Where the project's sentinel.yaml is: ``-c``, else ``$SENTINEL_CONFIG``, else ./sentinel.yaml.

Kept apart from the loader so that commands which only need the path (and ``sentinel
--help``) do not load the config models.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

DEFAULT_CONFIG = "sentinel.yaml"


def config_path(explicit: str | os.PathLike[str] | None, environ: Mapping[str, str]) -> Path:
    """-c/--config, else $SENTINEL_CONFIG, else ./sentinel.yaml."""
    chosen = explicit or environ.get("SENTINEL_CONFIG") or DEFAULT_CONFIG
    return Path(chosen)
