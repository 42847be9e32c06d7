"""Load a project: sentinel.yaml, the watchers directory and the skills directory.

YAML → plain data (with lines) → ``${env:…}`` interpolation → pydantic models → checks
against the service config. Every problem of every file is collected and raised at once
as a ConfigError of ``file:line: key: message`` issues, with secrets redacted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from sentinel_hooks.config.compiled import CompiledCache, cache_file, context_digest, until_due
from sentinel_hooks.config.crosscheck import check_service, check_watcher
from sentinel_hooks.config.envvars import interpolate
from sentinel_hooks.config.issues import format_loc, validation_issues
from sentinel_hooks.config.linemap import LineMap, Loc
from sentinel_hooks.config.loaded import LoadedWatcher, WatcherSource
from sentinel_hooks.config.location import DEFAULT_CONFIG, config_path
from sentinel_hooks.config.precompile import precompiled
from sentinel_hooks.config.secrets import Redactor
from sentinel_hooks.config.service import ServerSpec, ServiceConfig
from sentinel_hooks.config.skills import Skill, load_skills
from sentinel_hooks.config.watcher import (
    WATCHER_ADAPTER,
    AnyWatcher,
    HeartbeatWatcher,
    WatcherSpec,
    watcher_model,
)
from sentinel_hooks.config.yamlfile import YamlDocument, display_path, parse_yaml, read_yaml
from sentinel_hooks.errors import ConfigError, ConfigIssue
from sentinel_hooks.heap import collection_paused

__all__ = ["DEFAULT_CONFIG", "config_path"]  # re-exported: callers import them from here too

WATCHER_SUFFIXES = (".yaml", ".yml")


API_SOURCE_PREFIX = "api:"  # the file of a watcher created through the API: ``api:{id}``


@dataclass(frozen=True)
class LoadedConfig:
    """A whole, valid project."""

    path: Path
    base_dir: Path
    service: ServiceConfig
    watchers: tuple[LoadedWatcher, ...]
    skills: Mapping[str, Skill]
    redactor: Redactor

    def watcher(self, watcher_id: str) -> LoadedWatcher | None:
        return next((w for w in self.watchers if w.spec.id == watcher_id), None)


@dataclass
class IssueCollector:
    """The issues found so far, and the values read from the environment (to redact).

    ``unresolved`` holds the ``(file, key)`` places whose ``${env:…}`` reference did not resolve
    (an unset variable): the value there is not the user's, so what the models or the checks
    would say of it, or of anything below it, only repeats that one error in other words, and
    :meth:`add` leaves it out.
    """

    issues: list[ConfigIssue] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    unresolved: set[tuple[str, str]] = field(default_factory=set)

    def problems(self, display: str, lines: LineMap, prefix: Loc, found: list[tuple[Loc, str]]) -> None:
        self.add(self._issues(display, lines, prefix, found))

    def unresolved_references(self, display: str, lines: LineMap, found: list[tuple[Loc, str]]) -> None:
        """The interpolation's problems: reported, and their keys remembered."""
        issues = self._issues(display, lines, (), found)
        self.unresolved.update((issue.file, issue.key) for issue in issues)
        self.issues.extend(issues)

    def add(self, issues: Iterable[ConfigIssue]) -> None:
        """``issues``, but those about a value whose reference did not resolve."""
        self.issues.extend(issue for issue in issues if not self._about_unresolved(issue))

    def _about_unresolved(self, issue: ConfigIssue) -> bool:
        if not self.unresolved:
            return False
        key = issue.key
        while key:
            if (issue.file, key) in self.unresolved:
                return True
            cut = max(key.rfind("."), key.rfind("["))
            key = key[:cut] if cut > 0 else ""
        return False

    @staticmethod
    def _issues(display: str, lines: LineMap, prefix: Loc, found: list[tuple[Loc, str]]) -> list[ConfigIssue]:
        issues = []
        for loc, message in found:
            full = (*prefix, *loc)
            issues.append(ConfigIssue(display, lines.line_of(full), format_loc(full), message))
        return issues


