"""docs/api.md's roles table (a route per row, a role per column) is the endpoint declarations'
(SPEC §21): regenerate it with ``python -m tests.test_roles_doc`` when a route or its role changes."""

from __future__ import annotations

from pathlib import Path

from sentinel_hooks.core.roles import ROLES, allows
from sentinel_hooks.endpoints import ENDPOINTS

API_MD = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def roles_table() -> str:
    """The markdown table: one row per route that takes a token, ✔ where the role may call it."""
    lines = ["| route | " + " | ".join(ROLES) + " |", "| --- |" + " :-: |" * len(ROLES)]
    for e in ENDPOINTS:
        if e.role is None:
            continue
        marks = " | ".join("✔" if allows(role, e.role) else "" for role in ROLES)
        lines.append(f"| `{e.method} {e.path}` | {marks} |")
    return "\n".join(lines) + "\n"


def test_api_md_has_the_roles_table() -> None:
    assert roles_table() in API_MD.read_text(encoding="utf-8"), (
        "docs/api.md's roles table is stale: paste the output of `python -m tests.test_roles_doc`"
    )


if __name__ == "__main__":
    print(roles_table(), end="")
