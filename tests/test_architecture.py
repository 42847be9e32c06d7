"""The house keeps its shape: imports follow the flow, and pure modules load no I/O library.

``FLOORS`` lists the top-level parts of ``sentinel_hooks`` from the ground up, in the order data
flows down through them at run time (docs/architecture.md draws it): a module may import its own
part and the parts on lower floors. ``AGAINST_THE_FLOW`` names the imports allowed to run the
other way, each with its reason; there are at most two. ``PURE`` lists the modules of pure
logic: each is imported in a fresh interpreter, which must then hold no I/O library, however
indirectly it was reached.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sentinel_hooks"

FLOORS: list[set[str]] = [
    # ground: no Sentinel imports
    {"errors", "clock", "canonical", "hardening", "metrics", "background", "heap", "tracing"},
    {"core"},  # pure shared logic: paths, operators, conditions, envelope, templates, the EVM ABI, backoff
    {"config"},  # sentinel.yaml, watcher and skill files, validated
    {"skills"},  # what a hook session is given of its watcher's skill
    {"store", "process_runner", "net", "logs", "events", "outages"},  # durable state and the ways out
    {"cluster"},  # leases, membership, watcher changes between replicas
    {"inbox"},  # the operator inbox
    {"delivery"},  # targets and the outbox dispatcher
    {"relay"},  # the contract state machine: deadlines, fallback, fan-out
    {"callbacks"},  # intake, hook sessions, their queues, models and tools
    {"watchers"},  # strategies, runners, the firing pipeline
    {"retention", "report"},  # prunes / reports on what every stage left behind
    {"endpoints"},  # the HTTP API described once: the faces' routes, document and MCP tools read it
    {"operations"},  # what the faces ask of a service (mixed into Service)
    {"service"},  # wires the stages together
    {"mcp_server"},  # the MCP tools and server, reached over HTTP (cli) or in-process (api)
    {"api", "cli"},  # the faces
    {"__main__", "testing", "__init__"},
]
FLOOR_OF = {part: floor for floor, parts in enumerate(FLOORS) for part in parts}

AGAINST_THE_FLOW = {
    # The service starts its own HTTP API; every route calls back into the service, so the API
    # stands above it, and api/app.py names Service for its type only.
    ("service.py", "sentinel_hooks.api.app"),
}

PURE = [
    "canonical.py",
    "core/",  # every module of the core
    "watchers/lifecycle.py",
    "watchers/episodes.py",
    "watchers/builder.py",
    "config/hosts.py",
    "watchers/strategies/http_body.py",
    "watchers/strategies/sse_parser.py",
    "watchers/strategies/probe_state.py",
    "net/body.py",
    "inbox/transitions.py",
    "relay/fallback.py",
    "store/urls.py",
    "callbacks/sessions/prompt.py",
    "callbacks/policy/rules.py",
    "callbacks/sessions/compaction.py",
    "callbacks/sessions/memory.py",
    "callbacks/backends/recovery.py",
    "skills/injection.py",
]
"""Modules of pure logic (a folder: every module in it): functions from values to values."""

LOADED_IO = {
    "aiohttp",
    "anthropic",
    "apprise",
    "apscheduler",
    "hiredis",
    "httpx",
    "jinja2",
    "mcp",
    "openai",
    "redis",
    "slack_sdk",
    "sqlite3",
    "websockets",
}
"""What loading a pure module may never pull in, directly or through anything it imports."""
TEMPLATES = "sentinel_hooks.core.templates"  # the template engine, the one place Jinja2 is loaded
OWN_IO = {"socket", "subprocess"}
"""What a pure module may not import itself; the standard library's asyncio and email load them,
so they are checked in the module's own import lines only."""


def module_name(path: Path) -> str:
    relative = path.relative_to(PACKAGE).with_suffix("")
    parts = relative.parts[:-1] if relative.name == "__init__" else relative.parts
    return ".".join(("sentinel_hooks", *parts))


def pure_paths() -> list[Path]:
    """Every file PURE names, a folder standing for each module under it."""
    found: list[Path] = []
    for entry in PURE:
        path = PACKAGE / entry
        found += sorted(path.rglob("*.py")) if entry.endswith("/") else [path]
    return found


PURE_MODULES = [module_name(path) for path in pure_paths()]


def imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    roots: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def sentinel_imports(path: Path) -> set[str]:
    """Every ``sentinel_hooks.…`` module ``path`` names in an import (under TYPE_CHECKING too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return {name for name in names if name.startswith("sentinel_hooks.")}


def part_of(relative: Path) -> str:
    return relative.with_suffix("").parts[0]


def imports_against_the_flow() -> set[tuple[str, str]]:
    found: set[tuple[str, str]] = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        source = part_of(relative)
        for module in sentinel_imports(path):
            target = module.split(".")[1]
            if target != source and FLOOR_OF[target] >= FLOOR_OF[source]:
                found.add((relative.as_posix(), module))
    return found


def test_every_part_has_a_floor() -> None:
    parts = {part_of(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")}
    assert set() == parts - set(FLOOR_OF)


def test_imports_follow_the_flow() -> None:
    """Only the imports listed, each with its reason, run up the floors (or across one)."""
    assert AGAINST_THE_FLOW == imports_against_the_flow()
    assert len(AGAINST_THE_FLOW) <= 2


def test_every_pure_module_exists() -> None:
    """Each file PURE names is there (a move updates the list instead of dropping a check)."""
    assert [] == [entry for entry in PURE if not (PACKAGE / entry).exists()]


@pytest.mark.parametrize("path", pure_paths(), ids=lambda path: path.relative_to(PACKAGE).as_posix())
def test_pure_module_opens_no_socket_or_process_itself(path: Path) -> None:
    """A pure module imports neither socket nor subprocess in its own lines."""
    assert set() == imported_roots(path) & OWN_IO


def loaded_by(module: str) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after ``import module``."""
    code = f"import sys, {module}; print(' '.join(sorted({{n.split('.')[0] for n in sys.modules}})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert 0 == result.returncode, result.stderr
    return set(result.stdout.split())


@pytest.mark.parametrize("module", PURE_MODULES)
def test_pure_module_loads_no_io_library(module: str) -> None:
    """Nothing a pure module imports, however indirectly, is a network, database, scheduler or
    model client; only the template engine loads Jinja2. Checked in a fresh interpreter."""
    allowed = {"jinja2"} if f"{module}.".startswith(f"{TEMPLATES}.") else set()
    assert set() == loaded_by(module) & (LOADED_IO - allowed)


@pytest.mark.parametrize("module", ["sentinel_hooks.store", "sentinel_hooks.store.records"])
def test_the_store_contract_loads_no_backend(module: str) -> None:
    """The Store contract and its records load neither database client nor any other I/O library:
    a backend's package is imported only when a store URL names it (``store.backends``)."""
    assert set() == loaded_by(module) & LOADED_IO