def _read(doc: YamlDocument, environ: Mapping[str, str], collector: IssueCollector) -> Any:
    if not doc.may_reference_env:
        return doc.data
    result = interpolate(doc.data, environ)
    collector.secrets |= result.secrets
    collector.unresolved_references(doc.display, doc.lines, result.problems)
    return result.data


def load_service(path: Path, environ: Mapping[str, str], collector: IssueCollector) -> ServiceConfig | None:
    display = display_path(path)
    try:
        doc = read_yaml(path, display=display)
    except ConfigError as exc:
        if not path.exists():
            collector.issues.append(
                ConfigIssue(
                    display,
                    None,
                    "",
                    "file not found (create a project with `sentinel init`, or pass -c FILE)",
                )
            )
        else:
            collector.issues.extend(exc.issues)
        return None
    data = _read(doc, environ, collector)
    if data is None:
        data = {}
    if not isinstance(data, dict):
        collector.issues.append(ConfigIssue(display, 1, "", "sentinel.yaml must be a mapping of keys"))
        return None
    try:
        service = ServiceConfig.model_validate(data)
    except ValidationError as exc:
        collector.add(validation_issues(exc, display=display, data=data, lines=doc.lines, root=ServiceConfig))
        return None
    collector.problems(display, doc.lines, (), check_service(service))
    return service


SERVER_ADDRESS_KEYS = ("host", "port", "apiToken")
"""What a management command needs of ``server`` to reach the service (``load_server``)."""


def load_server(
    path: Path, environ: Mapping[str, str], keys: Sequence[str] = SERVER_ADDRESS_KEYS
) -> ServerSpec:
    """The ``server`` keys ``keys`` of sentinel.yaml, for a command that talks to the service.

    Only those keys are interpolated and validated, so a problem elsewhere in the file (a
    variable only a target needs) does not keep the command from the service it names; a
    problem in them, or a file that is not YAML, raises ConfigError: guessing the address
    could reach another service, or another program.
    """
    display = display_path(path)
    doc = read_yaml(path, display=display)
    data = {} if doc.data is None else doc.data
    server = data.get("server") if isinstance(data, dict) else None
    if not isinstance(data, dict) or not isinstance(server, dict | None):
        key = "" if not isinstance(data, dict) else "server"
        line = doc.lines.line_of((key,)) if key else 1
        raise ConfigError([ConfigIssue(display, line, key, "must be a mapping of keys")])
    wanted = {key: value for key, value in (server or {}).items() if key in keys}
    collector = IssueCollector()
    result = interpolate({"server": wanted}, environ)
    collector.secrets |= result.secrets
    collector.unresolved_references(display, doc.lines, result.problems)
    if not collector.issues:
        try:
            return ServerSpec.model_validate(result.data["server"])
        except ValidationError as exc:
            collector.issues.extend(
                validation_issues(
                    exc,
                    display=display,
                    data=result.data["server"],
                    lines=doc.lines,
                    root=ServerSpec,
                    prefix=("server",),
                )
            )
    raise _config_error(collector)


def validate_watcher(
    data: Any,
    *,
    display: str,
    lines: LineMap,
    prefix: Loc = (),
    service: ServiceConfig | None,
    skills: Mapping[str, Skill],
    base_dir: Path,
) -> tuple[AnyWatcher | None, list[ConfigIssue]]:
    """Validate one watcher's (interpolated) data; the API's create uses this too."""
    collector = IssueCollector()
    if not isinstance(data, dict):
        where = lines.line_of(prefix)
        return None, [ConfigIssue(display, where, format_loc(prefix), "a watcher must be a mapping of keys")]
    model = watcher_model(data)
    try:
        watcher = WATCHER_ADAPTER.validate_python(data) if model is None else model.model_validate(data)
    except ValidationError as exc:
        issues = validation_issues(
            exc,
            display=display,
            data=data,
            lines=lines.sub(prefix) if prefix else lines,
            root=WatcherSpec if model is None else model,
            prefix=(),
        )
        return None, [_reprefix(issue, prefix, lines) for issue in issues]
    if service is not None:
        found = check_watcher(watcher, data, config=service, skills=skills, base_dir=base_dir)
        collector.problems(display, lines, prefix, found)
    return (watcher if not collector.issues else None), collector.issues


