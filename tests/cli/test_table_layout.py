"""print_table on a terminal of a given width: real rich consoles writing to a buffer."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from sentinel_hooks.cli.output import LONG_WORD_CHARS, compact, new_table, print_table

VALUE = compact({"alertname": "QueueCronLate", "labels": ["queue-cron", "billing"], "for": "15m"})
ACTUAL = compact("the nightly billing queue has been backing up for forty minutes now")


def printed(columns: int) -> list[str]:
    """`sentinel test`'s conditions table (nothing to drop) printed on a terminal that wide."""
    table = new_table(("path", "op", "value", "actual", "result"), ids=("path", "op"))
    table.add_row("payload.labels.alertname", "eq", VALUE, ACTUAL, "[red]false[/red]")
    table.add_row("status", "in", compact(["ok", "degraded"]), compact("ok"), "[green]true[/green]")
    console = Console(
        file=io.StringIO(), force_terminal=True, color_system=None, width=columns, soft_wrap=True
    )
    print_table(table, console)
    return console.file.getvalue().splitlines()  # type: ignore[attr-defined, no-any-return]


@pytest.mark.parametrize("columns", [80, 120])
def test_table_with_nothing_to_drop_fits_and_keeps_short_words(columns: int) -> None:
    """Lines fit the terminal; ids and words up to LONG_WORD_CHARS are whole, longer ones may fold."""
    lines = printed(columns)
    assert [] == [line for line in lines if len(line) > columns], "\n".join(lines)
    text = "\n".join(lines)
    cells = (VALUE, ACTUAL, "payload.labels.alertname", compact(["ok", "degraded"]), "false", "result")
    words = [w for cell in cells for w in cell.split()]
    assert [] == [w for w in words if len(w) <= LONG_WORD_CHARS and w not in text], text
