"""A `function_tool` tool called directly gives the model, the tool and the developer what the SDK's invoker gives."""

from __future__ import annotations

import dataclasses
import logging
from typing import Annotated, Any, Literal

import agents.tool
import pytest
from agents import AgentHooks, RunContextWrapper, Usage, function_tool
from agents.tool import FunctionTool
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall
from pydantic import Field

from agency_swarm import Agent
from agency_swarm._base import _sdk as _sdk
from agency_swarm._turn import _direct_call as _direct_call
from agency_swarm._turn import _tools as _tools

SEEN: list[Any] = []


@function_tool
async def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    SEEN.append((a, b))
    return a + b


@function_tool
def add_in_a_thread(a: int, b: int) -> int:
    """Add two integers, synchronously."""
    SEEN.append((a, b))
    return a + b


@function_tool(strict_mode=False)
async def describe(ctx: RunContextWrapper[Any], text: str, *, times: int = 1, tags: list[str] | None = None,
                   mode: Literal["plain", "loud"] = "plain", score: float = 0.5, extra: dict[str, Any] | None = None,
                   ) -> str:
    """Repeat text."""
    SEEN.append(ctx)
    shown = text.upper() if mode == "loud" else text
    return f"{shown * times} {tags} {score!r} {extra}"


@function_tool
async def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


@function_tool(failure_error_function=lambda ctx, error: f"custom: {error}")
async def explode_politely(reason: str) -> str:
    """Always fails, with its own message."""
    raise ValueError(reason)


@function_tool(failure_error_function=None)
async def explode_loudly(reason: str) -> str:
    """Always fails, with no failure function."""
    raise KeyError(reason)


@function_tool
async def spread(*numbers: int) -> int:
    """Sums any number of integers."""
    return sum(numbers)


@function_tool
async def matched(code: Annotated[str, Field(pattern=r"^[a-z]+$")]) -> str:
    """Takes a lower-case code."""
    return code


class Run:
    def __init__(self) -> None:
        self.user_context = {"user": 1}
        self._context = RunContextWrapper(context=self.user_context, usage=Usage())

    def context(self) -> RunContextWrapper[Any]:
        return self._context


def a_call(tool: FunctionTool, arguments: str) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", call_id="call_1", name=tool.name, arguments=arguments)


async def run(tool: FunctionTool, arguments: str, *, show: bool = True) -> Any:
    agent = Agent(name="Worker", instructions="x", tools=[tool], show_tool_errors=show)
    return await _tools.run_function_tool(agent, tool, a_call(tool, arguments), Run())


class SdkInvocations:
    """Counts the SDK invoker's own runs: each one parses the arguments through this module-level function."""

    def __init__(self, parse: Any) -> None:
        self.count, self.parse = 0, parse

    def __call__(self, **kwargs: Any) -> Any:
        self.count += 1
        return self.parse(**kwargs)


@pytest.fixture
def sdk_invocations(monkeypatch: pytest.MonkeyPatch) -> SdkInvocations:
    counter = SdkInvocations(agents.tool._parse_function_tool_json_input)
    monkeypatch.setattr(agents.tool, "_parse_function_tool_json_input", counter)
    return counter


async def both_ways(monkeypatch: pytest.MonkeyPatch, tool: FunctionTool, arguments: str, show: bool = True,
                    ) -> tuple[Any, Any]:
    direct = await outcome(tool, arguments, show)
    with monkeypatch.context() as patch:
        patch.setattr(_tools, "direct_call", lambda tool: None)
        by_sdk = await outcome(tool, arguments, show)
    return direct, by_sdk


async def outcome(tool: FunctionTool, arguments: str, show: bool) -> Any:
    """What the model reads, or what a tool built with failure_error_function=None raised."""
    try:
        return await run(tool, arguments, show=show)
    except Exception as error:
        return ("raised", type(error), str(error))


CASES = [
    (add, '{"a": 1, "b": 2}'),
    (add, '{"a": 5}'),
    (add, '{"a": "7", "b": 1.0}'),
    (add, '{"a": 1.5, "b": 2}'),
    (add, '{"a": 1, "b": 2, "c": 3}'),
    (add, '{"b": 2}'),
    (add, '{"a": null}'),
    (add, '{"a": 1,}'),
    (add, "[1, 2]"),
    (add, ""),
    (add, "{}"),
    (add, '{"a": 1, "a": 4}'),
    (add, '{"a": 123456789012345678901234567890}'),
    (add, ' {"a": 1, "b": 2} \n'),
    (add, '{"a": 1} trailing'),
    (add, '{"a": 1e2, "b": true}'),
    (add, '{"a": "0x10"}'),
    (add, '{"a": " 5 "}'),
    (add_in_a_thread, '{"a": 2, "b": 3}'),
    (add_in_a_thread, '{"a": "x", "b": 3}'),
    (describe, '{"text": "hi", "times": 2, "tags": ["a", "b"], "mode": "loud", "score": 1e400}'),
    (describe, '{"text": "\\ud800"}'),
    (describe, '{"text": "caf\\u00e9 \\ud83d\\ude00", "extra": {"n": [1, 2.5, null, true, "s"]}}'),
    (describe, '{"text": "hi", "mode": "quiet"}'),
    (describe, '{"text": 3}'),
    (describe, '{"text": "hi", "score": NaN}'),
    (explode, '{"reason": "r"}'),
    (explode_politely, '{"reason": "r"}'),
    (explode_loudly, '{"reason": "r"}'),
    (explode, '{"reason": 1}'),
]


