"""A hosted MCP approval request that nobody decides pauses the turn, as under `Runner`; resume answers it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import HostedMCPTool
from openai.types.responses.response_output_item import McpApprovalRequest

from agency_swarm import (
    Agency,
    Agent,
    ApprovalRequested,
    ChatPaused,
    ConfigError,
    FileThreadStore,
    Interruption,
    MemoryThreadStore,
    StoreError,
)
from agency_swarm.testing import ScriptedModel, Step, send_message


def request() -> Step:
    return McpApprovalRequest(type="mcp_approval_request", id="mcpr_1", server_label="docs", name="lookup",
                              arguments='{"q": "refunds"}')


def docs_agency(require_approval: str, store: Any = None) -> tuple[Agency, ScriptedModel]:
    model = ScriptedModel(lambda call: "the docs say 30 days" if responses_of(call.input) else request())
    server = HostedMCPTool(tool_config={
        "type": "mcp", "server_label": "docs", "server_url": "https://mcp.example.com/sse",
        "require_approval": require_approval,  # type: ignore[typeddict-item]
    })
    return Agency(Agent(name="Support", tools=[server], model=model), thread_store=store), model


def responses_of(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [item for item in items if item.get("type") == "mcp_approval_response"]


@pytest.mark.parametrize("require_approval", ["never", "always"])
@pytest.mark.parametrize("stream", [False, True], ids=["blocking", "streamed"])
async def test_an_undecided_mcp_approval_request_pauses_and_resume_answers_it(
    require_approval: str, stream: bool
) -> None:
    agency, model = docs_agency(require_approval)  # "always" without on_approval_request: built, no longer refused
    if stream:
        response = agency.get_response_stream("refund policy?", chat_id="c")
        events = [event async for event in response]
        paused = response.result
        requests = [event for event in events if isinstance(event, ApprovalRequested)]
        assert [(event.tool, event.call_id, event.agent, event.depth) for event in requests] == [
            ("lookup", "mcpr_1", "Support", 0)
        ]
    else:
        paused = await agency.get_response("refund policy?", chat_id="c")
    assert paused.paused
    assert paused.interruptions == [Interruption(
        agent="Support", caller="user", depth=0, chat_id="c", call_id="mcpr_1", tool="lookup",
        arguments='{"q": "refunds"}',
    )]
    assert len(model.calls) == 1
    items = agency.thread_manager.get_threads("c")["user->Support"]
    assert responses_of(items) == []
    result = await agency.resume("c", approve=["mcpr_1"])
    assert result.final_output == "the docs say 30 days"
    assert responses_of(model.calls[-1].input) == [
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": True}
    ]


async def test_a_paused_mcp_request_survives_a_restart_and_can_be_rejected(tmp_path: Path) -> None:
    agency, _ = docs_agency("never", FileThreadStore(tmp_path))
    await agency.get_response("refund policy?", chat_id="r")
    await agency.aclose()

    restarted, model = docs_agency("never", FileThreadStore(tmp_path))
    with pytest.raises(ChatPaused) as caught:
        await restarted.get_response("hello?", chat_id="r")
    assert [(item.call_id, item.tool) for item in caught.value.interruptions] == [("mcpr_1", "lookup")]
    with pytest.raises(ConfigError, match="mcpr_1"):
        await restarted.resume("r", approve=["mcpr_2"])
    undecided = await restarted.resume("r")
    assert [item.call_id for item in undecided.interruptions] == ["mcpr_1"]
    assert model.calls == []
    result = await restarted.resume("r", reject=["mcpr_1"])
    assert result.final_output == "the docs say 30 days"
    assert responses_of(model.calls[-1].input) == [
        {"type": "mcp_approval_response", "approval_request_id": "mcpr_1", "approve": False}
    ]
    await restarted.aclose()


async def test_a_nested_mcp_request_whose_send_already_failed_does_not_hold_the_chat() -> None:
    """The store took Developer's waiting mark for the request, then reported a failure: the CEO's send failed and
    the CEO finished. Nobody waits for the request any more, so the next message is not refused."""

    class LosesTheAck(MemoryThreadStore):
        async def append(self, chat_id: str, key: str, items: list[dict[str, Any]]) -> None:
            await super().append(chat_id, key, items)
            if any(item.get("type") == "agency_swarm.awaiting_approval" for item in items):
                raise StoreError("connection lost after commit")

    server = HostedMCPTool(tool_config={"type": "mcp", "server_label": "docs", "server_url": "https://mcp.invalid"})
    ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Developer", "look it up"), "done"]))
    dev = Agent(name="Developer", tools=[server], model=ScriptedModel([request(), "found it"]))
    agency = Agency([ceo, [ceo, dev]], thread_store=LosesTheAck())
    first = await agency.get_response("go", chat_id="c")
    assert first.final_output == "done"
    assert not first.interruptions
    second = await agency.get_response("next", chat_id="c")
    assert second.final_output == "done"
