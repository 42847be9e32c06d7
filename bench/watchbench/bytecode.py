"""A child's environment that reads cached bytecode, as an installed package does.

pip writes the ``.pyc`` files of a package when it installs it, and the Docker image is built
that way; a checkout run from its source folder on a machine that sets
``PYTHONDONTWRITEBYTECODE`` (this one does) compiles every module it imports, at every launch.
A benchmark that times launches gives each side its own ``PYTHONPYCACHEPREFIX`` instead, which
one unrecorded launch fills.
"""

from __future__ import annotations

import os
from pathlib import Path


def child_env(pythonpath: Path | None, pycache: Path | None) -> dict[str, str]:
    """This process's environment (no ``SENTINEL_*``) with ``pythonpath`` first on the path and,
    when ``pycache`` is given, bytecode read from and written to that folder."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SENTINEL_")}
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    if pycache is not None:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env
