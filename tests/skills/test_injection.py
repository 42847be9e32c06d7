"""A loaded skill reaches a session: looked up by the watcher's skillId, written under ``## Skill``."""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.config.skills import Skill
from sentinel_hooks.skills.injection import session_skill, skill_section

VAULTS = Skill(
    "vaults", "Vaults", "How to read a vault alert", "  Check the vault's health first.\n", Path("x")
)


def test_a_watcher_without_skill_id_gets_no_skill() -> None:
    """No skillId: the lookup is not asked at all."""
    asked: list[str] = []
    assert None is session_skill(None, lambda skill_id: asked.append(skill_id) or VAULTS)
    assert [] == asked


def test_the_skill_is_looked_up_by_the_watchers_skill_id() -> None:
    """The lookup (skills as last loaded) answers for the watcher's skillId."""
    assert VAULTS == session_skill("vaults", {"vaults": VAULTS}.get)


def test_the_section_carries_the_stripped_body() -> None:
    """The model reads the body under a ``## Skill`` heading."""
    assert "## Skill\nCheck the vault's health first." == skill_section(VAULTS)


def test_an_empty_body_adds_no_section() -> None:
    """A skill whose body is blank, or no skill, adds nothing to the first message."""
    blank = Skill("blank", "Blank", "Nothing", " \n", Path("x"))
    assert (None, None) == (skill_section(blank), skill_section(None))
