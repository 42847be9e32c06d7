"""Pure modules import no I/O libraries (STYLE.md dependency rule)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sentinel_hooks"
PURE = [
    "canonical.py",
    "watchers/paths.py",
    "watchers/conditions.py",
    "watchers/operators.py",
    "watchers/lifecycle.py",
    "watchers/episodes.py",
    "callbacks/envelope.py",
    "callbacks/builder.py",
    "config/hosts.py",
    "watchers/strategies/http_body.py",
    "watchers/strategies/sse_parser.py",
    "watchers/strategies/probe_state.py",
    "net/body.py",
    "inbox/transitions.py",
    "relay/fallback.py",
    "store/contract_states.py",
    "callbacks/prompt.py",
    "callbacks/policy.py",
    "callbacks/compaction.py",
    "callbacks/memory.py",
    "callbacks/backends/recovery.py",
]
IO_LIBRARIES = {"aiohttp", "redis", "sqlite3", "apscheduler", "socket", "subprocess", "jinja2"}


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_io(module: str) -> None:
    """Conditions, paths, envelopes and friends stay free of network, database and scheduler code."""
    assert set() == imported_roots(PACKAGE / module) & IO_LIBRARIES
