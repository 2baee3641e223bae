"""Calling a `function_tool` tool's function without the SDK's per-call argument machinery, where that is exact."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from agents import FunctionTool
from agents.logger import logger as _sdk_logger
from agents.tool_context import ToolContext
from pydantic import BaseModel

from .._base import _sdk

_PLAIN = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


@dataclass(frozen=True, slots=True, kw_only=True)
class DirectCall:
    """What the SDK's invoker would do for one tool, worked out once: its function, the validator of its
    arguments, and which validated field goes to which parameter."""

    invoker: object  # held, so the memo's id() key cannot be reused by another invoker
    function: Callable[..., Any]
    validate_json: Callable[[str], BaseModel]
    positional: tuple[str, ...]
    keyword: tuple[str, ...]
    takes_context: bool
    sync: bool


def parsed_arguments(direct: DirectCall, arguments: str) -> BaseModel | None:
    """The validated arguments, or None where the SDK's path must run instead: invalid arguments (its error
    text is the one the model reads) or SDK debug logging on (its log lines are the ones the developer reads)."""
    if _sdk_logger.isEnabledFor(logging.DEBUG):
        return None
    try:
        return direct.validate_json(arguments)
    except Exception:
        return None


def call_function(direct: DirectCall, context: ToolContext[Any] | None, parsed: BaseModel) -> Awaitable[Any]:
    """The tool function's result, called with the arguments the SDK's `to_call_args` would give it (and the
    call's ToolContext first, for a function that takes one)."""
    values = parsed.__dict__
    if direct.keyword:
        args = [values[name] for name in direct.positional]
        kwargs = {name: values[name] for name in direct.keyword}
    else:  # only positional parameters: validation fills `__dict__` in their order (checked in `_worked_out`)
        args, kwargs = list(values.values()), {}
    if direct.takes_context:
        args.insert(0, context)
    if direct.sync:
        return asyncio.to_thread(direct.function, *args, **kwargs)
    result: Awaitable[Any] = direct.function(*args, **kwargs)
    return result


def replaying(tool: FunctionTool, error: Exception) -> Callable[[ToolContext[Any], str], Awaitable[Any]]:
    """An invoker that fails with `error` inside the SDK's own failure handling (for a tool `direct_call` accepted):
    the tool's failure_error_function, run config formatter and span error then treat it as the SDK would."""
    return _sdk.replaying(tool, error)


_TAKES_TOOL_CONTEXT: dict[int, tuple[object, bool]] = {}


def takes_tool_context(tool: FunctionTool) -> bool:
    """Whether the SDK would hand this tool our ToolContext unchanged.

    `invoke_function_tool` works that out with `inspect.signature` on every call, a large share of a tool call;
    the answer depends only on the invoker's signature, so it is asked once per invoker. Anything unexpected means
    "no", which keeps the SDK's own (slower) path.
    """
    invoker = tool.on_invoke_tool
    known = _TAKES_TOOL_CONTEXT.get(id(invoker))
    if known is not None and known[0] is invoker:
        return known[1]
    try:
        unchanged = _sdk.hands_over_tool_context(tool)
    except Exception:
        unchanged = False
    if len(_TAKES_TOOL_CONTEXT) > 4096:  # tools built per request: keep the memo bounded
        _TAKES_TOOL_CONTEXT.clear()
    _TAKES_TOOL_CONTEXT[id(invoker)] = (invoker, unchanged)  # holds the invoker so its id is never reused
    return unchanged


_MEMO: dict[int, tuple[object, DirectCall | None]] = {}


def direct_call(tool: FunctionTool) -> DirectCall | None:
    """How to call this tool directly, or None to keep the SDK's path (asked once per invoker)."""
    if not _sdk.SHORTCUTS:
        return None
    invoker = tool.on_invoke_tool
    known = _MEMO.get(id(invoker))
    if known is not None and known[0] is invoker:
        return known[1]
    try:
        found = _worked_out(tool, invoker)
    except Exception:
        found = None
    if len(_MEMO) > 4096:  # tools built per request: keep the memo bounded
        _MEMO.clear()
    _MEMO[id(invoker)] = (invoker, found)
    return found


def _worked_out(tool: FunctionTool, invoker: object) -> DirectCall | None:
    """A DirectCall only for a tool `function_tool` made whose every step is known: the SDK's invoker unchanged,
    no output type to validate, a parameter model that runs no user code, and one field per plain parameter."""
    parts = _sdk.function_tool_parts(tool)
    if parts is None:
        return None
    schema = parts.schema
    model = schema.params_pydantic_model
    if parts.output_type_adapter is not None or not _sdk.prepares_without_user_code(model):
        return None
    parameters = list(schema.signature.parameters.values())[1 if schema.takes_context else 0 :]
    if [parameter.name for parameter in parameters] != list(model.model_fields):
        return None  # one field per parameter, in the parameters' order
    if not takes_tool_context(tool):
        return None  # the SDK would narrow the context it hands the invoker
    if any(parameter.kind not in (*_PLAIN, inspect.Parameter.KEYWORD_ONLY) for parameter in parameters):
        return None  # *args / **kwargs: the SDK's to_call_args spreads them
    return DirectCall(
        invoker=invoker,
        function=parts.function,
        validate_json=model.__pydantic_validator__.validate_json,
        positional=tuple(parameter.name for parameter in parameters if parameter.kind in _PLAIN),
        keyword=tuple(parameter.name for parameter in parameters if parameter.kind not in _PLAIN),
        takes_context=bool(schema.takes_context),
        sync=parts.sync,
    )
