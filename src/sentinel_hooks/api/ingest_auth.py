"""How a push to ``/hooks/ingest/{id}`` proves itself (SPEC.md §3, §16).

Per webhook watcher: an HMAC ``secret`` (``sha256=<hex>`` of the raw body in
``signatureHeader``; GitHub's ``X-Hub-Signature-256`` has the same form), or ``auth``: a bearer
token or basic credentials in ``Authorization`` (what Alertmanager's and Grafana's webhook
configs can send), or ``auth: none``. Every comparison is constant-time and made on bytes, so
header text that is not UTF-8 is just a wrong credential, and a refusal never says which part
was wrong (user name or password, scheme or token).

``push_admitted`` decides for a push to any id, so a caller without credentials learns nothing
about the watchers: an unknown id, a watcher of another strategy and a webhook watcher refusing
the credentials get the same answer (the route's one 401) after the same work — the body's HMAC
and the ``Authorization`` header are compared every time, against the watcher's credentials or,
where there are none, against random ones drawn at start.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import secrets
from collections.abc import Mapping

from pydantic import SecretStr

from sentinel_hooks.api.security import auth_scheme, bearer_token
from sentinel_hooks.config.ingest import IngestAuthSpec
from sentinel_hooks.config.watcher import WebhookWatcher

_UNGUESSABLE = secrets.token_hex(32)  # compared against when a watcher has no such credential
_UNGUESSABLE_AUTH = IngestAuthSpec.model_construct(bearer_token=SecretStr(_UNGUESSABLE), basic=None)
DEFAULT_SIGNATURE_HEADER: str = WebhookWatcher.model_fields["signature_header"].default


def _bytes(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """Whether ``header`` is ``sha256=<hex HMAC-SHA256 of body>`` (constant-time compare, as bytes:
    a header with other characters is simply a wrong signature)."""
    if not header or not header.startswith("sha256="):
        return False
    expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest().encode()
    given = _bytes(header[len("sha256=") :]).lower()  # hex digits in either case, nothing around them
    return hmac.compare_digest(given, expected)


def basic_credentials(authorization: str) -> tuple[bytes, bytes] | None:
    """``(user, password)`` of an ``Authorization: Basic <base64>`` header (any case of the
    scheme, the base64 exactly as sent), else None."""
    encoded = auth_scheme(authorization, "basic")
    if encoded is None:
        return None
    try:
        decoded = base64.b64decode(_bytes(encoded), validate=True)
    except (binascii.Error, ValueError):
        return None
    user, colon, password = decoded.partition(b":")
    return (user, password) if colon else None


def credentials_ok(auth: IngestAuthSpec, authorization: str) -> bool:
    """Whether ``Authorization`` carries the watcher's bearer token or basic credentials (both
    parts of basic credentials are always compared, so timing does not tell which was wrong)."""
    if auth.bearer_token is not None:
        token = bearer_token(authorization)
        matches = hmac.compare_digest(_bytes(token or ""), _bytes(auth.bearer_token.get_secret_value()))
        return token is not None and matches
    if auth.basic is None:  # pragma: no cover - the model requires one of the two
        return False
    sent = basic_credentials(authorization)
    user, password = sent or (b"", b"")
    user_ok = hmac.compare_digest(user, _bytes(auth.basic.username))
    password_ok = hmac.compare_digest(password, _bytes(auth.basic.password.get_secret_value()))
    return sent is not None and user_ok and password_ok


def push_admitted(spec: WebhookWatcher | None, headers: Mapping[str, str], body: bytes) -> bool:
    """Whether a push of ``body`` with ``headers`` proves itself to ``spec`` (None: no webhook
    watcher has the id pushed to, which admits nothing). A watcher with a ``secret`` wants the
    signature, one with ``auth`` credentials the ``Authorization`` header, one with neither (``auth:
    none``, or nothing said on loopback) takes any push; both checks are made in every case (see
    the module docstring)."""
    secret = spec.secret.get_secret_value() if spec is not None and spec.secret is not None else None
    auth = spec.auth if spec is not None and isinstance(spec.auth, IngestAuthSpec) else None
    header = headers.get(spec.signature_header if spec is not None else DEFAULT_SIGNATURE_HEADER)
    signed = signature_ok(secret or _UNGUESSABLE, body, header)
    credentialed = credentials_ok(auth or _UNGUESSABLE_AUTH, headers.get("Authorization", ""))
    if spec is None:
        return False
    if secret is not None:
        return signed
    return credentialed if auth is not None else True


def included_headers(spec: WebhookWatcher, headers: Mapping[str, str]) -> dict[str, str]:
    """The request headers named by ``includeHeaders`` that were sent, under the names as
    written; several values of one header joined with ``, ``; text that is not UTF-8 replaced."""
    found: dict[str, str] = {}
    getall = getattr(headers, "getall", None)
    for name in spec.include_headers:
        values = list(getall(name, [])) if getall is not None else [v for v in [headers.get(name)] if v]
        if values:
            joined = ", ".join(values)
            found[name] = _bytes(joined).decode("utf-8", "replace")
    return found
