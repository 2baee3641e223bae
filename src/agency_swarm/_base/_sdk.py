"""The one module that uses openai-agents' private names; each has a public fallback, and SHORTCUTS turns them off.

Every private name (or private attribute of an SDK object) the package relies on is read here and nowhere else
(tests/project/test_sdk_boundary.py checks that). Each is looked up with a fallback, so a newer SDK that renamed one
still imports and runs, only slower or with plainer output. Borrowed from openai-agents 0.24:

- `agents.tool._FailureHandlingFunctionToolInvoker`, its attributes `_function_tool`, `_invoke_tool_impl` and
  `_on_handled_error`, and the closure of `function_tool`'s `_on_invoke_tool_impl` (`the_func`, `schema`,
  `output_type_adapter`, `is_sync_function_tool`, `_prepare_arguments`; accepted only while the globals it reads are
  the known ones, such as `_function_tool_arguments`, `_log_function_tool_invocation` and
  `_validate_function_tool_output`): the invoker `function_tool` builds. Read to call the decorated
  function with arguments validated once, skipping the SDK's per-call argument machinery, and to replay a failure
  through the tool's own failure handling. Fallback: no direct calls; every call goes through the tool's public
  `on_invoke_tool` (or `agents.tool.invoke_function_tool`).
- `agents._function_tool_arguments.can_prepare_without_user_code`: whether validating a tool's parameter model runs
  user code, which a direct call would run outside the SDK's error handling. Fallback: assume it does (no direct
  call).
- `agents.tool._get_function_tool_invoke_context`: whether the SDK hands a tool's invoker our ToolContext unchanged
  (not narrowed to a RunContextWrapper); asked once per invoker instead of the SDK's signature check per call.
  Fallback: "no": calls go through the public `agents.tool.invoke_function_tool`, which decides per call.
- `__agents_function_tool_wrapped_callable__` (on `_invoke_tool_impl`): the decorated function, whose argument
  model says which argument the model got wrong. Fallback: the model reads that its arguments "do not match" the
  tool's parameters, without the details.
- `agents.models._retry_runtime._DISABLE_PROVIDER_MANAGED_RETRIES`: the ContextVar the SDK's Runner sets so its
  OpenAI / LiteLLM / any-llm models skip their client's own retries while the runner retries; RetryingModel sets it
  for the same reason. Fallback: a ContextVar of our own that no client reads: clients then retry on their own as
  well (more attempts on failure, same outcome).
- The private fields a ToolContext's constructor sets (`_approvals`, `_tool_invocations`,
  `_restored_unbound_approval_call_ids`, `_custom_data`, `_function_tool_arguments`): filled in by hand for a
  ToolContext built without the constructor, after checking at import that the result equals what the
  constructor builds. Fallback: the public `ToolContext(...)` constructor.
- `agents.util._approvals.evaluate_function_tool_approval`: `Runner`'s own answer to "does this call of a tool whose
  `needs_approval` is a function wait for approval?". It fails closed: arguments that are not a JSON object, or that
  the tool's argument validation would change (a "5000" for an int, a default filled in, an extra key dropped), or
  that a user-code validator would see, wait without the policy being asked; otherwise the policy gets the parsed
  object. Fallback: every such call waits for approval (the policy is never asked), since without the SDK's check
  nobody knows whether the tool would run with what the policy saw.
- `DefaultTraceProvider._refresh_disabled_flag()` and `._disabled`: whether tracing is off, known without building
  and logging a throw-away trace. Fallback: ask `agents.trace()`, which returns a NoOpTrace when tracing is off.
- `DefaultTraceProvider._multi_processor._processors` and each processor's `_exporter`: whether the only exporter is
  the SDK's OpenAI one with no key, which would drop an offline turn's trace with a warning. Fallback: tracing
  stays on (and the SDK warns that it skips the export).
- `_agents_sdk_request_completed_without_usage` (on a streamed `Response`): how many requests the SDK's model
  adapters say a response that reported no usage stands for; `Runner` counts it in `usage.requests`. Fallback:
  none, as for a response no adapter marked.

- `FunctionTool._agent_instance`: the agent behind a tool that `agent.as_tool(...)` built, which the SDK's
  `RunState.from_json` needs to rebuild that agent's paused nested run from the thread (`_turn/_nested_runs`).
  Fallback: such a run cannot be continued; its call gets an error output and nothing of it runs.

`SHORTCUTS` (read at call time) turns off every fast path that bypasses an SDK path, here and elsewhere: direct
tool calls, the hand-filled ToolContext, the provider flag read, the fast thread-item and tool-output dicts. With
it False every call takes the plain public SDK path; results must not differ. The error-detail, retry-flag and
exporter reads, and the approval check, are not shortcuts (they change what happens, not how fast) and stay on.
"""

