"""The Report view's SVG charts: well-formed, escaped, and honest about what was not measured."""

from __future__ import annotations

from xml.dom.minidom import parseString

from sentinel_hooks.api.charts import bar_chart, report_charts

NOTHING = {"p50": None, "p90": None}


def figures(fires: int, agent: int, cost: float) -> dict[str, object]:
    return {
        "fires": fires,
        "pagesByAgent": agent,
        "fallbacks": 0,
        "deduped": 0,
        "silenced": 0,
        "grouped": 0,
        "usage": {"costUsd": cost},
        "timeToPageS": {"p50": 1.5, "p90": 4.0},
        "timeToAckS": NOTHING,
        "timeToResolveS": NOTHING,
    }


def test_charts_are_svg_with_escaped_labels_and_none_for_unmeasured_times() -> None:
    per = {"<script>": figures(3, 1, 0.25)}
    report = {"watchers": per, "total": per["<script>"], "noisiest": [{"watcherId": "<script>", "fires": 3}]}
    charts = {c["id"]: c["svg"] for c in report_charts(report)}
    assert ["fires", "times", "cost"] == list(charts)
    for svg in charts.values():
        assert "svg" == parseString(svg).documentElement.tagName
        assert "<script>" not in svg
    times = parseString(charts["times"])
    labels = [t.firstChild.data for t in times.getElementsByTagName("text") if t.firstChild]
    assert "4 s" in labels  # the page bar ends at p90
    assert 2 == labels.count("none")  # ack and resolve: nothing measured, not "0 s"


def test_an_empty_window_says_so() -> None:
    assert "nothing in this window" in bar_chart("Fires", [])