def _reprefix(issue: ConfigIssue, prefix: Loc, lines: LineMap) -> ConfigIssue:
    if not prefix:
        return issue
    key = format_loc(prefix) + ("." + issue.key if issue.key and not issue.key.startswith("[") else issue.key)
    return ConfigIssue(issue.file, issue.line, key, issue.message)


def load_watcher_file(
    path: Path,
    *,
    environ: Mapping[str, str],
    service: ServiceConfig | None,
    skills: Mapping[str, Skill],
    base_dir: Path,
    collector: IssueCollector,
    text: str | None = None,
) -> list[LoadedWatcher]:
    """The watchers of one file: a single mapping, or a list under ``watchers:`` (``text``: the
    file's text, already read)."""
    display = display_path(path)
    try:
        if text is None:
            doc = read_yaml(path, display=display)
        else:
            doc = parse_yaml(text, display=display, path=path)
    except ConfigError as exc:
        collector.issues.extend(exc.issues)
        return []
    data = _read(doc, environ, collector)
    if data is None:
        return []
    entries: list[tuple[Loc, Any]]
    if isinstance(data, dict) and set(data) == {"watchers"}:
        if not isinstance(data["watchers"], list):
            collector.issues.append(
                ConfigIssue(
                    display,
                    doc.lines.line_of(("watchers",)),
                    "watchers",
                    "must be a list of watchers",
                )
            )
            return []
        entries = [(("watchers", i), item) for i, item in enumerate(data["watchers"])]
    else:
        entries = [((), data)]
    loaded: list[LoadedWatcher] = []
    for prefix, item in entries:
        watcher, issues = validate_watcher(
            item,
            display=display,
            lines=doc.lines,
            prefix=prefix,
            service=service,
            skills=skills,
            base_dir=base_dir,
        )
        collector.add(issues)
        if watcher is not None:
            source = WatcherSource(display, doc.lines.line_of(prefix) if prefix else 1)
            loaded.append(LoadedWatcher.of(watcher, item, source))
    return loaded


def watcher_files(directory: Path) -> list[Path]:
    """The watcher files of a directory, in name order (hidden files skipped)."""
    if not directory.is_dir():
        return []
    with os.scandir(directory) as entries:  # one directory read; is_file() needs no stat per file
        names = sorted(
            entry.name
            for entry in entries
            if entry.name.endswith(WATCHER_SUFFIXES) and not entry.name.startswith(".") and entry.is_file()
        )
    return [directory / name for name in names]


def _load_base(
    path: Path, env: Mapping[str, str], collector: IssueCollector
) -> tuple[ServiceConfig | None, dict[str, Skill], Path]:
    """sentinel.yaml and the skills: ``(service, skills, watchers_dir)``; problems are collected."""
    service = load_service(path, env, collector)
    skills_dir = path.parent / (service.skills_dir if service else "skills")
    skills, skill_issues = load_skills(skills_dir)
    collector.issues.extend(skill_issues)
    watchers_dir = path.parent / (service.watchers_dir if service else "watchers")
    if service is not None and "watchersDir" in service.model_fields_set and not watchers_dir.is_dir():
        collector.issues.append(
            ConfigIssue(
                display_path(path),
                None,
                "watchersDir",
                f"directory {str(watchers_dir)!r} not found",
            )
        )
    return service, skills, watchers_dir


