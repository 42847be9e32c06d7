"""The Store is cut into role Protocols sized by their users (``store/base.py``'s docstring).

``ROLES`` pins each role's members, so a role grows only by an edit of this list, and never past
``MAX_MEMBERS``; ``Store`` is exactly their union. Outside the composition root no module names
``Store``: a consumer is typed on the roles it calls, and one that calls several names a Protocol
of its own that inherits them and adds nothing.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path
from typing import Generic, Protocol

import pytest

from sentinel_hooks.store import base
from sentinel_hooks.store.redis import RedisStore
from sentinel_hooks.store.sqlite import SqliteStore

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "sentinel_hooks"
MAX_MEMBERS = 8
ROLES: dict[str, set[str]] = {
    "LifecycleStore": {"shared", "open", "close", "ping"},
    "WatcherStore": {
        "list_watcher_states",
        "get_watcher_states",
        "last_observations",
        "observations",
        "write_watcher_batch",
    },
    "ContractStore": {
        "accept_contract",
        "get_contract",
        "get_contracts",
        "get_envelopes",
        "trigger_priorities",
        "list_contracts",
    },
    "GroupStore": {"claim_joins", "joins_reported", "join_members", "member_resolved"},
    "TransitionStore": {
        "claim_due",
        "settle_contracts",
        "begin_notify",
        "resolve_contract",
        "pause_contract",
        "resume_contract",
    },
    "SessionStore": {"append_transcript", "get_transcript", "read_callback"},
    "CheckpointStore": {"put_checkpoint", "get_checkpoints"},
    "InboxStore": {
        "create_inbox_item",
        "get_inbox_item",
        "list_inbox",
        "transition_inbox_item",
        "inbox_history",
    },
    "OutboxStore": {"enqueue_delivery", "claim_deliveries", "list_deliveries", "record_outcomes"},
    "SilenceStore": {"put_silence", "get_silence", "list_silences"},
    "RetentionStore": {"prune"},
    "UsageStore": {"add_usage", "get_usage"},
    "FeedbackStore": {"put_feedback", "get_feedback"},
    "PaceStore": {"take_pace_slot"},
    "AuditStore": {"add_audit", "list_audit", "prune_audit"},
}
# Where the whole Store may be named: the service that opens it and hands each part its roles,
# the registry that makes it, and the package that defines and exports it.
COMPOSITION_ROOT = {"service.py", "store/__init__.py", "store/base.py", "store/backends.py"}


def members(protocol: type) -> set[str]:
    """The public names a Protocol declares, its own and its bases' (``Protocol``'s machinery,
    all underscored, left out)."""
    found: set[str] = set()
    for cls in protocol.__mro__:
        if cls not in (Protocol, Generic, object):
            found |= {name for name in vars(cls) if not name.startswith("_")}
    return found


def declared_roles() -> set[str]:
    """The Protocols ``store.base`` defines, but for their union ``Store``."""
    return {
        name
        for name, value in vars(base).items()
        if isinstance(value, type)
        and value.__module__ == base.__name__
        and getattr(value, "_is_protocol", False)
        and name != "Store"
    }


def modules() -> Iterator[tuple[str, ast.Module]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        yield path.relative_to(PACKAGE).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def names_in(tree: ast.AST) -> Iterator[str]:
    """Every name ``tree`` uses or imports, also inside string annotations."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            yield node.id
        elif isinstance(node, ast.Attribute):
            yield node.attr
        elif isinstance(node, ast.alias):
            yield (node.asname or node.name).rpartition(".")[2]
        annotations = (
            [node.annotation]
            if isinstance(node, ast.arg | ast.AnnAssign)
            else [node.returns]
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            else []
        )
        for annotation in annotations:
            if isinstance(annotation, ast.Constant) and isinstance(annotation.value, str):
                yield from names_in(ast.parse(annotation.value, mode="eval"))


@pytest.mark.parametrize("role", sorted(ROLES))
def test_role_has_the_members_listed(role: str) -> None:
    """Each role declares exactly the members listed for it."""
    assert ROLES[role] == members(getattr(base, role))


def test_no_role_has_more_than_eight_members() -> None:
    """A role is what one kind of consumer calls: at most eight members."""
    assert {} == {role: len(names) for role, names in ROLES.items() if len(names) > MAX_MEMBERS}


def test_every_role_is_listed() -> None:
    """A new role in ``store.base`` comes with its entry here."""
    assert set(ROLES) == declared_roles()


def test_no_member_is_in_two_roles() -> None:
    """Each member belongs to one role, so the union counts each once."""
    assert sum(len(names) for names in ROLES.values()) == len(set().union(*ROLES.values()))


def test_store_is_exactly_the_union_of_the_roles() -> None:
    """``Store`` inherits every role and declares nothing of its own."""
    bases = {cls.__name__ for cls in base.Store.__bases__} - {"Protocol", "Generic"}
    own = {name for name in vars(base.Store) if not name.startswith("_")}
    assert (set(ROLES), set(), set().union(*ROLES.values())) == (bases, own, members(base.Store))


@pytest.mark.parametrize("backend", [SqliteStore, RedisStore])
def test_backend_implements_every_member(backend: type) -> None:
    """Each backend class has every member of the union."""
    assert set() == {name for name in members(base.Store) if not hasattr(backend, name)}


def test_only_the_composition_root_names_store() -> None:
    """Consumers are typed on roles: outside the composition root no module imports, annotates
    with or otherwise names ``Store``."""
    naming = {
        path for path, tree in modules() if path not in COMPOSITION_ROOT and "Store" in set(names_in(tree))
    }
    assert set() == naming


def test_a_consumer_union_of_roles_adds_nothing() -> None:
    """A Protocol that inherits roles only names them (and ``Protocol``): it declares no member."""
    adding: set[str] = set()
    for path, tree in modules():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ClassDef) or path == "store/base.py":
                continue
            bases = {b.id if isinstance(b, ast.Name) else ast.unparse(b) for b in node.bases}
            if bases & set(ROLES):
                body = node.body[1:] if ast.get_docstring(node) is not None else node.body
                if bases - set(ROLES) - {"Protocol"} or any(not isinstance(stmt, ast.Pass) for stmt in body):
                    adding.add(f"{path}:{node.name}")
    assert set() == adding
