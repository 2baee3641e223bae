"""Observability from the event stream: agent_started / agent_finished with timings; decisions and tool calls shown."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any, TextIO

from agency_swarm import AgentFinished, AgentStarted, Event, MessageSent, ToolCalled, ToolOutput


@dataclass(kw_only=True)
class AgentTiming:
    """One agent turn: who asked, when it started and finished (seconds on the observer's clock)."""

    agent: str
    caller: str
    depth: int
    started_at: float
    finished_at: float | None = None
    """None when the turn failed or was cancelled before agent_finished."""

    @property
    def seconds(self) -> float | None:
        return None if self.finished_at is None else self.finished_at - self.started_at


class Observer:
    """Feed it every event of a turn; it prints a trace line per interesting event and keeps one timing per turn.

    `clock` is injectable so tests get exact, repeatable timings.
    """

    def __init__(
        self, out: TextIO, *, show_output_of: Collection[str] = (), clock: Callable[[], float] = time.perf_counter
    ) -> None:
        self.out = out
        self.clock = clock
        self.show_output_of = set(show_output_of)
        self.timings: list[AgentTiming] = []
        self._open: dict[tuple[str, str, int], AgentTiming] = {}  # a pair never runs twice at once in one chat

    def observe(self, event: Event) -> None:
        pad = "  " * event.depth
        match event:
            case AgentStarted(agent=agent, caller=caller, depth=depth):
                timing = AgentTiming(agent=agent, caller=caller, depth=depth, started_at=self.clock())
                self.timings.append(timing)
                self._open[(caller, agent, depth)] = timing
                self.out.write(f"{pad}[agent_started]  {agent} (asked by {caller})\n")
            case AgentFinished(agent=agent, caller=caller, depth=depth, output=output):
                timing = self._open.pop((caller, agent, depth))
                timing.finished_at = self.clock()
                shown = f"  {_json(output)}" if agent in self.show_output_of else ""
                self.out.write(f"{pad}[agent_finished] {agent} {_ms(timing.seconds)}{shown}\n")
            case MessageSent(agent=agent, recipient=recipient, message=message):
                self.out.write(f"{pad}{agent} -> {recipient}: {_short(message)}\n")
            case ToolCalled(agent=agent, tool=tool, arguments=arguments):
                self.out.write(f"{pad}  {agent} calls {tool}({arguments})\n")
            case ToolOutput(agent=agent, tool=tool, output=output) if tool != "send_message":
                self.out.write(f"{pad}  {agent} <- {tool}: {_short(output)}\n")
            case _:
                pass

    def report(self) -> str:
        """The timings table, one line per agent turn in start order."""
        width = max((len(timing.agent) for timing in self.timings), default=0)
        lines = ["Timings (agent_started -> agent_finished):"]
        for timing in self.timings:
            indent = "  " * timing.depth
            lines.append(f"  {indent}{timing.agent:<{width}}  {_ms(timing.seconds)}")
        return "\n".join(lines)


def _json(output: Any) -> str:
    dump = getattr(output, "model_dump", None)
    return json.dumps(dump(mode="json") if callable(dump) else output)


def _ms(seconds: float | None) -> str:
    return "did not finish" if seconds is None else f"{seconds * 1000:.1f} ms"


def _short(text: str, limit: int = 110) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
