"""The web page in a real browser (Debian's chromium via Playwright) against `sentinel run`.

What an on-call engineer does with it: the page asks for the API token; an escalation appears
without a reload, is acked and then resolved; a real hook session (a fake OpenAI-compatible model
scripted to call ``run_command``, ``actionPolicy.default: needs_approval``) pauses on an approval,
which is approved in the page, and its command runs; watchers are disabled and enabled; at a
375 px phone width nothing scrolls sideways. No test may log a console error (so no CSP
violation, no failed request).

One `sentinel run` and one browser serve the whole module; every test opens its own browser
context and creates the items it needs. The approval test writes a desktop screenshot to
``tmp_path``, and to ``docs/web-inbox.png`` when that file is missing or
``SENTINEL_UPDATE_SCREENSHOT=1`` (so a test run does not rewrite a committed image).
Without ``/usr/bin/chromium`` or the ``playwright`` package the tests skip, except in CI
(env ``CI``), where they fail.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import threading
import urllib.request
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import pytest

from sentinel_hooks.clock import SystemClock
from sentinel_hooks.inbox.items import Inbox
from sentinel_hooks.store import InboxItem, InboxKind, open_store
from sentinel_hooks.store.records import Severity
from sentinel_hooks.testing import FakeOpenAIServer
from tests.service.test_process import Running, free_port
from tests.support import wait_until

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Locator, Page

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "web-inbox.png"
TOKEN = "tok-browser-test-7f3a"
WAIT_MS = 10_000
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 375, "height": 812}
T = TypeVar("T")

CONFIG = """\
store: sqlite:///state.db
server: {{host: 127.0.0.1, port: {port}, apiToken: {token}}}
allowedHosts: ["127.0.0.1"]
hookResponseTimeoutMs: 600000
hookResponseDedupeWindowMs: 0
notificationPayloadMode: none
models:
  ops: {{type: openai, baseUrl: "{model_url}", model: ops-model, timeoutMs: 5000}}
targets:
  oncall: {{type: console}}
actionPolicy: {{default: needs_approval}}
"""

WATCHERS = """\
watchers:
  - id: deploy-events
    strategy: webhook
    deliveryTargets: [oncall]
    fire:
      eventName: deploy_failed
      priority: high
      operatorGoal: A deploy failed. Restart the worker if that is safe, then tell #ops.
  - id: checkout-api
    strategy: http-poll
    endpoint: http://127.0.0.1:{dead_port}/healthz
    intervalMs: 1000
    retry: {{maxRetries: 3, baseMs: 20000, maxMs: 30000}}
    conditions: [{{path: status, op: neq, value: ok}}]
    deliveryTargets: [oncall]
  - id: nightly-backup
    strategy: webhook
    enabled: false
    deliveryTargets: [oncall]
"""


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None."""
    if importlib.util.find_spec("playwright") is None:
        return "the playwright package is not installed (pip install playwright)"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install chromium)"
    return None


class Background:
    """An event loop in a thread for the fake model server and the tests' store writes.

    (Playwright's sync API keeps an event loop of its own on the main thread.)
    """

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout=15)

    def __enter__(self) -> Background:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)
        self.loop.close()


async def _new_model() -> FakeOpenAIServer:
    server = FakeOpenAIServer()
    await server.start()
    return server


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Debian's chromium, headless (skips without it locally, fails in CI)."""
    missing = browser_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"the browser tests must run in CI: {missing}")
        pytest.skip(missing)
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=WAIT_MS)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def background() -> Iterator[Background]:
    with Background() as loop:
        yield loop


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("web")


def command(project: Path) -> list[str]:
    """The command the model asks to run: it writes ran.txt in the project directory."""
    return ["sh", "-c", f"echo restarted > {project / 'ran.txt'}"]


@pytest.fixture(scope="module")
def model(background: Background, project: Path) -> Iterator[FakeOpenAIServer]:
    """The model: asks to run ``command``, then (once it ran) notifies the on-call."""
    server = background.run(_new_model())
    argv = command(project)
    server.reply_tool_call("sentinel_act", {"action": "run_command", "command": argv[0], "args": argv[1:]})
    server.reply_tool_call("sentinel_act", {"action": "notify", "message": "billing-worker restarted."})
    yield server
    background.run(server.stop())