from __future__ import annotations

import importlib
from collections.abc import Awaitable, Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from agents import FunctionTool, RunConfig, RunContextWrapper, Usage
from agents.function_schema import FuncSchema
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall

if TYPE_CHECKING:
    from pydantic import BaseModel


class ToolRun(Protocol):
    """What a tool call needs of its turn: the user's context object, and the SDK run context on demand."""

    user_context: Any

    def context(self) -> RunContextWrapper[Any]: ...


SHORTCUTS: bool = True
"""False: every call takes the SDK's public path (the parity tests run both ways and compare)."""


def _borrowed(module: str, name: str) -> Any:
    """`module.name`, or None when this SDK version has no such name (its fallback then runs)."""
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None


_OWN_NO_CLIENT_RETRIES: ContextVar[bool] = ContextVar("agency_swarm_no_client_retries", default=False)

_INVOKER: Any = None
_CAN_PREPARE: Any = None
_INVOKE_CONTEXT: Any = None
_NO_CLIENT_RETRIES: ContextVar[bool] = _OWN_NO_CLIENT_RETRIES
_FILLS_TOOL_CONTEXT = False
_EVALUATE_APPROVAL: Any = None


def resolve() -> None:
    """Look the borrowed module-level names up (at import; tests call it again after hiding one)."""
    global _INVOKER, _CAN_PREPARE, _INVOKE_CONTEXT, _NO_CLIENT_RETRIES, _FILLS_TOOL_CONTEXT, _EVALUATE_APPROVAL
    _INVOKER = _borrowed("agents.tool", "_FailureHandlingFunctionToolInvoker")
    _EVALUATE_APPROVAL = _borrowed("agents.util._approvals", "evaluate_function_tool_approval")
    _CAN_PREPARE = _borrowed("agents._function_tool_arguments", "can_prepare_without_user_code")
    _INVOKE_CONTEXT = _borrowed("agents.tool", "_get_function_tool_invoke_context")
    flag = _borrowed("agents.models._retry_runtime", "_DISABLE_PROVIDER_MANAGED_RETRIES")
    _NO_CLIENT_RETRIES = flag if isinstance(flag, ContextVar) else _OWN_NO_CLIENT_RETRIES
    _FILLS_TOOL_CONTEXT = _fills_like_the_sdk()


# -- the SDK's function-tool invoker ----------------------------------------------------------------------------

_TOOL_OF_INVOKER = "_function_tool"
_IMPLEMENTATION_OF_INVOKER = "_invoke_tool_impl"
_ERROR_HANDLER_OF_INVOKER = "_on_handled_error"
_WRAPPED_CALLABLE = "__agents_function_tool_wrapped_callable__"

_IMPLEMENTATION = "function_tool.<locals>._create_function_tool.<locals>._on_invoke_tool_impl"
_CLOSURE = frozenset({"_prepare_arguments", "is_sync_function_tool", "output_type_adapter", "schema", "the_func"})
_NAMES = frozenset({
    "tool_name", "_function_tool_arguments", "owner", "arguments", "UserError", "_log_function_tool_invocation",
    "args", "kwargs", "_debug", "DONT_LOG_TOOL_DATA", "logger", "debug", "takes_context", "asyncio", "to_thread",
    "_validate_function_tool_output",
})
"""Every global and attribute the SDK's invoker (openai-agents 0.24) reads. One more means it does something a
direct call does not know about, and that tool keeps the SDK's path."""


@dataclass(frozen=True, slots=True)
class FunctionToolParts:
    """What `function_tool` put into a tool's invoker: the function, its schema, how its output is checked."""

    function: Callable[..., Any]
    schema: FuncSchema
    output_type_adapter: Any
    sync: bool


def function_tool_parts(tool: FunctionTool) -> FunctionToolParts | None:
    """The parts of a tool `function_tool` made whose invoker is the SDK's own, unchanged; else None."""
    invoker = tool.on_invoke_tool
    if _INVOKER is None or type(invoker) is not _INVOKER or getattr(invoker, _TOOL_OF_INVOKER, None) is not tool:
        return None
    if not callable(getattr(invoker, _ERROR_HANDLER_OF_INVOKER, None)):
        return None  # a failure could not be replayed through the SDK's handling
    implementation = getattr(invoker, _IMPLEMENTATION_OF_INVOKER, None)
    code = getattr(implementation, "__code__", None)
    if (
        getattr(implementation, "__qualname__", None) != _IMPLEMENTATION
        or code is None
        or frozenset(code.co_freevars) != _CLOSURE
        or not _NAMES.issuperset(code.co_names)
    ):
        return None
    cells = zip(code.co_freevars, getattr(implementation, "__closure__", None) or (), strict=True)
    closure = {name: cell.cell_contents for name, cell in cells}
    schema = closure["schema"]
    if not isinstance(schema, FuncSchema) or not callable(closure["the_func"]):
        return None
    return FunctionToolParts(
        function=closure["the_func"], schema=schema, output_type_adapter=closure["output_type_adapter"],
        sync=bool(closure["is_sync_function_tool"]),
    )


