"""The ``sentinel`` command. ``main()`` is the one place CLI errors are rendered."""

from __future__ import annotations

import gc
import os
import sys

import click

from sentinel_hooks.cli.app import app
from sentinel_hooks.cli.client import ServiceUnreachable
from sentinel_hooks.cli.exits import EXIT_INVALID, EXIT_OK, EXIT_UNREACHABLE, EXIT_USAGE
from sentinel_hooks.cli.output import print_error
from sentinel_hooks.errors import ConfigError, SentinelError


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return (and exit with) SPEC.md §10's exit codes, never a traceback."""
    try:
        result = app.main(args=argv, prog_name="sentinel", standalone_mode=False)
    except click.exceptions.UsageError as exc:
        exc.show()
        code = EXIT_USAGE
    except click.exceptions.Abort:
        print_error("aborted")
        code = EXIT_INVALID
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = EXIT_INVALID
    except ServiceUnreachable as exc:
        print_error(str(exc))
        code = EXIT_UNREACHABLE
    except ConfigError as exc:
        for issue in exc.issues:
            print_error(str(issue), prefix=False)
        code = EXIT_INVALID
    except SentinelError as exc:
        print_error(str(exc))
        code = EXIT_INVALID
    except KeyboardInterrupt:
        code = 130
    except Exception as exc:  # the last line of defence: users never see a traceback
        if os.environ.get("SENTINEL_DEBUG"):
            raise
        print_error(f"internal error: {type(exc).__name__}: {exc} (set SENTINEL_DEBUG=1 for details)")
        code = EXIT_INVALID
    else:
        code = result if isinstance(result, int) else EXIT_OK
    return code


def entry() -> None:
    """The console-script entry point."""
    code = main()
    # The process ends here. Objects frozen now are left out of the collections the interpreter
    # runs while it shuts down, which would otherwise walk every module, model and config object
    # loaded (~25 ms of a 300 ms `sentinel test`); they are still released as the modules go.
    gc.freeze()
    sys.exit(code)
