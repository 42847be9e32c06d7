"""The web page's callback view and Report view in a real browser (SPEC §22), against `sentinel run`.

A callback opens from the list: its conditions, payload at full size, transcript, usage,
deliveries and feedback, with 👍/👎 buttons that record feedback through the API. The Report view
shows the figures the API computes and its server-drawn SVG charts, at desktop and at phone width
(screenshots of both go to ``tmp_path``), with nothing scrolling sideways on the phone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.service.test_process import Running
from tests.web.test_browser import (
    DESKTOP,
    PHONE,
    Opened,
    api,
    background,
    browser,
    model,
    project,
    service,
)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

__all__ = ["background", "browser", "model", "project", "service"]  # the module's fixtures

pytestmark = [pytest.mark.slow, pytest.mark.browser]
FIGURES = ("fires", "pages", "pagesByAgent", "fallbacks", "deduped", "silenced", "useful", "notUseful")


def shown_figures(page: Page) -> dict[str, str]:
    return {key: page.locator(f'#report-figures [data-figure="{key}"]').inner_text() for key in FIGURES}


def api_figures(service: Running) -> dict[str, str]:
    total = api(service, "GET", "/api/v1/report?since=7d")["total"]
    keyed = {**total, "useful": total["feedback"]["useful"], "notUseful": total["feedback"]["notUseful"]}
    return {key: str(keyed[key]) for key in FIGURES}


def check_report(page: Page, service: Running) -> None:
    """The page's figures equal the API's, and the three charts are drawn."""
    from playwright.sync_api import expect

    expect(page.locator('#report-figures [data-figure="fires"]')).not_to_have_text("0")
    page.locator("#report-form").get_by_role(
        "button", name="Show"
    ).click()  # reload: the state may have moved
    expect(page.locator("#report-charts figure svg")).to_have_count(3)
    expected = api_figures(service)
    expect(page.locator('#report-figures [data-figure="fires"]')).to_have_text(expected["fires"])
    assert expected == shown_figures(page)


def test_a_callback_opens_and_takes_feedback_and_the_report_matches_the_api(
    browser: Browser, service: Running, tmp_path: Path
) -> None:
    from playwright.sync_api import expect

    fired = api(
        service,
        "POST",
        "/api/v1/watchers/checkout-api/fire",
        {"payload": {"status": "down", "region": "eu-1"}},
    )
    cid = fired["callbackId"]
    api(service, "POST", f"/api/v1/callbacks/{cid}/feedback", {"useful": True})
    opened = Opened(browser, service, DESKTOP)
    try:
        page = opened.enter_token()
        check_report(page, service)
        page.get_by_role("button", name=f"Open callback {cid}").click()
        view = page.locator("#callback-view")
        expect(view.get_by_role("heading", name="Payload")).to_be_visible()
        expect(view.locator("pre.full").first).to_contain_text('"region": "eu-1"')
        for title in ("Contract", "Usage", "Deliveries (page, follow-ups)", "Feedback", "Envelope"):
            expect(view.get_by_role("heading", name=title)).to_be_visible()
        expect(view.locator(".feedback-counts")).to_have_text("1 👍 · 0 👎")
        view.get_by_role("button", name="Not useful").click()
        expect(view.locator(".feedback-counts")).to_have_text("1 👍 · 1 👎")
        counts = api(service, "GET", f"/api/v1/callbacks/{cid}")["feedback"]["counts"]
        assert {"useful": 1, "notUseful": 1} == counts
        check_report(page, service)
        page.screenshot(path=str(tmp_path / "web-report-desktop.png"), full_page=True)
    finally:
        opened.context.close()
    assert [] == opened.problems


def test_the_report_is_readable_at_phone_width(browser: Browser, service: Running, tmp_path: Path) -> None:
    api(service, "POST", "/api/v1/watchers/checkout-api/fire", {"payload": {"status": "down"}})
    opened = Opened(browser, service, PHONE)
    try:
        page = opened.enter_token()
        check_report(page, service)
        chart = page.locator("#report-charts svg").first.bounding_box()
        assert chart is not None
        assert PHONE["width"] * 0.8 <= chart["width"] <= PHONE["width"]  # drawn near its own 360 units
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        page.locator("#report").screenshot(path=str(tmp_path / "web-report-phone.png"))
    finally:
        opened.context.close()
    assert [] == opened.problems