def prepares_without_user_code(model: type[BaseModel]) -> bool:
    """Whether validating this parameter model runs no user code (validators, custom types)."""
    return _CAN_PREPARE is not None and bool(_CAN_PREPARE(model))


def hands_over_tool_context(tool: FunctionTool) -> bool:
    """Whether the SDK would give this tool's invoker the ToolContext it is given, not a narrower copy."""
    if not callable(_INVOKE_CONTEXT):
        return False
    probe = ToolContext(context=None, tool_name=tool.name, tool_call_id="probe", tool_arguments="{}")
    return _INVOKE_CONTEXT(tool, probe) is probe


def replaying(tool: FunctionTool, error: Exception) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
    """An invoker that fails with `error` inside the SDK's own failure handling: the tool's failure_error_function,
    run config formatter and span error then treat it exactly as if the SDK had called the function.

    Only for a tool `function_tool_parts` accepted (so the invoker class and its error handler exist).
    """

    async def fail(context: ToolContext[Any], arguments: str) -> Any:
        raise error

    handled = getattr(tool.on_invoke_tool, _ERROR_HANDLER_OF_INVOKER)
    replay: Callable[[ToolContext[Any], str], Awaitable[Any]] = _INVOKER(fail, handled, function_tool=tool)
    return replay


def decorated_function(tool: FunctionTool | None) -> Callable[..., Any] | None:
    """The function `function_tool` decorated, or None (a hand-made tool, or an SDK that no longer marks it)."""
    implementation = getattr(getattr(tool, "on_invoke_tool", None), _IMPLEMENTATION_OF_INVOKER, None)
    function = getattr(implementation, _WRAPPED_CALLABLE, None)
    return function if callable(function) else None


# -- approvals --------------------------------------------------------------------------------------------------


async def policy_wants_approval(
    tool: FunctionTool, context: RunContextWrapper[Any], arguments: str, call_id: str
) -> bool:
    """Whether this call of a tool whose `needs_approval` is a function waits for approval, as `Runner` decides it
    (see the module docstring). The policy's own exception propagates."""
    if _EVALUATE_APPROVAL is None:
        return True
    evaluation = await _EVALUATE_APPROVAL(tool, context, arguments, call_id)
    return bool(evaluation.outcome != "invoke")


# -- client retries ---------------------------------------------------------------------------------------------


def quiet_client_retries() -> Token[bool]:
    """Tell the SDK's provider models to leave retrying to us until `restore_client_retries(token)`."""
    return _NO_CLIENT_RETRIES.set(True)


def restore_client_retries(token: Token[bool]) -> None:
    token.var.reset(token)  # the token's own variable: right even if `resolve()` ran in between


# -- usage ------------------------------------------------------------------------------------------------------

_REQUESTS_WITHOUT_USAGE = "_agents_sdk_request_completed_without_usage"


def requests_without_usage(response: Any) -> int:
    """The requests a streamed response without usage stands for, as its model adapter marked it (True is one)."""
    marked = getattr(response, _REQUESTS_WITHOUT_USAGE, 0)
    if marked is True:
        return 1
    return marked if type(marked) is int and marked > 0 else 0


# -- tracing ----------------------------------------------------------------------------------------------------

_REFRESH_FLAG = "_refresh_disabled_flag"
_DISABLED_FLAG = "_disabled"
_PROCESSOR_SET = "_multi_processor"
_PROCESSORS = "_processors"
_EXPORTER = "_exporter"


def tracing_switched_off(provider: Any) -> bool:
    """Tracing is disabled (OPENAI_AGENTS_DISABLE_TRACING, `set_tracing_disabled`), read from the provider's flag.

    False when the flag cannot be read or SHORTCUTS is off: the caller then asks `trace()`, which knows as well.
    """
    if not SHORTCUTS:
        return False
    try:
        getattr(provider, _REFRESH_FLAG)()
        return getattr(provider, _DISABLED_FLAG) is True
    except (AttributeError, TypeError):  # another provider, or a newer SDK's
        return False


