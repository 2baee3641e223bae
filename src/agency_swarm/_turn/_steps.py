"""What comes after a model response: the next-step types, and how a response (or its tools' results) picks one."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from agents import (
    FunctionTool,
    FunctionToolResult,
    ItemHelpers,
    ModelBehaviorError,
    ModelRefusalError,
    ToolsToFinalOutputResult,
    UserError,
)
from agents.items import ToolCallOutputItem
from openai.types.responses import ResponseFunctionToolCall

from .._base._errors import ConfigError, OutputValidationError
from .._base._names import SEND_MESSAGE
from ._outputs import TOOL_ACTIVITY, USED_TOOLS
from ._setup import Setup
from ._state import Turn
from ._tools import output_item


@dataclass(slots=True)
class FinalOutput:
    output: Any


@dataclass(slots=True)
class RunAgain:
    """No tool calls and no usable final output yet (e.g. a structured output still to come)."""


RUN_AGAIN = RunAgain()  # it carries nothing, so one instance serves every turn


@dataclass(slots=True)
class FunctionToolCall:
    call: ResponseFunctionToolCall
    tool: FunctionTool
    resume: bool = False
    """Resuming a stored turn: the call waited for approval before (only those are run on resume)."""


@dataclass(slots=True)
class SendMessage:
    call: ResponseFunctionToolCall
    resume: bool = False
    """Resuming a stored turn: the recipient may already have this message, or even have answered it."""


@dataclass(slots=True)
class UnknownTool:
    call: ResponseFunctionToolCall


ToolCallStep = FunctionToolCall | SendMessage | UnknownTool

ToolResult = tuple[int, FunctionTool, ResponseFunctionToolCall, Any]
"""(call index, tool, call, output) of a function tool call that ran or was refused: what tool_use_behavior reads."""


@dataclass(slots=True)
class RunTools:
    calls: list[ToolCallStep]
    mcp_approvals: Sequence[Any] = ()
    """Hosted MCP approval requests, decided after the calls ran (by the user on resume, else by their server's
    on_approval_request; undecided, they wait)."""
    used_tools: bool = True
    """The response used a tool (`_outputs.USED_TOOLS`): `reset_tool_choice` then applies. False for a response of
    MCP approval requests or tool listings only, as under `Runner`."""
    answered: list[ToolResult] = field(default_factory=list)
    """Resuming: the function calls of the paused response that got their outputs before the pause. As under
    `Runner`, tool_use_behavior reads them with the resumed calls' results."""
    order: dict[str, int] = field(default_factory=dict)
    """Resuming: each call id's place in the paused response (the call order tool_use_behavior reads)."""


NextStep = FinalOutput | RunAgain | RunTools


def classify(setup: Setup, call: ResponseFunctionToolCall, *, resume: bool = False) -> ToolCallStep:
    """What a function call asks for: the tool it names by namespace and name, as `Runner` looks it up (never
    another tool of the same name), a send, or an unknown tool."""
    namespace = call.namespace
    if namespace:
        tool = setup.function_tools.get((namespace, call.name))
    elif call.name == SEND_MESSAGE and setup.can_send:
        return SendMessage(call, resume)
    else:
        tool = setup.function_tools.get(call.name)
    return UnknownTool(call) if tool is None else FunctionToolCall(call, tool, resume)


def next_step(turn: Turn, setup: Setup, output: Sequence[Any]) -> NextStep:
    """As `Runner` decides: calls to run; else the last message's text (a refusal raises); a response of hosted tool
    calls only runs the model again."""
    if len(output) == 1:  # the common cases: one call, or one plain-text answer
        item = output[0]
        kind = item.type
        if kind == "function_call":
            return RunTools([classify(setup, item)])
        if kind == "message" and setup.schema is None and len(item.content) == 1:
            part = item.content[0]
            if part.type == "output_text":
                return FinalOutput(part.text or "")
    calls: list[ToolCallStep] = []
    approvals: list[Any] = []
    last_message = None
    hosted = used = False
    for item in output:
        kind = item.type
        if kind == "function_call":
            calls.append(classify(setup, item))
        elif kind == "message":
            last_message = item
        elif kind == "mcp_approval_request":
            approvals.append(item)
        elif kind in TOOL_ACTIVITY:
            hosted = True
            used = used or kind in USED_TOOLS
    if calls or approvals:
        return RunTools(calls, approvals, used_tools=bool(calls) or used)
    if last_message is None:
        return RunTools([], used_tools=used) if hosted else _final_text_output(turn, setup, "")
    refusal = ItemHelpers.extract_refusal(last_message)
    if refusal:
        raise ModelRefusalError(refusal)
    step = _final_text_output(turn, setup, ItemHelpers.extract_text(last_message) or "")
    return RunTools([]) if step is RUN_AGAIN and used else step  # asks again, with tool_choice reset


