"""Parity of usage: what tools and hooks read in `ctx.usage` while the run goes on (every scenario also compares the
run's whole usage: Runner's `result.context_wrapper.usage` against our `RunResult.usage` and `usage_by_agent`)."""

from __future__ import annotations

from typing import Any

import pytest
from agents import AgentHooks, ModelResponse, RunContextWrapper, Tool, function_tool
from agents.tool_context import ToolContext

from parity.harness import Kit, Scenario, call, msg, run_and_compare, usage_view


def _usage_tool(kit: Kit) -> Any:
    @function_tool
    def tokens_so_far(ctx: ToolContext[Any], label: str) -> str:
        """Report the tokens used so far."""
        kit.hook_calls.append(f"tool {label} saw {usage_view(ctx.usage)}")
        return f"{ctx.usage.total_tokens} tokens"

    return tokens_so_far


def _wrapper_tool(kit: Kit) -> Any:
    @function_tool
    def requests_so_far(ctx: RunContextWrapper[Any]) -> str:
        """Report the requests made so far."""
        kit.hook_calls.append(f"wrapper tool saw {usage_view(ctx.usage)}")
        return f"{ctx.usage.requests} requests"

    return requests_so_far


class UsageHooks(AgentHooks[Any]):
    """Hooks that log the run's usage as each one sees it."""

    def __init__(self, kit: Kit) -> None:
        self.kit = kit

    def _saw(self, where: str, context: RunContextWrapper[Any]) -> None:
        self.kit.hook_calls.append(f"{where} saw {usage_view(context.usage)}")

    async def on_start(self, context: RunContextWrapper[Any], agent: Any) -> None:
        self._saw("on_start", context)

    async def on_llm_end(self, context: RunContextWrapper[Any], agent: Any, response: ModelResponse) -> None:
        self._saw("on_llm_end", context)
        self.kit.hook_calls.append(f"on_llm_end response usage {usage_view(response.usage)}")

    async def on_tool_start(self, context: RunContextWrapper[Any], agent: Any, tool: Tool) -> None:
        self._saw(f"on_tool_start({tool.name})", context)

    async def on_end(self, context: RunContextWrapper[Any], agent: Any, output: Any) -> None:
        self._saw("on_end", context)


def usage_tool(kit: Kit) -> dict[str, Any]:
    return {"tools": [_usage_tool(kit)]}


def usage_tools_and_hooks(kit: Kit) -> dict[str, Any]:
    return {"tools": [_usage_tool(kit), _wrapper_tool(kit)], "hooks": UsageHooks(kit)}


def _three_calls() -> list[list[Any]]:
    return [
        [call("tokens_so_far", {"label": "first"})],
        [call("tokens_so_far", {"label": "second"}, "call_2")],
        [msg("done", "msg_3")],
    ]


def _one_call_at_a_time() -> list[list[Any]]:
    """One call per response: two calls of one response run concurrently, and the order in which their hooks and
    bodies log is up to the scheduler (Runner's and ours alike), which is not what this scenario is about."""
    return [
        [call("tokens_so_far", {"label": "a"})],
        [call("requests_so_far", {}, "call_2")],
        [call("tokens_so_far", {"label": "b"}, "call_3")],
        [msg("done", "msg_3")],
    ]


SCENARIOS = [
    Scenario("usage_read_by_a_tool_mid_turn", _three_calls, usage_tool),
    Scenario("usage_read_by_tools_and_hooks", _one_call_at_a_time, usage_tools_and_hooks),
    Scenario("usage_read_by_hooks_only", lambda: [[msg("Hi.")]], lambda kit: {"hooks": UsageHooks(kit)}),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
async def test_scenario(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