@pytest.mark.parametrize("show", [True, False])
@pytest.mark.parametrize(("tool", "arguments"), CASES)
async def test_the_model_reads_what_the_sdk_invoker_gives(
    monkeypatch: pytest.MonkeyPatch, tool: FunctionTool, arguments: str, show: bool
) -> None:
    direct, by_sdk = await both_ways(monkeypatch, tool, arguments, show)
    if isinstance(direct, str) and "nan" in direct:  # nan != nan, so compare the text
        assert str(direct) == str(by_sdk)
    else:
        assert direct == by_sdk
        assert type(direct) is type(by_sdk)


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    (add, '{"a": 1, "b": 2}', 3),
    (add_in_a_thread, '{"a": 2, "b": 5}', 7),
    (describe, '{"text": "ab", "times": 2}', "abab None 0.5 None"),
])
async def test_valid_arguments_skip_the_sdk_invoker(
    sdk_invocations: SdkInvocations, tool: FunctionTool, arguments: str, expected: Any
) -> None:
    assert _direct_call.direct_call(tool) is not None
    assert await run(tool, arguments) == expected
    assert sdk_invocations.count == 0


@pytest.mark.parametrize("arguments", ['{"a": "x"}', "not json", "", "[1]"])
async def test_invalid_arguments_take_the_sdk_invoker_for_its_error(
    sdk_invocations: SdkInvocations, arguments: str
) -> None:
    SEEN.clear()
    output = await run(add, arguments)
    assert sdk_invocations.count == 1
    assert output.startswith("Error: invalid arguments for tool 'add'")
    assert SEEN == []  # the function never ran


async def test_a_failing_function_runs_once_and_its_error_goes_through_the_sdk_formatter(
    sdk_invocations: SdkInvocations,
) -> None:
    calls: list[str] = []

    @function_tool(failure_error_function=lambda ctx, error: f"sorry: {error} ({ctx.tool_name})")
    async def flaky(reason: str) -> str:
        """Fails."""
        calls.append(reason)
        raise ValueError(reason)

    assert await run(flaky, '{"reason": "disk full"}') == "sorry: disk full (flaky)"
    assert calls == ["disk full"]
    assert sdk_invocations.count == 0  # the failure handling ran, not the SDK's argument path again


async def test_the_function_gets_the_calls_own_tool_context() -> None:
    SEEN.clear()
    await run(describe, '{"text": "x"}')
    [context] = SEEN
    assert isinstance(context, ToolContext)
    assert (context.tool_name, context.tool_call_id, context.tool_arguments) == ("describe", "call_1", '{"text": "x"}')
    assert context.context == {"user": 1}


async def test_sdk_debug_logging_keeps_the_sdk_invoker_and_its_log_lines(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="openai.agents"):
        assert await run(add, '{"a": 1, "b": 2}') == 3
    assert any(record.getMessage().startswith("Invoking tool add") for record in caplog.records)


@pytest.mark.parametrize("tool", [spread, matched], ids=["var-positional", "pattern-validator"])
def test_tools_whose_arguments_need_the_sdk_keep_its_path(tool: FunctionTool) -> None:
    assert _direct_call.direct_call(tool) is None


@dataclasses.dataclass
class Total:
    value: int


async def test_tools_with_an_output_type_keep_the_sdk_path(sdk_invocations: SdkInvocations) -> None:
    @function_tool(output_type=Total)
    async def typed(a: int) -> Any:
        """Returns a total as a plain dict; the SDK validates it into a Total."""
        return {"value": a}

    assert _direct_call.direct_call(typed) is None
    assert await run(typed, '{"a": 4}') == Total(value=4)
    assert sdk_invocations.count == 1


def test_a_hand_made_function_tool_keeps_the_sdk_path() -> None:
    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return arguments

    tool = FunctionTool(name="echo", description="Echo.", params_json_schema={"type": "object"},
                        on_invoke_tool=invoke)
    assert _direct_call.direct_call(tool) is None


