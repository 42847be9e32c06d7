"""Management commands find the service from the config's `server` even when the rest of the config
is broken, and stop with the reason when `server` itself is: real subprocesses against a real
`sentinel run` on a port other than the default."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.cli.conftest import sentinel_command
from tests.mcp_server.conftest import body_of
from tests.service.test_process import Running, free_port

pytestmark = pytest.mark.slow

TOKEN = "address-test-token-0123456789"
PROJECT = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}, apiToken: "${{env:ADDRESS_TEST_TOKEN}}", mcpApprovals: true}}
allowedHosts: [events.pagerduty.com]
targets:
  console: {{type: console}}
  oncall: {{type: pagerduty, routingKey: "${{env:ADDRESS_TEST_ROUTING}}"}}
"""
SERVICE_ENV = {"ADDRESS_TEST_TOKEN": TOKEN, "ADDRESS_TEST_ROUTING": "R0123456789abcdef0123456789abcdef"}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """`sentinel run` on a free port with its token and a PagerDuty routing key from the environment."""
    root: Path = tmp_path_factory.mktemp("address")
    port = free_port()
    (root / "sentinel.yaml").write_text(PROJECT.format(port=port))
    (root / "watchers").mkdir()
    (root / "watchers" / "w.yaml").write_text("id: hook\nstrategy: webhook\ndeliveryTargets: [console]\n")
    running = Running(root / "sentinel.yaml", port)
    saved = {name: os.environ.get(name) for name in SERVICE_ENV}
    os.environ.update(SERVICE_ENV)  # Running.start passes its own environment on
    try:
        running.start()
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    yield running
    assert running.proc is not None
    running.proc.kill()
    running.proc.wait()


def cli(service: Running, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """`sentinel ARGS -c CONFIG` with only ``env`` of the service's variables set."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("SENTINEL_", "ADDRESS_TEST_"))}
    return subprocess.run(
        [*sentinel_command(), *args, "-c", str(service.config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**base, **env},
        stdin=subprocess.DEVNULL,
    )


def test_unset_variable_elsewhere_does_not_lose_the_address(service: Running) -> None:
    """A PagerDuty routing key the command does not need is unset: `watchers list` still reaches the service
    on its port with the config's token (it used to try 127.0.0.1:8765 without a token)."""
    done = cli(service, "watchers", "list", "--json", env={"ADDRESS_TEST_TOKEN": TOKEN})
    assert (0, "") == (done.returncode, done.stderr)
    assert ["hook"] == [item["id"] for item in json.loads(done.stdout)["items"]]


def test_unset_token_variable_stops_with_the_reason(service: Running) -> None:
    """The token's own variable unset: exit 1 with one `file:line: key: message` line, no request."""
    done = cli(service, "watchers", "list", env={})
    assert 1 == done.returncode
    assert [
        f"{service.config.name}:2: server.apiToken: environment variable ADDRESS_TEST_TOKEN is not set "
        "(set it, or give a default: ${env:ADDRESS_TEST_TOKEN:-value})"
    ] == [line.replace(str(service.config.parent) + "/", "") for line in done.stderr.splitlines()]


def test_unreadable_port_stops_every_management_command(service: Running, tmp_path: Path) -> None:
    """`server.port` that does not read stops `status`, `inbox list` and `mcp` alike: exit 1, no traceback."""
    broken = tmp_path / "sentinel.yaml"
    broken.write_text(
        service.config.read_text().replace(f"port: {service.port}", 'port: "${env:ADDRESS_TEST_PORT}"')
    )
    for args in (("status",), ("inbox", "list"), ("mcp",)):
        done = subprocess.run(
            [*sentinel_command(), *args, "-c", str(broken)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            env={**{k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}, **SERVICE_ENV},
            stdin=subprocess.DEVNULL,
        )
        assert 1 == done.returncode, (args, done.stderr)
        assert 1 == len(done.stderr.splitlines()), (args, done.stderr)
        assert "server.port: environment variable ADDRESS_TEST_PORT is not set" in done.stderr
        assert "Traceback" not in done.stderr


async def test_mcp_reaches_the_service_of_a_partly_broken_config(service: Running) -> None:
    """`sentinel mcp -c` with the PagerDuty routing key unset: its tools reach the service with the token, and
    mcpApprovals is read from the same `server`."""
    command = sentinel_command()
    env = {"ADDRESS_TEST_TOKEN": TOKEN}
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(
        command=command[0], args=[*command[1:], "mcp", "-c", str(service.config)], env=env
    )
    async with Client(params) as client:
        listed = await client.list_tools()
        watchers = await client.call_tool("list_watchers", {"limit": 10})
    assert not watchers.is_error, body_of(watchers)
    assert ["hook"] == [w["id"] for w in body_of(watchers)["items"]]
    assert {"approve", "deny"} <= {tool.name for tool in listed.tools}
