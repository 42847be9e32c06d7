"""Printing for the CLI: JSON for machines, rich tables for people, one-line errors.

Every table goes through :func:`new_table` and :func:`print_table`, so ids are never wrapped
or cut: piped into ``grep`` or a file, a table is printed at its full width (one row per line,
whatever ``$COLUMNS`` says). On a terminal a table fits its width, as amtool's do: text columns
wrap between words (rich's wrapping; a word longer than :data:`LONG_WORD_CHARS`, a URL, may
fold), id columns keep their full width, and when even the narrowest layout is too wide the
table's least important columns are left out, in the order it names, with a line saying which.
Only an id wider than the terminal makes the table wider than it.

rich narrows a table too wide for the terminal by shrinking its widest wrapping columns first,
whatever the words in them (``watcherI|d eq|"queue-c|ron"``), so :func:`print_table` gives the
text columns a ``max_width`` each instead (:meth:`_Layout.fit`).
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
        """The rich table of the columns ``shown`` (id columns never narrower than their ids)."""
        from rich.table import Table

        table = Table(**self.options)
        kept = [index for index, name in enumerate(self.columns) if name in shown]
        for index in kept:
            name = self.columns[index]
            if name in self.ids:  # min_width: rich squeezes even no_wrap columns when short of room
                table.add_column(name, no_wrap=True, min_width=self.widths(index)[0])
            else:
                table.add_column(name, overflow="fold")
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
        console.width = _measured(console, table, rows).widest
        console.print(table)
        return
    width = console.width
    shown = list(rows.columns)
    left_out: list[str] = []
    table = rows.table(shown)
    layout = _measured(console, table, rows)
    for name in rows.drop:
        if layout.narrowest <= width:
            break
        shown.remove(name)
        left_out.append(name)
        table = rows.table(shown)
        layout = _measured(console, table, rows)
    if layout.widest > width:
        width = layout.fit(width)
    console.width = max(console.width, width)
    console.print(table)
    if left_out:
        console.print(f"(left out to fit: {', '.join(left_out)}; --json shows all)", soft_wrap=False)


@dataclass
class _Layout:
    """A table's text columns and the widths that bound its layout.

    ``fixed`` is what the id columns, padding and borders take; each text column needs its
    longest word (up to LONG_WORD_CHARS, ``words``) and would use its widest cell (``cells``).
    """

    columns: list[Any]
    fixed: int
    words: list[int]
    cells: list[int]

    @property
    def narrowest(self) -> int:
        return self.fixed + sum(self.words)

    @property
    def widest(self) -> int:
        return self.fixed + sum(self.cells)

    def fit(self, width: int) -> int:
        """Cap each text column (``max_width``) so that the table fits ``width``; the width it
        then takes. With room for every word, each column gets its word and a share of what is
        left, in proportion to the width it would use. Without, the widest words are cut down
        to one level (so they fold) and the narrow columns keep theirs; ids never are: a table
        whose ids alone are too wide takes their width."""
        room = width - self.fixed
        if room < len(self.columns):
            return self.narrowest
        if room >= sum(self.words):
            spare = room - sum(self.words)
            wants = [cells - words for cells, words in zip(self.cells, self.words, strict=True)]
            total = sum(wants) or 1
            caps = [words + spare * want // total for words, want in zip(self.words, wants, strict=True)]
        else:
            level = max(level for level in range(1, max(self.words) + 1) if self._under(level) <= room)
            caps = [min(words, level) for words in self.words]
        for column, cap in zip(self.columns, caps, strict=True):
            column.max_width = cap
        return width

    def _under(self, level: int) -> int:
        return sum(min(words, level) for words in self.words)


def _measured(console: Console, table: Table, rows: Rows) -> _Layout:
    """``table``'s layout bounds, from rich's measure (borders and padding) and the cells'."""
    from rich.measure import Measurement

    measured = Measurement.get(console, console.options.update_width(UNBOUNDED_WIDTH), table)
    text = [column for column in table.columns if not column.no_wrap]
    widths = [rows.widths(rows.columns.index(str(column.header))) for column in text]
    fixed = measured.minimum - sum(longest for _, longest in widths)
    return _Layout(
        text,
        fixed,
        [min(longest, LONG_WORD_CHARS) for _, longest in widths],
        [widest for widest, _ in widths],
    )


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