def test_an_sdk_invoker_that_does_something_unknown_keeps_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    @function_tool
    async def fresh(a: int) -> int:
        """A tool the memo has not seen."""
        return a

    monkeypatch.setattr(_sdk, "_NAMES", _sdk._NAMES - {"to_thread"})
    assert _direct_call.direct_call(fresh) is None


def test_the_answer_is_kept_per_invoker_and_the_memo_stays_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    first = _direct_call.direct_call(add)
    assert first is not None
    assert _direct_call.direct_call(add) is first
    monkeypatch.setattr(_direct_call, "_MEMO", {index: (object(), None) for index in range(4097)})
    assert _direct_call.direct_call(add) is not None
    assert len(_direct_call._MEMO) == 1


async def test_a_copied_tool_is_worked_out_for_its_own_invoker(sdk_invocations: SdkInvocations) -> None:
    copy = dataclasses.replace(add, name="plus")
    found = _direct_call.direct_call(copy)
    assert found is not None
    assert found.invoker is copy.on_invoke_tool is not add.on_invoke_tool
    assert await run(copy, '{"a": 2, "b": 2}') == 4
    assert sdk_invocations.count == 0


class Recorder(AgentHooks[Any]):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any, Any]] = []

    async def on_tool_start(self, context: Any, agent: Any, tool: Any) -> None:
        self.seen.append(("start", context, None))

    async def on_tool_end(self, context: Any, agent: Any, tool: Any, result: Any) -> None:
        self.seen.append(("end", context, result))


@pytest.mark.parametrize(("tool", "arguments", "expected"), [
    (add, '{"a": 1, "b": 2}', 3),
    (explode_politely, '{"reason": "no"}', "custom: no"),
])
async def test_hooks_get_the_calls_tool_context_and_the_output_on_the_direct_path(
    sdk_invocations: SdkInvocations, tool: FunctionTool, arguments: str, expected: Any
) -> None:
    hooks = Recorder()
    agent = Agent(name="Worker", instructions="x", tools=[tool], hooks=hooks)
    output = await _tools.run_function_tool(agent, tool, a_call(tool, arguments), Run())
    assert output == expected
    [(start, context, _), (end, same, result)] = hooks.seen
    assert (start, end, result) == ("start", "end", expected)
    assert isinstance(context, ToolContext)
    assert same is context
    assert context.tool_arguments == arguments
    assert sdk_invocations.count == 0


def a_fresh_tool() -> FunctionTool:
    @function_tool
    async def subtract(a: int, b: int) -> int:
        """A tool the memo has not seen."""
        return a - b

    return subtract


def test_an_invoker_the_sdk_would_hand_a_narrower_context_keeps_its_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_sdk, "_INVOKE_CONTEXT", lambda tool, context: object())
    assert _direct_call.direct_call(a_fresh_tool()) is None


def test_fields_in_another_order_than_the_parameters_keep_the_sdk_path() -> None:
    tool = a_fresh_tool()
    implementation: Any = tool.on_invoke_tool._invoke_tool_impl  # type: ignore[attr-defined]
    closure = dict(zip(implementation.__code__.co_freevars, implementation.__closure__, strict=True))
    schema = closure["schema"].cell_contents
    reordered = schema.signature.replace(parameters=list(reversed(schema.signature.parameters.values())))
    closure["schema"].cell_contents = dataclasses.replace(schema, signature=reordered)
    assert _direct_call.direct_call(tool) is None


async def test_positional_arguments_reach_the_function_in_its_parameters_order(
    sdk_invocations: SdkInvocations,
) -> None:
    assert await run(a_fresh_tool(), '{"b": 10, "a": 3}') == -7
    assert sdk_invocations.count == 0


def test_a_tool_that_cannot_be_worked_out_keeps_the_sdk_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def unreadable(tool: FunctionTool, invoker: Any) -> None:
        raise AttributeError("an SDK invoker of another shape")

    monkeypatch.setattr(_direct_call, "_worked_out", unreadable)
    assert _direct_call.direct_call(a_fresh_tool()) is None


def test_an_sdk_that_cannot_say_how_it_hands_the_context_means_no_and_the_memo_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def broken(tool: FunctionTool, context: ToolContext[Any]) -> Any:
        raise TypeError("unreadable signature")

    monkeypatch.setattr(_sdk, "_INVOKE_CONTEXT", broken)
    monkeypatch.setattr(_direct_call, "_TAKES_TOOL_CONTEXT", {index: (object(), True) for index in range(4097)})
    tool = a_fresh_tool()
    assert _direct_call.takes_tool_context(tool) is False
    assert list(_direct_call._TAKES_TOOL_CONTEXT.values()) == [(tool.on_invoke_tool, False)]
    assert _direct_call.direct_call(tool) is None
