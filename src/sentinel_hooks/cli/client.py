"""A small client of the running service's API for the management commands.

It finds the service from ``--url``, else the ``server`` of the config (``-c``), and the
token from ``--token``, $SENTINEL_API_TOKEN, else the config. Failures become errors the
CLI maps to SPEC.md §10 exit codes: unreachable → 3, refused or invalid → 1.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sentinel_hooks.config.location import config_path
from sentinel_hooks.errors import SentinelError

if TYPE_CHECKING:  # urllib.error loads tempfile, shutil, bz2 and lzma: not for commands that send nothing
    import urllib.error

DEFAULT_URL = "http://127.0.0.1:8765"


class ServiceUnreachable(SentinelError):
    """No service answers at the URL (exit code 3)."""


class ApiRefused(SentinelError):
    """The service answered with an error (exit code 1)."""

    def __init__(self, status: int, message: str, body: Any = None) -> None:
        super().__init__(message)
        self.status = status
        self.body = body


CLI_ACTOR = "cli"  # who an operator command acts as, unless --actor says


def operator_client(options: Mapping[str, Any]) -> Client:
    """The client of an inbox or silences command (its ``remote_options``): it acts as ``cli``
    unless ``--actor`` names someone, so the audit trail says where a change came from."""
    return Client.from_options(
        url=options["url"],
        token=options["token"],
        config=options["config"],
        actor=options["actor"] or CLI_ACTOR,
    )


@dataclass(frozen=True)
class Client:
    url: str
    token: str | None
    actor: str | None = None
    timeout_s: float = 30.0
    via: str = "cli"  # the face the service records changes as coming through (SPEC §21)

    @classmethod
    def from_options(
        cls, *, url: str | None, token: str | None, config: str | None, actor: str | None
    ) -> Client:
        token = token or os.environ.get("SENTINEL_API_TOKEN") or None
        if url is None or token is None:
            found_url, found_token = _from_config(config)
            url = url or found_url
            token = token or found_token
        return cls(url.rstrip("/"), token, actor)

    def call(self, method: str, path: str, body: Any = None) -> Any:
        """Send a request; the decoded JSON answer (None for 204)."""
        import urllib.error

        try:
            return self._send(method, path, body)[1]
        except urllib.error.HTTPError as exc:
            raise _refused(exc) from None

    def answer(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """Send a request; the status and decoded JSON answer, error answers included (the MCP
        tools hand the API's error JSON to the agent as it is)."""
        import urllib.error

        try:
            return self._send(method, path, body)
        except urllib.error.HTTPError as exc:
            raw = exc.read()
            try:
                return exc.code, json.loads(raw)
            except ValueError:
                return exc.code, _error_json(exc.code, raw.decode(errors="replace")[:200] or exc.reason)

    def _send(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        import urllib.error
        import urllib.request  # http.client, email, ssl: not loaded for commands that send nothing

        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        if data is not None or method in ("POST", "PATCH"):
            request.add_header("Content-Type", "application/json")
            if data is None:
                request.data = b"{}"
        if self.token:
            request.add_header("Authorization", f"Bearer {self.token}")
        if self.actor:
            request.add_header("X-Sentinel-Actor", self.actor)
        request.add_header("X-Sentinel-Via", self.via)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                status, raw = response.status, response.read()
        except urllib.error.HTTPError:
            raise
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ServiceUnreachable(
                f"no Sentinel service answers at {self.url} ({reason}); "
                "start one with `sentinel run`, or pass --url"
            ) from exc
        return status, json.loads(raw) if raw else None


def _error_json(status: int, message: str) -> dict[str, Any]:
    return {"error": {"code": f"http_{status}", "message": message, "details": None}}


def _refused(exc: urllib.error.HTTPError) -> ApiRefused:
    raw = exc.read()
    try:
        body = json.loads(raw)
        message = body["error"]["message"]
    except (ValueError, KeyError, TypeError):
        body, message = None, raw.decode(errors="replace")[:200] or exc.reason
    if exc.code == 401:
        message = f"{message} (pass --token or set SENTINEL_API_TOKEN)"
    return ApiRefused(exc.code, f"{exc.code}: {message}", body)


def _from_config(config: str | None) -> tuple[str, str | None]:
    """The service's URL and token from the config's ``server``; the defaults without a config.

    Only ``server.host``, ``port`` and ``apiToken`` are read (``load_server``): a problem
    elsewhere does not matter here, and a problem in them stops the command with the reason
    (exit 1) rather than sending it to 127.0.0.1:8765 without a token.
    """
    path = config_path(config, os.environ)
    if not path.exists():
        if config is not None:
            raise SentinelError(f"config {config!r} not found")
        return DEFAULT_URL, None
    from sentinel_hooks.config.loader import load_server

    server = load_server(path.absolute(), os.environ)
    host = server.host
    host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    host = f"[{host}]" if ":" in host and not host.startswith("[") else host
    token = server.api_token.get_secret_value() if server.api_token else None
    return f"http://{host}:{server.port}", token
