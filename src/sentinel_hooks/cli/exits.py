"""The exit codes of every command, ``run`` and ``validate`` included (SPEC.md §10)."""

from __future__ import annotations

EXIT_OK = 0
EXIT_INVALID = 1  # invalid input or config, or not found
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3  # the service does not answer