@pytest.fixture(scope="module")
def service(
    browser: Browser, project: Path, model: FakeOpenAIServer, background: Background
) -> Iterator[Running]:
    """`sentinel run` with a token, the fake model, a webhook, a failing poll, a disabled watcher."""
    port = free_port()
    (project / "sentinel.yaml").write_text(CONFIG.format(port=port, token=TOKEN, model_url=model.url))
    (project / "watchers").mkdir()
    (project / "watchers" / "w.yaml").write_text(WATCHERS.format(dead_port=free_port()))
    running = Running(project / "sentinel.yaml", port)
    running.start()
    failure = {"error": "404 channel_not_found", "delivery": {"message": {"text": "checkout-api is failing"}}}
    add_item(background, running, "delivery_failure", "warning", "Slack target oncall answered 404", failure)
    add_item(background, running, "escalation", "info", "Certificate for api.example.com expires in 9 days")
    yield running
    assert running.proc is not None
    running.proc.kill()
    running.proc.wait()


class Opened:
    """A page in its own browser context, and the console errors it logged."""

    def __init__(
        self, browser: Browser, service: Running, viewport: dict[str, int], *, fake_clock: bool = False
    ) -> None:
        self.context = browser.new_context(viewport=viewport)  # type: ignore[arg-type]
        self.page = self.context.new_page()
        self.problems: list[str] = []
        self.page.on("console", lambda m: self.problems.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda error: self.problems.append(str(error)))
        if fake_clock:
            self.page.clock.install()
        self.page.goto(service.url + "/")

    def enter_token(self) -> Page:
        from playwright.sync_api import expect

        self.page.get_by_label("API token", exact=True).fill(TOKEN)
        self.page.get_by_role("button", name="Use token").click()
        expect(self.page.locator("#token-panel")).to_be_hidden()
        return self.page


@pytest.fixture
def opened(browser: Browser, service: Running) -> Iterator[Opened]:
    """The page at desktop width, token not yet entered; no console errors by the end."""
    opened = Opened(browser, service, DESKTOP)
    yield opened
    opened.context.close()
    assert [] == opened.problems


def add_item(
    background: Background,
    service: Running,
    kind: InboxKind,
    severity: Severity,
    reason: str,
    detail: dict[str, Any] | None = None,
) -> InboxItem:
    """Create an item in the running service's SQLite file, as a session or the relay would."""

    async def create() -> InboxItem:
        store = open_store("sqlite:///state.db", base_dir=service.config.parent)
        await store.open()
        try:
            return await Inbox(store, SystemClock()).create(
                kind,
                severity=severity,
                reason=reason,
                watcher_id="checkout-api",
                detail=detail,
                actor="agent",
            )
        finally:
            await store.close()

    return background.run(create())


