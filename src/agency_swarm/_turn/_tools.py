"""Running function tools: the ToolContext, errors shown to the model, and outputs as thread items."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from agents import (
    FunctionTool,
    InputGuardrailTripwireTriggered,
    ItemHelpers,
    ModelBehaviorError,
    OutputGuardrailTripwireTriggered,
    RunConfig,
)
from agents.run_config import ToolErrorFormatterArgs
from agents.tool import invoke_function_tool
from agents.tool_context import ToolContext
from agents.tracing.scope import Scope
from agents.tracing.span_data import FunctionSpanData
from agents.tracing.spans import NoOpSpan
from openai.types.responses import ResponseFunctionToolCall
from pydantic import ValidationError

from .._base import _sdk
from .._base._sdk import ToolRun
from ._direct_call import call_function, direct_call, parsed_arguments, replaying, takes_tool_context
from ._tool_guardrails import check_tool_input, check_tool_output
from ._tool_keys import call_key, tool_key

if TYPE_CHECKING:
    from ._definition import AgentBase, Wiring
    from ._nested_runs import NestedRun

logger = logging.getLogger("agency_swarm")


def _shown(args: ToolErrorFormatterArgs[Any]) -> str | None:
    """The SDK hides tool exceptions from the model by default; the model needs them to recover."""
    if args.kind == "tool_exception" and args.error is not None:
        return failure_output(args.run_context, args.tool_name, args.error, show=True)
    return None


def _hidden(args: ToolErrorFormatterArgs[Any]) -> str | None:
    if args.kind == "tool_exception" and args.error is not None:
        return failure_output(args.run_context, args.tool_name, args.error, show=False)
    return None


TOOL_RUN_CONFIG = RunConfig(tool_error_formatter=_shown, tracing_disabled=True)
_HIDDEN_ERRORS_RUN_CONFIG = RunConfig(tool_error_formatter=_hidden, tracing_disabled=True)


def error_output(tool_name: str, error: BaseException) -> str:
    return f"Error: tool {tool_name!r} failed: {type(error).__name__}: {error}"


def hidden_error_output(tool_name: str) -> str:
    return f"Error: tool {tool_name!r} failed."


def failure_output(context: Any, tool_name: str, error: BaseException, *, show: bool) -> str:
    """What the model reads about a failed call: why its arguments were wrong (always), or the tool's exception
    (only with `show`; otherwise it is logged for the developer instead)."""
    if isinstance(error, ModelBehaviorError) and str(error).startswith("Invalid JSON input for tool"):
        arguments = getattr(context, "tool_arguments", "") or ""
        problem = argument_problem(_find_tool(getattr(context, "agent", None), context), arguments)
        return (
            f"Error: invalid arguments for tool {tool_name!r}: {problem}. "
            "Call it again with arguments that match its parameters."
        )
    if show:
        return error_output(tool_name, error)
    logger.warning("Tool %r failed; its error is hidden from the model (show_tool_errors=False)", tool_name,
                   exc_info=error)
    return hidden_error_output(tool_name)


def _find_tool(agent: Any, context: Any) -> FunctionTool | None:
    """The agent's tool that a failed call's context names (namespace and name), as the loop found it: the last
    tool with that key."""
    name = getattr(context, "tool_name", None)
    if not isinstance(name, str):
        return None
    wanted = call_key(name, getattr(context, "tool_namespace", None))
    found = None
    for tool in getattr(agent, "tools", None) or []:
        if isinstance(tool, FunctionTool) and tool_key(tool) == wanted:
            found = tool
    return found


def argument_problem(tool: FunctionTool | None, arguments: str) -> str:
    """Why `arguments` do not fit `tool`, in words the model can act on.

    The SDK says only "Invalid JSON input" (it keeps tool data out of its logs); the details are the model's
    own output, so they are safe to give back to it.
    """
    try:
        data = json.loads(arguments or "{}")
    except json.JSONDecodeError as error:
        return f"they are not valid JSON ({error.msg} at line {error.lineno}, column {error.colno})"
    if not isinstance(data, dict):
        return f"they must be a JSON object, got {type(data).__name__}"
    params_model = _params_model(tool)
    if params_model is not None:
        try:
            params_model(**data)
        except ValidationError as error:
            return "; ".join(_describe(problem) for problem in error.errors(include_url=False)[:5])
        except Exception:
            pass
    return "they do not match its parameters"


def _describe(problem: Any) -> str:
    where = ".".join(str(part) for part in problem.get("loc", ())) or "(arguments)"
    return f"{where}: {problem.get('msg', 'invalid')}"


def _params_model(tool: FunctionTool | None) -> Any:
    """The pydantic model the SDK validated with, rebuilt from the decorated function (error path only)."""
    function = _sdk.decorated_function(tool)
    if function is None:
        return None
    try:
        from agents.function_schema import function_schema

        return function_schema(function).params_pydantic_model
    except Exception:
        return None


Tripwire = InputGuardrailTripwireTriggered | OutputGuardrailTripwireTriggered
_INFO_LIMIT = 300


def named_tripwire(error: Tripwire, agent: str) -> Tripwire:
    """The SDK's exception, reworded to name the agent, the guardrail and what it reported.

    The SDK's own text names only the guardrail class ("Guardrail InputGuardrail triggered tripwire"). For a
    nested agent this text is what its caller's model reads as the send_message output.
    """
    result = error.guardrail_result
    kind = "input" if isinstance(error, InputGuardrailTripwireTriggered) else "output"
    info = result.output.output_info
    detail = "" if info is None else f": {info}"
    if len(detail) > _INFO_LIMIT:
        detail = detail[: _INFO_LIMIT - 3] + "..."
    error.args = (f"Agent {agent!r}: {kind} guardrail {result.guardrail.get_name()!r} tripped{detail}",)
    return error


_NO_SPAN = NoOpSpan(FunctionSpanData(name="agency_swarm tool", input=None, output=None))
"""Made current around a tool when nothing is traced: the SDK then has somewhere to attach a handled tool error
instead of logging "No active span" for every failed call. Never when a trace is current: spans a tool opens
itself would then be dropped."""


def unknown_tool_output(name: str, available: list[str]) -> str:
    listing = ", ".join(available) if available else "none"
    return f"Error: there is no tool named {name!r}. Available tools: {listing}."


async def run_function_tool(
    agent: AgentBase,
    tool: FunctionTool,
    call: ResponseFunctionToolCall,
    run: ToolRun,
    wiring: Wiring | None = None,
    nested: NestedRun | None = None,
) -> Any:
    """Invoke one tool the way the SDK's runner does (timeouts, failure formatters); never raises for tool errors.

    `nested` scopes what an agent tool keeps in the SDK's store; as under `Runner`, a call that continues a paused
    nested run skips input guardrails and on_tool_start, and one whose nested run pauses skips output guardrails
    and on_tool_end (they run when it finishes)."""
    show = agent.show_tool_errors
    if show is None:
        show = True if wiring is None else wiring.show_tool_errors
    run_config = TOOL_RUN_CONFIG if show else _HIDDEN_ERRORS_RUN_CONFIG
    direct = direct_call(tool) if tool.timeout_seconds is None else None
    parsed = None if direct is None else parsed_arguments(direct, call.arguments)
    hooks = agent.hooks
    guarded = bool(tool.tool_input_guardrails or tool.tool_output_guardrails)
    if direct is not None and parsed is not None and hooks is None and not direct.takes_context and not guarded:
        try:  # the usual tool: no one reads its ToolContext unless it fails
            return await call_function(direct, None, parsed)
        except Exception as error:
            context = tool_context(run, call, agent, run_config)
            return await _invoked(replaying(tool, error), tool, context, call.arguments)
    context = tool_context(run, call, agent, run_config)
    if nested is not None:
        nested.bind(context, tool)
    if guarded:
        return await _guarded(agent, tool, call, context, run, nested)
    if hooks is not None and not (nested is not None and nested.continuing):
        await hooks.on_tool_start(context, agent, tool)
    if direct is not None and parsed is not None:
        try:
            output = await call_function(direct, context, parsed)
        except Exception as error:  # the SDK's failure handling decides what the model reads
            output = await _invoked(replaying(tool, error), tool, context, call.arguments)
    else:
        output = await _invoked(tool.on_invoke_tool, tool, context, call.arguments)
    if hooks is not None and not (nested is not None and nested.paused()):
        await hooks.on_tool_end(context, agent, tool, output)
    return output


async def _guarded(
    agent: AgentBase,
    tool: FunctionTool,
    call: ResponseFunctionToolCall,
    context: ToolContext[Any],
    run: ToolRun,
    nested: NestedRun | None,
) -> Any:
    """A tool with guardrails, in `Runner`'s order: input guardrails (a rejection means the tool never runs and no
    hook sees it), on_tool_start, the SDK's own invocation, output guardrails, then on_tool_end with what the model
    will read."""
    log = getattr(run, "guardrail_log", None)
    continuing = nested is not None and nested.continuing
    rejected = None if continuing else await check_tool_input(tool, context, agent, log)
    if rejected is not None:
        return rejected
    hooks = agent.hooks
    if hooks is not None and not continuing:
        await hooks.on_tool_start(context, agent, tool)
    output = await _invoked(tool.on_invoke_tool, tool, context, call.arguments)
    if nested is not None and nested.paused():
        return output
    output = await check_tool_output(tool, context, agent, output, log)
    if hooks is not None:
        await hooks.on_tool_end(context, agent, tool, output)
    return output


async def _invoked(
    invoker: Callable[[ToolContext[Any], str], Awaitable[Any]],
    tool: FunctionTool,
    context: ToolContext[Any],
    arguments: str,
) -> Any:
    """The SDK's own invocation: its argument handling, timeout and failure formatting. It raises only for a tool
    built with `failure_error_function=None`: its user asked for the error to end the turn, as under `Runner`."""
    untraced = Scope.get_current_span() is None and Scope.get_current_trace() is None
    token = Scope.set_current_span(_NO_SPAN) if untraced else None
    try:
        if invoker is not tool.on_invoke_tool or (
            _sdk.SHORTCUTS and tool.timeout_seconds is None and takes_tool_context(tool)
        ):  # a replayed failure, or an invoker the SDK would call with this very context and no timeout
            return await invoker(context, arguments)
        return await invoke_function_tool(function_tool=tool, context=context, arguments=arguments)
    finally:
        if token is not None:
            Scope.reset_current_span(token)


tool_context = _sdk.tool_context
"""A tool's ToolContext: context and usage are the run's own objects (usage looked up when read), the rest is this
call's. Hand-filled where that matches the SDK's constructor (see `_sdk`), else built by it."""


_AS_TEXT = frozenset({int, float, bool, type(None)})
"""Return types the SDK turns into `str(output)` for a call no hosted program made (it would read them as
JSON instead)."""


def output_item(call: ResponseFunctionToolCall, output: Any) -> dict[str, Any]:
    """The function_call_output item for a tool's return value (str and scalar fast paths, SDK conversion
    otherwise)."""
    if not _sdk.SHORTCUTS:
        return dict(ItemHelpers.tool_call_output_item(call, output))
    if isinstance(output, str):
        return {"type": "function_call_output", "call_id": call.call_id, "output": output}
    if type(output) in _AS_TEXT and getattr(call, "caller", None) is None:
        return {"type": "function_call_output", "call_id": call.call_id, "output": str(output)}
    return dict(ItemHelpers.tool_call_output_item(call, output))
