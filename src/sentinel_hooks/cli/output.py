"""Printing for the CLI: JSON for machines, rich tables for people, one-line errors.

Every table goes through :func:`new_table` and :func:`print_table`, so ids are never wrapped
or cut: piped into ``grep`` or a file, a table is printed at its full width (one row per line,
whatever ``$COLUMNS`` says); on a terminal, id columns keep their full width and only the
other columns fold (the table grows past the terminal's width rather than cut an id).
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # rich is imported when something is printed with it, not for --help
    from rich.console import Console
    from rich.table import Table

UNBOUNDED_WIDTH = 1_000_000
FOLDED_COLUMN_CHARS = 8
"""On a narrow terminal, the width a folding column may be squeezed to before the table grows."""


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def new_table(columns: Sequence[str], *, ids: Collection[str] = (), **options: Any) -> Table:
    """A table whose ``ids`` columns never wrap; the other columns fold when space is short."""
    from rich.table import Table

    table = Table(**options)
    for column in columns:
        table.add_column(column, no_wrap=column in ids, overflow="fold")
    return table


def print_table(table: Table, console: Console | None = None) -> None:
    """Print ``table`` without wrapping or cutting its no-wrap (id) columns."""
    from rich.measure import Measurement

    console = console or stdout_console()
    unbounded = console.options.update_width(UNBOUNDED_WIDTH)
    if not console.is_terminal:
        console.width = Measurement.get(console, unbounded, table).maximum
    else:
        folding = [column for column in table.columns if not column.no_wrap and column.max_width is None]
        for column in folding:
            column.max_width = FOLDED_COLUMN_CHARS
        narrowest = Measurement.get(console, unbounded, table).maximum
        for column in folding:
            column.max_width = None
        console.width = max(console.width, narrowest)
    console.print(table)


class LazyChoice(click.Choice):  # type: ignore[type-arg]
    """``click.Choice`` of the names in ``module.attribute``, imported when first used (to
    parse or to show the command's help), so defining a command does not import that module."""

    def __init__(self, module: str, attribute: str) -> None:
        self._where = (module, attribute)
        self._names: tuple[str, ...] = ()
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        if not self._names:
            module, attribute = self._where
            self._names = tuple(getattr(importlib.import_module(module), attribute))
        return self._names

    @choices.setter
    def choices(self, names: tuple[str, ...]) -> None:
        self._names = tuple(names)


def print_json(data: Any) -> None:
    """Indented JSON on stdout (UTF-8, keys in their natural order)."""
    sys.stdout.write(json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def print_error(message: str, *, prefix: bool = True) -> None:
    """One line on stderr: ``sentinel: error: …``."""
    sys.stderr.write((f"sentinel: error: {message}" if prefix else message) + "\n")


def compact(value: Any, limit: int = 60) -> str:
    """A value as short compact JSON for a table cell."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def show_answer(answer: Any, *, as_json: bool, show: Callable[[Any], None]) -> None:
    """An API answer: printed as the API's JSON with ``--json``, else handed to ``show`` to say
    in words (every management command offers both, SPEC §10)."""
    if as_json:
        print_json(answer)
    else:
        show(answer)