def api(service: Running, method: str, path: str, body: Any = None) -> Any:
    """Call the service's API with the bearer token; the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(service.url + path, data=data, method=method)
    request.add_header("Authorization", f"Bearer {TOKEN}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=5) as response:
        return json.loads(response.read())


def inbox_item(page: Page, text: str) -> Locator:
    return page.locator("#inbox-list > li", has_text=text)


def status_badge(item: Locator) -> Locator:
    return item.locator(".facts .badge[class*='status-']")


def test_token_form_unlocks_the_page_and_the_token_survives_a_reload(opened: Opened) -> None:
    """With apiToken the page asks for it first; entered once, it is kept for the browser session."""
    from playwright.sync_api import expect

    page = opened.page
    expect(page.get_by_role("heading", name="API token needed")).to_be_visible()
    expect(page.locator("#inbox-list > li")).to_have_count(0)
    opened.enter_token()
    expect(inbox_item(page, "Certificate for api.example.com")).to_be_visible()
    page.reload()
    expect(inbox_item(page, "Certificate for api.example.com")).to_be_visible()
    expect(page.locator("#token-panel")).to_be_hidden()


def test_escalation_appears_without_reload_then_is_acked_and_resolved(
    opened: Opened, service: Running, background: Background
) -> None:
    """A new escalation shows up by polling; ack then resolve (with a note) show and are audited as web."""
    from playwright.sync_api import expect

    page = opened.enter_token()
    expect(page.locator("#inbox-summary")).to_contain_text("open")
    reason = "Checkout error rate at 7% for 10 minutes (SLO 2%)"
    escalation = add_item(background, service, "escalation", "critical", reason)
    item = inbox_item(page, reason)
    expect(status_badge(item)).to_have_text("open")
    item.get_by_role("button", name="Ack").click()
    expect(status_badge(item)).to_have_text("acked")
    item.get_by_label("Note (optional)").fill("rolled back release 412")
    item.get_by_role("button", name="Resolve").click()
    expect(status_badge(item)).to_have_text("resolved")
    expect(item.get_by_role("button")).to_have_text(["Show details"])
    history = api(service, "GET", f"/api/v1/inbox/{escalation.id}")["history"]
    expected = [
        ("agent", "open", None),
        ("web", "acked", None),
        ("web", "resolved", "rolled back release 412"),
    ]
    assert expected == [(h["actor"], h["to"], h["note"]) for h in history]


def test_approval_shows_the_exact_command_and_runs_it_when_approved(
    opened: Opened, service: Running, tmp_path: Path
) -> None:
    """A paused session's approval shows argv, envelope and transcript; Approve runs the command."""
    from playwright.sync_api import expect

    argv = command(service.config.parent)
    ran = service.config.parent / "ran.txt"
    page = opened.enter_token()
    assert 202 == service.call("POST", "/hooks/ingest/deploy-events", {"service": "billing-worker"})[0]
    approval = inbox_item(page, "run `sh -c")
    expect(approval.locator(".command code")).to_have_text(f"sh -c 'echo restarted > {ran}'")
    approval.get_by_role("button", name="Show details").click()
    details = approval.locator(".detail")
    expect(details.get_by_role("heading", name="Exact command (argv, run without a shell)")).to_be_visible()
    expect(details.locator(".argv li")).to_have_text(argv)
    expect(details.get_by_role("heading", name="Callback envelope")).to_be_visible()
    expect(details.locator(".transcript")).to_contain_text("sentinel_act")
    assert not ran.exists()
    approval.get_by_role("button", name="Approve").click()
    expect(status_badge(approval)).to_have_text("approved")
    assert "restarted\n" == wait_until(lambda: ran.exists() and ran.read_text(), what="the command to run")
    expect(page.locator("#callbacks-body tr", has_text="deploy-events")).to_contain_text("fulfilled")

    approval.get_by_role("button", name="Hide details").click()
    expect(page.locator("#watchers-body")).to_contain_text("failing")
    page.screenshot(path=str(tmp_path / "web-inbox.png"), full_page=True)
    if not SCREENSHOT.exists() or os.environ.get("SENTINEL_UPDATE_SCREENSHOT") == "1":
        shutil.copyfile(tmp_path / "web-inbox.png", SCREENSHOT)


def test_watchers_show_their_status_and_can_be_enabled_and_disabled(opened: Opened, service: Running) -> None:
    """The failing poll shows its last error; Enable and Disable change the watcher through PATCH."""
    from playwright.sync_api import expect

    page = opened.enter_token()
    failing = page.locator("#watchers-body tr", has_text="checkout-api")
    expect(failing).to_contain_text("cannot connect")
    backup = page.locator("#watchers-body tr", has_text="nightly-backup")
    expect(backup).to_contain_text("disabled")
    page.get_by_role("button", name="Enable watcher nightly-backup").click()
    expect(page.get_by_role("button", name="Disable watcher nightly-backup")).to_be_visible()
    enabled = api(service, "GET", "/api/v1/watchers/nightly-backup")["status"]["state"]
    page.get_by_role("button", name="Disable watcher nightly-backup").click()
    expect(backup).to_contain_text("disabled")
    assert ("ok", "disabled") == (
        enabled,
        api(service, "GET", "/api/v1/watchers/nightly-backup")["status"]["state"],
    )


