"""Printing for the CLI: JSON for machines, rich tables for people, one-line errors.

Every table goes through :func:`new_table` and :func:`print_table`, so ids are never wrapped
or cut: piped into ``grep`` or a file, a table is printed at its full width (one row per line,
whatever ``$COLUMNS`` says). On a terminal a table fits its width, as amtool's do: text columns
wrap between words (rich's wrapping; a word longer than :data:`LONG_WORD_CHARS`, a URL, may
fold), id columns keep their full width, and when even the narrowest layout is too wide the
table's least important columns are left out, in the order it names, with a line saying which.
Only an id wider than the terminal makes the table wider than it.

Each column's ``min_width`` is its widest id or longest word. rich narrows a table too wide for
the terminal by shrinking its widest wrapping columns first, below their ``min_width`` too, so
:func:`print_table` gives the text columns a ``max_width`` each instead: its longest word plus a
share of the width left, in proportion to the width it would use.
"""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

if TYPE_CHECKING:  # rich is imported when something is printed with it, not for --help
    from rich.console import Console
    from rich.table import Table

UNBOUNDED_WIDTH = 1_000_000
LONG_WORD_CHARS = 30
"""A word up to this long is never split on a terminal; a longer one (a URL) may fold."""


def stdout_console() -> Console:
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


@dataclass
class Rows:
    """A table's columns and rows, laid out when printed (:func:`print_table`).

    ``ids`` never wrap (ids, timestamps, one-word cells); ``drop`` lists the columns a terminal
    too narrow for the whole table leaves out, least important first.
    """

    columns: tuple[str, ...]
    ids: frozenset[str]
    drop: tuple[str, ...]
    options: dict[str, Any]
    rows: list[tuple[Any, ...]] = field(default_factory=list)
    _widths: dict[int, tuple[int, int]] = field(default_factory=dict, repr=False, compare=False)

    def add_row(self, *cells: Any) -> None:
        self.rows.append(cells)
        self._widths.clear()

    def table(self, shown: Collection[str]) -> Table:
        """The rich table of the columns ``shown``, each at least as wide as its widest id or
        longest word (up to LONG_WORD_CHARS)."""
        from rich.table import Table

        table = Table(**self.options)
        kept = [index for index, name in enumerate(self.columns) if name in shown]
        for index in kept:
            name = self.columns[index]
            widest, longest_word = self.widths(index)
            if name in self.ids:
                table.add_column(name, no_wrap=True, min_width=widest)
            else:
                table.add_column(name, overflow="fold", min_width=min(longest_word, LONG_WORD_CHARS))
        for row in self.rows:
            table.add_row(*(row[index] for index in kept))
        return table

    def widths(self, index: int) -> tuple[int, int]:
        """Column ``index``'s width unwrapped, and its longest word's (header included)."""
        if index not in self._widths:
            from rich.cells import cell_len

            texts = _plain([self.columns[index], *(row[index] for row in self.rows)])
            words = [word for text in texts for word in text.split()]
            self._widths[index] = (
                max(map(cell_len, texts), default=1),
                max(map(cell_len, words), default=1),
            )
        return self._widths[index]


def _plain(cells: Sequence[Any]) -> list[str]:
    """The text of each cell that is text (rich markup, like ``[green]true[/green]``, left out)."""
    from rich.text import Text

    return [Text.from_markup(cell).plain if "[" in cell else cell for cell in cells if isinstance(cell, str)]


def new_table(
    columns: Sequence[str], *, ids: Collection[str] = (), drop: Sequence[str] = (), **options: Any
) -> Rows:
    """A table whose ``ids`` columns never wrap; ``drop``: the columns a narrow terminal leaves
    out, first listed first; ``options`` go to rich's ``Table``."""
    return Rows(tuple(columns), frozenset(ids), tuple(drop), options)


def print_table(rows: Rows, console: Console | None = None) -> None:
    """Print ``rows``: at full width when not on a terminal, else to fit the terminal."""
    console = console or stdout_console()
    if not console.is_terminal:
        table = rows.table(rows.columns)
        console.width = _measured(console, table)[1]
        console.print(table)
        return
    width = console.width
    shown = list(rows.columns)
    left_out: list[str] = []
    table = rows.table(shown)
    narrowest, widest = _measured(console, table)
    for name in rows.drop:
        if narrowest <= width:
            break
        shown.remove(name)
        left_out.append(name)
        table = rows.table(shown)
        narrowest, widest = _measured(console, table)
    if widest > width:
        _share(table, rows, max(width, narrowest) - narrowest)
    console.width = max(width, narrowest)
    console.print(table)
    if left_out:
        console.print(f"(left out to fit: {', '.join(left_out)}; --json shows all)", soft_wrap=False)


def _measured(console: Console, table: Table) -> tuple[int, int]:
    """The narrowest and the widest ``table`` can be laid out, borders included."""
    from rich.measure import Measurement

    measured = Measurement.get(console, console.options.update_width(UNBOUNDED_WIDTH), table)
    return measured.minimum, measured.maximum


def _share(table: Table, rows: Rows, spare: int) -> None:
    """Cap each text column at its longest word plus its share of ``spare`` columns."""
    text = [column for column in table.columns if not column.no_wrap]
    wants = {
        id(column): rows.widths(rows.columns.index(str(column.header)))[0] - (column.min_width or 0)
        for column in text
    }
    total = sum(wants.values()) or 1
    for column in text:
        column.max_width = (column.min_width or 0) + spare * wants[id(column)] // total


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
    """Indented JSON on stdout (UTF-8, keys in their natural order); text stdout cannot encode
    (a lone surrogate read from a JSON file) is written as JSON escapes."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    try:
        text.encode(sys.stdout.encoding or "utf-8")
    except UnicodeEncodeError:
        text = json.dumps(data, indent=2)
    sys.stdout.write(text + "\n")


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
