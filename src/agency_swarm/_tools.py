"""Running function tools: the ToolContext, errors shown to the model, and outputs as thread items."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agents import FunctionTool, ItemHelpers, RunConfig, RunContextWrapper
from agents.run_config import ToolErrorFormatterArgs
from agents.tool import invoke_function_tool
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall

if TYPE_CHECKING:
    from ._agent import Agent


def _show_tool_error(args: ToolErrorFormatterArgs[Any]) -> str | None:
    """The SDK hides tool exceptions from the model by default; the model needs them to recover."""
    if args.kind == "tool_exception" and args.error is not None:
        return error_output(args.tool_name, args.error)
    return None


TOOL_RUN_CONFIG = RunConfig(tool_error_formatter=_show_tool_error, tracing_disabled=True)


def error_output(tool_name: str, error: BaseException) -> str:
    return f"Error: tool {tool_name!r} failed: {type(error).__name__}: {error}"


def unknown_tool_output(name: str, available: list[str]) -> str:
    listing = ", ".join(available) if available else "none"
    return f"Error: there is no tool named {name!r}. Available tools: {listing}."


async def run_function_tool(
    *,
    agent: Agent,
    tool: FunctionTool,
    call: ResponseFunctionToolCall,
    run_context: RunContextWrapper[Any],
) -> Any:
    """Invoke one tool the way the SDK's runner does (timeouts, failure formatters); never raises for tool errors."""
    context = ToolContext(
        context=run_context.context,
        usage=run_context.usage,
        tool_name=call.name,
        tool_call_id=call.call_id,
        tool_arguments=call.arguments,
        tool_call=call,
        agent=agent,
        run_config=TOOL_RUN_CONFIG,
    )
    hooks = agent.hooks
    if hooks is not None:
        await hooks.on_tool_start(context, agent, tool)
    try:
        if tool.timeout_seconds is None and _takes_tool_context(tool):
            output = await tool.on_invoke_tool(context, call.arguments)
        else:
            output = await invoke_function_tool(function_tool=tool, context=context, arguments=call.arguments)
    except Exception as error:  # a tool without a failure_error_function raised; show the model why
        output = error_output(call.name, error)
    if hooks is not None:
        await hooks.on_tool_end(context, agent, tool, output)
    return output


_TAKES_TOOL_CONTEXT: dict[int, tuple[object, bool]] = {}


def _takes_tool_context(tool: FunctionTool) -> bool:
    """Whether the SDK would hand this tool our ToolContext unchanged.

    `invoke_function_tool` works that out with `inspect.signature` on every call (~70 µs); the answer depends
    only on the invoker's signature, so it is asked once per invoker. Anything unexpected means "no", which
    keeps the SDK's own (slower) path.
    """
    invoker = tool.on_invoke_tool
    known = _TAKES_TOOL_CONTEXT.get(id(invoker))
    if known is not None and known[0] is invoker:
        return known[1]
    try:
        from agents.tool import _get_function_tool_invoke_context

        probe = ToolContext(context=None, tool_name=tool.name, tool_call_id="probe", tool_arguments="{}")
        unchanged = _get_function_tool_invoke_context(tool, probe) is probe
    except Exception:
        unchanged = False
    if len(_TAKES_TOOL_CONTEXT) > 4096:  # tools built per request: keep the memo bounded
        _TAKES_TOOL_CONTEXT.clear()
    _TAKES_TOOL_CONTEXT[id(invoker)] = (invoker, unchanged)  # holds the invoker so its id is never reused
    return unchanged


def output_item(call: ResponseFunctionToolCall, output: Any) -> dict[str, Any]:
    """The function_call_output item for a tool's return value (str fast path, SDK conversion otherwise)."""
    if isinstance(output, str):
        return {"type": "function_call_output", "call_id": call.call_id, "output": output}
    return dict(ItemHelpers.tool_call_output_item(call, output))
