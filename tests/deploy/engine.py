"""A Docker engine of the test's own, a base image made without any registry, a package index on 127.0.0.1.

``tests/deploy/test_compose_run.py`` builds the image and runs docker-compose.yml for real, the way
someone offline or behind a mirror does, and leaves nothing behind:

- ``Engine`` starts Debian's ``dockerd`` with its own data root, exec root, pid file and socket in
  a directory of its own, no iptables rules, no default bridge and no IP forwarding: it never
  touches another daemon or the machine's network settings. ``stop`` removes what compose left
  (the project's bridge interfaces included), stops the daemon and deletes its directory.
- ``base_tarball`` is a Debian root made by ``debootstrap`` from the mirror apt uses here, with
  python3, venv, pip and redis-server; ``docker import`` makes it the image both services build
  on or run (passed as the Dockerfile's PYTHON_IMAGE and compose's SENTINEL_REDIS_IMAGE). It is
  cached in ``CACHE`` between runs.
- ``PackageIndex`` downloads the locked wheels with this machine's pip and its configuration
  (whatever index or mirror it uses) and serves them as a PEP 503 index on 127.0.0.1, given to
  the build as PIP_INDEX_URL.

Locally each missing tool skips the test; with ``CI`` set it fails it (``.ci/run`` installs
docker.io, docker-compose and debootstrap).
"""

from __future__ import annotations

import contextlib
import hashlib
import html
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import unavailable, wait_until

CACHE = Path(os.environ.get("SENTINEL_TEST_CACHE", "/var/cache/sentinel-tests"))
SUITE = "bookworm"
BASE_PACKAGES = ("python3", "python3-venv", "python3-pip", "python-is-python3", "redis-server")
BASE_IMAGE = "sentinel-test/base:bookworm"
DEBIAN_PACKAGES = "docker.io, docker-compose and debootstrap"


def tool(name: str, *candidates: str) -> str:
    """The path of ``name`` (or the first existing candidate); skip locally, fail in CI."""
    for path in (*candidates, shutil.which(name)):
        if path and os.access(path, os.X_OK):
            return path
    return unavailable(
        f"{name} is not installed (Debian's {DEBIAN_PACKAGES} provide what this test needs)",
        in_ci=".ci/run installs them",
    )


def require_root() -> None:
    """dockerd and debootstrap need root; skip locally without it, fail in CI."""
    if os.geteuid() != 0:
        unavailable("the compose test runs dockerd and debootstrap, which need root", in_ci="CI runs as root")


def run(argv: list[str], *, timeout: float, env: dict[str, str] | None = None, **kwargs: Any) -> str:
    """Run ``argv``; its stdout, or an assertion error with both outputs."""
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=timeout, env=env, check=False, **kwargs
    )
    assert 0 == done.returncode, f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


# --- the base image -------------------------------------------------------------------------


def debian_mirror(sources: Path = Path("/etc/apt")) -> str:
    """The URI apt uses here for Debian's main archive (not the security one)."""
    files = [sources / "sources.list", *sorted((sources / "sources.list.d").glob("*"))]
    for path in files:
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        uris = re.findall(r"^URIs:\s*(.+)$", text, re.MULTILINE)  # deb822 .sources
        uris += re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+" + SUITE + r"\s", text, re.MULTILINE)
        for uri in (u for line in uris for u in line.split()):
            if re.search(r"/debian/?$", uri):
                return uri
    raise AssertionError(f"no Debian mirror for {SUITE} in {sources}/sources.list*")


def base_tarball() -> Path:
    """A ``debootstrap --variant=minbase`` root with ``BASE_PACKAGES`` as a tar file, cached in ``CACHE``."""
    mirror = debian_mirror()
    key = hashlib.sha256(f"{SUITE} {mirror} {' '.join(BASE_PACKAGES)}".encode()).hexdigest()[:16]
    tarball = CACHE / f"{SUITE}-minbase-{key}.tar"
    if tarball.exists():
        return tarball
    debootstrap = tool("debootstrap", "/usr/sbin/debootstrap")
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="debootstrap-", dir=CACHE) as work:
        root = Path(work) / "root"
        run(
            [
                debootstrap,
                "--variant=minbase",
                f"--include={','.join(BASE_PACKAGES)}",
                SUITE,
                str(root),
                mirror,
            ],
            timeout=900,
        )
        partial_tar = Path(work) / "root.tar"
        run(["tar", "-C", str(root), "-cf", str(partial_tar), "."], timeout=300)
        partial_tar.rename(tarball)
    return tarball


