"""How every Store turns records and opaque dicts into text and back, identically.

All backends keep JSON text (SQLite TEXT columns, Redis strings), so each copies values and
refuses non-JSON the same way. Encoding problems are
the caller's (a value that is not JSON) and decoding problems are corrupt data; both surface as
``StoreError`` naming what was being stored or read.
"""

from __future__ import annotations

import contextlib
import json
from collections import OrderedDict
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError

from sentinel_hooks.canonical import compact_encoder
from sentinel_hooks.core.envelope import Envelope
from sentinel_hooks.errors import StoreError

R = TypeVar("R", bound=BaseModel)


_COMPACT: Final = compact_encoder(sort_keys=False, allow_nan=False)


def dumps(value: Any, *, what: str) -> str:
    """Compact JSON for ``value``; StoreError when it is not JSON (NaN, sets, objects, a value
    that contains itself …)."""
    try:
        return _COMPACT(value)
    except (TypeError, ValueError, RecursionError) as exc:
        raise StoreError(f"cannot store {what}: it is not JSON ({exc})") from exc


def loads(text: str, *, what: str) -> Any:
    """The value of stored JSON ``text``; StoreError when the stored text is corrupt."""
    try:
        return json.loads(text)
    except ValueError as exc:
        raise StoreError(f"stored {what} is not valid JSON ({exc})") from exc


def loads_dict(text: str, *, what: str) -> dict[str, Any]:
    """Like ``loads`` for a value that must be a JSON object."""
    value = loads(text, what=what)
    if not isinstance(value, dict):
        raise StoreError(f"stored {what} is not a JSON object")
    return value


def dump_record(record: BaseModel) -> str:
    """The record's API-shaped JSON (camelCase keys, ISO instants)."""
    try:
        return record.model_dump_json(by_alias=True)
    except PydanticSerializationError as exc:
        name = type(record).__name__
        raise StoreError(f"cannot store {name}: it holds a value that is not JSON ({exc})") from exc


def load_record(model: type[R], text: str) -> R:
    """Parse a record written by ``dump_record``; StoreError when it no longer validates."""
    try:
        return model.model_validate_json(text)
    except ValidationError as exc:
        raise StoreError(f"stored {model.__name__} is corrupt: {exc}") from exc


def validate_record(model: type[R], data: dict[str, Any]) -> R:
    """Build a record from stored parts; StoreError when they no longer validate."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise StoreError(f"stored {model.__name__} is corrupt: {exc}") from exc


def dump_envelope(envelope: Envelope) -> str:
    """The envelope's wire JSON (camelCase keys), as ``dumps`` writes it (a payload that is not
    JSON is refused the same way): ``Envelope.wire_text``, so an envelope whose text was made
    before (its secret check at build time) is not serialised again."""
    try:
        text = envelope.wire_text()
    except (TypeError, ValueError) as exc:
        raise StoreError(
            f"cannot store envelope of {envelope.callback_id!r}: it is not JSON ({exc})"
        ) from exc
    _WRITTEN.remember(text, envelope)
    return text


class _WrittenEnvelopes:
    """The envelopes this process stored last, by their exact text (at most ``size``, the oldest
    forgotten first).

    The relay reads a fire's envelope back at its deadline, mostly in the process that stored
    it moments before; parsing and validating it again is a fifth of the relay's CPU per
    fallback. Equal text gives an equal envelope (an envelope is frozen and its text made once,
    and ``load_envelope(dump_envelope(e)) == e``), so the stored object is handed out instead.
    """

    def __init__(self, size: int) -> None:
        self._size = size
        # an OrderedDict forgets its oldest in O(1); a dict's first live entry is found by
        # walking past the slots of those already forgotten, which grow until it resizes
        self._by_text: OrderedDict[str, Envelope] = OrderedDict()

    def remember(self, text: str, envelope: Envelope) -> None:
        by_text = self._by_text
        by_text[text] = envelope
        if len(by_text) > self._size:
            with contextlib.suppress(KeyError):  # another thread may have emptied it
                by_text.popitem(last=False)

    def get(self, text: str) -> Envelope | None:
        return self._by_text.get(text)


WRITTEN_ENVELOPES = 8192  # 8 s of fires at 1,000/s; about 6 KiB each, so under 50 MiB when full
_WRITTEN = _WrittenEnvelopes(WRITTEN_ENVELOPES)


def load_envelope(text: str) -> Envelope:
    """The envelope stored as ``text``; StoreError when it is corrupt or no longer validates.

    One this process stored lately is handed back as it was stored (``_WrittenEnvelopes``);
    any other is parsed and validated in one step by pydantic's JSON parser (a quarter less
    CPU than ``json.loads`` and then validating the dict)."""
    written = _WRITTEN.get(text)
    if written is not None:
        return written
    try:
        return Envelope.model_validate_json(text)
    except ValidationError as exc:
        if any(error["type"] in ("json_invalid", "model_type") for error in exc.errors()):
            raise StoreError(f"stored envelope is not a valid JSON object ({exc})") from exc
        raise StoreError(f"stored Envelope is corrupt: {exc}") from exc


def dict_arg(value: dict[str, Any], *, what: str) -> dict[str, Any]:
    """``value`` round-tripped through JSON: a detached copy with exactly what a store keeps."""
    result: dict[str, Any] = json.loads(dumps(value, what=what))
    return result
