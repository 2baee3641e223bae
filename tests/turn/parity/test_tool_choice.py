"""Parity of `reset_tool_choice`: which responses count as the agent having used a tool, so that a forced
`tool_choice` is reset before the next model call (Runner tracks tool calls and their outputs; an MCP approval
request or a tool listing alone is neither)."""

from __future__ import annotations

from typing import Any

import pytest
from agents import ModelSettings, WebSearchTool
from pydantic import BaseModel

from parity.harness import (
    Kit,
    Scenario,
    call,
    mcp_approval_request,
    mcp_call,
    mcp_list_tools,
    msg,
    run_and_compare,
    web_search,
)
from parity.test_output_items import _mcp, _note_tool

REQUIRED = ModelSettings(tool_choice="required")


class Weather(BaseModel):
    city: str
    sky: str


def approving_mcp(kit: Kit) -> dict[str, Any]:
    return {"tools": [_mcp(kit, require_approval="always", decide=True)], "model_settings": REQUIRED}


def rejecting_mcp(kit: Kit) -> dict[str, Any]:
    return {"tools": [_mcp(kit, require_approval="always", decide=False)], "model_settings": REQUIRED}


def plain_mcp(kit: Kit) -> dict[str, Any]:
    return {"tools": [_mcp(kit)], "model_settings": REQUIRED}


def approving_mcp_and_note(kit: Kit) -> dict[str, Any]:
    return {"tools": [_mcp(kit, require_approval="always", decide=True), _note_tool(kit)], "model_settings": REQUIRED}


def web_search_tool(kit: Kit) -> dict[str, Any]:
    return {"tools": [WebSearchTool()], "model_settings": REQUIRED}


def web_search_structured(kit: Kit) -> dict[str, Any]:
    return {"tools": [WebSearchTool()], "model_settings": REQUIRED, "output_type": Weather}


SCENARIOS = [
    Scenario("required_kept_after_an_approved_mcp_request", lambda: [
        [mcp_approval_request()], [mcp_call(), msg("Looked it up.", "msg_2")],
    ], approving_mcp),
    Scenario("required_kept_after_a_rejected_mcp_request", lambda: [
        [mcp_approval_request()], [msg("I was not allowed to.", "msg_2")],
    ], rejecting_mcp),
    Scenario("required_kept_after_an_mcp_tool_listing", lambda: [
        [mcp_list_tools(), mcp_approval_request()], [mcp_call(), msg("Found it.", "msg_2")],
    ], approving_mcp),
    Scenario("mcp_tool_listing_alone_ends_the_turn", lambda: [[mcp_list_tools()], [msg("Found it.", "msg_2")]],
             plain_mcp),
    Scenario("required_reset_after_an_mcp_call", lambda: [
        [mcp_list_tools(), mcp_call()], [msg("Found it.", "msg_2")],
    ], plain_mcp),
    Scenario("required_reset_after_an_mcp_request_beside_a_call", lambda: [
        [mcp_approval_request(), call("note", {"text": "x"})], [msg("Done.", "msg_2")],
    ], approving_mcp_and_note),
    Scenario("required_reset_after_a_hosted_call", lambda: [
        [web_search()], [msg("Sunny in Paris.", "msg_2")],
    ], web_search_tool),
    Scenario("required_reset_after_a_hosted_call_beside_an_empty_message", lambda: [
        [web_search(), msg("")], [msg('{"city": "Paris", "sky": "sunny"}', "msg_2")],
    ], web_search_structured),
]


@pytest.mark.parametrize("scenario", SCENARIOS, ids=lambda s: s.id)
async def test_scenario(scenario: Scenario, stream: bool, shortcuts: bool) -> None:
    await run_and_compare(scenario, stream)
