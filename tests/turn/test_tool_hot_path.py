"""The function-tool fast paths give tools exactly what the SDK's own constructors and helpers would."""

from __future__ import annotations

from typing import Any

import pytest
from agents import RunContextWrapper, Usage
from agents.tool_context import ToolContext
from openai.types.responses import ResponseFunctionToolCall

from agency_swarm._base import _sdk as _sdk
from agency_swarm._turn import _tools as _tools


def a_call(namespace: str | None = None) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(
        type="function_call", call_id="call_1", name="add", arguments='{"a": 1, "b": 2}', namespace=namespace
    )


class Run:
    """A turn as a tool call sees it; counts how often the run context (and its usage) had to be built."""

    def __init__(self) -> None:
        self.user_context = {"user": 7}
        self._context = RunContextWrapper(context=self.user_context, usage=Usage(requests=3))
        self.built = 0

    def context(self) -> RunContextWrapper[Any]:
        self.built += 1
        return self._context


@pytest.mark.parametrize("namespace", [None, "", "math"])
def test_a_filled_tool_context_equals_the_sdk_constructed_one(namespace: str | None) -> None:
    run, call, agent = Run(), a_call(namespace), object()

    filled = _sdk.filled_tool_context(run, call, agent, _tools.TOOL_RUN_CONFIG)
    made = _sdk.built_tool_context(run, call, agent, _tools.TOOL_RUN_CONFIG)

    assert isinstance(filled, ToolContext)
    assert _sdk.tool_context_fields(filled) == _sdk.tool_context_fields(made)
    assert filled.usage is run.context().usage  # live: the run keeps counting into it
    assert filled.qualified_tool_name == made.qualified_tool_name
    assert filled.turn_input is not made.turn_input  # fresh containers, never shared between calls


def test_a_filled_tool_context_asks_the_run_for_usage_only_when_read() -> None:
    run = Run()
    filled = _sdk.filled_tool_context(run, a_call(), object(), _tools.TOOL_RUN_CONFIG)
    assert (run.built, filled.context) == (0, run.user_context)
    assert filled.usage.requests == 3
    assert filled.usage is filled.usage
    assert run.built == 1  # looked up once, then kept
    other = Usage(requests=9)
    filled.usage = other
    assert filled.usage is other


def test_this_sdk_gets_the_filled_context() -> None:
    assert _sdk._fills_like_the_sdk()
    assert _sdk._FILLS_TOOL_CONTEXT
    run, call = Run(), a_call()
    assert type(_tools.tool_context(run, call, object(), _tools.TOOL_RUN_CONFIG)) is _sdk.RunToolContext
    assert run.built == 0


def test_a_context_that_no_longer_matches_the_sdk_falls_back_to_the_constructor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = _sdk.filled_tool_context

    def missing_a_field(*args: Any) -> ToolContext[Any]:
        context = real(*args)
        del context.__dict__["_custom_data"]
        return context

    monkeypatch.setattr(_sdk, "filled_tool_context", missing_a_field)
    assert not _sdk._fills_like_the_sdk()


def test_a_constructor_that_raises_means_the_constructor(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any) -> ToolContext[Any]:
        raise TypeError("a new required argument")

    monkeypatch.setattr(_sdk, "built_tool_context", broken)
    assert not _sdk._fills_like_the_sdk()


class Count(int):
    """An int subclass: not a plain scalar, so the SDK converts it."""


@pytest.mark.parametrize("output", [3, -1.5, float("nan"), True, None, Count(4), [1, 2], {"n": 1}, "text"])
def test_an_output_item_is_what_the_sdk_makes(output: Any) -> None:
    from agents import ItemHelpers

    call = a_call()
    assert _tools.output_item(call, output) == dict(ItemHelpers.tool_call_output_item(call, output))


def test_a_scalar_returned_to_a_hosted_program_goes_through_the_sdk() -> None:
    from agents import ItemHelpers

    call = ResponseFunctionToolCall.model_validate({
        "type": "function_call", "call_id": "call_1", "name": "add", "arguments": "{}",
        "caller": {"type": "program", "caller_id": "prog_1"},
    })
    item = _tools.output_item(call, 3)
    assert item == dict(ItemHelpers.tool_call_output_item(call, 3))
    assert "caller" in item
