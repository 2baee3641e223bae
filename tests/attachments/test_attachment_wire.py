"""Images and files reach each model API in its own wire format: the real openai client against the local server
(tests/support/openai_server.py), request bodies checked. The SDK's models do the converting; agency_swarm hands them
the parts resolved from the store."""

from __future__ import annotations

import base64
import importlib.util
from collections.abc import AsyncIterator

import pytest
from agents import OpenAIChatCompletionsModel, OpenAIResponsesModel
from openai import AsyncOpenAI

from agency_swarm import Agency, Agent, MemoryThreadStore, file_part, image_part
from openai_server import OpenAIServer

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"
PNG_URL = "data:image/png;base64," + base64.b64encode(PNG).decode()
PDF_URL = "data:application/pdf;base64," + base64.b64encode(PDF).decode()
API_KEY = "offline-test-value-attachments"
MESSAGE = [{"role": "user", "content": [{"type": "input_text", "text": "Describe both."}, image_part(PNG, detail="low"),
                                        file_part(PDF, filename="r.pdf")]}]


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY) as client:
        yield client


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streamed"])
async def test_the_responses_api_gets_input_image_and_input_file(
    server: OpenAIServer, client: AsyncOpenAI, streaming: bool
) -> None:
    server.push("a dot and a report", "still a dot")
    agency = Agency(Agent(name="CEO", model=OpenAIResponsesModel(model="gpt-r", openai_client=client)),
                    thread_store=MemoryThreadStore())
    if streaming:
        stream = agency.get_response_stream(MESSAGE, chat_id="w")
        _ = [event async for event in stream]
    else:
        await agency.get_response(MESSAGE, chat_id="w")
    await agency.get_response("and again?", chat_id="w")  # the stored reference resolves again, call after call

    for request in server.requests:
        assert request.path == "/v1/responses"
        assert request.body["input"][0] == {"role": "user", "content": [
            {"type": "input_text", "text": "Describe both."},
            {"type": "input_image", "image_url": PNG_URL, "detail": "low"},
            {"type": "input_file", "file_data": PDF_URL, "filename": "r.pdf"},
        ]}


async def test_chat_completions_gets_image_url_and_file_parts(server: OpenAIServer, client: AsyncOpenAI) -> None:
    server.push("a dot and a report")
    model = OpenAIChatCompletionsModel(model="gpt-c", openai_client=client)
    await Agency(Agent(name="CEO", model=model)).get_response(MESSAGE)

    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["messages"][-1] == {"role": "user", "content": [
        {"type": "text", "text": "Describe both."},
        {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}},
        {"type": "file", "file": {"file_data": PDF_URL, "filename": "r.pdf"}},
    ]}


@pytest.mark.skipif(
    importlib.util.find_spec("litellm") is None,
    reason='needs the optional litellm extra: pip install ".[litellm]"',
)
async def test_litellm_gets_the_openai_wire_format(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.extensions.models.litellm_model import LitellmModel

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    server.push("a dot and a report")
    model = LitellmModel(model="openai/gpt-lite", base_url=server.base_url, api_key=API_KEY)
    await Agency(Agent(name="CEO", model=model)).get_response(MESSAGE)

    (request,) = server.requests
    content = request.body["messages"][-1]["content"]
    assert content[1] == {"type": "image_url", "image_url": {"url": PNG_URL, "detail": "low"}}
    assert content[2]["file"]["file_data"] == PDF_URL
