"""Canonical JSON text and exact JSON numbers: one spelling per JSON value.

``changed`` conditions and default dedupe keys compare observations as text, so two observations
that hold the same JSON value must render identically whatever the key order or the number's
spelling (``1``, ``1.0``, ``Decimal("1.00")``). The numeric condition operators need the same
exact number form to compare ``2**64 + 1`` with ``"1e3"`` without float rounding, so it lives here
too, as does ``plain_copy`` of such values. Rendering and comparing are iterative and bounded: no
recursion on deep nesting, no int/str conversions past CPython's digit limit, no Decimal
arithmetic that could overflow on ``1e999999999``.

Rendering follows RFC 8785 (sorted keys by UTF-16 code units, no whitespace, minimal string
escapes, numbers in their shortest exact form) with two deliberate extensions: numbers are exact
(integral values up to 4300 digits render as plain integers, so big ints stay readable and exact),
and a lone surrogate in a string is escaped as ``\\udXXX`` so the text always encodes to UTF-8.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import MAX_EMAX, MAX_PREC, MIN_EMIN, Context, Decimal
from typing import Any, Final, cast

__all__ = [
    "ExactNumber",
    "canonical_json",
    "compare_numbers",
    "parse_number",
    "sha256_hex",
    "to_number",
]

_NUMBER_GRAMMAR: Final = re.compile(r"(-?)(0|[1-9][0-9]*)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?")
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
# int(str) and str(int) are quadratic and capped (sys.set_int_max_str_digits, minimum 640):
# below these sizes they are cheap and allowed; above, exponents stay Decimals.
_MAX_INT_TEXT: Final = 600
_MAX_INT_BITS: Final = 1990  # 2**1990 has 600 decimal digits
_MAX_PLAIN_DIGITS: Final = 4300  # integral values up to this many digits render without exponent
_EXACT: Final = Context(prec=MAX_PREC, Emax=MAX_EMAX, Emin=MIN_EMIN, traps=[])

Exponent = int | Decimal
"""A power of ten: an int, or an integral Decimal for exponents written with 600+ digits."""


@dataclass(frozen=True, slots=True)
class ExactNumber:
    """A finite number as ``sign * int(digits) * 10**exponent`` in lowest terms.

    ``digits`` has no leading or trailing zeros (it is empty for zero, whose sign is 0), so two
    equal numbers have equal fields whatever spelling they came from.
    """

    sign: int
    digits: str
    exponent: Exponent

    @property
    def adjusted(self) -> Exponent:
        """The exponent of the leading digit (``1.5e3`` → 3)."""
        return _shift(self.exponent, len(self.digits) - 1)


_ZERO: Final = ExactNumber(0, "", 0)


def _shift(exponent: Exponent, delta: int) -> Exponent:
    """``exponent + delta`` without rounding, whatever the exponent's size."""
    return exponent + delta if isinstance(exponent, int) else _EXACT.add(exponent, delta)


def _make(negative: bool, digits: str, exponent: Exponent) -> ExactNumber:
    """Normalise a sign, a digit string and an exponent into an :class:`ExactNumber`."""
    significant = digits.lstrip("0")
    if not significant:
        return _ZERO
    trimmed = significant.rstrip("0")
    shifted = _shift(exponent, len(significant) - len(trimmed))
    return ExactNumber(-1 if negative else 1, trimmed, shifted)


def parse_number(text: str) -> ExactNumber | None:
    """The number a string spells in exactly the JSON number grammar, else ``None``.

    ``"42"``, ``"-1.5"``, ``"1e3"`` are numbers; ``" 42 "``, ``"+1"``, ``"01"``, ``"0x10"``,
    ``"NaN"``, ``"Infinity"`` are not.
    """
    found = _NUMBER_GRAMMAR.fullmatch(text)
    if found is None:
        return None
    sign, whole, fraction, exponent_text = found.groups()
    fraction = fraction or ""
    exponent: Exponent = 0
    if exponent_text:
        # Past _MAX_INT_TEXT digits int() is quadratic (and capped); Decimal() is exact and linear.
        exponent = int(exponent_text) if len(exponent_text) <= _MAX_INT_TEXT else Decimal(exponent_text)
    return _make(sign == "-", whole + fraction, _shift(exponent, -len(fraction)))


