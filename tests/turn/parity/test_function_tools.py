"""Parity of function tools: how they are described to the model, how they run, what the model reads back."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import RunConfig, RunContextWrapper, ToolOutputImage, ToolOutputText, function_tool
from agents.tool_context import ToolContext
from pydantic import BaseModel, Field

from parity.harness import Kit, Outcome, Scenario, call, check_inputs_not_mutated, msg, run_and_compare


def _add_tool(kit: Kit) -> Any:
    @function_tool
    def add(a: int, b: int) -> int:
        """Add two numbers.

        Args:
            a: The first number.
            b: The second number.
        """
        kit.ran("add", {"a": a, "b": b})
        return a + b

    return add


def _mul_tool(kit: Kit) -> Any:
    @function_tool
    async def mul(a: int, b: int) -> int:
        """Multiply two numbers."""
        kit.ran("mul", {"a": a, "b": b})
        return a * b

    return mul


def plain_answer(kit: Kit) -> dict[str, Any]:
    return {"instructions": "Answer briefly."}


def sync_tool(kit: Kit) -> dict[str, Any]:
    return {"instructions": "Use tools.", "tools": [_add_tool(kit)]}


def async_tool(kit: Kit) -> dict[str, Any]:
    return {"instructions": "Use tools.", "tools": [_mul_tool(kit)]}


class Size(BaseModel):
    width: int = Field(gt=0, description="Width in cm")
    height: int = Field(gt=0, description="Height in cm")


class Shape(BaseModel):
    name: str
    size: Size
    tags: list[str] = Field(default_factory=list)


def pydantic_arguments(kit: Kit) -> dict[str, Any]:
    @function_tool
    def area(shape: Shape) -> str:
        """Compute the area of a shape."""
        kit.ran("area", shape.model_dump())
        return f"{shape.name}: {shape.size.width * shape.size.height} cm2"

    return {"tools": [area]}


def tool_context_parameter(kit: Kit) -> dict[str, Any]:
    @function_tool
    def whoami(ctx: ToolContext[Any], label: str) -> str:
        """Report what the tool context says."""
        kit.ran("whoami", {
            "label": label, "tool_name": ctx.tool_name, "call_id": ctx.tool_call_id,
            "arguments": ctx.tool_arguments, "context": ctx.context, "agent": getattr(ctx.agent, "name", None),
        })
        return f"{label}: {ctx.tool_name} {ctx.tool_call_id}"

    return {"tools": [whoami]}


def run_context_parameter(kit: Kit) -> dict[str, Any]:
    @function_tool
    async def lookup(ctx: RunContextWrapper[dict[str, str]], key: str) -> str:
        """Look a key up in the run context."""
        kit.ran("lookup", {"key": key, "context": dict(ctx.context)})
        return ctx.context.get(key, "missing")

    return {"tools": [lookup]}


def _failing_tool(kit: Kit, **options: Any) -> Any:
    @function_tool(**options)
    def explode(reason: str) -> str:
        """Always fails."""
        kit.ran("explode", {"reason": reason})
        raise ValueError(f"boom: {reason}")

    return explode


def tool_error_default(kit: Kit) -> dict[str, Any]:
    return {"tools": [_failing_tool(kit)]}


def tool_error_custom_function(kit: Kit) -> dict[str, Any]:
    def explain(ctx: RunContextWrapper[Any], error: Exception) -> str:
        return f"custom failure: {type(error).__name__}: {error}"

    return {"tools": [_failing_tool(kit, failure_error_function=explain)]}


def tool_error_no_function(kit: Kit) -> dict[str, Any]:
    return {"tools": [_failing_tool(kit, failure_error_function=None)]}


def strict_mode_off(kit: Kit) -> dict[str, Any]:
    @function_tool(strict_mode=False)
    def greet(name: str, greeting: str = "Hello", times: int | None = None) -> str:
        """Greet someone."""
        kit.ran("greet", {"name": name, "greeting": greeting, "times": times})
        return f"{greeting}, {name}!" * (times or 1)

    return {"tools": [greet]}


def disabled_tool(kit: Kit) -> dict[str, Any]:
    @function_tool(is_enabled=False)
    def secret() -> str:
        """Never offered."""
        kit.ran("secret", {})
        return "secret"

    return {"tools": [secret, _add_tool(kit)]}


def conditionally_enabled(kit: Kit) -> dict[str, Any]:
    def admin_only(ctx: RunContextWrapper[Any], agent: Any) -> bool:
        return bool(ctx.context.get("admin"))

    async def for_users(ctx: RunContextWrapper[Any], agent: Any) -> bool:
        return not ctx.context.get("admin")

    @function_tool(is_enabled=admin_only)
    def wipe() -> str:
        """Wipe everything (admins only)."""
        kit.ran("wipe", {})
        return "wiped"

    @function_tool(is_enabled=for_users)
    def ask() -> str:
        """Ask an admin."""
        kit.ran("ask", {})
        return "asked"

    return {"tools": [wipe, ask]}


def needs_approval_always(kit: Kit) -> dict[str, Any]:
    @function_tool(needs_approval=True)
    def delete_branch(name: str) -> str:
        """Delete a git branch."""
        kit.ran("delete_branch", {"name": name})
        return f"deleted {name}"

    return {"tools": [delete_branch]}


def needs_approval_callable(kit: Kit) -> dict[str, Any]:
    async def only_prod(ctx: RunContextWrapper[Any], params: dict[str, Any], call_id: str) -> bool:
        return params.get("name") == "prod"

    @function_tool(needs_approval=only_prod)
    def deploy(name: str) -> str:
        """Deploy to an environment."""
        kit.ran("deploy", {"name": name})
        return f"deployed {name}"

    return {"tools": [deploy]}


def timeout_tool(kit: Kit) -> dict[str, Any]:
    @function_tool(timeout=0.05)
    async def slow(query: str) -> str:
        """Never finishes in time."""
        kit.ran("slow", {"query": query})
        await asyncio.Event().wait()  # cancelled by the tool's timeout
        return "too late"

    return {"tools": [slow]}


def described_tool(kit: Kit) -> dict[str, Any]:
    @function_tool(name_override="get_weather", description_override="Current weather for a city.")
    def weather(city: str, unit: str = "C") -> str:
        """Ignored docstring.

        Args:
            city: The city name.
            unit: C or F.
        """
        kit.ran("get_weather", {"city": city, "unit": unit})
        return f"20{unit} in {city}"

    return {"tools": [weather]}


class Report(BaseModel):
    ok: bool
    count: int


def structured_returns(kit: Kit) -> dict[str, Any]:
    @function_tool
    def as_dict() -> dict[str, Any]:
        """Returns a dict."""
        kit.ran("as_dict", {})
        return {"a": 1, "b": [1, 2]}

    @function_tool
    def as_model() -> Report:
        """Returns a pydantic model."""
        kit.ran("as_model", {})
        return Report(ok=True, count=3)

    @function_tool
    def as_list() -> list[int]:
        """Returns a list."""
        kit.ran("as_list", {})
        return [1, 2, 3]

    @function_tool
    def as_none() -> None:
        """Returns nothing."""
        kit.ran("as_none", {})

    @function_tool
    def as_float() -> float:
        """Returns a float."""
        kit.ran("as_float", {})
        return 2.5

    return {"tools": [as_dict, as_model, as_list, as_none, as_float]}


def rich_outputs(kit: Kit) -> dict[str, Any]:
    @function_tool
    def picture() -> list[Any]:
        """Returns text and an image."""
        kit.ran("picture", {})
        return [ToolOutputText(text="a red square"),
                ToolOutputImage(image_url="data:image/png;base64,iVBORw0KGgo=", detail="low")]

    @function_tool
    def caption() -> ToolOutputText:
        """Returns one text part."""
        kit.ran("caption", {})
        return ToolOutputText(text="a caption")

    return {"tools": [picture, caption]}


def _no_mutation(runner: Outcome, ours: Outcome) -> None:
    problems = check_inputs_not_mutated(runner) + check_inputs_not_mutated(ours)
    assert not problems, "\n".join(problems)


def _did_not_run(*tools: str) -> Any:
    def check(runner: Outcome, ours: Outcome) -> None:
        for outcome in (runner, ours):
            ran = [name for name, _ in outcome.tool_runs if name in tools]
            assert not ran, f"{outcome.side}: {ran} ran, but must not have"

    return check


def _paused_without_running(*tools: str) -> Any:
    def check(runner: Outcome, ours: Outcome) -> None:
        _did_not_run(*tools)(runner, ours)
        assert ours.result.paused, "ours: result.paused must be True while a call waits for approval"
        assert [item["tool"] for item in ours.interruptions] == [item["tool"] for item in runner.interruptions]

    return check


SCENARIOS = [
    Scenario("plain_answer", lambda: [[msg("Hi there.")]], plain_answer),
    Scenario("sync_tool", lambda: [[call("add", {"a": 1, "b": 2})], [msg("3", "msg_2")]], sync_tool),
    Scenario("async_tool", lambda: [[call("mul", {"a": 6, "b": 7})], [msg("42", "msg_2")]], async_tool),
    Scenario(
        "pydantic_arguments",
        lambda: [[call("area", {"shape": {"name": "door", "size": {"width": 2, "height": 3}, "tags": ["x"]}})],
                 [msg("6 cm2", "msg_2")]],
        pydantic_arguments,
    ),
    Scenario(
        "tool_context_parameter",
        lambda: [[call("whoami", {"label": "me"}, "call_ctx")], [msg("ok", "msg_2")]],
        tool_context_parameter, context=lambda: {"user": "ann"},
    ),
    Scenario(
        "run_context_parameter",
        lambda: [[call("lookup", {"key": "city"})], [msg("Paris", "msg_2")]],
        run_context_parameter, context=lambda: {"city": "Paris"},
    ),
    Scenario(
        "tool_error_default_failure_function",
        lambda: [[call("explode", {"reason": "disk full"})], [msg("It failed.", "msg_2")]],
        tool_error_default, differences=("tool_error_text",),
    ),
    Scenario(
        "tool_error_custom_failure_function",
        lambda: [[call("explode", {"reason": "disk full"})], [msg("It failed.", "msg_2")]],
        tool_error_custom_function,
    ),
    Scenario(
        "tool_error_no_failure_function_raises",
        lambda: [[call("explode", {"reason": "disk full"})], [msg("It failed.", "msg_2")]],
        tool_error_no_function,
    ),
    Scenario(
        "strict_mode_off",
        lambda: [[call("greet", {"name": "Ann"})], [msg("Greeted.", "msg_2")]],
        strict_mode_off,
    ),
    Scenario("disabled_tool_not_offered", lambda: [[call("add", {"a": 2, "b": 2})], [msg("4", "msg_2")]],
             disabled_tool),
    Scenario(
        "is_enabled_callables",
        lambda: [[call("ask", {})], [msg("Asked.", "msg_2")]],
        conditionally_enabled, context=lambda: {"admin": False},
    ),
    Scenario(
        "needs_approval_pauses",
        lambda: [[call("delete_branch", {"name": "old"})], [msg("Deleted.", "msg_2")]],
        needs_approval_always, check=_paused_without_running("delete_branch"),
    ),
    Scenario(
        "needs_approval_callable_mixed",
        lambda: [[call("deploy", {"name": "staging"}, "call_1"), call("deploy", {"name": "prod"}, "call_2")],
                 [msg("Deployed.", "msg_2")]],
        needs_approval_callable, check=_paused_without_running(),
    ),
    Scenario(
        "tool_timeout",
        lambda: [[call("slow", {"query": "q"})], [msg("It timed out.", "msg_2")]],
        timeout_tool,
    ),
    Scenario(
        "invalid_json_arguments",
        lambda: [[call("add", '{"a": 1, "b": ')], [msg("Oops.", "msg_2")]],
        sync_tool, differences=("invalid_arguments_text",), check=_did_not_run("add"),
    ),
    Scenario(
        "invalid_argument_values",
        lambda: [[call("area", {"shape": {"name": "door", "size": {"width": 0, "height": 3}, "tags": []}})],
                 [msg("Oops.", "msg_2")]],
        pydantic_arguments, differences=("invalid_arguments_text",), check=_did_not_run("area"),
    ),
    Scenario(
        "unknown_tool_answered",
        lambda: [[call("teleport", {"to": "Mars"})], [msg("No such tool.", "msg_2")]],
        sync_tool, differences=("unknown_tool_answered",),
        runner_config=lambda: RunConfig(tool_not_found_behavior="return_error_to_model"),
    ),
    Scenario(
        "unknown_tool_runner_default",
        lambda: [[call("teleport", {"to": "Mars"})], [msg("No such tool.", "msg_2")]],
        sync_tool, differences=("unknown_tool_raises",),
    ),
    Scenario(
        "parallel_calls",
        lambda: [[call("add", {"a": 1, "b": 2}, "call_1"), call("mul", {"a": 3, "b": 4}, "call_2")],
                 [msg("3 and 12", "msg_2")]],
        lambda kit: {"tools": [_add_tool(kit), _mul_tool(kit)]},
    ),
    Scenario(
        "structured_tool_returns",
        lambda: [[call("as_dict", {}, "c1"), call("as_model", {}, "c2"), call("as_list", {}, "c3"),
                  call("as_none", {}, "c4"), call("as_float", {}, "c5")], [msg("ok", "msg_2")]],
        structured_returns,
    ),
    Scenario(
        "rich_tool_outputs",
        lambda: [[call("picture", {}, "c1"), call("caption", {}, "c2")], [msg("A red square.", "msg_2")]],
        rich_outputs,
    ),
    Scenario(
        "name_and_description_override",
        lambda: [[call("get_weather", {"city": "Oslo", "unit": "F"})], [msg("20F", "msg_2")]],
        described_tool,
    ),
    Scenario(
        "max_turns_exceeded",
        lambda: [[call("add", {"a": 1, "b": 1}, f"call_{n}")] for n in range(5)],
        sync_tool, max_turns=2, differences=("max_turns",),
    ),
    Scenario(
        "model_input_not_mutated",
        lambda: [
            [call("add", {"a": 1, "b": 2}, "call_1")],
            [msg("Thinking aloud.", "msg_a"), call("mul", {"a": 3, "b": 4}, "call_2")],
            [call("add", {"a": 5, "b": 6}, "call_3"), call("mul", {"a": 7, "b": 8}, "call_4")],
            [msg("Done: 3, 12, 11, 56.", "msg_2")],
        ],
        lambda kit: {"tools": [_add_tool(kit), _mul_tool(kit)]}, check=_no_mutation,
    ),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda scenario: scenario.id)
async def test_parity(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