def _config_error(collector: IssueCollector) -> ConfigError:
    """Every collected issue, in file order, secrets redacted."""
    redactor = Redactor(collector.secrets)
    return ConfigError([_redacted(issue, redactor) for issue in _in_file_order(collector.issues)])


def load_config(
    path: Path, *, environ: Mapping[str, str] | None = None, compiled: bool = False
) -> LoadedConfig:
    """Load and validate a whole project; raise ConfigError listing every problem.

    With ``compiled`` (``sentinel validate`` and ``sentinel run``), watcher files unchanged since
    a load that kept them are taken from the compiled cache instead of being read again, and
    the cache is written after a load without problems (``config.compiled``).

    The garbage collector is paused meanwhile (``heap.collection_paused``): what a load makes
    lives on or is freed by reference counting, and the collections would walk every watcher
    loaded so far (10,000 one-line watchers: 1.8 s with them, 0.9 s without).
    """
    with collection_paused():
        return _load_config(path, os.environ if environ is None else environ, compiled)


def _load_config(path: Path, env: Mapping[str, str], compiled: bool) -> LoadedConfig:
    collector = IssueCollector()
    path = path.absolute()
    base_dir = path.parent
    service, skills, watchers_dir = _load_base(path, env, collector)
    cache = None
    if compiled and service is not None and not collector.issues:
        cache = CompiledCache.open(cache_file(path, env), context_digest(service, list(skills), base_dir))
    try:
        return _load_watchers(path, service, skills, watchers_dir, cache, env, collector)
    finally:
        if cache is not None:
            cache.close()


def _load_watchers(
    path: Path,
    service: ServiceConfig | None,
    skills: Mapping[str, Skill],
    watchers_dir: Path,
    cache: CompiledCache | None,
    env: Mapping[str, str],
    collector: IssueCollector,
) -> LoadedConfig:
    """The rest of ``load_config`` once sentinel.yaml and the skills are read."""
    base_dir = path.parent
    watchers: list[LoadedWatcher] = []
    seen: dict[str, LoadedWatcher] = {}
    for file in watcher_files(watchers_dir):
        for loaded in _file_watchers(
            file,
            cache,
            environ=env,
            service=service,
            skills=skills,
            base_dir=base_dir,
            collector=collector,
        ):
            first = seen.get(loaded.spec.id)
            if first is not None:
                collector.issues.append(
                    ConfigIssue(
                        loaded.file,
                        loaded.line,
                        "id",
                        f"watcher id {loaded.spec.id!r} is already used at {first.file}:{first.line}",
                    )
                )
                continue
            seen[loaded.spec.id] = loaded
            watchers.append(loaded)
    collector.issues.extend(shared_ping_keys(watchers))
    if service is not None and len(watchers) > service.limits.max_watchers:
        collector.issues.append(
            ConfigIssue(
                display_path(path),
                None,
                "limits.maxWatchers",
                f"{len(watchers)} watchers exceed the limit of {service.limits.max_watchers}",
            )
        )
    if collector.issues or service is None:
        raise _config_error(collector)
    if cache is not None:
        cache.save()
    return LoadedConfig(path, base_dir, service, tuple(watchers), skills, Redactor(collector.secrets))


WatcherChunks = Iterator[list[LoadedWatcher]]
"""A project's watchers a chunk at a time, read as they are asked for (``load_streamed``)."""


