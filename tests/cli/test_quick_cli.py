"""A quick CLI: ``sentinel --help`` loads click and little else, and ``sentinel test`` reads
only what the watcher it tests needs (issue 18.3)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.cli.conftest import Runner

HEAVY = {"pydantic", "rich", "jinja2", "ruamel", "yaml", "asyncio", "aiohttp", "eth_abi", "redis"}


def test_help_imports_no_heavy_library() -> None:
    """Loading the command (all it needs for --help) imports none of the config or output stacks."""
    code = "import sys, sentinel_hooks.cli; print(' '.join(sorted({n.split('.')[0] for n in sys.modules})))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert set() == set(result.stdout.split()) & HEAVY


def test_test_ignores_other_broken_watcher_files(sentinel: Runner, tmp_path: Path) -> None:
    """A broken watcher file the tested watcher does not live in does not stop `sentinel test`."""
    sentinel("init", "demo")
    (tmp_path / "demo" / "watchers" / "broken.yaml").write_text("id: broken\nstrategy: nope\n")
    result = sentinel("test", "self-health", "-c", "demo/sentinel.yaml", "--payload", '{"status": "ok"}')
    assert (0, "") == (result.code, result.err)
    assert "fires: yes" in result.out
    assert 1 == sentinel("validate", "-c", "demo/sentinel.yaml").code


def test_test_reports_errors_of_the_watchers_own_file(sentinel: Runner, tmp_path: Path) -> None:
    """An error in the tested watcher's file is printed as file:line: key: message."""
    sentinel("init", "demo")
    path = tmp_path / "demo" / "watchers" / "self-health.yaml"
    path.write_text(path.read_text().replace("intervalMs: 5000", "intervalMs: soon"))
    result = sentinel("test", "self-health", "-c", "demo/sentinel.yaml")
    assert 1 == result.code
    assert result.err.startswith("demo/watchers/self-health.yaml:6: intervalMs: ")


def test_test_refuses_an_id_defined_twice(sentinel: Runner, tmp_path: Path) -> None:
    """The tested id in two watcher files is the same error `validate` gives."""
    sentinel("init", "demo")
    watchers = tmp_path / "demo" / "watchers"
    (watchers / "twin.yaml").write_text((watchers / "self-health.yaml").read_text())
    result = sentinel("test", "self-health", "-c", "demo/sentinel.yaml")
    assert 1 == result.code
    assert "demo/watchers/twin.yaml:1: id: watcher id 'self-health' is already used at" in result.err
