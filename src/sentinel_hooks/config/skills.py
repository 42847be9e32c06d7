"""Skills: ``skills/<id>/SKILL.md`` — markdown with YAML front matter (name, description).

The body is injected into the hook sessions of watchers whose ``skillId`` is ``<id>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

from sentinel_hooks.config.base import Spec
from sentinel_hooks.config.issues import validation_issues
from sentinel_hooks.config.yamlfile import display_path, parse_yaml
from sentinel_hooks.errors import ConfigError, ConfigIssue

SKILL_FILE = "SKILL.md"


class SkillFrontMatter(Spec):
    """The keys a SKILL.md front matter may hold."""

    name: str = Field(min_length=1, max_length=200)
    description: str = Field(min_length=1, max_length=2000)
    license: str | None = None
    metadata: dict[str, Any] | None = None


@dataclass(frozen=True)
class Skill:
    """One loaded skill."""

    id: str
    name: str
    description: str
    body: str
    path: Path


def parse_skill(skill_id: str, text: str, *, path: Path, display: str) -> Skill:
    """Parse SKILL.md text; raise ConfigError with file:line for a malformed file."""
    lines = text.splitlines()
    if not lines or lines[0].strip() != "---":
        raise ConfigError(
            [
                ConfigIssue(
                    display,
                    1,
                    "",
                    "SKILL.md must start with '---' front matter holding name and description",
                )
            ]
        )
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise ConfigError(
            [ConfigIssue(display, 1, "", "front matter is not closed by a '---' line")]
        ) from None
    header = "\n".join(lines[1:end]) + "\n"
    doc = parse_yaml("\n" + header, display=display, path=path)  # leading newline keeps line numbers true
    data = doc.data if doc.data is not None else {}
    if not isinstance(data, dict):
        raise ConfigError(
            [ConfigIssue(display, 2, "", "front matter must be a mapping with name and description")]
        )
    try:
        meta = SkillFrontMatter.model_validate(data)
    except ValidationError as exc:
        issues = validation_issues(exc, display=display, data=data, lines=doc.lines, root=SkillFrontMatter)
        raise ConfigError(issues) from exc
    body = "\n".join(lines[end + 1 :]).strip()
    return Skill(skill_id, meta.name, meta.description, body, path)


def load_skills(skills_dir: Path) -> tuple[dict[str, Skill], list[ConfigIssue]]:
    """Every ``<id>/SKILL.md`` below ``skills_dir``; problems are returned, not raised."""
    skills: dict[str, Skill] = {}
    issues: list[ConfigIssue] = []
    if not skills_dir.is_dir():
        return skills, issues
    for folder in sorted(p for p in skills_dir.iterdir() if p.is_dir()):
        path = folder / SKILL_FILE
        display = display_path(path)
        if not path.is_file():
            issues.append(ConfigIssue(display, None, "", f"skill folder {folder.name!r} has no {SKILL_FILE}"))
            continue
        try:
            text = path.read_text(encoding="utf-8")
            skills[folder.name] = parse_skill(folder.name, text, path=path, display=display)
        except ConfigError as exc:
            issues.extend(exc.issues)
        except (OSError, UnicodeDecodeError) as exc:
            issues.append(ConfigIssue(display, None, "", f"cannot read file: {exc}"))
    return skills, issues