def load_streamed(
    path: Path, *, environ: Mapping[str, str] | None = None
) -> tuple[LoadedConfig, WatcherChunks | None]:
    """``load_config(path, compiled=True)`` for ``sentinel run``, its watchers streamed when it can.

    When the compiled cache covers the project whole (every watcher file, and no other, kept
    with its bytes now: it loaded without a problem, checks across files included, under this
    context), the answer is the project without watchers and the chunks of them, those polling
    soonest first, each read from the cache when asked for: the service starts the watchers of a
    chunk before the next is read, so the first polls do not wait for a million to be read. A
    chunk that cannot be read (the cache damaged meanwhile) raises ``ConfigError``. When the
    cache does not cover a large project (no cache, a file changed, added or removed), a child
    process validates it and writes the cache first (``config.precompile``: a project validated
    in this process would keep the holes its validation leaves in memory), with the process's
    environment only. Otherwise the project is loaded whole, and None.
    """
    env = os.environ if environ is None else environ
    with collection_paused():
        collector = IssueCollector()
        path = path.absolute()
        service, skills, watchers_dir = _load_base(path, env, collector)
        if collector.issues or service is None:
            raise _config_error(collector)
        cache = CompiledCache.open(cache_file(path, env), context_digest(service, list(skills), path.parent))
        files = watcher_files(watchers_dir)
        if environ is None and not cache.covers(files) and precompiled(path, cache.path, files):
            cache.close()  # the child wrote it anew: read what it wrote
            cache = CompiledCache.open(cache.path, cache.context)
        if cache.covers(files):
            config = LoadedConfig(path, path.parent, service, (), skills, Redactor(collector.secrets))
            return config, _chunks(cache, files)
        try:
            return _load_watchers(path, service, skills, watchers_dir, cache, env, collector), None
        finally:
            cache.close()


def _chunks(cache: CompiledCache, files: Sequence[Path]) -> WatcherChunks:
    """The kept watchers of ``files``, a chunk at a time, soonest to poll first; closes ``cache``."""
    now_us = time.time_ns() // 1000
    places = [(display_path(file), offset, key) for file in files for offset, key in cache.chunks(file)]
    places.sort(key=lambda place: until_due(place[2], now_us))
    try:
        for display, offset, _ in places:
            try:
                rows = cache.chunk(offset)
            except Exception as exc:
                issue = ConfigIssue(
                    str(cache.path), None, "cache", f"the compiled cache cannot be read ({exc}); remove it"
                )
                raise ConfigError([issue]) from exc
            yield [LoadedWatcher(spec, data, display, line, at) for spec, data, line, at in rows]
    finally:
        cache.close()


def _file_watchers(
    file: Path,
    cache: CompiledCache | None,
    *,
    environ: Mapping[str, str],
    service: ServiceConfig | None,
    skills: Mapping[str, Skill],
    base_dir: Path,
    collector: IssueCollector,
) -> list[LoadedWatcher]:
    """``load_watcher_file``, or the file's watchers from ``cache`` when it kept these bytes."""
    read = partial(
        load_watcher_file,
        environ=environ,
        service=service,
        skills=skills,
        base_dir=base_dir,
        collector=collector,
    )
    if cache is None:
        return read(file)
    display = display_path(file)
    try:
        content = file.read_bytes()
        text = content.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return read(file)  # which says what is wrong
    rows = cache.rows(file, content)
    if rows is not None:
        return [LoadedWatcher(spec, data, display, line, at) for spec, data, line, at in rows]
    before = len(collector.issues)
    loaded = read(file, text=text)
    clean = len(collector.issues) == before and all(w.spec.fire.operator_goal_file is None for w in loaded)
    cache.keep(file, content, [(w.spec, w.data, w.line, w.at) for w in loaded], clean=clean)
    return loaded


def shared_ping_keys(watchers: Iterable[LoadedWatcher]) -> list[ConfigIssue]:
    """An issue for each heartbeat watcher whose pingKey an earlier one has: a ping could not
    tell them apart. The message names both watchers and where they are, never the key."""
    return [ping_key_issue(later, earlier) for later, earlier in ping_key_clashes(watchers)]


