"""A function tool's own input and output guardrails, run around the call the way `agents.Runner` runs them."""

from __future__ import annotations

from typing import Any

from agents import (
    FunctionTool,
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
    """Every tool guardrail result of one top-level turn, in the order they ran (`RunResult` exposes them)."""

    __slots__ = ("inputs", "outputs")

    def __init__(self) -> None:
        self.inputs: list[ToolInputGuardrailResult] = []
        self.outputs: list[ToolOutputGuardrailResult] = []


async def check_tool_input(
    tool: FunctionTool, context: ToolContext[Any], agent: Any, log: GuardrailLog | None
) -> str | None:
    """The message the model reads instead of running the tool, or None to run it.

    In order; the first guardrail that rejects stops the rest, and one that raises ends the turn.
    """
    for guardrail in tool.tool_input_guardrails or ():
        output = await guardrail.run(ToolInputGuardrailData(context=context, agent=agent))
        if log is not None:
            log.inputs.append(ToolInputGuardrailResult(guardrail=guardrail, output=output))
        behavior = output.behavior
        if behavior["type"] == "raise_exception":
            error = ToolInputGuardrailTripwireTriggered(guardrail=guardrail, output=output)
            raise _named(error, "input", guardrail.get_name(), output, agent, tool.name)
        if behavior["type"] == "reject_content":
            return str(behavior["message"])
    return None


async def check_tool_output(
    tool: FunctionTool, context: ToolContext[Any], agent: Any, output: Any, log: GuardrailLog | None
) -> Any:
    """What the model reads of the tool's `output`: unchanged, or the first rejecting guardrail's message.

    Every guardrail sees the tool's real output, as under `Runner`.
    """
    for guardrail in tool.tool_output_guardrails or ():
        verdict = await guardrail.run(ToolOutputGuardrailData(context=context, agent=agent, output=output))
        if log is not None:
            log.outputs.append(ToolOutputGuardrailResult(guardrail=guardrail, output=verdict))
        behavior = verdict.behavior
        if behavior["type"] == "raise_exception":
            error = ToolOutputGuardrailTripwireTriggered(guardrail=guardrail, output=verdict)
            raise _named(error, "output", guardrail.get_name(), verdict, agent, tool.name)
        if behavior["type"] == "reject_content":
            return str(behavior["message"])
    return output


def _named(
    error: ToolInputGuardrailTripwireTriggered | ToolOutputGuardrailTripwireTriggered,
    kind: str,
    guardrail: str,
    output: ToolGuardrailFunctionOutput,
    agent: Any,
    tool: str,
) -> ToolInputGuardrailTripwireTriggered | ToolOutputGuardrailTripwireTriggered:
    """The SDK's exception, reworded to name the agent, the tool, the guardrail and what it reported.

    The SDK's text names only the guardrail class; for a nested agent this text is what its caller's model reads.
    """
    info = output.output_info
    detail = "" if info is None else f": {info}"
    if len(detail) > _INFO_LIMIT:
        detail = detail[: _INFO_LIMIT - 3] + "..."
    name = getattr(agent, "name", "?")
    error.args = (f"Agent {name!r}: tool {tool!r} {kind} guardrail {guardrail!r} tripped{detail}",)
    return error
