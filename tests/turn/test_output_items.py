"""Output items beyond messages and function calls, decided as `Runner` decides; the model keeps its own input."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from agents import (
    ComputerTool,
    HostedMCPTool,
    LocalShellTool,
    ModelBehaviorError,
    ModelRefusalError,
    WebSearchTool,
    function_tool,
)
from openai.types.responses import (
    ResponseComputerToolCall,
    ResponseFunctionWebSearch,
    ResponseOutputMessage,
    ResponseOutputRefusal,
    ResponseOutputText,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall

from agency_swarm import Agency, Agent, ConfigError
from agency_swarm.testing import ModelCall, ScriptedModel, ToolCall


def web_search(number: int) -> ResponseFunctionWebSearch:
    return ResponseFunctionWebSearch.model_validate({
        "id": f"ws_{number}", "type": "web_search_call", "status": "completed",
        "action": {"type": "search", "query": "launch news"},
    })


def message(*parts: Any) -> ResponseOutputMessage:
    return ResponseOutputMessage(type="message", id="msg_x", role="assistant", status="completed", content=list(parts))


def text(value: str) -> ResponseOutputText:
    return ResponseOutputText(type="output_text", text=value, annotations=[])


async def run(agent: Agent, streamed: bool) -> Any:
    if not streamed:
        return await agent.get_response("go")
    stream = agent.get_response_stream("go")
    async for _ in stream:
        pass
    return stream.result


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_response_of_hosted_calls_only_asks_the_model_again(streamed: bool) -> None:
    model = ScriptedModel([web_search(1), [web_search(2), "Found it."]])
    agent = Agent(name="Searcher", tools=[WebSearchTool()], model=model)
    result = await run(agent, streamed)
    assert result.final_output == "Found it."
    assert len(model.calls) == 2
    kinds = [item.get("type") for item in model.calls[1].input]
    assert kinds == [None, "web_search_call"]  # the hosted call is kept and replayed to the next call


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_final_output_is_the_last_messages_text(streamed: bool) -> None:
    model = ScriptedModel([[message(text("first draft")), message(text("final "), text("answer"))]])
    result = await run(Agent(name="Writer", model=model), streamed)
    assert result.final_output == "final answer"


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_refusal_raises_the_sdks_error(streamed: bool) -> None:
    refusal = ResponseOutputRefusal(type="refusal", refusal="I cannot help with that.")
    agent = Agent(name="Careful", model=ScriptedModel([message(refusal)]))
    with pytest.raises(ModelRefusalError, match="cannot help"):
        await run(agent, streamed)


async def test_reasoning_items_are_kept_and_replayed_in_place() -> None:
    reasoning = ResponseReasoningItem(id="rs_1", type="reasoning", summary=[], encrypted_content="opaque")

    @function_tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    model = ScriptedModel([[reasoning, ToolCall("ping")], "done"])
    await Agent(name="Thinker", tools=[ping], model=model).get_response("go")
    replayed = model.calls[1].input
    assert replayed[1] == reasoning.model_dump(exclude_unset=True)
    assert replayed[2]["type"] == "function_call"


@pytest.mark.parametrize("approve", [True, False])
async def test_a_hosted_mcp_approval_request_is_answered_by_its_callback(approve: bool) -> None:
    asked: list[str] = []

    def decide(request: Any) -> Any:
        asked.append(request.data.name)
        return {"approve": approve, "reason": "not today"}

    server = HostedMCPTool(
        tool_config={"type": "mcp", "server_label": "files", "server_url": "https://mcp.invalid"},
        on_approval_request=decide,
    )
    request = McpApprovalRequest(id="mcpr_1", type="mcp_approval_request", name="rm", arguments="{}",
                                 server_label="files")
    done = McpCall(id="mcp_1", type="mcp_call", name="rm", arguments="{}", server_label="files", output="ok")
    model = ScriptedModel([request, [done, "Handled."]])
    result = await Agent(name="Ops", tools=[server], model=model).get_response("go")
    assert asked == ["rm"]
    assert result.final_output == "Handled."
    answer = model.calls[1].input[-1]
    expected = {"approval_request_id": "mcpr_1", "approve": approve, "type": "mcp_approval_response"}
    assert answer == (expected if approve else {**expected, "reason": "not today"})


def test_a_hosted_mcp_server_asking_for_approval_with_nobody_to_answer_is_accepted() -> None:
    """Its requests pause the turn for the user, as under `Runner` (test_mcp_approvals.py)."""
    server = HostedMCPTool(tool_config={"type": "mcp", "server_label": "files", "server_url": "https://mcp.invalid"})
    agent = Agent(name="Ops", tools=[server])
    assert Agency(agent).agents["Ops"] is agent


@pytest.mark.parametrize("tool", [LocalShellTool(executor=lambda request: "ok")], ids=["local_shell"])
def test_local_execution_tools_are_refused_when_the_agent_is_built(tool: Any) -> None:
    with pytest.raises(ConfigError, match=r"'Ops'.*local shell tool.*function_tool"):
        Agent(name="Ops", tools=[tool])


async def test_a_local_execution_tool_added_later_is_refused_before_the_model_is_called() -> None:
    model = ScriptedModel(["never"])
    agent = Agent(name="Ops", model=model)
    agent.tools = [ComputerTool(computer=object())]  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="computer tool"):
        await agent.get_response("go")
    assert model.calls == []


@pytest.mark.parametrize("streamed", [False, True])
async def test_a_local_call_without_its_tool_raises_and_leaves_no_call_without_output(streamed: bool) -> None:
    call = ResponseComputerToolCall.model_validate({
        "id": "cu_1", "call_id": "call_cu_1", "type": "computer_call", "status": "completed",
        "pending_safety_checks": [], "action": {"type": "screenshot"},
    })
    agent = Agent(name="Ops", model=ScriptedModel([call]))
    with pytest.raises(ModelBehaviorError, match="computer action without a computer tool"):
        await run(agent, streamed)
    (items,) = agent.wiring.thread_manager.get_threads("default").values()
    assert [item.get("type") for item in items] == [None]  # only the user's message: the thread stays usable


class KeepingModel(ScriptedModel):
    """Keeps the very list object it was handed, next to a deep copy made when it was called."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.handed: list[tuple[Any, Any]] = []

    def _record(self, system: Any, input: Any, *rest: Any) -> ModelCall:
        self.handed.append((input, copy.deepcopy(input)))
        return super()._record(system, input, *rest)


@pytest.mark.parametrize("streamed", [False, True])
async def test_the_models_input_is_never_changed_after_the_call(streamed: bool) -> None:
    @function_tool
    def ping() -> str:
        """Answers pong."""
        return "pong"

    model = KeepingModel([ToolCall("ping"), [ToolCall("ping"), ToolCall("ping")], "done"])
    ceo = Agent(name="CEO", tools=[ping], model=model)
    agency = Agency([ceo])
    if streamed:
        async for _ in agency.get_response_stream("go"):
            pass
    else:
        await agency.get_response("go")
    assert [len(at_call) for _, at_call in model.handed] == [1, 3, 7]
    for live, at_call in model.handed:
        assert live == at_call
