"""The docs keep up with the code: links, API routes, config keys and CLI commands are all documented."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from ruamel.yaml import YAML

from sentinel_hooks.api.openapi import build_openapi
from sentinel_hooks.callbacks.policy.rules import CommandRequest, decide
from sentinel_hooks.cli.app import app
from sentinel_hooks.config.service import ActionPolicySpec, ServiceConfig

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
METHODS = ("get", "put", "post", "patch", "delete")
PLACEHOLDER = re.compile(r"\{[^}/]*\}")


def doc(name: str) -> str:
    return (DOCS / name).read_text(encoding="utf-8")


def readme_doc_links() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return sorted(set(re.findall(r"\]\((docs/[^)#\s]+\.md)(?:#[^)]*)?\)", text)))


def api_routes() -> list[str]:
    """``METHOD /path`` for every operation of the OpenAPI document."""
    paths = build_openapi()["paths"]
    return [
        f"{method.upper()} {path}" for path, item in paths.items() for method in METHODS if method in item
    ]


def cli_commands(group: click.Group, parents: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command path of the click group, depth first: ("inbox",), ("inbox", "ack"), …"""
    found: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        found.append((*parents, name))
        if isinstance(command, click.Group):
            found += cli_commands(command, (*parents, name))
    return found


def mentions_route(text: str, route: str) -> bool:
    """``route`` appears in ``text``; path parameter names may differ (``{id}`` vs ``{callbackId}``)."""
    normal = PLACEHOLDER.sub("{}", text)
    return re.search(re.escape(PLACEHOLDER.sub("{}", route)) + r"(?![\w/{.-])", normal) is not None


def test_readme_links_some_docs() -> None:
    """README.md links the docs pages (so the next test checks something)."""
    assert "docs/api.md" in readme_doc_links()


@pytest.mark.parametrize("link", readme_doc_links())
def test_docs_linked_from_readme_exist(link: str) -> None:
    """Every docs/*.md page README.md links to exists."""
    assert (ROOT / link).is_file(), f"README.md links {link}, which does not exist"


@pytest.mark.parametrize("route", api_routes())
def test_every_api_route_is_in_api_md(route: str) -> None:
    """Each operation of the OpenAPI document is mentioned in docs/api.md."""
    assert mentions_route(doc("api.md"), route), f"docs/api.md does not mention `{route}`"


def test_route_matching_is_exact() -> None:
    """A route is not counted as mentioned by a longer path or a different method."""
    text = "`GET /api/v1/watchers/{id}` and `POST /api/v1/watchers?x=` and `GET /api/v1/inbox/{itemId}/ack`"
    found = [mentions_route(text, r) for r in ("GET /api/v1/watchers", "POST /api/v1/watchers")]
    assert [False, True, True] == [*found, mentions_route(text, "GET /api/v1/inbox/{id}/ack")]


@pytest.mark.parametrize("key", [field.alias or name for name, field in ServiceConfig.model_fields.items()])
def test_every_top_level_config_key_is_in_configuration_md(key: str) -> None:
    """Each top-level key of sentinel.yaml is documented (as `key` or `key.sub`)."""
    assert re.search(rf"`{re.escape(key)}[`.]", doc("configuration.md")), (
        f"docs/configuration.md lacks `{key}`"
    )


@pytest.mark.parametrize("command", cli_commands(app), ids=" ".join)
def test_every_cli_command_is_in_cli_md(command: tuple[str, ...]) -> None:
    """Each command and subcommand appears in docs/cli.md (`sentinel GROUP … SUB` on one line)."""
    *groups, name = command
    prefix = " ".join(("sentinel", *groups))
    pattern = (
        rf"{re.escape(prefix)}\b[^\n]*?\b{re.escape(name)}\b" if groups else rf"sentinel {re.escape(name)}\b"
    )
    assert re.search(pattern, doc("cli.md")), f"docs/cli.md does not mention `sentinel {' '.join(command)}`"


def policy_examples() -> list[tuple[str, ActionPolicySpec]]:
    """Every ``actionPolicy`` with rules in a YAML block of docs/*.md, with its page."""
    found: list[tuple[str, ActionPolicySpec]] = []
    for page in sorted(DOCS.glob("*.md")):
        for block in re.findall(r"```yaml\n(.*?)```", page.read_text(encoding="utf-8"), re.DOTALL):
            data = YAML(typ="safe", pure=True).load(block)
            policy = data.get("actionPolicy") if isinstance(data, dict) else None
            if isinstance(policy, dict) and policy.get("rules"):
                found.append((page.name, ActionPolicySpec.model_validate(policy)))
    return found


def test_docs_show_policy_examples() -> None:
    """docs/sessions.md and docs/configuration.md each show an actionPolicy (so the next tests check some)."""
    assert {"configuration.md", "sessions.md"} <= {page for page, _ in policy_examples()}


@pytest.mark.parametrize(("page", "policy"), policy_examples(), ids=[p for p, _ in policy_examples()])
def test_documented_policy_allows_only_the_whole_command(page: str, policy: ActionPolicySpec) -> None:
    """The documented rule runs `systemctl status nginx` unasked, never `systemctl stop nginx status`."""
    said = [
        decide(policy, CommandRequest("systemctl", args, "w"), history=[]).decision
        for args in (["status", "nginx"], ["stop", "nginx", "status"])
    ]
    assert "auto" == said[0], f"{page}: the example no longer allows `systemctl status nginx`"
    assert "auto" != said[1], f"{page}: the example auto-approves `systemctl stop nginx status`"
