"""get_response_sync from plain code and from inside a running loop, and a real AsyncOpenAI client end to end.

The real client talks to a scripted Responses API through httpx2.MockTransport: no network, but the request
bodies are the ones openai-python really sends.
"""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import httpx2
import pytest
from agents import OpenAIResponsesModel
from openai import AsyncOpenAI

from agency_swarm import Agency, Agent, TextDelta
from agency_swarm.testing import ScriptedModel, send_message

# -- sync with scripted models ---------------------------------------------------------------------


def scripted_agency(*entry_points: str) -> tuple[Agency, ScriptedModel, ScriptedModel]:
    """CEO -> Developer; `entry_points` names the agents the user may address besides CEO."""
    ceo_model = ScriptedModel.each_turn([send_message("Developer", "build it"), "shipped"])
    dev_model = ScriptedModel.each_turn(["built"])
    ceo = Agent(name="CEO", description="Leads", model=ceo_model)
    dev = Agent(name="Developer", description="Codes", model=dev_model)
    standalone = [agent for agent in (dev,) if agent.name in entry_points]
    return Agency([ceo, *standalone, [ceo, dev]]), ceo_model, dev_model


def test_get_response_sync_from_plain_code() -> None:
    agency, ceo_model, dev_model = scripted_agency()
    first = agency.get_response_sync("Build a page", chat_id="s1")
    second = agency.get_response_sync("Another one", chat_id="s1")

    assert first.final_output == second.final_output == "shipped"
    assert first.chat_id == "s1"
    assert first.usage.requests == 3
    assert len(ceo_model.calls) == 4
    assert len(dev_model.calls) == 2
    assert ceo_model.calls[2].input[0] == {"role": "user", "content": "Build a page"}
    assert sorted(agency.thread_manager.get_threads("s1")) == ["CEO->Developer", "user->CEO"]
    assert all(not call.stream for call in ceo_model.calls)


async def test_get_response_sync_inside_a_running_loop() -> None:
    """Like a Jupyter cell: sync code called while this thread's event loop is running."""
    agency, ceo_model, _ = scripted_agency()
    result = agency.get_response_sync("Build a page", chat_id="nb")
    assert result.final_output == "shipped"
    # The async API on the test's own loop continues the same chat.
    again = await agency.get_response("More", chat_id="nb")
    assert again.final_output == "shipped"
    assert ceo_model.calls[-2].input[0] == {"role": "user", "content": "Build a page"}


def test_get_response_sync_by_recipient_name() -> None:
    agency, _, dev_model = scripted_agency("Developer")
    result = agency.get_response_sync("Direct question", "Developer")
    assert (result.final_output, result.agent, result.chat_id) == ("built", "Developer", "default")
    assert dev_model.calls[0].input == [{"role": "user", "content": "Direct question"}]


def test_get_response_sync_propagates_errors() -> None:
    agency, ceo_model, _ = scripted_agency()
    with pytest.raises(ValueError, match="chat_id"):
        agency.get_response_sync("hi", chat_id="")
    assert ceo_model.calls == []


# -- a real openai.AsyncOpenAI client over a mock transport ----------------------------------------


