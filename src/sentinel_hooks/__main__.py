"""``python -m sentinel_hooks`` runs the ``sentinel`` command."""

from sentinel_hooks.cli import entry

entry()
