"""The start-up line of `sentinel run` names the address the API is bound to."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.service.test_process import Running, free_port

pytestmark = pytest.mark.slow

TOKEN = "listening-test-token-0123456789abcdef"


def run_on(tmp_path: Path, host: str) -> tuple[Running, str]:
    """`sentinel run` with ``server.host: host``: the process and its start-up line."""
    port = free_port()
    (tmp_path / "sentinel.yaml").write_text(
        f"store: sqlite:///state.db\nserver: {{host: '{host}', port: {port}, apiToken: {TOKEN}}}\n"
    )
    service = Running(tmp_path / "sentinel.yaml", port)
    service.start()
    line = next(line for line in service.log.read_text().splitlines() if "sentinel: listening on" in line)
    return service, line


def test_a_wildcard_host_is_named_with_the_url_that_reaches_it(tmp_path: Path) -> None:
    """server.host 0.0.0.0 (the Docker example): the line says 0.0.0.0 and how to reach it here, not
    127.0.0.1 alone (the address people would take for the only one listened on)."""
    service, line = run_on(tmp_path, "0.0.0.0")
    try:
        here = f"from this machine {service.url}"
        assert f"listening on 0.0.0.0:{service.port} (every IPv4 interface; {here})" in line, line
    finally:
        service.kill()


def test_a_specific_host_is_named_as_bound(tmp_path: Path) -> None:
    """server.host 127.0.0.1: the line gives the URL of that address and port."""
    service, line = run_on(tmp_path, "127.0.0.1")
    try:
        assert re.search(rf"listening on http://127\.0\.0\.1:{service.port} — 0 watcher\(s\)", line), line
    finally:
        service.kill()
