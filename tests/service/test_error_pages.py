"""A watched endpoint's error page in the watcher's status: summarised, never pasted raw."""

from __future__ import annotations

from aiohttp import web

from tests.service.conftest import Starter
from tests.support import Endpoint, wait_for

WATCHER = """\
id: probe
strategy: http-poll
endpoint: "{url}"
intervalMs: 100
timeoutMs: 1000
retry: {{maxRetries: 0, baseMs: 50, maxMs: 100}}
conditions: [{{path: status, op: eq, value: ok}}]
deliveryTargets: [console]
"""

PROXY_PAGE = (
    "<!DOCTYPE html>\n<html><head><meta charset='utf-8'>\n"
    "<style>body { font-family: sans-serif; } " + "h1 { color: red; } " * 40 + "</style>\n"
    "<title>\n  502 Bad   Gateway\n</title></head>\n"
    "<body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx/1.25.3</center>\n"
    + "<!-- a padding comment to disable MSIE and Chrome friendly error page -->\n" * 30
    + "</body></html>\n"
)


async def last_error(start_service: Starter, endpoint: Endpoint, status: int, body: str, kind: str) -> str:
    async def answer(request: web.Request) -> web.Response:
        return web.Response(status=status, text=body, content_type=kind)

    endpoint.handler = answer
    service = await start_service(watchers={"p.yaml": WATCHER.format(url=endpoint.url("/health"))})
    runner = service.manager.get("probe")
    error: str = await wait_for(lambda: service.manager.status(runner)["lastError"], what="a failed poll")
    return error


async def test_html_error_page_is_summarised_by_status_and_title(
    start_service: Starter, endpoint: Endpoint
) -> None:
    """A big HTML 502 page: lastError names the status and the page's title, and stays short."""
    error = await last_error(start_service, endpoint, 502, PROXY_PAGE, "text/html")
    assert error.endswith(': HTTP 502 Bad Gateway (HTML page: "502 Bad Gateway")'), error
    assert (False, True) == ("<" in error, len(error) <= 300)


async def test_plain_error_body_keeps_a_short_snippet(start_service: Starter, endpoint: Endpoint) -> None:
    """A text body keeps its first words, on one line and cut short."""
    body = "database unavailable\n  retry later " + "x" * 3000
    error = await last_error(start_service, endpoint, 503, body, "text/plain")
    assert ": HTTP 503 Service Unavailable: database unavailable retry later xxx" in error
    assert len(error) <= 300