# --- the engine -----------------------------------------------------------------------------


class Engine:
    """``dockerd`` of this test alone, on a socket in ``root``; ``stop`` leaves nothing behind."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "docker.sock"
        self.log = root / "dockerd.log"
        self.docker_cli = tool("docker", "/usr/bin/docker")  # Debian's client: BuildKit built in
        self.compose_cli = tool("docker-compose", "/usr/bin/docker-compose")
        self.process: subprocess.Popen[bytes] | None = None
        self.bridges: set[str] = set()
        bin_dir = root / "bin"  # docker-compose runs `docker build`: Debian's client, first on PATH
        bin_dir.mkdir()
        (bin_dir / "docker").symlink_to(self.docker_cli)
        self.env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_", "PIP_"))},
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "DOCKER_HOST": f"unix://{self.socket}",
            "DOCKER_CONFIG": str(root / "client-config"),
            "DOCKER_BUILDKIT": "1",
            "COMPOSE_DOCKER_CLI_BUILD": "1",
        }

    def start(self) -> None:
        dockerd = tool("dockerd", "/usr/sbin/dockerd")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [
                    dockerd,
                    *("--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec")),
                    *("--pidfile", str(self.root / "dockerd.pid"), "--host", f"unix://{self.socket}"),
                    *("--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false"),
                    *("--bridge=none", "--log-level=warn"),
                ],
                stdout=log,
                stderr=log,
                start_new_session=True,
            )
        wait_until(self._answers, timeout_s=90, interval_s=0.5, what=f"dockerd (log: {self.log})")

    def _answers(self) -> bool:
        assert self.process is not None
        assert self.process.poll() is None, self.log.read_text()
        done = subprocess.run([self.docker_cli, "version"], env=self.env, capture_output=True, timeout=30)
        return 0 == done.returncode

    def docker(self, *args: str, timeout: float = 120) -> str:
        return run([self.docker_cli, *args], env=self.env, timeout=timeout)

    def attempt(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A docker command that may fail (cleaning up after a failed test)."""
        return subprocess.run(
            [self.docker_cli, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def compose(self, project: list[str], *args: str, timeout: float = 300) -> str:
        return run([self.compose_cli, *project, *args], env=self.env, timeout=timeout)

    def inspect(self, container: str) -> dict[str, Any]:
        data = json.loads(self.docker("inspect", container))
        assert isinstance(data, list)
        assert 1 == len(data)
        return dict(data[0])

    def remember_bridges(self) -> None:
        """The Linux bridges of the engine's networks, removed in ``stop`` if still there."""
        for network in self.docker("network", "ls", "-q", "--no-trunc", "--filter", "driver=bridge").split():
            self.bridges.add(f"br-{network[:12]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(Exception):
                self.remember_bridges()
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)
        for bridge in sorted(self.bridges):
            if Path(f"/sys/class/net/{bridge}").exists():
                subprocess.run(["ip", "link", "delete", bridge], capture_output=True, timeout=30, check=False)
        self._unmount_below(self.root)
        shutil.rmtree(self.root, ignore_errors=True)

    @staticmethod
    def _unmount_below(root: Path) -> None:
        """Mounts a killed daemon may leave under ``root`` (overlays, shm), deepest first."""
        mounts = [
            line.split()[1]
            for line in Path("/proc/self/mounts").read_text().splitlines()
            if line.split()[1].startswith(str(root) + "/")
        ]
        for mount in sorted(mounts, key=len, reverse=True):
            subprocess.run(["umount", "-l", mount], capture_output=True, timeout=30, check=False)


@contextlib.contextmanager
def running_engine() -> Iterator[Engine]:
    """An ``Engine`` in a fresh short directory (socket paths are limited to 108 bytes)."""
    require_root()
    engine = Engine(Path(tempfile.mkdtemp(prefix="sntl-dk-", dir="/tmp")))
    try:
        engine.start()
        yield engine
    finally:
        engine.stop()


# --- the package index ----------------------------------------------------------------------


@dataclass(frozen=True)
class Locked:
    """One requirement of a lock file: its name, pinned version, marker and full text with hashes."""

    name: str
    version: str
    marker: Marker | None
    text: str


def read_lock(path: Path) -> list[Locked]:
    """The requirements of a ``--generate-hashes`` lock file (continuation lines joined)."""
    entries: list[Locked] = []
    block: list[str] = []
    for line in [*path.read_text(encoding="utf-8").splitlines(), ""]:
        if line.strip().startswith("#") and not block:
            continue
        if line.strip():
            block.append(line)
        if block and not line.rstrip().endswith("\\"):
            requirement = Requirement(block[0].rstrip("\\ ").strip())
            [pin] = list(requirement.specifier)
            assert "==" == pin.operator, f"{path}: {block[0]} is not pinned with =="
            entries.append(
                Locked(canonicalize_name(requirement.name), pin.version, requirement.marker, "\n".join(block))
            )
            block = []
    return entries


def image_environment(engine: Engine, image: str) -> dict[str, str]:
    """The marker environment (PEP 508) of the image's ``python3``, read with no network."""
    script = (
        "import json, os, platform, sys;"
        "print(json.dumps({'implementation_name': sys.implementation.name,"
        " 'implementation_version': platform.python_version(), 'os_name': os.name,"
        " 'platform_machine': platform.machine(), 'platform_release': platform.release(),"
        " 'platform_system': platform.system(), 'platform_version': platform.version(),"
        " 'python_full_version': platform.python_version(),"
        " 'platform_python_implementation': platform.python_implementation(),"
        " 'python_version': '.'.join(platform.python_version_tuple()[:2]), 'sys_platform': sys.platform}))"
    )
    out = engine.docker("run", "--rm", "--network", "none", image, "python3", "-c", script)
    return dict(json.loads(out))


class PackageIndex:
    """The wheels the locks name for one image, downloaded with this machine's pip, served on 127.0.0.1."""

    def __init__(self, locks: list[Path], environment: dict[str, str], root: Path) -> None:
        self.root = root
        root.mkdir(parents=True)
        wheels = CACHE / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        wanted = [
            entry
            for lock in locks
            for entry in read_lock(lock)
            if entry.marker is None or entry.marker.evaluate(dict(environment))
        ]
        requirements = root / "requirements.txt"
        text = "\n".join(re.sub(r"\s*;[^\\]*", " ", e.text, count=1) for e in wanted) + "\n"
        requirements.write_text(text)
        done = wheels / f".downloaded-{hashlib.sha256(text.encode()).hexdigest()[:16]}"
        if not done.exists():  # pip asks the index about every file even when it has them all
            run(
                [
                    *(sys.executable, "-m", "pip", "download", "--quiet", "--no-deps"),
                    *("--only-binary", ":all:"),
                    *("--python-version", environment["python_full_version"], "--dest", str(wheels)),
                    *("--require-hashes", "-r", str(requirements)),
                ],
                timeout=600,
            )
            done.touch()
        self._write_simple_index(wheels, {e.name for e in wanted})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), partial(_QuietHandler, directory=str(root)))
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/simple/"

    def _write_simple_index(self, wheels: Path, names: set[str]) -> None:
        files = self.root / "files"
        files.mkdir()
        by_name: dict[str, list[Path]] = {}
        for wheel in wheels.glob("*.whl"):
            name = canonicalize_name(wheel.name.split("-")[0])
            if name in names:
                shutil.copy2(wheel, files / wheel.name)
                by_name.setdefault(name, []).append(wheel)
        missing = names - set(by_name)
        assert not missing, f"pip downloaded no wheel for {sorted(missing)}"
        for name, found in by_name.items():
            page = self.root / "simple" / name / "index.html"
            page.parent.mkdir(parents=True)
            links = "".join(
                f'<a href="../../files/{html.escape(w.name)}#sha256={_sha256(w)}">{html.escape(w.name)}</a>\n'
                for w in sorted(found)
            )
            page.write_text(f"<!DOCTYPE html><html><body>\n{links}</body></html>\n")

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class _QuietHandler(SimpleHTTPRequestHandler):
    """Files of the index directory, without a log line per request."""

    def log_message(self, format: str, *args: Any) -> None:
        return


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
