"""What an Apprise URL means, told by the Apprise library itself (SPEC.md §16, target ``apprise``).

Apprise (``apprise`` on PyPI) turns URLs such as ``tgram://BOT_TOKEN/CHAT_ID`` or
``mailto://user:password@example.com`` into notifiers. Sentinel never parses those URLs by hand:
``Apprise.instantiate`` says whether a URL is one Apprise supports, and the notifier it builds says
which host it reaches and which parts are secret. Imported lazily (loading Apprise's notifiers
takes a few hundred milliseconds), only when a target of type ``apprise`` is configured.

Which host a URL reaches is not always the host it is written with: in ``tgram://TOKEN/CHAT`` the
"host" is part of the bot token, and Telegram is reached at ``api.telegram.org``. ``reached_hosts``
therefore takes, in this order: the SMTP server an e-mail notifier picked (``mailto://``); the
URL's host when the notifier's URL template declares a ``host`` token (a server the user names:
``json://host/path``, ``ntfy://my.server/topic``); the host of the notifier's fixed API URL when it
declares one (``notify_url``: ``api.telegram.org``, ``discord.com``, ``ntfy.sh``). That is what can be
known before sending; every connection a notifier opens is checked again when it is made
(``net.guard``), so a host this misses is refused then.

Which notifiers the ``apprise`` target takes (``transport``): those that reach their service over
TCP through Python's socket module, where the connection guard applies allowedHosts and
allowPrivateNetworks to every name lookup and connect: HTTP(S) notifiers (they send with
``requests``), e-mail (``smtplib``), and Apprise's own IRC and APRS clients. The others send UDP
datagrams (``rsyslog://``), write to the local syslog (``syslog://``), show desktop notifications or
drive USB devices: the host policy cannot be applied to them, so a URL of theirs is refused at
load. The test is what a notifier is built with, not its name: one that a later Apprise release adds
is taken when it sends with ``requests`` or ``smtplib``, and refused otherwise until it is known.

Secrets (``url_secrets``): the parts of a URL that Apprise hides in its privacy form
(``url(privacy=True)``: tokens, passwords), and every other part of its user, password, host, path
and query values except the hosts it reaches (a ntfy topic or a webhook path lets anyone post).
``shown`` is the privacy form, cut at its query, with those parts masked: safe to print.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from sentinel_hooks.config.secrets import Redactor

if TYPE_CHECKING:
    from apprise.plugins.base import NotifyBase

_PIECES = re.compile(r"[/:@?&=#,+ ]+")  # what separates the parts of a URL, to find the hidden ones
_FIXED_URL_ATTRIBUTES = ("notify_url", "cloud_notify_url")
_SERVER_ATTRIBUTES = ("smtp_host",)  # e-mail: the SMTP server Apprise picked (not the address's domain)
_TCP_CLIENTS = ("apprise.plugins.irc.base", "apprise.plugins.aprs")  # resolve and connect with socket
_SENDING_MODULES = {"requests": "HTTP(S)", "smtplib": "SMTP"}
MIN_SECRET_CHARS = 4
SCHEME_CHARS = 20


class AppriseUrlError(ValueError):
    """A URL Apprise cannot use; the message is safe to show (it holds no part of the URL's secrets)."""


@dataclass(frozen=True)
class AppriseUrl:
    """One parsed Apprise URL: the notifier, where it goes, and what in it is secret."""

    url: str
    scheme: str
    notifier: str  # Apprise's service name, e.g. "Telegram"
    shown: str  # Apprise's privacy form of the URL, without its query (Apprise's defaults)
    hosts: tuple[str, ...]  # the hosts known to be reached (see the module docstring)
    secrets: tuple[str, ...]


def scheme_of(url: str) -> str:
    """The scheme of ``url`` (the text before ``://``), cut short: safe to show."""
    head, sep, _ = url.partition("://")
    return head[:SCHEME_CHARS] if sep else ""


def parse_apprise_url(url: str) -> AppriseUrl:
    """``url`` as Apprise understands it; ``AppriseUrlError`` when Apprise has no notifier for it."""
    import apprise  # lazily: see the module docstring

    scheme = scheme_of(url)
    if not scheme:
        raise AppriseUrlError(
            "not an Apprise URL: expected scheme://… (e.g. json://host/path, tgram://token/chat)"
        )
    quiet_apprise_logs()
    asset = apprise.AppriseAsset(storage_mode="memory")
    notifier: NotifyBase | None = apprise.Apprise.instantiate(url, asset=asset)
    if notifier is None:
        raise AppriseUrlError(
            f"Apprise cannot use this {scheme}:// URL: the scheme is unknown or a required part is "
            "missing (see https://github.com/caronc/apprise/wiki for the form of each service)"
        )
    if transport(notifier) is None:
        name = str(getattr(notifier, "service_name", scheme))
        raise AppriseUrlError(
            f"Apprise's {name} notifier ({scheme}://) does not send over HTTP(S), SMTP or TCP, where "
            "allowedHosts and allowPrivateNetworks are applied to every connection, so the apprise "
            "target refuses it; reach that service another way (a webhook target to a relay that "
            "forwards to it, or a file target for a local log)"
        )
    privacy = str(notifier.url(privacy=True))  # type: ignore[no-untyped-call]  # untyped in Apprise
    hosts = reached_hosts(notifier)
    secrets = url_secrets(url, privacy, hosts)
    return AppriseUrl(
        url=url,
        scheme=scheme,
        notifier=str(getattr(notifier, "service_name", scheme)),
        shown=Redactor(secrets).text(privacy.split("?", 1)[0]),
        hosts=hosts,
        secrets=secrets,
    )


def transport(notifier: NotifyBase) -> str | None:
    """How ``notifier`` reaches its service when the connection guard sees it (``"HTTP(S)"``,
    ``"SMTP"``, ``"TCP"``), else None (see the module docstring): told by the modules its class and
    its bases are written in, so a notifier built on an HTTP one (Guilded on Discord) is HTTP too."""
    for klass in type(notifier).__mro__:
        if klass.__module__ in _TCP_CLIENTS:
            return "TCP"
        module = sys.modules.get(klass.__module__)
        if module is None:  # pragma: no cover - a class's module is loaded while the class exists
            continue
        used = {value.__name__ for value in vars(module).values() if isinstance(value, ModuleType)}
        for name, how in _SENDING_MODULES.items():
            if name in used:
                return how
    return None


def url_secrets(url: str, privacy: str, hosts: tuple[str, ...]) -> tuple[str, ...]:
    """What in ``url`` must never be shown: the parts Apprise's privacy form hides, and every part
    of its user, password, host (unless it is a host reached), path and query values as Apprise's
    URL parser reads them (a ntfy topic, a webhook path: Apprise shows them, but they let anyone
    post)."""
    from apprise.utils.parse import parse_url

    found = set(hidden_parts(url, privacy))
    parts = parse_url(url, verify_host=False) or {}  # type: ignore[no-untyped-call]  # untyped in Apprise
    values: list[object] = [parts.get("user"), parts.get("password"), parts.get("host")]
    values += str(parts.get("fullpath") or "").split("/")
    values += list((parts.get("qsd") or {}).values())
    for value in values:
        if not isinstance(value, str) or value.lower() in hosts:
            continue
        for form in {value, *_PIECES.split(value)}:
            if len(form) >= MIN_SECRET_CHARS and form.lower() not in hosts:
                found.add(form)
    return tuple(sorted(found, key=len, reverse=True))


def reached_hosts(notifier: NotifyBase) -> tuple[str, ...]:
    """The hosts ``notifier`` is known to reach (see the module docstring)."""
    for attribute in _SERVER_ATTRIBUTES:
        server = getattr(notifier, attribute, None)
        if isinstance(server, str) and server:
            return (server.lower(),)
    tokens: dict[str, Any] = getattr(notifier, "template_tokens", {}) or {}
    host = getattr(notifier, "host", None)
    if "host" in tokens and isinstance(host, str) and host:
        return (host.lower(),)
    for attribute in _FIXED_URL_ATTRIBUTES:
        fixed = getattr(type(notifier), attribute, None)
        if isinstance(fixed, str) and "{" not in fixed:
            name = urlsplit(fixed).hostname
            if name:
                return (name.lower(),)
    return ()


def hidden_parts(url: str, shown: str) -> tuple[str, ...]:
    """The parts of ``url`` (as written and percent-decoded) that its privacy form ``shown`` hides."""
    visible = {unquote(part) for part in _PIECES.split(shown)}
    hidden: set[str] = set()
    _, _, rest = url.partition("://")  # the scheme is no secret (and Apprise may show another)
    for part in _PIECES.split(rest):
        for form in (part, unquote(part)):
            if len(form) >= MIN_SECRET_CHARS and form not in visible:
                hidden.add(form)
    return tuple(sorted(hidden, key=len, reverse=True))


def quiet_apprise_logs() -> None:
    """Keep Apprise's own log lines (which may quote URLs and their tokens) out of Sentinel's logs.

    Apprise still captures each call's lines for its result, where the ``apprise`` target reads
    them, redacted, into its error texts. Idempotent."""
    import logging  # here: loading a config (sentinel test, validate) needs no logging

    logger = logging.getLogger("apprise")
    if not logger.propagate:
        return
    logger.addHandler(logging.NullHandler())  # no handler at all would print to stderr
    logger.propagate = False
