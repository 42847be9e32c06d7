"""The noise report's endpoint (SPEC §22): ``GET /api/v1/report?since=7d``, what ``sentinel
report`` prints and the web page's Report view draws (computed by ``report``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from sentinel_hooks.endpoints.base import Answer, ApiModel, Endpoint
from sentinel_hooks.endpoints.callbacks import FeedbackCounts, UsageTotals
from sentinel_hooks.endpoints.common import Count


class Percentiles(ApiModel):
    """Seconds, by nearest rank; null when nothing was measured."""

    p50: float | None
    p90: float | None


class ReportFigures(ApiModel):
    """What the fires of a watcher (or of all) did in the window."""

    fires: Count
    pages: Count = Field(description="pagesByAgent + fallbacks")
    pages_by_agent: Count
    fallbacks: Count
    deduped: Count
    silenced: Count
    grouped: Count
    resolved_before_page: Count
    follow_ups: Count
    escalation_steps: Count = Field(description="escalation steps delivered")
    time_to_page_s: Percentiles
    time_to_ack_s: Percentiles
    time_to_resolve_s: Percentiles
    usage: UsageTotals
    feedback: FeedbackCounts


class Noisy(ApiModel):
    watcher_id: str
    fires: Count


class Flapping(ApiModel):
    """A watcher with three or more fire and resolve cycles on one UTC day (its worst day)."""

    watcher_id: str
    cycles: Count
    day: str


class Report(ApiModel):
    """The fires created from since to until."""

    since: datetime
    until: datetime
    total: ReportFigures
    watchers: dict[str, ReportFigures]
    noisiest: list[Noisy] = Field(description="the ten watchers with the most fires")
    flapping: list[Flapping]


class ReportQuery(ApiModel):
    since: str = Field("7d", description="the window: 90m, 24h, 7d, 2w … (inside retention.callbacksDays)")


REPORT = Endpoint(
    "report",
    "GET",
    "/api/v1/report",
    "the noise report: fires, pages, time to page, ack and resolve, cost, feedback, noisy and flapping "
    "watchers",
    "callbacks",
    (Answer(200, "the report", Report),),
    query=ReportQuery,
    errors=(400,),
    role="viewer",
)


class Chart(ApiModel):
    id: str
    title: str
    svg: str = Field(description="a standalone SVG document (viewBox 360 wide)")


class ReportCharts(ApiModel):
    """The Report view's charts of the same window, drawn by the server."""

    charts: list[Chart]


CHARTS = Endpoint(
    "reportCharts",
    "GET",
    "/api/v1/report/charts",
    "the report's charts as SVG (what the web page's Report view shows)",
    "callbacks",
    (Answer(200, "the charts", ReportCharts),),
    query=ReportQuery,
    errors=(400,),
    role="viewer",
)

ENDPOINTS = (REPORT, CHARTS)