def to_number(value: Any) -> ExactNumber | None:
    """The exact value of a JSON number (int, float, Decimal; not bool), else ``None``.

    A float counts as the decimal its shortest ``repr`` spells (``0.1`` is one tenth); NaN and
    infinities are not JSON numbers and give ``None``. Strings give ``None`` too.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if value.bit_length() <= _MAX_INT_BITS:
            return _make(value < 0, str(abs(value)), 0)
        return _from_decimal(Decimal(value))
    if isinstance(value, float):
        return parse_number(repr(value)) if math.isfinite(value) else None
    if isinstance(value, Decimal):
        return _from_decimal(value) if value.is_finite() else None
    return None


def _from_decimal(value: Decimal) -> ExactNumber:
    """The exact value of a finite Decimal."""
    sign, digits, exponent = value.as_tuple()
    # A finite Decimal's exponent is an int (only NaN and infinities carry 'n', 'N', 'F').
    return _make(bool(sign), "".join(map(str, digits)), cast(int, exponent))


def compare_numbers(left: ExactNumber, right: ExactNumber) -> int:
    """-1, 0 or 1 as ``left`` is below, equal to or above ``right``; exact and cheap."""
    if left.sign != right.sign:
        return -1 if left.sign < right.sign else 1
    if left.sign == 0:
        return 0
    left_adjusted, right_adjusted = left.adjusted, right.adjusted
    if left_adjusted != right_adjusted:
        magnitude = -1 if left_adjusted < right_adjusted else 1
    elif left.digits != right.digits:
        # Same leading power of ten and no trailing zeros: digit strings order like the numbers.
        magnitude = -1 if left.digits < right.digits else 1
    else:
        return 0
    return magnitude * left.sign


def _number_text(number: ExactNumber) -> str:
    """Shortest exact JSON spelling: plain integer, fixed point near 1, else ``d.ddde±x``."""
    if number.sign == 0:
        return "0"
    sign = "-" if number.sign < 0 else ""
    digits, exponent = number.digits, number.exponent
    places = _shift(exponent, len(digits))  # digits before the decimal point
    if exponent >= 0 and places <= _MAX_PLAIN_DIGITS:
        return f"{sign}{digits}{'0' * int(exponent)}"
    if exponent < 0 and places > -6:
        if places > 0:
            return f"{sign}{digits[: int(places)]}.{digits[int(places) :]}"
        return f"{sign}0.{'0' * -int(places)}{digits}"
    mantissa = digits if len(digits) == 1 else f"{digits[0]}.{digits[1:]}"
    adjusted = number.adjusted
    return f"{sign}{mantissa}e{'+' if adjusted >= 0 else '-'}{abs(adjusted)}"


def _string_text(text: str) -> str:
    """A JSON string literal with minimal escapes; lone surrogates escaped as ``\\udXXX``."""
    literal = json.dumps(text, ensure_ascii=False)
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", literal)


def _utf16_order(key: str) -> bytes:
    """Sort key ordering strings by UTF-16 code units, as RFC 8785 requires."""
    return key.encode("utf-16-be", "surrogatepass")


_VALUE, _TEXT, _CLOSE = 0, 1, 2


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value``: equal JSON values give identical text.

    Accepts dict, list, tuple, str, int, float, bool, None and Decimal; anything else renders as
    the JSON string of its ``str()``. NaN and infinities render as ``null``. Raises
    ``ValueError`` only for a container that contains itself.
    """
    if type(value) in _CONTAINERS and _plain(value):
        # json's C encoder spells these exactly as below, ~7x faster (a fire renders its
        # payload three times: dedupe key, truncation, fan-out line); one encoder made once
        text = _plain_json(value)
        if _SURROGATE.search(text) is None:
            return text
    return _tokens_json(value)


def compact_encoder(*, sort_keys: bool, allow_nan: bool) -> Callable[[Any], str]:
    """``json.dumps(value, ensure_ascii=False, separators=(",", ":"), check_circular=False, …)``
    with its C encoder made once: ``JSONEncoder.encode`` makes one at every call, half the time
    of a small value (a watcher's state, an alert's dedupe basis). A value that contains itself
    raises ``RecursionError``; a non-JSON one ``TypeError``, NaN without ``allow_nan``
    ``ValueError``, as ``json.dumps`` would."""
    encoder = json.JSONEncoder(
        ensure_ascii=False,
        sort_keys=sort_keys,
        allow_nan=allow_nan,
        check_circular=False,
        separators=(",", ":"),
    )
    make: Any = getattr(json.encoder, "c_make_encoder", None)  # CPython's C accelerator
    if make is None:
        return encoder.encode
    encode: Callable[[Any, int], list[str]] = make(
        None,  # no check for a container inside itself (check_circular=False)
        encoder.default,
        json.encoder.encode_basestring,
        None,
        encoder.key_separator,
        encoder.item_separator,
        sort_keys,
        False,  # skipkeys
        allow_nan,
    )
    return lambda value: "".join(encode(value, 0))


_plain_json: Final = compact_encoder(sort_keys=True, allow_nan=True)
"""JSON text of a value ``_plain`` accepted (it refuses a container inside itself and floats)."""


