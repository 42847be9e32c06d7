"""A converted watcher as the text of a watcher file: block-style YAML with a header comment.

The header names the source and lists what was not carried over, so the file itself tells
the next reader what to check. The YAML is written by ruamel.yaml (YAML 1.2, as the loader
reads it): strings that YAML would read as something else are quoted, multi-line text is a
literal block, and text holding any other control or line-break character (a carriage return,
U+2028, U+0085, which YAML reads as line breaks) is double-quoted with escapes, so no imported
value can start a line of its own. Upstream text shown in the comments is made visible the same
way (:func:`visible`).
"""

from __future__ import annotations

import io
import textwrap
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString

from sentinel_hooks.config.openclaw.convert import Conversion

WIDTH = 100
TEXT_WIDTH = 4096  # long values stay on one line (wrapped plain scalars read badly)


def visible(text: str) -> str:
    """``text`` with every character that is not printable (a line break, a terminal escape)
    written as its Python escape, for a comment line or a line of the report."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)


def _styled(text: str) -> Any:
    """``text`` in the style that reads back as exactly ``text`` (see the module docstring)."""
    if text.isprintable():
        return text  # ruamel.yaml picks plain or quoted
    if all(ch == "\n" or ch.isprintable() for ch in text):
        return LiteralScalarString(text)
    return DoubleQuotedScalarString(text)


def _prepared(node: Any) -> Any:
    if isinstance(node, dict):
        return {_styled(str(key)): _prepared(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_prepared(item) for item in node]
    if isinstance(node, str):
        return _styled(node)
    return node


def _comment(text: str) -> list[str]:
    """``text`` as comment lines no wider than the file (long words stay whole)."""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent="#   - ",
        subsequent_indent="#     ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def header(conversion: Conversion, source: str) -> str:
    """The comment block at the top of the file."""
    origin = f"openclaw-sentinel watcher {conversion.source_id!r}"  # repr escapes what is not printable
    lines = [f"# Imported by `sentinel import openclaw` from {visible(source)} ({origin})."]
    notes = [note for note in conversion.notes if note.kind != "changed"]
    changes = [note for note in conversion.notes if note.kind == "changed"]
    if notes:
        lines.append("# Not carried over, or to check:")
        for note in notes:
            lines += _comment(visible(str(note)))
    if changes:
        lines.append("# Carried over with a change:")
        for note in changes:
            lines += _comment(visible(str(note)))
    return "\n".join(lines) + "\n"


def watcher_yaml(conversion: Conversion, source: str) -> str:
    """The whole file for a converted watcher (``conversion.watcher`` must be set)."""
    if conversion.watcher is None:
        raise ValueError(f"watcher {conversion.source_id!r} was not converted")
    yaml = YAML(typ="rt", pure=True)
    yaml.default_flow_style = False
    yaml.width = TEXT_WIDTH
    yaml.indent(mapping=2, sequence=4, offset=2)
    stream = io.StringIO()
    yaml.dump(_prepared(conversion.watcher), stream)
    return header(conversion, source) + stream.getvalue()
