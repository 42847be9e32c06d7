"""Reading ``fire.operatorGoalFile`` at fire time, confined to the project directory."""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.config.crosscheck import resolve_under
from sentinel_hooks.errors import SentinelError

MAX_GOAL_FILE_CHARS = 20000


class GoalFileError(SentinelError):
    """The operatorGoalFile cannot be read (outside the project, missing, unreadable)."""


def read_goal_file(base_dir: Path, relative: str) -> str:
    """The file's text (cut at 20,000 characters); the path is checked again, symlinks included."""
    path = resolve_under(base_dir, relative)
    if path is None:
        raise GoalFileError(f"operatorGoalFile {relative!r} lies outside {str(base_dir)!r}")
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise GoalFileError(f"cannot read operatorGoalFile {relative!r}: {exc.strerror or exc}") from exc
    return text[:MAX_GOAL_FILE_CHARS]
