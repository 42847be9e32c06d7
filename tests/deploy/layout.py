"""The container as Dockerfile and docker-compose.yml describe it, replayed on this machine.

No Docker engine runs in CI, so the deployment tests read the image's ENTRYPOINT/CMD/WORKDIR and
HEALTHCHECK and the compose service's volumes and environment, map every container path onto a
temporary directory (bind mounts are copied there, named volumes are empty directories) and run
the very same command locally. Only what cannot exist outside compose is rewritten: the store
(the `redis` service's host), the listening address and port.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from tests.cli.conftest import sentinel_command

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
COMPOSE_FILE = ROOT / "docker-compose.yml"
EXAMPLE = ROOT / "deploy" / "example"
CONTAINER_PORT = 8765

_COMPOSE_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs, continuation lines joined and comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        keyword, _, arguments = text.partition(" ")
        instructions.append((keyword.upper(), arguments.strip()))
    return instructions


def last_instruction(name: str) -> str:
    """The arguments of the last ``name`` instruction (the one that counts in the final image)."""
    found = [arguments for keyword, arguments in dockerfile_instructions() if keyword == name]
    assert found, f"the Dockerfile has no {name}"
    return found[-1]


def exec_form(name: str) -> list[str]:
    """ENTRYPOINT or CMD as its JSON array (the exec form; a shell form is a test failure)."""
    value = json.loads(last_instruction(name))
    assert isinstance(value, list), f"{name} must be a JSON array"
    return [str(part) for part in value]


def healthcheck_command() -> list[str]:
    """The exec-form command of the Dockerfile's HEALTHCHECK (its options dropped)."""
    _, marker, command = last_instruction("HEALTHCHECK").partition("CMD ")
    assert marker, "HEALTHCHECK must run a command (CMD [...])"
    return [str(part) for part in json.loads(command)]


def compose() -> dict[str, Any]:
    """docker-compose.yml as plain data."""
    data = YAML(typ="safe", pure=True).load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(data, dict)
    return data


def interpolate(value: str, environ: dict[str, str]) -> str:
    """Compose's ``${NAME}``, ``${NAME:-default}`` and ``${NAME:?message}`` (``$$`` is ``$``)."""

    def replace(match: re.Match[str]) -> str:
        name, operator, argument = match.group(1), match.group(2), match.group(3)
        present = environ.get(name)
        if operator in (":?", "?") and not present:
            raise AssertionError(f"compose refuses to start without {name}: {argument}")
        if operator in (":-", "-") and not present:
            return argument or ""
        return present or ""

    return _COMPOSE_VARIABLE.sub(replace, value).replace("$$", "$")


@dataclass
class LocalContainer:
    """The sentinel service's command, environment and mounts, mapped onto ``root``."""

    root: Path
    port: int
    environ: dict[str, str]
    paths: dict[str, Path] = field(default_factory=dict)  # container path → local path
    argv: list[str] = field(default_factory=list)
    cwd: Path = Path()
    env: dict[str, str] = field(default_factory=dict)

    def local(self, container_path: str) -> Path:
        """The local path that stands for ``container_path``."""
        for inside in sorted(self.paths, key=len, reverse=True):
            if container_path == inside or container_path.startswith(inside.rstrip("/") + "/"):
                return self.paths[inside] / container_path[len(inside) :].lstrip("/")
        raise AssertionError(f"{container_path} is neither mounted nor the WORKDIR")

    @property
    def config(self) -> Path:
        """The local copy of the config the command names with ``-c``."""
        return Path(self.argv[self.argv.index("-c") + 1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def prepare(root: Path, *, store: str, environ: dict[str, str]) -> LocalContainer:
    """Lay out the sentinel service under ``root`` and compute its local command and environment."""
    service = compose()["services"]["sentinel"]
    box = LocalContainer(root=root, port=free_port(), environ=environ)
    for volume in service["volumes"]:
        source, inside = str(volume).split(":")[:2]
        if source.startswith((".", "/")):
            local = root / "mounts" / inside.strip("/").replace("/", "_")
            shutil.copytree((ROOT / source).resolve(), local)
        else:
            local = root / "volumes" / source
            local.mkdir(parents=True)
        box.paths[inside] = local
    workdir = last_instruction("WORKDIR")
    box.paths[workdir] = root / "workdir"
    box.cwd = root / "workdir"
    box.cwd.mkdir()
    entrypoint = service.get("entrypoint") or exec_form("ENTRYPOINT")
    command = service.get("command") or exec_form("CMD")
    assert "sentinel" == entrypoint[0], "the image must start the `sentinel` command"
    translated = [str(box.local(arg)) if arg.startswith("/") else arg for arg in [*entrypoint, *command]]
    box.argv = [*sentinel_command(), *translated[1:]]
    environment = service.get("environment") or {}
    if isinstance(environment, list):
        environment = dict(item.split("=", 1) for item in environment)
    box.env = {k: v for k, v in environ.items() if not k.startswith("SENTINEL_")}
    box.env.update({key: interpolate(str(value), environ) for key, value in environment.items()})
    _rewrite_project(box, store)
    return box


def _rewrite_project(box: LocalContainer, store: str) -> None:
    """Container paths and the port in every YAML file; then the store and the listening address."""
    for path in box.config.parent.rglob("*.yaml"):
        text = path.read_text(encoding="utf-8")
        for inside in sorted(box.paths, key=len, reverse=True):
            text = text.replace(inside, str(box.paths[inside]))
        text = text.replace(f"127.0.0.1:{CONTAINER_PORT}", f"127.0.0.1:{box.port}")
        path.write_text(text, encoding="utf-8")
    yaml = YAML(typ="rt")
    document = yaml.load(box.config.read_text(encoding="utf-8"))
    document["store"] = store
    document["server"]["host"] = "127.0.0.1"
    document["server"]["port"] = box.port
    with box.config.open("w", encoding="utf-8") as out:
        yaml.dump(document, out)


def local_healthcheck(command: list[str], port: int) -> list[str]:
    """A container healthcheck command as it runs here: this Python, this port."""
    if command and command[0] in ("CMD", "CMD-SHELL"):
        assert "CMD" == command[0], "the healthcheck must use the exec form (no shell in the image)"
        command = command[1:]
    assert command[0] in ("python", "python3"), "the healthcheck needs no tool beyond Python"
    return [sys.executable, *(part.replace(f":{CONTAINER_PORT}/", f":{port}/") for part in command[1:])]
