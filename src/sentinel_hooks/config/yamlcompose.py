"""The fast way to read a YAML file: libyaml parses, this module makes plain data.

PyYAML's C parser (libyaml) reads a document about 40 times faster than ruamel.yaml's
round-trip loader. Its constructors are never used (they read YAML 1.1: ``no`` would become
false); instead every plain scalar is resolved here by the YAML 1.2 core schema exactly as the
round-trip loader resolves it. The data is built from libyaml's events; a document with an
anchor is composed into nodes first, so that an alias copies what it names. The line of a key
or list item is its event's or node's.

The fast path only answers when it is sure to give what the round-trip loader gives. It
returns ``None`` (and :mod:`yamlfile` falls back to ruamel.yaml, which also words the errors)
for: any syntax or composition error, a duplicate key, a merge key ``<<``, an explicit tag,
a ``%`` directive, a tab, a timestamp, a number in a rarer spelling (``1_000``, ``017``, ``0b1``,
``-0x1F``, ``.5``, ``=``), a key that is a list or a mapping, and a Unicode line break that
YAML 1.1 and 1.2 read differently.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

from sentinel_hooks.config.linemap import LineMap, Loc

try:  # PyYAML built without libyaml: every file takes the round-trip path
    from yaml import YAMLError
    from yaml._yaml import CParser
    from yaml.events import (
        AliasEvent,
        DocumentEndEvent,
        MappingStartEvent,
        ScalarEvent,
        SequenceStartEvent,
        StreamEndEvent,
    )
    from yaml.nodes import ScalarNode, SequenceNode
except ImportError:  # pragma: no cover - PyYAML's wheels ship libyaml; a source build may not
    CParser = None

_PLAIN = "?plain"
_TEXT = "?text"
_SEQ = "?seq"
_MAP = "?map"

_NULLS = frozenset({"", "~", "null", "Null", "NULL"})
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_SPECIAL_FLOATS = {
    ".inf": math.inf,
    ".Inf": math.inf,
    ".INF": math.inf,
    "+.inf": math.inf,
    "+.Inf": math.inf,
    "+.INF": math.inf,
    "-.inf": -math.inf,
    "-.Inf": -math.inf,
    "-.INF": -math.inf,
    ".nan": math.nan,
    ".NaN": math.nan,
    ".NAN": math.nan,
}
_DECIMAL = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_OCTAL = re.compile(r"0o[0-7]+")
_HEX = re.compile(r"0x[0-9a-fA-F]+")
_FLOAT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?")
# Everything the round-trip loader might read as a number or a timestamp (a superset): what
# matches and is none of the plain spellings above is left to ruamel.yaml.
_MAYBE_NUMBER = re.compile(
    r"[-+]?(?:[0-9_]+(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9_]+(?:[eE][-+]?[0-9]+)?"
    r"|0[box][0-9a-fA-F_]+|\.(?:inf|Inf|INF|nan|NaN|NAN))"
)
_MAYBE_TIMESTAMP = re.compile(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}")
_NUMBER_START = frozenset("-+.0123456789")
# A directive, a tag (``!`` where a node may start), a line break only YAML 1.1 knows, or a
# tab (ruamel.yaml refuses some that libyaml accepts).
_UNSURE_TEXT = re.compile(r"^%|(?:^[ \t]*|[:?-][ \t]+|[\[{,][ \t]*)!|[\t\x85\u2028\u2029]", re.MULTILINE)
_UNSURE_CHARS = "%!\t\x85\u2028\u2029"
"""One of these is in every text ``_UNSURE_TEXT`` matches: without them the search (a third of a
second for 10,000 watcher files) is skipped."""


class Unsure(Exception):
    """The fast path cannot vouch for this document; the round-trip loader reads it."""


def resolve_plain(text: str) -> Any:
    """The value of a plain (unquoted, untagged) scalar under YAML 1.2's core schema.

    ``no``, ``on``, ``yes`` stay text; ``~``/``null``/empty are None; ``0o17`` and ``0x1F`` are
    ints; ``1e3``, ``.inf`` and ``.nan`` are floats. Raises :class:`Unsure` for the spellings
    left to ruamel.yaml (see the module docstring).
    """
    if text in _NULLS:
        return None
    first = text[0]
    if first in "tTfF" and text in _BOOLS:
        return _BOOLS[text]
    if first in _NUMBER_START:
        if _DECIMAL.fullmatch(text):
            return int(text)
        if _FLOAT.fullmatch(text):
            return float(text)
        special = _SPECIAL_FLOATS.get(text)
        if special is not None:
            return special
        if _OCTAL.fullmatch(text):
            return int(text[2:], 8)
        if _HEX.fullmatch(text):
            return int(text[2:], 16)
        if not text.strip("-+._"):  # "-_", "._": ruamel.yaml fails on them; YAML 1.2 reads text
            return text
        if _MAYBE_NUMBER.fullmatch(text) or _MAYBE_TIMESTAMP.match(text):
            raise Unsure(text)
    elif text in ("<<", "="):
        raise Unsure(text)
    return text


if CParser is not None:

    class _Composer(CParser):  # type: ignore[misc]  # CParser is untyped (a Cython class)
        """libyaml's composer with tags that only say what a node is, never what it means."""

        def descend_resolver(self, parent: object, index: object) -> None:
            """No path resolvers."""

        def ascend_resolver(self) -> None:
            """No path resolvers."""

        def resolve(self, kind: type, value: object, implicit: tuple[bool, bool]) -> str:
            if kind is ScalarNode:
                return _PLAIN if implicit[0] else _TEXT
            return _SEQ if kind is SequenceNode else _MAP


