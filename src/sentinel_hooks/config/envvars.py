"""``${env:NAME}`` and ``${env:NAME:-default}`` interpolation in configuration values.

Only the loader reads the environment. Every value that came from it is collected so the
service can redact it (it may be a token); defaults written in the file are not secret.

A value that is exactly one reference (``intervalMs: ${env:EVERY}``) becomes an
:class:`EnvText`: still text, but the models may read it as the number or boolean its key
expects (``config.base``). Text around a reference (``"${env:A}0"``) makes a plain string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sentinel_hooks.config.linemap import Loc
from sentinel_hooks.config.yamlcompose import Unsure, resolve_plain

ENV_MARK = "${env:"  # in every reference, and in every malformed one worth reporting
ENV_REFERENCE = re.compile(r"\$\{env:([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
_TOKEN = re.compile(r"[A-Za-z0-9_.+~-]+")
_MALFORMED = re.compile(r"\$\{env:(?![A-Za-z_][A-Za-z0-9_]*(?::-[^}]*)?\})")


class EnvText(str):
    """A whole value taken from one ``${env:…}`` reference (or its default)."""

    __slots__ = ()


def yaml_scalar(text: str) -> bool | int | float | None:
    """The boolean or number ``text`` reads as in YAML 1.2 (``20000``, ``1.5``, ``false``), else None.

    A value from the environment is read as if written in the file in place of its reference,
    so ``yes`` stays text.
    """
    if _TOKEN.fullmatch(text) and not text.startswith("-"):
        try:
            value = resolve_plain(text)
        except Unsure:
            pass
        else:
            return value if isinstance(value, bool | int | float) else None
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        value = YAML(typ="safe", pure=True).load(text)
    except YAMLError:
        return None
    return value if isinstance(value, bool | int | float) else None


@dataclass
class Interpolation:
    """The result of interpolating one document."""

    data: Any
    secrets: set[str] = field(default_factory=set)
    problems: list[tuple[Loc, str]] = field(default_factory=list)


def interpolate(data: Any, environ: Mapping[str, str]) -> Interpolation:
    """Replace env references in every string value (keys are left alone).

    A document without any reference comes back as it is (not copied). ``repr`` tells at C
    speed: it writes ``${env:`` as is wherever a string holds it (none of those characters is
    ever escaped), so its absence means there is nothing to replace.
    """
    if ENV_MARK not in repr(data):
        return Interpolation(data=data)
    result = Interpolation(data=None)
    result.data = _walk(data, (), environ, result)
    return result


def _walk(node: Any, loc: Loc, environ: Mapping[str, str], result: Interpolation) -> Any:
    if isinstance(node, dict):
        return {key: _walk(value, (*loc, key), environ, result) for key, value in node.items()}
    if isinstance(node, list):
        return [_walk(value, (*loc, i), environ, result) for i, value in enumerate(node)]
    if isinstance(node, str) and ENV_MARK in node:
        return _substitute(node, loc, environ, result)
    return node


def _substitute(text: str, loc: Loc, environ: Mapping[str, str], result: Interpolation) -> str:
    if _MALFORMED.search(text):
        result.problems.append(
            (
                loc,
                f"malformed environment reference in {text!r}: write ${{env:NAME}} or ${{env:NAME:-default}}",
            )
        )
        return text

    def replace(match: re.Match[str]) -> str:
        name, default = match.group(1), match.group(2)
        value = environ.get(name)
        if value is not None:
            result.secrets.add(value)
            return value
        if default is not None:
            return default
        result.problems.append(
            (
                loc,
                f"environment variable {name} is not set (set it, or give a default: ${{env:{name}:-value}})",
            )
        )
        return ""

    substituted = ENV_REFERENCE.sub(replace, text)
    return EnvText(substituted) if ENV_REFERENCE.fullmatch(text) else substituted