_CONTAINERS: Final = (dict, list, tuple)
# A float with a fraction, at least 1e-4 and below 1e16 in magnitude, is spelt by ``repr`` in fixed
# point with its shortest digits, as ``_number_text`` spells it: most readings in a payload
# (``42.5``, ``0.93``) take the fast path; ``1.0``, ``1e-05``, NaN and infinity do not (every
# float from 2**53 up is whole: the upper bound keeps out infinity, which has no fraction either).
_PLAIN_FLOAT_MIN: Final = 1e-4
_PLAIN_FLOAT_MAX: Final = 1e16
_PLAIN_MAX_DEPTH: Final = 64  # deeper values take the iterative path (json.dumps recurses)


def _plain(value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> bool:
    """Whether ``json.dumps(sort_keys=True)`` writes ``value`` canonically: only dicts with ASCII
    string keys (code point order is then UTF-16 order), lists, tuples, strings, ints that
    ``to_number`` keeps as ints, bools and None (exact types, no subclasses), nested at most
    ``_PLAIN_MAX_DEPTH`` deep (a container that contains itself goes past that and is refused
    by the iterative path), and floats with a fraction between ``_PLAIN_FLOAT_MIN`` and
    ``_PLAIN_FLOAT_MAX`` in magnitude. Other floats and Decimals are not plain: their canonical
    spelling is not ``repr``'s (``1.0`` is ``1``, ``1e-05`` is ``0.00001``)."""
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        container, depth = pending.pop()
        if depth > _PLAIN_MAX_DEPTH:
            return False
        members = container
        if type(container) is dict:
            for key in container:
                if type(key) is not str or not key.isascii():
                    return False
            members = container.values()
        for member in members:
            kind = type(member)
            if kind is str or kind is bool or member is None:
                continue
            if kind is int:
                if member.bit_length() > _MAX_INT_BITS:
                    return False
            elif kind is float:
                if not (_PLAIN_FLOAT_MIN <= abs(member) < _PLAIN_FLOAT_MAX) or member.is_integer():
                    return False
            elif kind in _CONTAINERS:
                pending.append((member, depth + 1))
            else:
                return False
    return True


def _tokens_json(value: Any) -> str:
    """``canonical_json`` of any value, token by token without recursion."""
    out: list[str] = []
    open_containers: set[int] = set()
    stack: list[tuple[int, Any]] = [(_VALUE, value)]
    while stack:
        kind, item = stack.pop()
        if kind == _TEXT:
            out.append(item)
        elif kind == _CLOSE:
            open_containers.discard(item)
        elif isinstance(item, dict | list | tuple):
            if id(item) in open_containers:
                raise ValueError("canonical_json: a container contains itself")
            open_containers.add(id(item))
            stack.append((_CLOSE, id(item)))
            stack.extend(reversed(_container_tokens(item)))
        else:
            out.append(_scalar_text(item))
    return "".join(out)


def _container_tokens(container: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> list[Any]:
    """The opening text, members and separators of a container, in output order."""
    tokens: list[tuple[int, Any]] = []
    if isinstance(container, dict):
        members = sorted(
            ((key if isinstance(key, str) else str(key), member) for key, member in container.items()),
            key=lambda pair: _utf16_order(pair[0]),
        )
        tokens.append((_TEXT, "{"))
        for index, (key, member) in enumerate(members):
            tokens.append((_TEXT, f"{',' if index else ''}{_string_text(key)}:"))
            tokens.append((_VALUE, member))
        tokens.append((_TEXT, "}"))
        return tokens
    tokens.append((_TEXT, "["))
    for index, member in enumerate(container):
        if index:
            tokens.append((_TEXT, ","))
        tokens.append((_VALUE, member))
    tokens.append((_TEXT, "]"))
    return tokens


def _scalar_text(value: Any) -> str:
    """Canonical text of a value that is not a container."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float | Decimal):
        number = to_number(value)
        return "null" if number is None else _number_text(number)
    if isinstance(value, str):
        return _string_text(value)
    return _string_text(str(value))


def plain_copy(value: Any) -> Any:
    """A copy of JSON-like data (dicts, lists, scalars) sharing no container with it, as plain
    dicts and lists: ``copy.deepcopy``'s result for such data, about ten times faster.
    Recursive, unlike the rendering: for values bounded already (a template's constants, what a
    session's memory keeps of a callback)."""
    if isinstance(value, dict):
        return {key: plain_copy(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain_copy(item) for item in value]
    return value


def sha256_hex(text: str) -> str:
    """Hex SHA-256 of ``text`` encoded as UTF-8 (lone surrogates passed through, never raising)."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