def compose_plain(text: str) -> tuple[Any, LineMap] | None:
    """``(data, lines)`` of a one-document YAML text, or None when ruamel.yaml must read it.

    ``lines`` gives the 1-based line of every key and list item by its path, ``()`` 1.

    libyaml's events are read straight into plain data (``_read_events``); a document with an
    anchor is composed into nodes first (``_plain``), as an alias copies the node it names.
    """
    if CParser is None or (any(c in text for c in _UNSURE_CHARS) and _UNSURE_TEXT.search(text)):
        return None
    try:
        return _read_events(text)
    except _Anchored:
        pass
    except (YAMLError, Unsure):
        return None
    composer = _Composer(text)
    try:
        root = composer.get_single_node()
    except YAMLError:
        return None
    finally:
        composer.dispose()
    if root is None:
        return None, LineMap({(): 1})
    try:
        return _plain(root, set()), NodeLines(root)
    except Unsure:
        return None


class _Anchored(Exception):
    """The document names a node (``&anchor``): composing it into nodes reads it as ruamel.yaml."""


_NO_KEY: Any = object()  # a mapping waiting for its next key


def _read_events(text: str) -> tuple[Any, LineMap]:
    """``compose_plain`` from libyaml's events, without building a node tree.

    The nodes cost as much again as the events (each with two marks), and freeing 10,000
    watchers' tree is a tenth of loading them. Values are resolved as ``_plain`` resolves
    nodes; the lines of the first two levels (each watcher of a ``watchers:`` list) are kept as
    read, deeper ones found when an error asks (``EventLines``). Raises ``Unsure`` where
    ``_plain`` does, on a second document, and ``_Anchored`` on an anchor.
    """
    parser = CParser(text)
    get = parser.get_event
    try:
        get()  # the stream's start
        if type(get()) is StreamEndEvent:  # no document at all
            return None, LineMap({(): 1})
        data, near = _document(get)
        if type(get()) is not StreamEndEvent:
            raise Unsure("more than one document")
    finally:
        parser.dispose()
    return data, EventLines(text, near)


