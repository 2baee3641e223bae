"""Run an agency described in a YAML file, pausing for approval whenever a tool needs it.

    .venv/bin/python examples/yaml_agents/main.py [flat_team.yaml | departments.yaml | PATH] [--message TEXT ...]
        [--approve-all | --reject-all]

Without --approve-all/--reject-all, each email or merge is shown and you answer y/N. Offline with scripted models
unless OPENAI_API_KEY is set (then each agent uses the `model:` of the YAML file).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path

import agents

from agency_swarm import (
    Agency,
    AgentFinished,
    AgentStarted,
    ApprovalRequested,
    ConfigError,
    Event,
    Interruption,
    MessageSent,
    RunResult,
    ToolCalled,
    ToolOutput,
)

if __package__ in (None, ""):  # run as a script: make the package importable from examples/
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from yaml_agents.offline import scripted_models
from yaml_agents.toolkits import TOOLKITS, Office, sample_office

HERE = Path(__file__).resolve().parent
DEFAULT_MESSAGES = {
    "flat_team.yaml": [
        "What is on the calendar for 2025-07-01?",
        "Book a release review on 2025-07-02.",
        "Email team@example.com that the release review is booked for 2025-07-02.",
    ],
    "departments.yaml": [
        "Merge the approved pull request for the login fix. Then email customers@example.com that the login fix "
        "is live.",
    ],
}

Decide = Callable[[Interruption], bool]


def load(path: Path, *, offline: bool) -> Agency:
    """The file's agency; offline, every agent gets its scripted model instead of the file's `model:`."""
    agency = Agency.from_config(path, toolkits=TOOLKITS)  # validates the file and tells us its agents
    if offline:
        agency = Agency.from_config(path, toolkits=TOOLKITS, models=scripted_models(list(agency.agents)))
    return agency


class Printer:
    """One line per event; a resumed turn replays where it stood (its start, the sends and calls that led to the
    pause), which was printed already, so those lines are not repeated."""

    def __init__(self) -> None:
        self.shown: set[str] = set()  # call ids of sends and tool calls already printed
        self.resuming = False

    def show(self, event: Event) -> None:
        pad = "  " * event.depth
        match event:
            case AgentStarted(depth=0, caller=caller, agent=agent, message=message) if not self.resuming:
                print(f"{caller} -> {agent}: {message}")
            case MessageSent(agent=agent, recipient=recipient, message=message, call_id=call_id):
                self.once(call_id, f"{pad}{agent} -> {recipient}: {message}")
            case ToolCalled(agent=agent, tool=tool, arguments=arguments, call_id=call_id):
                self.once(call_id, f"{pad}  {agent} calls {tool}({arguments})")
            case ToolOutput(agent=agent, tool=tool, output=output) if tool != "send_message":
                lines = output.replace("\n", "\n" + pad + "    ")
                print(f"{pad}  {agent} <- {tool}: {lines}")
            case ApprovalRequested(agent=agent, tool=tool):
                print(f"{pad}  [authorization required] {agent} wants to run {tool}: the turn pauses")
            case AgentFinished(agent=agent, output=output):
                print(f"{pad}{agent}: {output}")
            case _:
                pass

    def once(self, call_id: str, line: str) -> None:
        if call_id not in self.shown:
            self.shown.add(call_id)
            print(line)


async def converse(agency: Agency, message: str, office: Office, decide: Decide, chat_id: str = "default") -> RunResult:
    """One user message; each pause is decided by `decide` and the turn resumed until it finishes."""
    printer = Printer()
    stream = agency.get_response_stream(message, chat_id=chat_id, context=office)
    while True:
        async with stream:
            async for event in stream:
                printer.show(event)
        result = stream.result
        if not result.paused:
            return result
        decisions = {waiting.call_id: decide(waiting) for waiting in result.interruptions}
        approve = [call_id for call_id, yes in decisions.items() if yes]
        reject = [call_id for call_id, yes in decisions.items() if not yes]
        print(f"-- resuming: {len(approve)} approved, {len(reject)} rejected")
        printer.resuming = True
        stream = agency.resume_stream(chat_id, approve=approve, reject=reject, context=office)


def ask(waiting: Interruption) -> bool:
    try:
        answer = input(f"Allow {waiting.agent} to run {waiting.tool}({waiting.arguments})? [y/N] ")
    except EOFError:
        print("(no answer: rejected)")
        return False
    if not sys.stdin.isatty():  # piped answers are not echoed by the terminal
        print(answer)
    return answer.strip().lower() in ("y", "yes")


def report(agency: Agency, office: Office, chat_id: str = "default") -> None:
    print("\nThe office afterwards:")
    for email in office.outbox:
        print(f"  sent to {email.to}: {email.subject!r}")
    print(f"  calendar: {office.calendar}")
    print(f"  merged: {[f'#{pr.number}' for pr in office.pull_requests.values() if pr.merged] or 'nothing'}")
    entry = agency.entry_points[0]
    items = agency.thread_manager.get_threads(chat_id).get(f"user->{entry.name}", [])
    window = entry.history_window
    seen = "the whole thread" if window is None else f"its first item and its last {window} (history_window)"
    print(f"{entry.name}'s thread holds {len(items)} items; each of its model calls sees {seen}.")
    calls = getattr(entry.model, "calls", None)  # scripted models record what they received
    if calls:
        print(f"  Its last model call received {len(calls[-1].input)} items.")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run a YAML-defined agency with approvals.")
    parser.add_argument("config", nargs="?", default="flat_team.yaml", help="a YAML file (names are looked up "
                        "next to this script first)")
    parser.add_argument("--message", action="append", help="a user message (repeat for several turns)")
    choice = parser.add_mutually_exclusive_group()
    choice.add_argument("--approve-all", action="store_true", help="approve every email and merge")
    choice.add_argument("--reject-all", action="store_true", help="reject every email and merge")
    args = parser.parse_args(argv)
    path = HERE / args.config if (HERE / args.config).is_file() else Path(args.config)
    messages = args.message or (DEFAULT_MESSAGES.get(path.name) if path.parent == HERE else None)
    if not messages:
        parser.error(f"give at least one --message for {path}")
    offline = not os.environ.get("OPENAI_API_KEY")
    if offline:
        print("Using scripted offline models (set OPENAI_API_KEY to use the models named in the YAML file)")
        agents.set_tracing_disabled(True)
    else:
        print("Using the models named in the YAML file (OPENAI_API_KEY is set)")
    try:
        agency = load(path, offline=offline)
    except (ConfigError, ValueError) as error:  # the message names the file, line and key, or the missing script
        print(f"Error: {error}", file=sys.stderr)
        return 2
    decide: Decide = (lambda waiting: True) if args.approve_all else (lambda waiting: False) if args.reject_all else ask
    office = sample_office()
    for message in messages:
        asyncio.run(converse(agency, message, office, decide))
        print()
    report(agency, office)
    return 0


if __name__ == "__main__":
    sys.exit(main())
