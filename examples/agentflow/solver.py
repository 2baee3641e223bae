"""solve(): one streamed turn of the Solver agent, watched event by event. The watcher numbers the steps, enforces
`max_steps` and `max_time` (by ending the turn before a new step starts), and writes the audit log."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agency_swarm import Agency, AgentFinished, AgentStarted, Event, RunResult, ToolCalled, image_part

from .memory import FlowState, Memory
from .team import EXECUTOR, PLANNER, SOLVER, VERIFIER, NextStep, Verdict

STOP_NOW = "Stop now: {reason}. Answer the question with what the executor found so far."


@dataclass(kw_only=True, frozen=True)
class Limits:
    max_steps: int = 5
    """Planner -> Executor -> Verifier rounds."""
    max_time: float = 120.0
    """Seconds on the solve's clock; checked before each new step."""

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.max_time <= 0:
            raise ValueError(f"max_steps must be >= 1 and max_time > 0, got {self.max_steps} and {self.max_time}.")


@dataclass(kw_only=True)
class Solution:
    answer: str
    stop_reason: str
    steps: int
    memory: Memory
    log_path: Path
    result: RunResult
    """The Solver's last turn (the stop-now turn when a limit ended the loop)."""


class AuditLog:
    """JSON Lines, one object per agent turn (step, agent, sub_goal, tool, result_summary, verdict, timestamps)."""

    def __init__(self, path: Path, clock: Callable[[], float]) -> None:
        self.path, self.clock = path, clock
        self._started: dict[str, float] = {}
        self._tools: list[str] = []

    def observe(self, event: Event, state: FlowState) -> None:
        if isinstance(event, AgentStarted) and event.agent in (PLANNER, EXECUTOR, VERIFIER):
            self._started[event.agent] = self.clock()
            self._tools = []
        elif isinstance(event, ToolCalled) and event.agent == EXECUTOR:
            self._tools.append(event.tool)
        elif isinstance(event, AgentFinished) and event.agent in self._started:
            started_at = self._started.pop(event.agent)
            self.write(state, agent=event.agent, started_at=started_at, **_fields(event, self._tools))

    def write(self, state: FlowState, *, agent: str, started_at: float, **fields: Any) -> None:
        record = {
            "step": state.step, "agent": agent, "sub_goal": state.sub_goal or None, "tool": None,
            "result_summary": None, "verdict": None, **fields,
            "started_at": _iso(started_at), "finished_at": _iso(self.clock()),
        }
        with self.path.open("a", encoding="utf-8") as log:  # a line per record, written as it happens
            log.write(json.dumps(record) + "\n")


def _fields(event: AgentFinished, tools: list[str]) -> dict[str, Any]:
    output = event.output
    if isinstance(output, NextStep):
        return {"sub_goal": output.sub_goal, "tool": output.tool_name, "result_summary": output.justification}
    if isinstance(output, Verdict):
        return {"verdict": output.conclusion, "result_summary": output.analysis}
    return {"tool": ", ".join(tools) or None, "result_summary": _short(str(output))}


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat()


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def limit_reached(steps_done: int, elapsed: float, limits: Limits) -> str | None:
    if steps_done >= limits.max_steps:
        return f"max_steps reached ({steps_done} of {limits.max_steps} steps done, no STOP verdict)"
    if elapsed >= limits.max_time:
        return f"max_time reached ({elapsed:.1f}s elapsed, limit {limits.max_time:g}s)"
    return None


def asking(question: str, image: str | Path | None) -> str | list[dict[str, Any]]:
    """The user's message: the question, with the image (a path or an http(s) URL) when there is one."""
    if image is None:
        return question
    return [{"role": "user", "content": [{"type": "input_text", "text": question}, image_part(image)]}]


async def solve(
    agency: Agency,
    question: str,
    *,
    image: str | Path | None = None,
    log_dir: Path,
    limits: Limits = Limits(),
    clock: Callable[[], float] = time.time,
    on_event: Callable[[Event], None] | None = None,
) -> Solution:
    state = FlowState(question=question)
    log_dir.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (once per solve, before any agent runs)
    audit = AuditLog(log_dir / f"agentflow-{uuid.uuid4().hex[:12]}.jsonl", clock)
    start, verdict, stop_reason = clock(), None, None
    chat_id = f"solve-{uuid.uuid4().hex[:12]}"
    stream = agency.get_response_stream(asking(question, image), chat_id=chat_id, context=state)
    async with stream:
        async for event in stream:
            if isinstance(event, AgentStarted) and event.agent == PLANNER:
                stop_reason = limit_reached(state.step, clock() - start, limits)
                if stop_reason is not None:
                    break  # ends the whole turn before the planner's model is called
                state.step, state.sub_goal = state.step + 1, ""
            if on_event is not None:
                on_event(event)
            audit.observe(event, state)
            if isinstance(event, AgentFinished) and isinstance(event.output, NextStep):
                state.sub_goal = event.output.sub_goal
            elif isinstance(event, AgentFinished) and isinstance(event.output, Verdict):
                verdict = event.output
    if stop_reason is None:
        result = stream.result
        stop_reason = (f"verifier said STOP: {verdict.analysis}" if verdict and verdict.conclusion == "STOP"
                       else "the solver answered without a STOP verdict")
    else:  # a limit ended the loop: the solver still answers, from what memory holds
        result = await agency.get_response(STOP_NOW.format(reason=stop_reason), chat_id=chat_id, context=state)
    audit.write(state, agent=SOLVER, started_at=start, sub_goal=None, result_summary=_short(str(result.final_output)),
                verdict=verdict.conclusion if verdict else None, stop_reason=stop_reason)
    return Solution(answer=str(result.final_output), stop_reason=stop_reason, steps=state.step, memory=state.memory,
                    log_path=audit.path, result=result)