def _document(get: Any) -> tuple[Any, dict[Loc, int]]:
    """The data of one document whose start was read, and the lines of its first two levels."""
    near: dict[Loc, int] = {(): 1}
    root: Any = None
    container: Any = None  # the mapping or list being filled; None at the document's top
    key: Any = _NO_KEY
    path: Loc | None = ()  # the container's path while its children's lines are kept
    other_keys: set[Any] | None = None  # the container's keys that are not text
    stack: list[tuple[Any, Any, Loc | None, set[Any] | None]] = []
    while True:
        event = get()
        kind = type(event)
        if kind is ScalarEvent:
            if event.anchor is not None:
                raise _Anchored
            tag = event.tag
            if tag is not None and tag != "!":
                raise Unsure(f"tag {tag}")
            value = resolve_plain(event.value) if event.implicit[0] and tag is None else event.value
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            if event.anchor is not None:
                raise _Anchored
            if event.tag is not None:
                raise Unsure(f"tag {event.tag}")
            value = {} if kind is MappingStartEvent else []
        elif kind is DocumentEndEvent:
            return root, near
        elif kind is AliasEvent:
            raise _Anchored
        else:  # the end of a mapping or a list
            container, key, path, other_keys = stack.pop()
            continue
        if type(container) is dict:
            if key is _NO_KEY:  # this node is a key
                if kind is not ScalarEvent:
                    raise Unsure("a key that is a list or a mapping")
                if type(value) is str:
                    if value in container:
                        raise Unsure(f"duplicate key {value!r}")
                    key = value
                else:
                    other_keys = set() if other_keys is None else other_keys
                    key = _other_key(value, container, other_keys)
                if path is not None:
                    near[(*path, key)] = event.start_mark.line + 1
                continue
            container[key] = value
            child = None if path is None or len(path) == 1 else (*path, key)
            key = _NO_KEY
        elif container is not None:
            if path is not None:
                near[(*path, len(container))] = event.start_mark.line + 1
            child = None if path is None or len(path) == 1 else (*path, len(container))
            container.append(value)
        else:
            root, child = value, ()
        if kind is not ScalarEvent:
            stack.append((container, key, path, other_keys))
            container, key, path, other_keys = value, _NO_KEY, child, None


def _other_key(key: Any, mapping: dict[str, Any], other_keys: set[Any]) -> str:
    """The name in ``mapping`` of a key that is not text (``1``, ``true``, ``null``), recorded in
    ``other_keys``; ``Unsure`` when it repeats a key (``1`` and ``true`` are one key to ruamel.yaml,
    as in Python)."""
    name = str(key)
    if name in mapping or key in other_keys:
        raise Unsure(f"duplicate key {name!r}")
    other_keys.add(key)
    return name


def _plain(node: Any, open_nodes: set[int]) -> Any:
    """The plain data of ``node``."""
    tag = node.tag
    if tag == _PLAIN:
        return resolve_plain(node.value)
    if tag == _TEXT:
        return node.value
    if id(node) in open_nodes:  # an alias to a node that contains it
        raise Unsure("recursive alias")
    if tag == _MAP:
        open_nodes.add(id(node))
        out: dict[str, Any] = {}
        other_keys: set[Any] = set()  # keys that are not text (``1`` and ``true`` are one key)
        for key_node, value_node in node.value:
            key = _key(key_node)
            if type(key) is str:
                name = key
                if name in out:
                    raise Unsure(f"duplicate key {name!r}")
            else:
                name = _other_key(key, out, other_keys)
            value_tag = value_node.tag  # scalars inline: most values are one
            if value_tag == _PLAIN:
                out[name] = resolve_plain(value_node.value)
            elif value_tag == _TEXT:
                out[name] = value_node.value
            else:
                out[name] = _plain(value_node, open_nodes)
        open_nodes.discard(id(node))
        return out
    if tag == _SEQ:
        open_nodes.add(id(node))
        items = [_plain(item_node, open_nodes) for item_node in node.value]
        open_nodes.discard(id(node))
        return items
    raise Unsure(f"tag {tag}")


