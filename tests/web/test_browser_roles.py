"""The web page by role (SPEC §21) in headless Chromium: a viewer sees who it is and what it may do,
and no button that would change anything; an operator gets the inbox buttons but not the watchers';
the Audit view lists the changes with who made them."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.service.test_process import Running, free_port
from tests.web.test_browser import WAIT_MS, Background, add_item, background, browser  # noqa: F401

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytestmark = [pytest.mark.slow, pytest.mark.browser]

VIEWER, OPERATOR = "viewer-browser-0123456789", "operator-browser-0123456789"
CONFIG = """\
store: sqlite:///state.db
server:
  host: 127.0.0.1
  port: {port}
  tokens:
    - {{name: grafana, token: {viewer}, role: viewer}}
    - {{name: alice, token: {operator}, role: operator}}
targets:
  oncall: {{type: console}}
"""
WATCHER = "id: checkout-api\nstrategy: webhook\ndeliveryTargets: [oncall]\n"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory, browser: Browser) -> Iterator[Running]:  # noqa: F811
    project: Path = tmp_path_factory.mktemp("roles")
    port = free_port()
    (project / "sentinel.yaml").write_text(CONFIG.format(port=port, viewer=VIEWER, operator=OPERATOR))
    (project / "watchers").mkdir()
    (project / "watchers" / "w.yaml").write_text(WATCHER)
    running = Running(project / "sentinel.yaml", port)
    running.start()
    yield running
    assert running.proc is not None
    running.proc.kill()
    running.proc.wait()


def api(service: Running, token: str, method: str, path: str, body: Any = None) -> Any:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(service.url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def open_as(browser: Browser, service: Running, token: str) -> Page:  # noqa: F811
    from playwright.sync_api import expect

    page = browser.new_context().new_page()
    page.goto(service.url + "/")
    page.get_by_label("API token", exact=True).fill(token)
    page.get_by_role("button", name="Use token").click()
    expect(page.locator("#token-panel")).to_be_hidden()
    return page


def test_a_viewer_sees_no_buttons_that_change_things(
    browser: Browser,  # noqa: F811
    service: Running,
    background: Background,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    add_item(background, service, "escalation", "warning", "checkout-api is failing")
    page = open_as(browser, service, VIEWER)
    expect(page.locator("#whoami")).to_contain_text("grafana (viewer)", timeout=WAIT_MS)
    expect(page.locator("#inbox-list")).to_contain_text("checkout-api is failing", timeout=WAIT_MS)
    expect(page.locator("#watchers-body")).to_contain_text("checkout-api")
    for name in ("Ack", "Resolve", "Disable", "Silence"):
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    expect(page.locator("#silence-form")).to_be_hidden()
    page.context.close()


def test_an_operator_acks_and_the_audit_says_who(
    browser: Browser,  # noqa: F811
    service: Running,
    background: Background,  # noqa: F811
) -> None:
    from playwright.sync_api import expect

    add_item(background, service, "escalation", "warning", "disk almost full")
    page = open_as(browser, service, OPERATOR)
    expect(page.locator("#whoami")).to_contain_text("alice (operator)", timeout=WAIT_MS)
    entry = page.locator("#inbox-list li", has_text="disk almost full")
    entry.get_by_role("button", name="Ack", exact=True).click()
    expect(page.locator("#audit-body")).to_contain_text("inbox.ack", timeout=WAIT_MS)
    expect(page.locator("#audit-body")).to_contain_text("alice")
    expect(page.get_by_role("button", name="Disable", exact=True)).to_have_count(0)
    rows = api(service, VIEWER, "GET", "/api/v1/audit?actor=alice")["items"]
    assert [("inbox.ack", "web")] == [(e["action"], e["via"]) for e in rows]
    page.context.close()
