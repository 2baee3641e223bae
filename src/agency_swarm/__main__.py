"""Command line: `agency-swarm run|serve|visualize|demo` (also `python -m agency_swarm`); the commands are in _cli."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import NoReturn

INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as shells report it."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: the process's arguments); returns the exit code. A Ctrl-C that no command
    handles (one while the package loads, say) is one line, not a traceback."""
    try:
        from ._cli._commands import run_app  # the package, typer and rich load only when the command line is used

        return run_app(argv)
    except KeyboardInterrupt:
        print("Interrupted.", file=sys.stderr)
        return INTERRUPTED


def cli() -> NoReturn:
    """The process's entry point (`agency-swarm`, `python -m agency_swarm`): the SDK's own log lines stay out of the
    terminal (each failure is said once, by the command), traces still queued get a few seconds to be exported, and
    a Ctrl-C while the process ends stops it at once, quietly."""
    from ._cli._exit import quiet_sdk_logs, stop_quietly_on_ctrl_c

    quiet_sdk_logs()
    try:
        code = main()
    finally:
        stop_quietly_on_ctrl_c()
    from ._cli._exit import finish_traces

    finish_traces()
    sys.exit(code)


if __name__ == "__main__":
    cli()
