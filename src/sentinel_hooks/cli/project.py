"""``sentinel init``: write the example project shipped in the package."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sentinel_hooks.errors import SentinelError

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

EXAMPLE = "quickstart"


def _files(root: Traversable, prefix: Path = Path()) -> list[tuple[Path, Traversable]]:
    found: list[tuple[Path, Traversable]] = []
    for child in sorted(root.iterdir(), key=lambda c: c.name):
        if child.name.startswith(("__", ".")):
            continue
        if child.is_dir():
            found.extend(_files(child, prefix / child.name))
        else:
            found.append((prefix / child.name, child))
    return found


def example_files() -> list[tuple[Path, str]]:
    """(relative path, text) of every file of the example project."""
    from importlib import resources

    root = resources.files("sentinel_hooks").joinpath("examples", EXAMPLE)
    return [(path, item.read_text(encoding="utf-8")) for path, item in _files(root)]


SLACK_EDITS = (
    ("  # - hooks.slack.com", "  - hooks.slack.com"),
    ("  # oncall: {type: slack", "  oncall: {type: slack"),
    ("deliveryTargets: [console, log]", "deliveryTargets: [console, log, oncall]"),
)


def with_slack(text: str) -> str:
    """The example text with the Slack target switched on (webhook URL from $SLACK_WEBHOOK_URL)."""
    for before, after in SLACK_EDITS:
        text = text.replace(before, after)
    return text


def write_example(directory: Path, *, force: bool = False, slack: bool = False) -> list[Path]:
    """Write the example into ``directory``; refuse to overwrite files unless ``force``."""
    files = [(rel, with_slack(text) if slack else text) for rel, text in example_files()]
    existing = [directory / rel for rel, _ in files if (directory / rel).exists()]
    if existing and not force:
        shown = ", ".join(str(p) for p in existing[:3]) + (" …" if len(existing) > 3 else "")
        raise SentinelError(f"{shown} already exist(s); pass --force to overwrite, or choose another DIR")
    written: list[Path] = []
    for rel, text in files:
        target = directory / rel
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SentinelError(f"cannot write {target}: {exc.strerror or exc}") from exc
        written.append(target)
    return written
