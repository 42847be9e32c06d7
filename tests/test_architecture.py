"""The house keeps its shape: imports follow the flow, and pure modules load no I/O library.

``FLOORS`` lists the top-level parts of ``sentinel_hooks`` from the ground up, in the order data
flows down through them at run time (docs/architecture.md draws it): a module may import its own
part and the parts on lower floors. ``AGAINST_THE_FLOW`` names the imports allowed to run the
other way, each with its reason; there are at most two.
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
    {"errors", "clock", "canonical", "hardening", "metrics", "background", "heap"},
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
    {"retention"},  # prunes what every stage left behind
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
    "core/paths.py",
    "core/conditions.py",
    "core/checks.py",
    "core/operators.py",
    "core/envelope.py",
    "core/evm_abi.py",
    "core/retry.py",
    "core/usage.py",
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
    "store/contract_states.py",
    "store/urls.py",
    "callbacks/sessions/prompt.py",
    "callbacks/policy/rules.py",
    "callbacks/sessions/compaction.py",
    "callbacks/sessions/memory.py",
    "callbacks/backends/recovery.py",
    "skills/injection.py",
]
IO_LIBRARIES = {"aiohttp", "redis", "sqlite3", "apscheduler", "socket", "subprocess", "jinja2"}
# What loading a module may never pull in, directly or through anything it imports (socket and
# subprocess are left out: the standard library's asyncio and email load them).
LOADED_IO = {"aiohttp", "redis", "sqlite3", "apscheduler", "jinja2", "slack_sdk", "openai", "anthropic"}


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


@pytest.mark.parametrize("module", PURE)
def test_pure_module_imports_no_io(module: str) -> None:
    """Conditions, paths, envelopes and friends stay free of network, database and scheduler code."""
    assert set() == imported_roots(PACKAGE / module) & IO_LIBRARIES


def loaded_by(module: str) -> set[str]:
    """The top-level packages a fresh interpreter has loaded after ``import module``."""
    code = f"import sys, {module}; print(' '.join(sorted({{n.split('.')[0] for n in sys.modules}})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return set(result.stdout.split())


CORE = sorted(
    "sentinel_hooks." + path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
    for path in (PACKAGE / "core").rglob("*.py")
    if path.name != "__init__.py"
)


@pytest.mark.parametrize("module", CORE)
def test_the_core_loads_no_io_library(module: str) -> None:
    """Nothing the core imports, however indirectly, opens a connection or a database; only the
    templates load Jinja2."""
    allowed = {"jinja2"} if ".core.templates." in module else set()
    assert set() == loaded_by(module) & (LOADED_IO - allowed)


@pytest.mark.parametrize("module", ["sentinel_hooks.store", "sentinel_hooks.store.records"])
def test_the_store_contract_loads_no_backend(module: str) -> None:
    """The Store contract and its records load neither database client nor any other I/O library:
    a backend's package is imported only when a store URL names it (``store.backends``)."""
    assert set() == loaded_by(module) & LOADED_IO
