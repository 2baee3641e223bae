"""A function tool's own input and output guardrails, run around the call the way `agents.Runner` runs them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agents import (
    Agent,
    FunctionTool,
    InputGuardrailResult,
    OutputGuardrailResult,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    ToolInputGuardrailResult,
    ToolInputGuardrailTripwireTriggered,
    ToolOutputGuardrailData,
    ToolOutputGuardrailResult,
    ToolOutputGuardrailTripwireTriggered,
)
from agents.tool_context import ToolContext

_INFO_LIMIT = 300


class GuardrailLog:
    """Every guardrail result of one top-level turn, tools' and agents', in the order they ran (`RunResult` exposes
    them). Made when the first guardrail runs: turns without guardrails never have one."""

    __slots__ = ("agent_inputs", "agent_outputs", "inputs", "outputs")

    def __init__(self) -> None:
        self.inputs: list[ToolInputGuardrailResult] = []
        self.outputs: list[ToolOutputGuardrailResult] = []
        self.agent_inputs: list[AgentInputGuardrailResult] = []
        self.agent_outputs: list[OutputGuardrailResult] = []

    def copy(self) -> GuardrailLog:
        """A log that goes on from this one (a resumed turn's) without changing what this one's result shows."""
        copied = GuardrailLog()
        copied.inputs, copied.outputs = list(self.inputs), list(self.outputs)
        copied.agent_inputs, copied.agent_outputs = list(self.agent_inputs), list(self.agent_outputs)
        return copied


@dataclass
class AgentInputGuardrailResult(InputGuardrailResult):
    """The SDK's `InputGuardrailResult` with the agent whose input it checked (as its `OutputGuardrailResult` has
    one): an agency's turn holds the input guardrail results of every agent it ran."""

    agent: Agent[Any]


async def check_tool_input(
    tool: FunctionTool, context: ToolContext[Any], agent: Any, log: GuardrailLog | None
) -> str | None:
    """The message the model reads instead of running the tool, or None to run it.

    In order; the first guardrail that rejects stops the rest, and one that raises ends the turn.
    """
    data = ToolInputGuardrailData(context=context, agent=agent)
    kept = None if log is None else log.inputs
    return await _first_rejection(
        tool, tool.tool_input_guardrails, data, ToolInputGuardrailResult, ToolInputGuardrailTripwireTriggered, kept
    )


async def check_tool_output(
    tool: FunctionTool, context: ToolContext[Any], agent: Any, output: Any, log: GuardrailLog | None
) -> Any:
    """What the model reads of the tool's `output`: unchanged, or the first rejecting guardrail's message.

    Every guardrail sees the tool's real output, as under `Runner`.
    """
    data = ToolOutputGuardrailData(context=context, agent=agent, output=output)
    kept = None if log is None else log.outputs
    rejection = await _first_rejection(
        tool, tool.tool_output_guardrails, data, ToolOutputGuardrailResult, ToolOutputGuardrailTripwireTriggered, kept
    )
    return output if rejection is None else rejection


async def _first_rejection(
    tool: FunctionTool, guardrails: Any, data: Any, result_type: Any, tripwire_type: Any, kept: list[Any] | None
) -> str | None:
    """Run `guardrails` on `data` in order: the first `reject_content` message, None if all allow; a
    `raise_exception` raises `tripwire_type`, reworded."""
    for guardrail in guardrails or ():
        verdict: ToolGuardrailFunctionOutput = await guardrail.run(data)
        if kept is not None:
            kept.append(result_type(guardrail=guardrail, output=verdict))
        behavior = verdict.behavior
        if behavior["type"] == "raise_exception":
            tripwire = tripwire_type(guardrail=guardrail, output=verdict)
            raise _named(tripwire, guardrail.get_name(), data.agent, tool.name)
        if behavior["type"] == "reject_content":
            return str(behavior["message"])
    return None


def _named(
    error: ToolInputGuardrailTripwireTriggered | ToolOutputGuardrailTripwireTriggered, guardrail: str, agent: Any,
    tool: str,
) -> ToolInputGuardrailTripwireTriggered | ToolOutputGuardrailTripwireTriggered:
    """The SDK's exception, reworded to name the agent, the tool, the guardrail and what it reported.

    The SDK's text names only the guardrail class; for a nested agent this text is what its caller's model reads.
    """
    kind = "input" if isinstance(error, ToolInputGuardrailTripwireTriggered) else "output"
    info = error.output.output_info
    detail = "" if info is None else f": {info}"
    if len(detail) > _INFO_LIMIT:
        detail = detail[: _INFO_LIMIT - 3] + "..."
    name = getattr(agent, "name", "?")
    error.args = (f"Agent {name!r}: tool {tool!r} {kind} guardrail {guardrail!r} tripped{detail}",)
    return error
