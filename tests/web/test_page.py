"""The web page's routes (SPEC §9 ``GET /``): the HTML shell, its assets, headers and access rules."""

from __future__ import annotations

from html.parser import HTMLParser
from importlib import resources

import aiohttp
import pytest
from multidict import CIMultiDictProxy

from sentinel_hooks.api.routes.web import CONTENT_SECURITY_POLICY, template_environment
from sentinel_hooks.inbox.transitions import INBOX_KINDS, INBOX_STATUSES
from sentinel_hooks.service import Service
from tests.service.conftest import Starter

TOKEN_SERVER = "{host: 127.0.0.1, port: 0, apiToken: tok-web-page-0123456}"


async def get(
    service: Service, path: str, headers: dict[str, str] | None = None
) -> tuple[int, CIMultiDictProxy[str], str]:
    async with (
        aiohttp.ClientSession() as session,
        session.get(service.url + path, headers=headers or {}) as response,
    ):
        return response.status, response.headers, await response.text()


class Tags(HTMLParser):
    """Collects every start tag with its attributes, and the text inside <script> elements."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.script_text = ""
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.script_text += data.strip()


def parse(html: str) -> Tags:
    tags = Tags()
    tags.feed(html)
    return tags


async def test_page_is_html_with_the_security_headers(start_service: Starter) -> None:
    """`GET /` is HTML with a strict CSP, nosniff, no-referrer and DENY framing."""
    service = await start_service(watchers={})
    status, headers, _ = await get(service, "/")
    expected = (200, "text/html", CONTENT_SECURITY_POLICY, "nosniff", "no-referrer", "DENY")
    assert expected == (
        status,
        headers["Content-Type"].split(";")[0],
        headers["Content-Security-Policy"],
        headers["X-Content-Type-Options"],
        headers["Referrer-Policy"],
        headers["X-Frame-Options"],
    )


def test_policy_allows_only_own_origin_and_no_inline_code() -> None:
    """The CSP starts from default-src 'self' and allows neither inline script nor framing."""
    directives = dict(d.split(" ", 1) for d in CONTENT_SECURITY_POLICY.split("; "))
    assert ("'self'", "'self'", "'none'") == (
        directives["default-src"],
        directives["script-src"],
        directives["frame-ancestors"],
    )
    assert "unsafe" not in CONTENT_SECURITY_POLICY


async def test_page_has_no_inline_script_and_loads_its_assets_from_self(start_service: Starter) -> None:
    """Scripts come only from /static/app.js, the stylesheet from /static/app.css; no inline code."""
    service = await start_service(watchers={})
    tags = parse((await get(service, "/"))[2])
    scripts = [attrs.get("src") for tag, attrs in tags.tags if tag == "script"]
    styles = [
        attrs.get("href") for tag, attrs in tags.tags if tag == "link" and attrs.get("rel") == "stylesheet"
    ]
    inline_handlers = [name for _, attrs in tags.tags for name in attrs if name.startswith("on")]
    assert (["/static/app.js"], ["/static/app.css"], "", []) == (
        scripts,
        styles,
        tags.script_text,
        inline_handlers,
    )


async def test_page_has_landmarks_and_a_label_for_every_control(start_service: Starter) -> None:
    """banner, nav, main; each input and select has a <label for> naming it."""
    service = await start_service(watchers={})
    tags = parse((await get(service, "/"))[2])
    names = {tag for tag, _ in tags.tags}
    controls = {attrs["id"] for tag, attrs in tags.tags if tag in ("input", "select")}
    labelled = {attrs.get("for") for tag, attrs in tags.tags if tag == "label"}
    assert ({"header", "nav", "main", "footer"}, set()) == (
        names & {"header", "nav", "main", "footer"},
        controls - labelled,
    )


async def test_filters_offer_every_status_and_kind(start_service: Starter) -> None:
    """The status and kind filters list the inbox's statuses and kinds, plus "any"."""
    service = await start_service(watchers={})
    tags = parse((await get(service, "/"))[2])
    values = [attrs.get("value") for tag, attrs in tags.tags if tag == "option"]
    durations = ["1800000", "3600000", "7200000", "14400000", "86400000"]  # the silence form's
    windows = ["24h", "7d", "30d"]  # the report's
    assert [
        "",
        *INBOX_STATUSES,
        "",
        *INBOX_KINDS,
        "",
        "info",
        "warning",
        "critical",
        *durations,
        *windows,
    ] == values


@pytest.mark.parametrize(
    ("name", "media_type"),
    [("app.js", "text/javascript"), ("app.css", "text/css"), ("icon.svg", "image/svg+xml")],
)
async def test_static_assets_are_served_with_their_content_types(
    start_service: Starter, name: str, media_type: str
) -> None:
    """/static/app.js and /static/app.css: 200, the right type, nosniff, the file's bytes."""
    service = await start_service(watchers={})
    status, headers, text = await get(service, f"/static/{name}")
    packaged = resources.files("sentinel_hooks.api").joinpath("web", "static", name).read_text()
    assert (200, media_type, "nosniff", True) == (
        status,
        headers["Content-Type"].split(";")[0],
        headers["X-Content-Type-Options"],
        text == packaged,
    )


@pytest.mark.parametrize("path", ["/static/other.js", "/static/..%2Froutes%2Fweb.py", "/static/"])
async def test_other_static_paths_are_404(start_service: Starter, path: str) -> None:
    """Only the two known assets are served; anything else (traversal included) is 404."""
    service = await start_service(watchers={})
    assert 404 == (await get(service, path))[0]


async def test_foreign_host_is_421_without_token(start_service: Starter) -> None:
    """Without apiToken the page, like the API, answers only loopback Host names."""
    service = await start_service(watchers={})
    assert 421 == (await get(service, "/", {"Host": "rebound.example.com"}))[0]


async def test_page_loads_without_token_when_api_token_is_set(start_service: Starter) -> None:
    """With apiToken the page itself needs no token and says a token is required."""
    service = await start_service(watchers={}, server=TOKEN_SERVER)
    status, _, html = await get(service, "/", {"Host": "sentinel.internal"})
    body = next(attrs for tag, attrs in parse(html).tags if tag == "body")
    assert (200, "true") == (status, body["data-token-required"])


async def test_page_data_calls_still_need_the_token(start_service: Starter) -> None:
    """With apiToken the JSON calls the page makes are 401 without the bearer token, 200 with it."""
    service = await start_service(watchers={}, server=TOKEN_SERVER)
    without = (await get(service, "/api/v1/inbox"))[0]
    with_token = (await get(service, "/api/v1/inbox", {"Authorization": "Bearer tok-web-page-0123456"}))[0]
    assert (401, 200) == (without, with_token)


async def test_page_without_token_does_not_ask_for_one(start_service: Starter) -> None:
    """Without apiToken the page tells its script that no token is needed."""
    service = await start_service(watchers={})
    body = next(attrs for tag, attrs in parse((await get(service, "/"))[2]).tags if tag == "body")
    assert "false" == body["data-token-required"]


def test_templates_are_autoescaped() -> None:
    """The page's Jinja2 environment escapes values."""
    rendered = template_environment().from_string("{{ value }}").render(value="<img src=x onerror=1>")
    assert "&lt;img src=x onerror=1&gt;" == rendered


def test_script_never_writes_html() -> None:
    """app.js builds DOM nodes with textContent: no innerHTML, outerHTML, document.write or eval."""
    script = resources.files("sentinel_hooks.api").joinpath("web", "static", "app.js").read_text()
    sinks = ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"]
    assert [] == [sink for sink in sinks if sink in script]
