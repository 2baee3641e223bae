"""Command line: `python -m agency_swarm demo [--message TEXT]` (installed as `agency-swarm` too)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """Parse `argv` (default: the command line) and run the chosen command; returns the exit code."""
    from ._demo import DEFAULT_MESSAGE

    parser = argparse.ArgumentParser(
        prog="agency-swarm", description="Teams of openai-agents agents that message each other through a chart."
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    demo = commands.add_parser(
        "demo", help="stream a CEO -> Developer -> QA agency to the terminal (offline unless OPENAI_API_KEY is set)"
    )
    demo.add_argument(
        "--message", default=DEFAULT_MESSAGE, help=f"what the user asks the CEO (default: {DEFAULT_MESSAGE!r})"
    )
    args = parser.parse_args(argv)
    if args.command == "demo":
        from ._demo import main as demo_main

        try:
            return demo_main(args.message)
        except BrokenPipeError:  # e.g. `agency-swarm demo | head`: stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
