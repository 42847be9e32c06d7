"""How a loaded skill reaches a hook session (SPEC.md §5.1). Pure.

A session looks its watcher's skill up when it starts, among the skills as last loaded: a reload
(SIGHUP) may change them, and a session already running keeps the text it started with. The
model reads the skill's body first in its first user message (``callbacks/sessions/prompt.py``),
under ``## Skill``.
"""

from __future__ import annotations

from collections.abc import Callable

from sentinel_hooks.config.skills import Skill

SkillLookup = Callable[[str], Skill | None]
"""The skill with an id as last loaded; ``None`` when no skill has that id (any more)."""


def session_skill(skill_id: str | None, lookup: SkillLookup) -> Skill | None:
    """The skill a session starts with, for a watcher whose ``skillId`` is ``skill_id``."""
    return lookup(skill_id) if skill_id else None


def skill_section(skill: Skill | None) -> str | None:
    """The first user message's part that carries the skill; ``None`` without one or with an empty body."""
    if skill is None or not skill.body.strip():
        return None
    return f"## Skill\n{skill.body.strip()}"
