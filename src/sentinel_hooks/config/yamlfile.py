"""Read YAML 1.2 files into plain data plus a map from key paths to line numbers.

YAML 1.2 keeps `no`/`on`/`yes` as strings, and a duplicate key is an error. Every key's line
is recorded, so every later error (pydantic's, ours) can be reported as
``file:line: key.path: message``.

Two readers give the same data and lines: :mod:`yamlcompose` (libyaml's composer, our own
YAML 1.2 scalar resolution) reads almost every file; ruamel.yaml's round-trip loader reads
what the fast one cannot vouch for, and words every syntax error and duplicate key. ruamel.yaml
is imported only when it is needed.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sentinel_hooks.config.envvars import ENV_MARK
from sentinel_hooks.config.linemap import LineMap, Loc
from sentinel_hooks.config.yamlcompose import compose_plain
from sentinel_hooks.errors import ConfigError, ConfigIssue

if TYPE_CHECKING:
    from ruamel.yaml.error import MarkedYAMLError


@dataclass(frozen=True)
class YamlDocument:
    """A parsed file: its plain data and where each key came from.

    ``may_reference_env`` is False when no string in ``data`` can hold ``${env:``: the text has
    neither that nor a backslash. A YAML scalar's value holds what its text holds, but for
    escapes (a backslash, in double quotes) and line folding, which only puts a space or a line
    break where lines met. Loading skips the interpolation pass for such a file.
    """

    path: Path
    display: str
    data: Any
    lines: LineMap
    may_reference_env: bool = True


def _plain(node: Any, loc: Loc, lines: LineMap) -> Any:
    """Convert ruamel's round-trip data into dict/list/str/int/float/bool/None, recording lines."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq

    if isinstance(node, CommentedMap):
        out: dict[str, Any] = {}
        for key, value in node.items():
            name = key if isinstance(key, str) else str(_plain(key, loc, lines))
            with_key = (*loc, name)
            with suppress(KeyError, TypeError, AttributeError):  # merged keys carry no position
                lines.lines[with_key] = node.lc.key(key)[0] + 1
            out[name] = _plain(value, with_key, lines)
        return out
    if isinstance(node, CommentedSeq):
        items: list[Any] = []
        for index, value in enumerate(node):
            with_index = (*loc, index)
            with suppress(KeyError, TypeError, AttributeError):
                lines.lines[with_index] = node.lc.item(index)[0] + 1
            items.append(_plain(value, with_index, lines))
        return items
    if isinstance(node, Mapping):
        return {str(k): _plain(v, (*loc, str(k)), lines) for k, v in node.items()}
    if isinstance(node, bool) or node is None:
        return node
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    if isinstance(node, str):
        return str(node)
    if isinstance(node, datetime | date):
        return node.isoformat()
    if isinstance(node, Sequence):
        return [_plain(v, (*loc, i), lines) for i, v in enumerate(node)]
    return str(node)


def parse_yaml(text: str, *, display: str, path: Path | None = None) -> YamlDocument:
    """Parse one YAML 1.2 document; raise ConfigError with the line of any syntax error."""
    fast = compose_plain(text)
    if fast is not None:
        data, lines = fast
        return YamlDocument(path or Path(display), display, data, lines, _may_reference_env(text))
    return parse_yaml_roundtrip(text, display=display, path=path)


def _may_reference_env(text: str) -> bool:
    return ENV_MARK in text or "\\" in text


def parse_yaml_roundtrip(text: str, *, display: str, path: Path | None = None) -> YamlDocument:
    """:func:`parse_yaml` by ruamel.yaml's round-trip loader alone (the reference reader)."""
    from ruamel.yaml import YAML
    from ruamel.yaml.error import MarkedYAMLError, YAMLError

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    try:
        raw = yaml.load(text)
    except MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "invalid YAML"
        key = ""
        if "duplicate key" in str(exc):
            key, problem = _duplicate_key_message(exc, text, line)
        else:
            problem += syntax_hint(exc, line)
        raise ConfigError([ConfigIssue(display, line, key, f"YAML: {problem}")]) from exc
    except YAMLError as exc:
        raise ConfigError([ConfigIssue(display, None, "", f"YAML: {exc}")]) from exc
    except (ValueError, IndexError, TypeError, OverflowError) as exc:  # ruamel.yaml's own bugs
        problem = f"a value could not be read ({type(exc).__name__}: {exc}); quote unusual values"
        raise ConfigError([ConfigIssue(display, None, "", f"YAML: {problem}")]) from exc
    lines = LineMap({(): 1})
    data = _plain(raw, (), lines)
    return YamlDocument(path or Path(display), display, data, lines, _may_reference_env(text))


def syntax_hint(exc: MarkedYAMLError, line: int | None) -> str:
    """``; check the indentation of line 7 …``: what a YAML syntax error usually means, or ``""``."""
    if line is None:
        return ""
    problem = exc.problem or ""
    context = exc.context or ""
    opened = exc.context_mark.line + 1 if exc.context_mark is not None else None
    if "'\\t'" in problem:
        return f"; YAML does not allow tabs for indentation: indent line {line} with spaces"
    if problem.startswith("mapping values are not allowed"):
        return (
            f"; check the indentation of line {line} (a key indented under a key that already has "
            "a value?), or quote a value that contains ': '"
        )
    if problem.startswith(("expected <block end>", "did not find expected")):
        return (
            f"; check the indentation of line {line}: it does not line up with the keys "
            "(or '- ' items) above it"
        )
    if problem.startswith("could not find expected ':'") and opened is not None:
        return (
            f"; line {opened} is not `key: value` (a missing ':', or no space after it?), "
            "or check its indentation"
        )
    if "quoted scalar" in context and opened is not None:
        return f"; the quote opened on line {opened} is never closed"
    if "flow sequence" in context or "flow mapping" in context:
        return f"; a '[' or '{{' opened on line {opened} is not closed where it should be"
    return ""


_DUPLICATE = re.compile(r'duplicate key "(?P<key>[^"]*)"')


def _duplicate_key_message(exc: MarkedYAMLError, text: str, line: int | None) -> tuple[str, str]:
    """``(key, message)`` naming the duplicated key and the line where it first appears."""
    found = _DUPLICATE.search(str(exc))
    if found is None:
        return "", "duplicate key; duplicate keys are errors, remove one"
    key = found.group("key")
    first = None
    if line is not None:
        pattern = re.compile(r"^[\s-]*[\"']?" + re.escape(key) + r"[\"']?\s*:")
        for number, content in enumerate(text.splitlines()[: line - 1], start=1):
            if pattern.match(content):
                first = number
                break
    where = f" (first on line {first})" if first is not None else ""
    return key, f"duplicate key {key!r}{where}; duplicate keys are errors, remove one"


def read_yaml(path: Path, *, display: str) -> YamlDocument:
    """Read and parse ``path``; unreadable files become ConfigError naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError([ConfigIssue(display, None, "", "file not found")]) from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError([ConfigIssue(display, None, "", f"cannot read file: {exc}")]) from exc
    return parse_yaml(text, display=display, path=path)


def display_path(path: Path) -> str:
    """``path`` relative to the working directory when it lies below it, else absolute."""
    absolute = str(path.absolute())
    cwd = os.getcwd()
    if absolute == cwd:
        return "."
    below = cwd if cwd.endswith(os.sep) else cwd + os.sep  # the root directory ends with one
    return absolute[len(below) :] if absolute.startswith(below) else absolute
