"""The Dockerfile and docker-compose.yml as a reproducible build needs them (issue 27; docs/deploy.md).

Read from the files, no engine needed: no BuildKit frontend fetched from a registry, locked
dependencies in a layer before the sources, every image pinned, the package index passed in as
build configuration, rotated logs, an init, early healthchecks, and a reload command that keeps
the restart policy. tests/deploy/test_compose_run.py builds and runs the result for real.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.deploy.engine import read_lock
from tests.deploy.layout import DOCKERFILE, ROOT, compose, dockerfile_instructions, interpolate

LOCK = ROOT / "deploy" / "requirements.lock"
BUILD_LOCK = ROOT / "deploy" / "build-requirements.lock"
INDEX_SETTINGS = ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_TRUSTED_HOST", "PIP_FIND_LINKS")
EXACT_VERSION = re.compile(r":v?\d+\.\d+\.\d+[^:@]*(@sha256:[0-9a-f]{64})?$")


def build_stage() -> list[tuple[str, str]]:
    """The instructions of the Dockerfile's first stage (``FROM … AS build`` to the next FROM)."""
    instructions = dockerfile_instructions()
    start = next(i for i, (k, v) in enumerate(instructions) if k == "FROM" and v.endswith(" AS build"))
    end = next(i for i, (k, _) in enumerate(instructions) if k == "FROM" and i > start)
    return instructions[start + 1 : end]


def regenerate(lock: Path) -> str:
    """The command that made ``lock``, from its header (what to run when this test fails)."""
    header = lock.read_text(encoding="utf-8").splitlines()[:2]
    return header[1].lstrip("# ").strip()


def unlocked(requirements: list[str], lock: Path) -> list[str]:
    """Requirements the lock lacks, or pins to a version they do not allow."""
    pins = {entry.name: entry.version for entry in read_lock(lock)}
    missing = []
    for text in requirements:
        requirement = Requirement(text)
        pinned = pins.get(canonicalize_name(requirement.name))
        if pinned is None or not requirement.specifier.contains(pinned, prereleases=True):
            missing.append(f"{text} (locked: {pinned})")
    return missing


def test_dockerfile_fetches_no_frontend_image() -> None:
    """No `# syntax=` parser directive: BuildKit would pull that frontend from Docker Hub on every build."""
    first_lines = DOCKERFILE.read_text(encoding="utf-8").splitlines()[:5]
    assert [] == [line for line in first_lines if re.match(r"#\s*syntax\s*=", line, re.IGNORECASE)]