def trace_exporters(provider: Any) -> list[object] | None:
    """Each installed trace processor's exporter (None for one without), or None when the list cannot be read."""
    processors = getattr(getattr(provider, _PROCESSOR_SET, None), _PROCESSORS, None)
    if not isinstance(processors, tuple | list):
        return None
    return [getattr(processor, _EXPORTER, None) for processor in processors]


# -- agent tools -------------------------------------------------------------------------------------------------

_AGENT_OF_TOOL = "_agent_instance"


def agent_of_tool(tool: FunctionTool) -> Any:
    """The agent an `agent.as_tool(...)` tool runs, or None (not an agent tool, or this SDK keeps it elsewhere)."""
    return getattr(tool, _AGENT_OF_TOOL, None)


# -- the ToolContext --------------------------------------------------------------------------------------------


def built_tool_context(
    run: ToolRun, call: ResponseFunctionToolCall, agent: Any, run_config: RunConfig
) -> ToolContext[Any]:
    """The ToolContext the SDK's public constructor builds for this call."""
    run_context = run.context()
    return ToolContext(
        context=run_context.context,
        usage=run_context.usage,
        tool_name=call.name,
        tool_call_id=call.call_id,
        tool_arguments=call.arguments,
        tool_call=call,
        agent=agent,
        run_config=run_config,
    )


class RunToolContext(ToolContext[Any]):
    """A ToolContext whose `usage` (the run's, kept current as the turn goes on) is looked up when first read.

    The run's usage object is built on demand, and most tools never read it.
    """

    @property
    def usage(self) -> Usage:
        found: Usage | None = self.__dict__.get("usage")
        if found is None:
            found = self.__dict__["usage"] = self.__dict__["_run"].context().usage
        return found

    @usage.setter
    def usage(self, value: Usage) -> None:
        self.__dict__["usage"] = value


_new = object.__new__


def filled_tool_context(
    run: ToolRun, call: ResponseFunctionToolCall, agent: Any, run_config: RunConfig
) -> ToolContext[Any]:
    """The instance `ToolContext(...)` would build, attribute for attribute, at a third of its cost.

    The SDK's constructor re-imports `run_config`, coerces an already typed RunConfig and runs the dataclass
    machinery of two classes on every call; in a turn with one tool that is a visible share of the turn.
    """
    context: ToolContext[Any] = _new(RunToolContext)
    context.__dict__ = {
        "context": run.user_context,
        "_run": run,
        "turn_input": [],
        "_approvals": {},
        "_tool_invocations": {},
        "tool_input": None,
        "_restored_unbound_approval_call_ids": set(),
        "tool_name": call.name,
        "tool_arguments": call.arguments,
        "tool_call_id": call.call_id,
        "tool_call": call,
        "tool_namespace": _namespace(call),
        "agent": agent,
        "run_config": run_config,
        "_custom_data": None,
        "_function_tool_arguments": None,
    }
    return context


def tool_context(run: ToolRun, call: ResponseFunctionToolCall, agent: Any, run_config: RunConfig) -> ToolContext[Any]:
    """A tool call's ToolContext: context and usage are the run's own objects, the rest is this call's."""
    if SHORTCUTS and _FILLS_TOOL_CONTEXT:
        return filled_tool_context(run, call, agent, run_config)
    return built_tool_context(run, call, agent, run_config)


def _namespace(call: ResponseFunctionToolCall) -> str | None:
    """The namespace the SDK's constructor gives a call's context: a non-empty str, else None."""
    namespace = getattr(call, "namespace", None)
    return namespace if isinstance(namespace, str) and namespace else None


def _fills_like_the_sdk() -> bool:
    """Whether `filled_tool_context` still matches this SDK version's constructor (a new or renamed field,
    another default: then every call takes the constructor)."""
    try:
        probe = _ProbeRun()
        call = ResponseFunctionToolCall(type="function_call", call_id="probe", name="probe", arguments="{}")
        config = RunConfig(tracing_disabled=True)
        made = built_tool_context(probe, call, None, config)
        filled = filled_tool_context(probe, call, None, config)
        same = tool_context_fields(filled) == tool_context_fields(made)
        return type(made) is ToolContext and filled.usage is made.usage and same
    except Exception:
        return False


def tool_context_fields(context: ToolContext[Any]) -> dict[str, Any]:
    """A tool context's attributes as the constructor sets them (usage as the attribute reads it)."""
    found = {name: value for name, value in vars(context).items() if name != "_run"}
    found["usage"] = context.usage
    return found


class _ProbeRun:
    def __init__(self) -> None:
        self.user_context = object()
        self.wrapper = RunContextWrapper(context=self.user_context)

    def context(self) -> RunContextWrapper[Any]:
        return self.wrapper


resolve()