class FakeResponsesAPI:
    """A scripted POST /v1/responses: the CEO delegates once, the Developer answers, the CEO wraps up."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.raw_bodies: list[bytes] = []
        self.headers: list[dict[str, str]] = []
        self.loops: list[asyncio.AbstractEventLoop] = []
        self._ids = itertools.count(1)

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        assert request.method == "POST"
        assert request.url.path == "/v1/responses"
        raw = request.read()
        body = json.loads(raw)
        self.raw_bodies.append(raw)
        self.requests.append(body)
        self.headers.append(dict(request.headers))
        self.loops.append(asyncio.get_running_loop())
        return httpx2.Response(200, json=self._reply(body))

    def _reply(self, body: dict[str, Any]) -> dict[str, Any]:
        instructions = body.get("instructions") or ""
        current = self._since_last_user_message(body["input"])
        outputs = [item for item in current if item.get("type") == "function_call_output"]
        if "You are the Developer" in instructions:
            task = body["input"][-1]["content"]
            return self._response([self._message(f"Developer did: {task}")])
        if not outputs:
            arguments = {
                "recipient_agent": "Developer",
                "message": f"please handle: {current[0]['content']}",
                "additional_instructions": None,
            }
            return self._response([self._function_call("send_message", arguments)])
        return self._response([self._message(f"CEO reports: {outputs[-1]['output']}")])

    @staticmethod
    def _since_last_user_message(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        last = max(index for index, item in enumerate(items) if item.get("role") == "user")
        return items[last:]

    def _message(self, text: str) -> dict[str, Any]:
        return {
            "type": "message",
            "id": f"msg_{next(self._ids)}",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        }

    def _function_call(self, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        number = next(self._ids)
        return {
            "type": "function_call",
            "id": f"fc_{number}",
            "call_id": f"call_{number}",
            "name": name,
            "arguments": json.dumps(arguments),
            "status": "completed",
        }

    def _response(self, output: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "id": f"resp_{next(self._ids)}",
            "object": "response",
            "created_at": 1_700_000_000,
            "model": "gpt-test",
            "status": "completed",
            "output": output,
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "usage": {
                "input_tokens": 12,
                "input_tokens_details": {"cached_tokens": 0},
                "output_tokens": 7,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": 19,
            },
        }


def real_client_agency(api: FakeResponsesAPI) -> Agency:
    client = AsyncOpenAI(
        api_key="test-key",
        base_url="http://testserver/v1",
        http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler)),
    )
    ceo = Agent(
        name="CEO",
        description="Leads the team",
        instructions="You are the CEO.",
        model=OpenAIResponsesModel(model="gpt-test", openai_client=client),
    )
    dev = Agent(
        name="Developer",
        description="Writes code",
        instructions="You are the Developer.",
        model=OpenAIResponsesModel(model="gpt-test", openai_client=client),
    )
    return Agency([ceo, [ceo, dev]])


def check_delegation_requests(api: FakeResponsesAPI, first_task: str, second_task: str) -> None:
    assert len(api.requests) == 6  # per turn: CEO, Developer, CEO
    ceo_first, dev, ceo_second = api.requests[0:3]

    assert ceo_first["model"] == "gpt-test"
    assert ceo_first["instructions"] == "You are the CEO."
    (tool,) = ceo_first["tools"]
    assert tool["type"] == "function"
    assert tool["name"] == "send_message"
    assert tool["parameters"]["properties"]["recipient_agent"]["enum"] == ["Developer"]
    assert {"recipient_agent", "message", "additional_instructions"} <= set(tool["parameters"]["required"])
    assert "- Developer: Writes code" in tool["description"]
    assert ceo_first["input"][-1]["role"] == "user"
    assert ceo_first["input"][-1]["content"] == first_task

    assert dev["instructions"] == "You are the Developer."
    assert not dev.get("tools")
    assert dev["input"] == [{"role": "user", "content": f"please handle: {first_task}"}]

    call = next(item for item in ceo_second["input"] if item.get("type") == "function_call")
    output = next(item for item in ceo_second["input"] if item.get("type") == "function_call_output")
    assert call["name"] == "send_message"
    assert output["call_id"] == call["call_id"]
    assert output["output"] == f"Developer did: please handle: {first_task}"

    # The second turn continues the same chat: its first CEO request carries the whole first turn.
    ceo_again = api.requests[3]
    assert ceo_again["input"][: len(ceo_second["input"])] == ceo_second["input"]
    assert ceo_again["input"][-1] == {"role": "user", "content": second_task}
    assert api.requests[4]["input"][-1] == {"role": "user", "content": f"please handle: {second_task}"}

    # One client, one event loop: every request of both turns ran on the same loop.
    assert len({id(loop) for loop in api.loops}) == 1

    for raw in api.raw_bodies:
        assert b"test-key" not in raw
    for headers in api.headers:
        assert headers["authorization"] == "Bearer test-key"


def test_real_client_delegation_twice_via_get_response_sync() -> None:
    api = FakeResponsesAPI()
    agency = real_client_agency(api)

    first = agency.get_response_sync("Build a landing page", chat_id="real")
    second = agency.get_response_sync("Add a footer", chat_id="real")

    assert first.final_output == "CEO reports: Developer did: please handle: Build a landing page"
    assert second.final_output == "CEO reports: Developer did: please handle: Add a footer"
    assert first.usage.requests == 3
    assert first.usage.input_tokens == 36
    assert first.usage.output_tokens == 21
    check_delegation_requests(api, "Build a landing page", "Add a footer")
    assert sorted(agency.thread_manager.get_threads("real")) == ["CEO->Developer", "user->CEO"]


async def test_real_client_via_get_response_sync_inside_a_running_loop() -> None:
    api = FakeResponsesAPI()
    agency = real_client_agency(api)

    first = agency.get_response_sync("Build a landing page", chat_id="real")
    second = agency.get_response_sync("Add a footer", chat_id="real")

    assert first.final_output == "CEO reports: Developer did: please handle: Build a landing page"
    assert second.final_output == "CEO reports: Developer did: please handle: Add a footer"
    check_delegation_requests(api, "Build a landing page", "Add a footer")
    assert asyncio.get_running_loop() not in api.loops  # the test's own loop stayed free for the client


# -- streaming through the real client: Server-Sent Events over the mock transport -------------------------


class StreamingResponsesAPI(FakeResponsesAPI):
    """The same script, answered as the Responses API streams it when the request says "stream": true."""

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        body = json.loads(request.read())
        if not body.get("stream"):
            return super().handler(request)
        self.requests.append(body)
        response = self._reply(body)
        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=self._sse(response).encode()
        )

    def _sse(self, response: dict[str, Any]) -> str:
        sequence = itertools.count()
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**response, "status": "in_progress", "output": []}},
        ]
        for index, item in enumerate(response["output"]):
            events.append({"type": "response.output_item.added", "output_index": index, "item": item})
            if item["type"] == "message":
                text = item["content"][0]["text"]
                for word in text.split(" "):
                    events.append({
                        "type": "response.output_text.delta", "item_id": item["id"], "output_index": index,
                        "content_index": 0, "delta": word + " ", "logprobs": [],
                    })
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
        events.append({"type": "response.completed", "response": response})
        return "".join(
            f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': next(sequence)})}\n\n"
            for event in events
        )


async def test_real_client_streams_a_nested_turn_in_order() -> None:
    api = StreamingResponsesAPI()
    agency = real_client_agency(api)

    stream = agency.get_response_stream("Build a landing page", chat_id="live")
    events = [event async for event in stream]

    assert all(request["stream"] is True for request in api.requests)
    kinds = [(event.type, event.agent) for event in events if event.type != "raw"]
    assert kinds[0] == ("agent_started", "CEO")
    sent = kinds.index(("message_sent", "CEO"))
    assert kinds[sent + 1] == ("agent_started", "Developer")
    assert kinds.index(("agent_finished", "Developer")) < kinds.index(("tool_output", "CEO"))
    assert kinds[-1] == ("agent_finished", "CEO")
    developer_text = "".join(
        event.delta for event in events if isinstance(event, TextDelta) and event.agent == "Developer"
    )
    assert developer_text.strip() == "Developer did: please handle: Build a landing page"
    assert stream.result.final_output == "CEO reports: Developer did: please handle: Build a landing page"
    assert stream.result.usage.requests == 3
    assert stream.result.usage.total_tokens == 57
    threads = agency.thread_manager.get_threads("live")
    assert [item.get("type") for item in threads["user->CEO"]] == [
        None, "function_call", "function_call_output", "message",
    ]