def _final_text_output(turn: Turn, setup: Setup, text: str) -> NextStep:
    if setup.schema is None:
        return FinalOutput(text)
    if not text:
        return RUN_AGAIN
    try:
        return FinalOutput(setup.schema.validate_json(text))
    except ModelBehaviorError as error:
        raise OutputValidationError(
            f"Agent {turn.agent.name!r} answered with output that does not match its output_type: {error}",
            agent=turn.agent.name, chat_id=turn.run.chat_id, depth=turn.depth,
        ) from error


async def stop_after_tools(turn: Turn, results: list[ToolResult]) -> FinalOutput | None:
    """`tool_use_behavior` as in the SDK: a function tool's output may end the turn; with no `output_type` (or
    `str`) that output becomes its `str()`, as under `Runner`."""
    agent = turn.agent
    behavior = agent.tool_use_behavior
    if behavior == "run_llm_again" or not results:
        return None
    results = sorted(results, key=lambda result: result[0])  # call order, whatever finished first
    found: FinalOutput | None = None
    if behavior == "stop_on_first_tool":
        found = FinalOutput(results[0][3])
    elif isinstance(behavior, dict):
        names = behavior.get("stop_at_tool_names", [])
        for _, tool, _, output in results:
            if tool.name in names or tool.qualified_name in names:
                found = FinalOutput(output)
                break
    elif callable(behavior):
        found = await _decided_by(turn, behavior, results)
    else:
        raise ConfigError(f"Agent {agent.name!r}: invalid tool_use_behavior {behavior!r}.")
    if found is not None and (agent.output_type is None or agent.output_type is str):
        found.output = str(found.output)
    return found


async def _decided_by(turn: Turn, behavior: Any, results: list[ToolResult]) -> FinalOutput | None:
    """A custom `tool_use_behavior` function, given the SDK's `FunctionToolResult`s."""
    agent = turn.agent
    tool_results = [
        FunctionToolResult(tool=tool, output=output, run_item=ToolCallOutputItem(
            agent=agent, raw_item=output_item(call, output), output=output,
        ))
        for _, tool, call, output in results
    ]
    decided = behavior(turn.run.context(), tool_results)
    if inspect.isawaitable(decided):
        decided = await decided
    if not isinstance(decided, ToolsToFinalOutputResult):
        raise UserError(
            f"Agent {agent.name!r}: a tool_use_behavior callable must return ToolsToFinalOutputResult."
        )
    return FinalOutput(decided.final_output) if decided.is_final_output else None


def answered_results(
    setup: Setup, items: list[dict[str, Any]], waiting: set[str]
) -> tuple[list[ToolResult], dict[str, int]]:
    """The paused response's function calls answered before the pause (`RunTools.answered`), and each of its calls'
    place in it (`RunTools.order`). The response is the run of model items around the first of the `waiting` calls
    (those without an output, resumed now)."""
    first = next((index for index, item in enumerate(items)
                  if item.get("type") == "function_call" and str(item.get("call_id")) in waiting), None)
    if first is None:
        return [], {}
    start, end = first, first
    while start > 0 and _from_the_model(items[start - 1]):
        start -= 1
    while end < len(items) and _from_the_model(items[end]):
        end += 1
    calls = [item for item in items[start:end] if item.get("type") == "function_call"]
    outputs = {str(item.get("call_id")): item.get("output") for item in items[end:]
               if item.get("type") == "function_call_output"}
    order = {str(call.get("call_id")): index for index, call in enumerate(calls)}
    answered: list[ToolResult] = []
    for call in calls:
        call_id = str(call.get("call_id"))
        step = classify(setup, ResponseFunctionToolCall.model_validate(call)) if call_id in outputs else None
        if isinstance(step, FunctionToolCall):
            answered.append((order[call_id], step.tool, step.call, outputs[call_id]))
    return answered, order


def _from_the_model(item: dict[str, Any]) -> bool:
    """An item of a model response (not a user message, a tool's output, an answer to an approval or a mark)."""
    kind = item.get("type")
    return kind is not None and kind not in ("function_call_output", "mcp_approval_response") and (
        not str(kind).startswith("agency_swarm.")
    )