def test_every_pyproject_dependency_is_locked_with_hashes() -> None:
    """deploy/requirements.lock pins every dependency of pyproject.toml, the build lock its build backend."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for requirements, lock in (
        (pyproject["project"]["dependencies"], LOCK),
        (pyproject["build-system"]["requires"], BUILD_LOCK),
    ):
        missing = unlocked(requirements, lock)
        assert [] == missing, f"{lock.name} is stale; regenerate it with: {regenerate(lock)}"
        unhashed = [e.name for e in read_lock(lock) if "--hash=sha256:" not in e.text]
        assert [] == unhashed, f"{lock.name}: entries without hashes; regenerate it with: {regenerate(lock)}"


def test_locked_dependencies_are_installed_before_the_sources_are_copied() -> None:
    """A change to src/ must not reinstall the dependencies: their layer comes first, from the locks alone."""
    stage = build_stage()
    copy_locks = next(i for i, (k, v) in enumerate(stage) if k == "COPY" and "requirements.lock" in v)
    install = next(i for i, (k, v) in enumerate(stage) if k == "RUN" and "--require-hashes" in v)
    copy_sources = next(i for i, (k, v) in enumerate(stage) if k == "COPY" and v.split()[0] == "src")
    project = next(i for i, (k, v) in enumerate(stage) if k == "RUN" and "/dist/" in v)
    assert (True, True, True) == (
        copy_locks < install < copy_sources < project,
        "--no-deps" in stage[project][1],
        "venv --without-pip /opt/sentinel" in stage[install][1],
    )


def test_images_are_pinned_and_the_base_images_replaceable() -> None:
    """Exact versions everywhere (the Python and Redis images by digest too), no `latest`; the
    Python and Redis images can be replaced from the environment, with the same Python default."""
    services = compose()["services"]
    images = {
        name: interpolate(str(spec["image"]), {}) for name, spec in services.items() if "build" not in spec
    }
    [dockerfile_default] = [
        v.split("=", 1)[1] for k, v in dockerfile_instructions() if k == "ARG" and "PYTHON_IMAGE=" in v
    ]
    compose_python = str(services["sentinel"]["build"]["args"]["PYTHON_IMAGE"])
    images["sentinel (Python base)"] = interpolate(compose_python, {})
    assert {} == {name: image for name, image in images.items() if not EXACT_VERSION.search(image)}
    assert (True, True, dockerfile_default) == (
        "@sha256:" in images["redis"] and "@sha256:" in dockerfile_default,
        str(services["redis"]["image"]).startswith("${SENTINEL_REDIS_IMAGE:-")
        and compose_python.startswith("${SENTINEL_PYTHON_IMAGE:-"),
        images["sentinel (Python base)"],
    )


def test_the_package_index_is_build_configuration() -> None:
    """The build stage takes the pip index settings as ARGs; compose passes each from the environment."""
    declared = {v.split("=")[0] for k, v in build_stage() if k == "ARG"}
    args = compose()["services"]["sentinel"]["build"]["args"]
    assert ({*INDEX_SETTINGS}, {name: f"${{{name}:-}}" for name in INDEX_SETTINGS}) == (
        declared & set(INDEX_SETTINGS),
        {name: args.get(name) for name in INDEX_SETTINGS},
    )


def test_every_service_rotates_its_logs() -> None:
    """json-file with max-size and max-file on every service: an outage cannot fill the disk."""
    logging = {name: spec.get("logging") for name, spec in compose()["services"].items()}
    rotated = {"driver": "json-file", "options": {"max-size": "10m", "max-file": "3"}}
    assert dict.fromkeys(logging, rotated) == logging


def test_services_run_under_an_init_and_are_checked_early() -> None:
    """sentinel and redis run under `init: true`; their first healthcheck comes within 5 s, with
    options Docker 20.10 understands (no start_interval)."""
    services = compose()["services"]
    [healthcheck] = [v for k, v in dockerfile_instructions() if k == "HEALTHCHECK"]
    image_interval = re.search(r"--interval=(\d+)s", healthcheck)
    assert image_interval is not None
    actual = {
        name: (services[name].get("init"), services[name]["healthcheck"]["interval"])
        for name in ("sentinel", "redis")
    }
    assert ({"sentinel": (True, "5s"), "redis": (True, "3s")}, 5, False) == (
        actual,
        int(image_interval.group(1)),
        "start-interval" in healthcheck
        or any("start_interval" in s.get("healthcheck", {}) for s in services.values()),
    )


def test_the_documented_reload_keeps_the_restart_policy() -> None:
    """Docs tell people to reload through `exec … kill -HUP 1`, never `docker (compose) kill -s`,
    which makes Docker stop restarting the container."""
    texts = {path: path.read_text(encoding="utf-8") for path in [*ROOT.glob("docs/*.md"), ROOT / "README.md"]}
    advised = [  # a paragraph that names `kill -s` must be the warning against it
        f"{path.name}: {paragraph.strip()}"
        for path, text in texts.items()
        for paragraph in text.split("\n\n")
        if re.search(r"docker (compose )?kill -s", paragraph) and "no longer" not in paragraph
    ]
    assert ([], True) == (
        advised,
        "docker compose exec sentinel sh -c 'kill -HUP 1'" in texts[ROOT / "docs" / "deploy.md"],
    )