def test_a_silence_is_made_from_a_watcher_row_listed_and_expired(opened: Opened, service: Running) -> None:
    """Silence on a watcher row fills the form; the silence is listed, the row says silenced by,
    and Expire ends it (checked through the API)."""
    from playwright.sync_api import expect

    page = opened.enter_token()
    page.get_by_role("button", name="Silence watcher nightly-backup").click()
    expect(page.get_by_label("Watcher", exact=True)).to_have_value("nightly-backup")
    page.get_by_label("Why", exact=True).fill("restoring the backup host")
    page.get_by_label("For", exact=True).select_option("3600000")
    page.get_by_role("button", name="Silence", exact=True).click()
    row = page.locator("#silences-body tr", has_text="restoring the backup host")
    expect(row).to_contain_text('watcherId eq "nightly-backup"')
    expect(row).to_contain_text("active")
    expect(page.locator("#watchers-body tr", has_text="nightly-backup")).to_contain_text("silenced by")
    made = api(service, "GET", "/api/v1/silences?state=active")["items"]
    mine = [s for s in made if s["comment"] == "restoring the backup host"]
    row.get_by_role("button", name=f"Expire silence {mine[0]['id']}").click()
    expect(row).to_have_count(0)
    assert "expired" == api(service, "GET", f"/api/v1/silences/{mine[0]['id']}")["silence"]["state"]


def test_an_inbox_item_prepares_a_silence_of_its_watcher(opened: Opened) -> None:
    """Silence watcher on an open inbox item fills the form with the item's watcher."""
    from playwright.sync_api import expect

    page = opened.enter_token()
    item = inbox_item(page, "Certificate for api.example.com")
    item.get_by_role("button", name="Silence watcher").click()
    expect(page.get_by_label("Watcher", exact=True)).to_have_value("checkout-api")
    expect(page.get_by_label("Why", exact=True)).to_be_focused()


def test_phone_width_has_no_horizontal_scroll(browser: Browser, service: Running) -> None:
    """At 375 px, with an item's details open, the page is no wider than the screen."""
    from playwright.sync_api import expect

    opened = Opened(browser, service, PHONE)
    try:
        page = opened.enter_token()
        first = page.locator("#inbox-list > li").first
        first.get_by_role("button", name="Show details").click()
        expect(first.get_by_role("heading", name="History")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    finally:
        opened.context.close()
    assert [] == opened.problems


def set_hidden(page: Page, hidden: bool) -> None:
    """Make the page see its tab as hidden (or visible again), as the Page Visibility API reports it."""
    page.evaluate(
        """hidden => {
            Object.defineProperty(document, "hidden", {configurable: true, get: () => hidden});
            document.dispatchEvent(new Event("visibilitychange"));
        }""",
        hidden,
    )


def test_polling_pauses_while_the_tab_is_hidden(browser: Browser, service: Running) -> None:
    """Every 3 s the page polls; hidden, it stops; visible again, it polls at once."""
    from playwright.sync_api import Request, expect

    def polls(request: Request) -> bool:
        return "/api/v1/inbox?" in request.url

    opened = Opened(browser, service, DESKTOP, fake_clock=True)
    try:
        page = opened.enter_token()
        expect(page.locator("#connection")).to_contain_text("Updated")
        with page.expect_request(polls):
            page.clock.run_for(3500)
        set_hidden(page, True)
        seen: list[str] = []
        page.on("request", lambda request: seen.append(request.url) if polls(request) else None)
        page.clock.run_for(30_000)
        page.evaluate("() => new Promise(resolve => setTimeout(resolve, 0))")
        hidden_polls = list(seen)
        with page.expect_request(polls):
            set_hidden(page, False)
    finally:
        opened.context.close()
    assert ([], []) == (hidden_polls, opened.problems)
