"""The Report view's charts, drawn here as SVG (SPEC §22): no chart library, no script.

Each chart is a standalone ``<svg>`` with a ``viewBox`` 360 units wide, so on a 375 px phone it
is drawn at about its own size (text stays readable) and on a desktop it grows with its column.
Only presentation attributes are used (no ``style``), which the page's Content-Security-Policy
allows; every text is XML-escaped. The page fetches them with the report and puts them in as
parsed SVG, never as HTML.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from xml.sax.saxutils import escape, quoteattr

WIDTH = 360
LABEL_W = 120
ROW_H = 26
BAR_H = 16
TOP = 30
COLOURS = {
    "agent": "#2e7d32",
    "fallback": "#c62828",
    "deduped": "#9e9e9e",
    "silenced": "#5c6bc0",
    "grouped": "#8d6e63",
    "other": "#f9a825",
    "p50": "#1565c0",
    "p90": "#90caf9",
    "cost": "#6a1b9a",
}

Segment = tuple[str, float | None]  # None: nothing measured


def _text(x: float, y: float, text: str, *, anchor: str = "start", size: int = 12) -> str:
    return (
        f'<text x="{x:g}" y="{y:g}" font-size="{size}" text-anchor="{anchor}" fill="#222" '
        f'font-family="system-ui, sans-serif">{escape(text)}</text>'
    )


def bar_chart(title: str, rows: Sequence[tuple[str, Sequence[Segment]]], *, unit: str = "") -> str:
    """Horizontal stacked bars: one row per label, its segments left to right, the total at the
    end; a legend of the segment names under the title. Empty rows draw a "nothing" line."""
    names = list(dict.fromkeys(name for _, segments in rows for name, _ in segments))
    largest = max((sum(v or 0 for _, v in segments) for _, segments in rows), default=0) or 1
    span = WIDTH - LABEL_W - 60
    legend: list[str] = []
    x, line_y = 0.0, TOP
    for name in names:
        width = 20 + 7 * len(name)
        if x and x + width > WIDTH:
            x, line_y = 0.0, line_y + 16
        legend.append(
            f'<rect x="{x:g}" y="{line_y - 9}" width="11" height="11" fill="{COLOURS.get(name, "#777")}"/>'
        )
        legend.append(_text(x + 14, line_y + 1, name, size=12))
        x += width
    first_row = line_y + 14
    height = first_row + max(1, len(rows)) * ROW_H
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {height}" role="img" '
        f"aria-label={quoteattr(title)}>",
        f"<title>{escape(title)}</title>",
        _text(0, 16, title, size=15),
        *legend,
    ]
    if not rows:
        parts.append(_text(0, first_row + 14, "nothing in this window", size=13))
    for index, (label, segments) in enumerate(rows):
        y = first_row + index * ROW_H
        shown = label if len(label) <= 18 else label[:17] + "…"
        parts.append(_text(LABEL_W - 6, y + BAR_H - 3, shown, anchor="end", size=13))
        x = float(LABEL_W)
        for name, value in segments:
            if value is None or value <= 0:
                continue
            w = span * value / largest
            fill = COLOURS.get(name, "#777")
            parts.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR_H}" fill="{fill}">'
                f"<title>{escape(f'{label}: {name} {value:g}{unit}')}</title></rect>"
            )
            x += w
        measured = [v for _, v in segments if v is not None]
        total = f"{sum(measured):g}{unit}" if measured else "none"
        parts.append(_text(x + 4, y + BAR_H - 3, total, size=12))
    parts.append("</svg>")
    return "".join(parts)


def _pages(figures: dict[str, Any]) -> list[Segment]:
    other = figures["fires"] - sum(
        figures[k] for k in ("pagesByAgent", "fallbacks", "deduped", "silenced", "grouped")
    )
    return [
        ("agent", figures["pagesByAgent"]),
        ("fallback", figures["fallbacks"]),
        ("deduped", figures["deduped"]),
        ("silenced", figures["silenced"]),
        ("grouped", figures["grouped"]),
        ("other", max(0, other)),
    ]


def _spread(p: dict[str, float | None]) -> list[Segment]:
    """p50, then p90 drawn on from it (the bar ends at p90); None when nothing was measured."""
    p50, p90 = p["p50"], p["p90"]
    if p50 is None or p90 is None:
        return [("p50", None), ("p90", None)]
    return [("p50", p50), ("p90", round(max(0.0, p90 - p50), 3))]


def report_charts(report: dict[str, Any]) -> list[dict[str, str]]:
    """``[{id, title, svg}]``: fires of the noisiest watchers by outcome, the total's times in
    seconds (p50 and p90 side by side), and the noisiest watchers' cost."""
    noisiest = [n["watcherId"] for n in report["noisiest"]]
    per = report["watchers"]
    total = report["total"]
    times = [
        (
            name,
            _spread(total[key]),
        )
        for name, key in (
            ("to page", "timeToPageS"),
            ("to ack", "timeToAckS"),
            ("to resolve", "timeToResolveS"),
        )
    ]
    charts = [
        ("fires", "Fires by outcome (noisiest watchers)", [(w, _pages(per[w])) for w in noisiest], ""),
        ("times", "Time to page, ack, resolve (p50, p90)", times, " s"),
        (
            "cost",
            "Model cost (US$)",
            [(w, [("cost", round(per[w]["usage"]["costUsd"], 4))]) for w in noisiest],
            "",
        ),
    ]
    return [
        {"id": cid, "title": title, "svg": bar_chart(title, rows, unit=unit)}
        for cid, title, rows, unit in charts
    ]
