"""Where the keys and list items of a YAML document are: their lines, by their path.

Every later error (pydantic's, ours) is reported as ``file:line: key.path: message``, and each
watcher remembers the line it starts on. The round-trip reader fills a ``LineMap`` as it goes;
the fast reader (``yamlcompose.NodeLines``) finds a line in its node tree when one is asked for.
"""

from __future__ import annotations

from collections.abc import Sequence

Loc = tuple[str | int, ...]


class LineMap:
    """Line numbers (1-based) of keys and list items, by their path in the document."""

    def __init__(self, lines: dict[Loc, int] | None = None) -> None:
        self._lines = {} if lines is None else lines

    @property
    def lines(self) -> dict[Loc, int]:
        """Every recorded path and its line (``()`` is the document's first line)."""
        return self._lines

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        """The line of ``loc`` or of its nearest ancestor that has one."""
        lines = self.lines
        parts = tuple(loc)
        while parts:
            if parts in lines:
                return lines[parts]
            parts = parts[:-1]
        return lines.get((), None)

    def sub(self, prefix: Loc) -> LineMap:
        """The lines below ``prefix``, re-rooted so ``prefix`` becomes ``()``."""
        size = len(prefix)
        return LineMap({loc[size:]: n for loc, n in self.lines.items() if loc[:size] == prefix})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LineMap) and self.lines == other.lines

    def __repr__(self) -> str:
        return f"LineMap({self.lines!r})"