def ping_key_clashes(watchers: Iterable[LoadedWatcher]) -> list[tuple[LoadedWatcher, LoadedWatcher]]:
    """Each heartbeat watcher whose pingKey an earlier one in ``watchers`` has, with that one."""
    first: dict[str, LoadedWatcher] = {}
    clashes: list[tuple[LoadedWatcher, LoadedWatcher]] = []
    for loaded in watchers:
        spec = loaded.spec
        if not isinstance(spec, HeartbeatWatcher):
            continue
        other = first.setdefault(spec.ping_key.get_secret_value(), loaded)
        if other is not loaded:
            clashes.append((loaded, other))
    return clashes


def ping_key_issue(later: LoadedWatcher, earlier: LoadedWatcher) -> ConfigIssue:
    """``later`` has ``earlier``'s pingKey: the issue at ``later``'s place, naming both (not the key)."""
    source = earlier.source
    if source.file.startswith(API_SOURCE_PREFIX):
        where = "created through the API"
    else:
        where = "at " + (source.file if source.line is None else f"{source.file}:{source.line}")
    return ConfigIssue(
        later.source.file,
        later.source.line,
        "pingKey",
        f"heartbeat watchers {later.spec.id!r} and {earlier.spec.id!r} ({where}) have the same "
        "pingKey; give each its own (a ping could not tell them apart)",
    )


def load_without_watchers(path: Path, *, environ: Mapping[str, str] | None = None) -> LoadedConfig:
    """sentinel.yaml and the skills, validated; no watcher file is read."""
    env = os.environ if environ is None else environ
    collector = IssueCollector()
    path = path.absolute()
    service, skills, _ = _load_base(path, env, collector)
    if collector.issues or service is None:
        raise _config_error(collector)
    return LoadedConfig(path, path.parent, service, (), skills, Redactor(collector.secrets))


def load_one_watcher(
    path: Path, watcher_id: str, *, environ: Mapping[str, str] | None = None
) -> LoadedConfig | None:
    """The project with only the watcher ``watcher_id``, or None when no watcher file names it.

    Validates what that watcher needs: sentinel.yaml, the skills, and the watcher files whose
    text contains the id (all their watchers); the other files are not read beyond that
    search. Problems in those files raise ConfigError as :func:`load_config` would, and so
    does the id appearing in two of them. A None answer leaves it to :func:`load_config`
    (an id spelt with escapes or taken from the environment, or an id that does not exist).
    """
    env = os.environ if environ is None else environ
    collector = IssueCollector()
    path = path.absolute()
    service, skills, watchers_dir = _load_base(path, env, collector)
    if collector.issues or service is None:
        raise _config_error(collector)
    found: list[LoadedWatcher] = []
    needle = watcher_id.encode("utf-8", "surrogatepass")  # a lone surrogate matches no valid file
    for file in watcher_files(watchers_dir):
        try:
            content = file.read_bytes()
            if needle not in content:  # UTF-8 bytes contain the id's bytes where the text contains it
                continue
            content.decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # load_config reports it, if the watcher is not found elsewhere
        loaded = load_watcher_file(
            file, environ=env, service=service, skills=skills, base_dir=path.parent, collector=collector
        )
        found.extend(w for w in loaded if w.spec.id == watcher_id)
    for again in found[1:]:
        first = found[0].source
        collector.issues.append(
            ConfigIssue(
                again.source.file,
                again.source.line,
                "id",
                f"watcher id {watcher_id!r} is already used at {first.file}:{first.line}",
            )
        )
    if collector.issues:
        raise _config_error(collector)
    if not found:
        return None
    return LoadedConfig(path, path.parent, service, (found[0],), skills, Redactor(collector.secrets))


def _in_file_order(issues: list[ConfigIssue]) -> list[ConfigIssue]:
    """Files in the order first met, each file's issues by line."""
    rank = {file: i for i, file in reversed(list(enumerate(issue.file for issue in issues)))}
    return sorted(issues, key=lambda issue: (rank[issue.file], issue.line or 0))


def _redacted(issue: ConfigIssue, redactor: Redactor) -> ConfigIssue:
    return ConfigIssue(issue.file, issue.line, issue.key, redactor.text(issue.message))
