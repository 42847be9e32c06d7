"""``sentinel import openclaw FILE``: openclaw-sentinel watchers → watcher files (SPEC.md §16).

The conversion is ``config.openclaw`` (pure); this module finds the project (where to write,
which skills exist, which hosts are allowed), refuses to overwrite files unless ``--force``,
writes one file per watcher and reports every field that was not carried over.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sentinel_hooks.cli.exits import EXIT_OK
from sentinel_hooks.cli.output import print_json
from sentinel_hooks.config.location import config_path
from sentinel_hooks.errors import ConfigError, SentinelError

if TYPE_CHECKING:
    from sentinel_hooks.config.openclaw import Conversion, Note

DEFAULT_OUT = Path("watchers")


@dataclass(frozen=True)
class Project:
    """What the import needs to know of the project it writes into."""

    out_dir: Path
    config: Path | None = None
    skills: frozenset[str] = frozenset()
    allowed_hosts: tuple[str, ...] | None = None  # None: no sentinel.yaml was read
    min_interval_ms: int = 1000
    max_goal_chars: int = 12000
    max_conditions: int = 25


@dataclass
class Planned:
    """One converted watcher and the file it goes to (None when it was not imported)."""

    conversion: Conversion
    path: Path | None
    notes: list[Note] = field(default_factory=list)


def find_project(config: str | None, out: Path | None) -> Project:
    """The project of ``-c``/$SENTINEL_CONFIG/./sentinel.yaml, if there is one.

    Without ``--out`` the files go to its ``watchersDir`` (./watchers when there is no
    sentinel.yaml); a sentinel.yaml that does not load is an error then, as the place to write
    is unknown. With ``--out``, an unreadable sentinel.yaml is only a missed hint.
    """
    path = config_path(config, os.environ)
    if not path.exists() and config is None and "SENTINEL_CONFIG" not in os.environ:
        return Project(out or DEFAULT_OUT)
    from sentinel_hooks.config.loader import IssueCollector, load_service
    from sentinel_hooks.config.skills import load_skills

    collector = IssueCollector()
    service = load_service(path, os.environ, collector)
    if service is None:
        if out is None:
            raise ConfigError(collector.issues)
        return Project(out)
    base = path.parent
    skills, _ = load_skills(base / service.skills_dir)
    return Project(
        out_dir=out or base / service.watchers_dir,
        config=path,
        skills=frozenset(skills),
        allowed_hosts=tuple(service.allowed_hosts),
        min_interval_ms=service.limits.min_interval_ms,
        max_goal_chars=service.max_operator_goal_chars,
        max_conditions=service.limits.max_conditions_per_watcher,
    )


def _read(file: str) -> str:
    if file == "-":
        return sys.stdin.read()
    try:
        return Path(file).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise SentinelError(f"{file}: file not found") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise SentinelError(f"cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from exc


def plan(file: str, project: Project) -> list[Planned]:
    """Convert every watcher of ``file``; a repeated id is not imported twice."""
    from sentinel_hooks.config.openclaw import Conversion, Note, convert_watcher, read_watchers, visible

    name = "stdin" if file == "-" else visible(file)
    planned: list[Planned] = []
    seen: set[str] = set()
    for raw in read_watchers(_read(file), name=name):
        conversion = convert_watcher(
            raw,
            skills=project.skills,
            min_interval_ms=project.min_interval_ms,
            max_goal_chars=project.max_goal_chars,
            max_conditions=project.max_conditions,
        )
        watcher = conversion.watcher
        if watcher is not None and watcher["id"] in seen:
            conversion = Conversion(
                conversion.source_id,
                None,
                [Note("id", "dropped", "not imported: the id is repeated in the input")],
            )
        if conversion.watcher is not None:
            seen.add(conversion.watcher["id"])
        path = (
            project.out_dir / f"{conversion.watcher['id']}.yaml" if conversion.watcher is not None else None
        )
        planned.append(Planned(conversion, path))
    return planned


def missing_hosts(planned: list[Planned], project: Project) -> list[str]:
    """Hosts the imported watchers reach that allowedHosts does not list (all, without a config)."""
    from sentinel_hooks.config.hosts import host_allowed

    hosts = sorted({p.conversion.host for p in planned if p.path is not None and p.conversion.host})
    if project.allowed_hosts is None:
        return hosts
    return [host for host in hosts if not host_allowed(host, project.allowed_hosts)]


def write(planned: list[Planned], source: str, *, force: bool) -> list[Path]:
    """Write every planned file, or none when one exists already and ``force`` is not set."""
    from sentinel_hooks.config.openclaw import watcher_yaml

    targets = [(p, p.path) for p in planned if p.path is not None]
    existing = [path for _, path in targets if path.exists()]
    if existing and not force:
        shown = ", ".join(str(path) for path in existing[:3]) + (" …" if len(existing) > 3 else "")
        raise SentinelError(
            f"{shown} already exist(s); nothing written: pass --force to overwrite, or choose --out DIR"
        )
    written: list[Path] = []
    for item, path in targets:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(watcher_yaml(item.conversion, source), encoding="utf-8")
        except OSError as exc:
            raise SentinelError(f"cannot write {path}: {exc.strerror or exc}") from exc
        written.append(path)
    return written


def report_json(planned: list[Planned], hosts: list[str], project: Project) -> dict[str, Any]:
    """The ``--json`` body: every watcher with its file (or null) and its notes."""
    return {
        "written": [str(p.path) for p in planned if p.path is not None],
        "watchers": [
            {
                "id": p.conversion.source_id,
                "file": None if p.path is None else str(p.path),
                "imported": p.path is not None,
                "notes": [{"path": n.path, "kind": n.kind, "reason": n.reason} for n in p.conversion.notes],
            }
            for p in planned
        ],
        "hostsToAllow": hosts,
        "config": None if project.config is None else str(project.config),
    }


LABELS = {"dropped": "not carried over", "changed": "changed", "hint": "check"}


def report_text(planned: list[Planned], hosts: list[str], project: Project) -> str:
    """The readable report: one block per watcher, then what to do next. Upstream text in it is
    made visible (a line break or a terminal escape in a value prints as its escape)."""
    from sentinel_hooks.config.openclaw import visible

    lines: list[str] = []
    for item in planned:
        notes = item.conversion.notes
        if item.path is None:
            lines.append(f"skipped {visible(item.conversion.source_id)}")
        else:
            lines.append(f"wrote {item.path}" + ("" if notes else " (everything carried over)"))
        lines += [f"  {LABELS[note.kind]}: {visible(str(note))}" for note in notes]
    if hosts:
        where = f"in {project.config}" if project.config else "in sentinel.yaml"
        lines.append(f"next: add to allowedHosts {where}: {', '.join(hosts)}")
    config = f" -c {project.config}" if project.config else ""
    lines.append(f"then: sentinel validate{config}")
    return "\n".join(lines)


@click.group("import")
def import_group() -> None:
    """Convert watchers of other tools into Sentinel watcher files."""


@import_group.command("openclaw")
@click.argument("file", metavar="FILE")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    default=None,
    metavar="DIR",
    help="where to write the watcher files (default: the config's watchersDir, else ./watchers)",
)
@click.option(
    "--config",
    "-c",
    "config",
    default=None,
    metavar="FILE",
    help="sentinel.yaml (default: $SENTINEL_CONFIG, else ./sentinel.yaml)",
)
@click.option("--force", is_flag=True, help="overwrite existing watcher files")
@click.option("--json", "as_json", is_flag=True, help="print JSON instead of text")
def openclaw(file: str, out: Path | None, config: str | None, force: bool, as_json: bool) -> int:
    """Convert openclaw-sentinel watchers in FILE (JSON; - for stdin) into watcher files."""
    from sentinel_hooks.config.openclaw import visible

    project = find_project(config, out)
    planned = plan(file, project)
    if not any(p.path is not None for p in planned):
        reasons = "; ".join(f"{p.conversion.source_id}: {p.conversion.notes[-1]}" for p in planned)
        raise SentinelError(f"no watcher could be imported ({visible(reasons)})")
    write(planned, "stdin" if file == "-" else Path(file).name, force=force)
    hosts = missing_hosts(planned, project)
    if as_json:
        print_json(report_json(planned, hosts, project))
    else:
        click.echo(report_text(planned, hosts, project))
    return EXIT_OK
