"""The demo: an agency (CEO -> Developer -> QA) streaming to the terminal; offline unless OPENAI_API_KEY is set."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Mapping
from typing import TextIO

import agents
from agents import Model, function_tool

from .._agency._agency import Agency
from .._base._errors import AgencySwarmError
from .._base._events import AgentStarted, Event, MessageSent, TextDelta, ToolCalled, ToolOutput
from .._turn._agent import Agent
from .._turn._results import RunResult
from ..testing import ModelCall, ScriptedModel, Step, ToolCall, send_message

DEFAULT_MESSAGE = "Build a tiny landing page for our product launch."
OPENAI_MODEL = "gpt-4.1-mini"
INDENT = "  "


@function_tool
async def write_file(path: str, content: str) -> str:
    """Write a file in the team's workspace (simulated: the demo never touches the disk).

    Args:
        path: The file's path, e.g. "index.html".
        content: The whole content of the file.
    """
    return f"Wrote {len(content)} characters to {path}."


def _ceo_script(call: ModelCall) -> Step:
    if not call.tool_outputs:  # first step of a turn: hand the user's request to the Developer
        return send_message("Developer", f"Please build this: {call.last_user_message}")
    return f"Done. The Developer reports: {call.tool_outputs[-1]}"


def scripted_models() -> dict[str, Model]:
    """Offline stand-ins for the three models; each script restarts at every new message."""
    page = "<h1>Launch day</h1><p>Our product is here.</p><a href='/signup'>Sign up</a>"
    return {
        "CEO": ScriptedModel(_ceo_script, name="CEO-script"),
        "Developer": ScriptedModel.each_turn([
            ToolCall("write_file", {"path": "index.html", "content": page}),
            send_message("QA", f"Please review index.html:\n{page}"),
            "index.html is written and QA approved it.",
        ], name="Developer-script"),
        "QA": ScriptedModel.each_turn(
            ["Reviewed index.html: heading, pitch and sign-up link are there. Approved."], name="QA-script"
        ),
    }


def build_agency(models: Mapping[str, Model | str]) -> Agency:
    """CEO is the entry point; CEO may message Developer, Developer may message QA."""
    ceo = Agent(
        name="CEO", model=models["CEO"], description="Talks to the user and delegates the work.",
        instructions="You lead a small software team. Delegate the user's request to the Developer with "
        "send_message, then tell the user the outcome in two sentences.",
    )
    dev = Agent(
        name="Developer", model=models["Developer"], tools=[write_file], description="Writes code.",
        instructions="You are a developer. Write the code with write_file, then ask QA to review it with "
        "send_message (include the code), then reply with a one-sentence summary.",
    )
    qa = Agent(
        name="QA", model=models["QA"], description="Reviews code and reports problems.",
        instructions="You are QA. Review the code you are sent and answer with a short verdict.",
    )
    return Agency([ceo, [ceo, dev, qa]])


class Printer:
    """Prints events as lines labelled by agent and indented by depth; an agent's text deltas share a line."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self._line: tuple[str, int] | None = None  # (agent, depth) of the text line being streamed
        self._sends: set[str] = set()  # call ids of sends whose reply the recipient already printed

    def _print(self, depth: int, text: str) -> None:
        self.end_line()
        self.out.write(f"{INDENT * depth}{text}\n")

    def end_line(self) -> None:
        if self._line is not None:
            self.out.write("\n")
            self._line = None

    def show(self, event: Event) -> None:
        match event:
            case TextDelta(agent=agent, depth=depth, delta=delta):
                if self._line != (agent, depth):
                    self.end_line()
                    self.out.write(f"{INDENT * depth}{agent}: ")
                    self._line = (agent, depth)
                self.out.write(delta.replace("\n", "\n" + INDENT * depth + " " * (len(agent) + 2)))
                self.out.flush()
            case AgentStarted(depth=0, caller=caller, agent=agent, message=message):
                self._print(0, f"{caller} -> {agent}: {message}")
            case MessageSent(agent=agent, depth=depth, recipient=recipient, message=message, call_id=call_id):
                self._sends.add(call_id)
                self._print(depth, f"{agent} -> {recipient}: {_short(message)}")
            case ToolCalled(tool="send_message"):
                pass  # message_sent follows and says it better; a refused send shows its tool_output
            case ToolCalled(agent=agent, depth=depth, tool=tool, arguments=arguments):
                self._print(depth, f"{agent} calls {tool}({_short(arguments)})")
            case ToolOutput(agent=agent, depth=depth, tool=tool, output=output, call_id=call_id):
                if call_id not in self._sends:  # refused sends and function tools: show what the model got back
                    self._print(depth, f"{agent} <- {tool}: {_short(output)}")
            case _:
                pass  # agent_started deeper down (message_sent said it), agent_finished, raw model events


def _short(text: str, limit: int = 100) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


async def run_demo(agency: Agency, message: str, out: TextIO) -> RunResult:
    """Stream one turn to `out`, then print the usage and the threads it left behind."""
    printer = Printer(out)
    stream = agency.get_response_stream(message)
    async with stream:
        async for event in stream:
            printer.show(event)
    printer.end_line()
    result = stream.result
    usage = result.usage
    per_agent = ", ".join(f"{name} {u.requests}" for name, u in result.usage_by_agent.items())
    out.write(
        f"\nUsage: {usage.requests} requests ({per_agent}); tokens: {usage.input_tokens} input + "
        f"{usage.output_tokens} output = {usage.total_tokens}\n"
    )
    threads = agency.thread_manager.get_threads(result.chat_id)
    listing = ", ".join(f"{key} ({len(items)} items)" for key, items in threads.items())
    out.write(f"Threads of chat {result.chat_id!r}: {listing}\n")
    return result


def main(message: str = DEFAULT_MESSAGE, out: TextIO | None = None) -> int:
    """Run the demo once; returns the exit code."""
    out = sys.stdout if out is None else out
    models: Mapping[str, Model | str]
    if os.environ.get("OPENAI_API_KEY"):
        out.write(f"Using OpenAI model {OPENAI_MODEL} (OPENAI_API_KEY is set)\n")
        models = dict.fromkeys(("CEO", "Developer", "QA"), OPENAI_MODEL)
    else:
        out.write("Using scripted offline models (set OPENAI_API_KEY to use a real model)\n")
        agents.set_tracing_disabled(True)
        models = scripted_models()
    try:
        asyncio.run(run_demo(build_agency(models), message, out))
    except KeyboardInterrupt:
        out.write("\nInterrupted.\n")
        return 130
    except AgencySwarmError as error:
        out.write(f"\nError: {type(error).__name__}: {error}\n")
        return 1
    return 0