class NodeLines(LineMap):
    """The lines of a document the fast path read, found in its node tree when asked.

    Recording the line of every key while reading cost a third of the reading, and only an
    error or a watcher's own first line is ever asked for. ``lines`` (every path) is worked
    out on first use. The tree lives as long as its document, which the loader drops after
    the file.
    """

    def __init__(self, root: Any, line: int = 1) -> None:
        super().__init__(None)
        self._root = root
        self._line = line
        self._all: dict[Loc, int] | None = None

    @property
    def lines(self) -> dict[Loc, int]:
        if self._all is None:
            self._all = {(): self._line}
            _record(self._root, (), self._all, set())
        return self._all

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        node, line = self._root, self._line
        for part in loc:
            found = _child(node, part)
            if found is None:
                break
            node, line = found
        return line

    def sub(self, prefix: Loc) -> LineMap:
        node, line = self._root, self._line
        for part in prefix:
            found = _child(node, part)
            if found is None:
                return LineMap()
            node, line = found
        return NodeLines(node, line)


class EventLines(LineMap):
    """The lines of a document read from its events: its first two levels as read (a watcher's
    own line, on every load), anything deeper from its node tree, composed again the first time
    one is asked for (an error's, never on a good load)."""

    def __init__(self, text: str, near: dict[Loc, int]) -> None:
        super().__init__(None)
        self._text = text
        self._near = near
        self._nodes: NodeLines | None = None

    def _tree(self) -> NodeLines:
        if self._nodes is None:
            composer = _Composer(self._text)
            try:
                self._nodes = NodeLines(composer.get_single_node())
            finally:
                composer.dispose()
        return self._nodes

    @property
    def lines(self) -> dict[Loc, int]:
        return self._tree().lines

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        if len(loc) > 2:
            return self._tree().line_of(loc)
        near, parts = self._near, tuple(loc)
        while parts not in near:  # every path of the first two levels is there; () is
            parts = parts[:-1]
        return near[parts]

    def sub(self, prefix: Loc) -> LineMap:
        return self._tree().sub(prefix)


def _child(node: Any, part: str | int) -> tuple[Any, int] | None:
    """The node at ``part`` below ``node`` and its line (a key's, or a list item's own)."""
    if node.tag == _MAP:
        for key_node, value_node in node.value:
            key = _key(key_node)
            if (key if type(key) is str else str(key)) == part:
                return value_node, key_node.start_mark.line + 1
        return None
    if node.tag == _SEQ and type(part) is int and 0 <= part < len(node.value):
        item = node.value[part]
        return item, item.start_mark.line + 1
    return None


def _record(node: Any, loc: Loc, lines: dict[Loc, int], open_nodes: set[int]) -> None:
    """Put the line of every key and list item below ``loc`` into ``lines``."""
    if node.tag not in (_MAP, _SEQ) or id(node) in open_nodes:
        return
    open_nodes.add(id(node))
    if node.tag == _MAP:
        for key_node, value_node in node.value:
            key = _key(key_node)
            with_key = (*loc, key if type(key) is str else str(key))
            lines[with_key] = key_node.start_mark.line + 1
            _record(value_node, with_key, lines, open_nodes)
    else:
        for index, item_node in enumerate(node.value):
            with_index = (*loc, index)
            lines[with_index] = item_node.start_mark.line + 1
            _record(item_node, with_index, lines, open_nodes)
    open_nodes.discard(id(node))


def _key(node: Any) -> Any:
    """The value of a mapping key (a scalar; its text becomes the key of the plain data)."""
    if node.tag == _PLAIN:
        return resolve_plain(node.value)
    if node.tag == _TEXT:
        return node.value
    raise Unsure(f"a key tagged {node.tag} (a list, a mapping or an explicit tag)")
