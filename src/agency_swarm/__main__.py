"""Command line: `agency-swarm run|visualize|demo ...` (also `python -m agency_swarm ...`); the commands are in _cli."""

from __future__ import annotations

import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: the process's arguments); returns the exit code."""
    from ._cli._commands import run_app  # typer and rich load only when the command line is used

    return run_app(argv)


if __name__ == "__main__":
    sys.exit(main())
