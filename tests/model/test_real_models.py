"""Real models through the real openai client, against a local OpenAI-compatible server
(tests/support/openai_server.py).

Responses API and Chat Completions, blocking and streamed; what each request carried; retries with backoff,
timeouts, errors that name the agent and never the key; LiteLLM names; cost estimates from real usage.
"""

from __future__ import annotations

import logging
import traceback
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import openai
import pytest
from agents import Model, MultiProvider, OpenAIChatCompletionsModel, OpenAIResponsesModel
from agents.models.interface import ModelTracing
from openai import AsyncOpenAI

from agency_swarm import (
    Agency,
    Agent,
    ConfigError,
    Event,
    FileThreadStore,
    ModelAuthenticationError,
    ModelError,
    ModelPrice,
    ModelRequestError,
    ModelSettings,
    ModelTimeout,
    ModelUnavailable,
    RetryPolicy,
    RunResult,
    function_tool,
)
from agency_swarm._model._retry import RetryingModel
from agency_swarm.testing import Fail, ScriptedModel, ToolCall, send_message
from openai_server import Hold, OpenAIServer, Reply, Reset, Status, Tokens

API_KEY = "-".join(("sk", "test", uuid.uuid4().hex))  # key-shaped at run time only: the redaction needs the shape


@pytest.fixture
async def client(server: OpenAIServer) -> AsyncIterator[AsyncOpenAI]:
    async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY) as client:
        yield client


class Waits:
    """A RetryPolicy.sleep that records the requested waits instead of waiting."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def policy(waits: Waits, **settings: Any) -> RetryPolicy:
    return RetryPolicy(sleep=waits, **{"jitter": False, **settings})


async def run(agency: Agency, message: str, *, streaming: bool, chat_id: str = "c1") -> tuple[RunResult, list[Event]]:
    if not streaming:
        return await agency.get_response(message, chat_id=chat_id), []
    stream = agency.get_response_stream(message, chat_id=chat_id)
    events = [event async for event in stream]
    return stream.result, events


def team(provider: MultiProvider, **ceo_settings: Any) -> Agency:
    ceo = Agent(
        name="CEO", description="Runs the company", instructions="You are the CEO. Delegate coding.",
        model="gpt-ceo", model_settings=ModelSettings(temperature=0.25, max_tokens=300), **ceo_settings,
    )
    dev = Agent(
        name="Developer", description="Writes code", instructions="You are the Developer.",
        model="gpt-dev", model_settings=ModelSettings(temperature=0.9),
    )
    return Agency([ceo, [ceo, dev]], model_provider=provider)


def assert_no_key(*texts: Any) -> None:
    for text in texts:
        assert API_KEY not in str(text)
        assert API_KEY[8:] not in str(text)  # not even the part after "sk-test-"


# -- a nested turn through the real client ----------------------------------------------------------------


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_responses_api_nested_turn_sends_what_each_agent_should_see(
    server: OpenAIServer, client: AsyncOpenAI, tmp_path: Path, caplog: pytest.LogCaptureFixture, streaming: bool
) -> None:
    caplog.set_level(logging.DEBUG)
    server.push(
        Reply([send_message("Developer", "Write hello.py")], usage=Tokens(input=100, output=20)),
        Reply(["Done: hello.py is written."], usage=Tokens(input=150, output=10)),
        model="gpt-ceo",
    )
    server.push(Reply(["hello.py prints hello"], usage=Tokens(input=40, output=5)), model="gpt-dev")
    ceo = Agent(
        name="CEO", description="Runs the company", instructions="You are the CEO. Delegate coding.",
        model="gpt-ceo", model_settings=ModelSettings(temperature=0.25, max_tokens=300),
    )
    dev = Agent(
        name="Developer", description="Writes code", instructions="You are the Developer.",
        model="gpt-dev", model_settings=ModelSettings(temperature=0.9),
    )
    store = FileThreadStore(tmp_path / "chats")
    agency = Agency([ceo, [ceo, dev]], model_provider=MultiProvider(openai_client=client), thread_store=store)

    result, events = await run(agency, "Please write hello.py", streaming=streaming)

    assert result.final_output == "Done: hello.py is written."
    ceo_first, dev_request, ceo_second = server.requests
    assert [request.path for request in server.requests] == ["/v1/responses"] * 3
    assert [request.model for request in server.requests] == ["gpt-ceo", "gpt-dev", "gpt-ceo"]
    assert all(request.stream is streaming for request in server.requests)
    assert all(request.headers["authorization"] == f"Bearer {API_KEY}" for request in server.requests)

    assert ceo_first.body["instructions"] == "You are the CEO. Delegate coding."
    assert ceo_first.body["temperature"] == 0.25
    assert ceo_first.body["max_output_tokens"] == 300
    assert ceo_first.body["input"] == [{"role": "user", "content": "Please write hello.py"}]
    send = ceo_first.tool("send_message")
    assert send["type"] == "function"
    assert send["strict"] is True
    assert send["parameters"]["properties"]["recipient_agent"]["enum"] == ["Developer"]
    assert "- Developer: Writes code" in send["description"]

    assert dev_request.body["instructions"] == "You are the Developer."
    assert dev_request.body["temperature"] == 0.9
    assert "max_output_tokens" not in dev_request.body
    assert "tools" not in dev_request.body or dev_request.body["tools"] == []
    assert dev_request.body["input"] == [{"role": "user", "content": "Write hello.py"}]

    history = ceo_second.body["input"]
    assert history[0] == {"role": "user", "content": "Please write hello.py"}
    call, output = history[1], history[2]
    assert (call["type"], call["name"]) == ("function_call", "send_message")
    assert output == {"type": "function_call_output", "call_id": call["call_id"], "output": "hello.py prints hello"}

    assert result.usage.requests == 3
    assert (result.usage.input_tokens, result.usage.output_tokens) == (290, 35)
    by_agent = result.usage_by_agent
    assert (by_agent["CEO"].requests, by_agent["CEO"].input_tokens, by_agent["CEO"].output_tokens) == (2, 250, 30)
    assert (by_agent["Developer"].requests, by_agent["Developer"].input_tokens) == (1, 40)
    if streaming:
        typed = [(event.type, event.agent) for event in events if event.type != "raw"]
        assert typed[0] == ("agent_started", "CEO")
        assert typed.index(("message_sent", "CEO")) < typed.index(("agent_started", "Developer"))
        assert typed[-1] == ("agent_finished", "CEO")
        developer_text = "".join(
            getattr(event, "delta", "") for event in events if event.type == "text_delta" and event.agent == "Developer"
        )
        assert developer_text == "hello.py prints hello"

    await agency.aclose()
    stored = "".join(path.read_text() for path in (tmp_path / "chats").rglob("*") if path.is_file())
    assert "hello.py prints hello" in stored
    assert_no_key(stored, caplog.text, *(request.raw for request in server.requests))
    assert_no_key(*(item for items in agency.thread_manager.get_threads("c1").values() for item in items))


@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_chat_completions_nested_turn(server: OpenAIServer, client: AsyncOpenAI, streaming: bool) -> None:
    server.push(send_message("Developer", "Write hello.py"), "Done.", model="gpt-ceo")
    server.push("hello.py prints hello", model="gpt-dev")
    agency = team(MultiProvider(openai_client=client, openai_use_responses=False))

    result, events = await run(agency, "Please write hello.py", streaming=streaming)

    assert result.final_output == "Done."
    assert [request.path for request in server.requests] == ["/v1/chat/completions"] * 3
    ceo_first, dev_request, ceo_second = server.requests
    assert all(request.stream is streaming for request in server.requests)
    assert ceo_first.body["messages"] == [
        {"role": "system", "content": "You are the CEO. Delegate coding."},
        {"role": "user", "content": "Please write hello.py"},
    ]
    assert ceo_first.body["temperature"] == 0.25
    assert ceo_first.body["max_tokens"] == 300
    send = ceo_first.tool("send_message")
    assert send["parameters"]["properties"]["recipient_agent"]["enum"] == ["Developer"]
    assert dev_request.body["temperature"] == 0.9
    assert dev_request.body["messages"][-1] == {"role": "user", "content": "Write hello.py"}
    assistant, tool_message = ceo_second.body["messages"][2:4]
    (call,) = assistant["tool_calls"]
    assert call["function"]["name"] == "send_message"
    assert tool_message == {"role": "tool", "tool_call_id": call["id"], "content": "hello.py prints hello"}
    assert result.usage.requests == 3
    assert result.usage.total_tokens == 3 * 19
    if streaming:
        assert [event.agent for event in events if event.type == "agent_finished"] == ["Developer", "CEO"]


async def test_function_tool_schema_and_output_through_the_real_client(
    server: OpenAIServer, client: AsyncOpenAI
) -> None:
    @function_tool
    def get_weather(city: str, unit: str = "C") -> str:
        """Current weather of a city.

        Args:
            city: The city's name.
            unit: C or F.
        """
        return f"18 {unit} and sunny in {city}"

    server.push(ToolCall("get_weather", {"city": "Paris", "unit": "C"}), "It is sunny in Paris.")
    model = OpenAIResponsesModel(model="gpt-w", openai_client=client)
    agent = Agent(name="Forecaster", tools=[get_weather], model=model)

    result = await Agency(agent).get_response("Weather in Paris?")

    assert result.final_output == "It is sunny in Paris."
    tool = server.requests[0].tool("get_weather")
    assert tool["description"] == "Current weather of a city."
    assert tool["parameters"]["properties"]["city"]["description"] == "The city's name."
    assert set(tool["parameters"]["required"]) == {"city", "unit"}
    assert server.requests[1].body["input"][-1]["output"] == "18 C and sunny in Paris"


# -- retries ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "failure",
    [Status(429), Status(500), Status(502), Status(503), Status(504), Status(408), Reset()],
    ids=["429", "500", "502", "503", "504", "408", "reset"],
)
@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_transient_failures_are_retried(
    server: OpenAIServer, client: AsyncOpenAI, failure: Any, streaming: bool
) -> None:
    waits = Waits()
    server.push(failure, "recovered")
    agent = Agent(name="CEO", model=OpenAIResponsesModel(model="gpt-r", openai_client=client), retry=policy(waits))

    result, _ = await run(Agency(agent), "hi", streaming=streaming)

    assert result.final_output == "recovered"
    assert len(server.requests) == 2
    assert waits.delays == [0.5]
    assert result.usage.requests == 1  # failed attempts report no usage


async def test_backoff_doubles_up_to_max_delay_then_gives_up(server: OpenAIServer, client: AsyncOpenAI) -> None:
    waits = Waits()
    server.push(*[Status(503, "overloaded")] * 5)
    agent = Agent(
        name="CEO", model=OpenAIResponsesModel(model="gpt-r", openai_client=client),
        retry=policy(waits, max_attempts=5, initial_delay=1.0, max_delay=5.0),
    )

    with pytest.raises(ModelUnavailable) as caught:
        await Agency(agent).get_response("hi", chat_id="busy")

    assert waits.delays == [1.0, 2.0, 4.0, 5.0]
    assert len(server.requests) == 5
    error = caught.value
    assert (error.agent, error.chat_id, error.depth, error.attempts) == ("CEO", "busy", 0, 5)
    assert (error.model, error.status_code, error.request_id) == ("gpt-r", 503, "req_503")
    assert "'CEO'" in str(error)
    assert "gpt-r" in str(error)
    assert "after 5 attempts" in str(error)
    assert "HTTP 503: overloaded" in str(error)


async def test_full_jitter_waits_are_drawn_below_the_exponential_bound(
    server: OpenAIServer, client: AsyncOpenAI
) -> None:
    waits = Waits()
    server.push(*[Status(500)] * 6, "ok")
    agent = Agent(
        name="CEO", model=OpenAIResponsesModel(model="gpt-r", openai_client=client),
        retry=RetryPolicy(max_attempts=7, initial_delay=0.5, max_delay=4.0, sleep=waits),
    )

    result = await Agency(agent).get_response("hi")

    assert result.final_output == "ok"
    bounds = [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert len(waits.delays) == len(bounds)
    assert all(0 <= delay <= bound for delay, bound in zip(waits.delays, bounds, strict=True))


async def test_retry_after_is_honoured_beyond_max_delay_up_to_max_retry_after(
    server: OpenAIServer, client: AsyncOpenAI
) -> None:
    """A rate limit that says "30 s" is waited out, not cut to max_delay; max_retry_after caps it."""
    waits = Waits()
    server.push(
        Status(429, headers={"retry-after": "30"}), Status(429, headers={"retry-after-ms": "90000"}),
        Status(503, headers={"retry-after": "0.25"}), "ok",
    )
    agent = Agent(
        name="CEO", model=OpenAIResponsesModel(model="gpt-r", openai_client=client),
        retry=policy(waits, max_attempts=4, max_delay=8.0),
    )

    assert (await Agency(agent).get_response("hi")).final_output == "ok"
    assert waits.delays == [30.0, 60.0, 2.0]  # as asked; capped by max_retry_after (60 s); the backoff is longer

    waits.delays.clear()
    server.push(Status(429, headers={"retry-after": "30"}), "ok")
    agent.retry = policy(waits, max_delay=8.0, max_retry_after=20.0)
    assert (await Agency(agent).get_response("hi", chat_id="c2")).final_output == "ok"
    assert waits.delays == [20.0]


async def test_the_clients_own_retries_do_not_multiply_ours(server: OpenAIServer) -> None:
    """A provider-built client (openai's default max_retries=2) and a user's client with max_retries=5."""
    waits = Waits()
    provider = MultiProvider(openai_api_key=API_KEY, openai_base_url=server.base_url)
    server.push(Status(503), Status(503))
    agent = Agent(name="CEO", model="gpt-r", retry=policy(waits, max_attempts=2))
    with pytest.raises(ModelUnavailable):
        await Agency(agent, model_provider=provider).get_response("hi")
    assert len(server.requests) == 2
    await provider.aclose()

    server.reset()
    async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, max_retries=5) as eager:
        server.push(Status(500))
        solo = Agent(
            name="Solo", model=OpenAIResponsesModel(model="gpt-r", openai_client=eager),
            retry=RetryPolicy(max_attempts=1),
        )
        with pytest.raises(ModelUnavailable) as caught:
            await Agency(solo).get_response("hi")
    assert len(server.requests) == 1
    assert caught.value.attempts == 1
    assert "after" not in str(caught.value)


async def test_agency_retry_is_the_default_and_an_agents_own_wins(server: OpenAIServer, client: AsyncOpenAI) -> None:
    agency_waits, own_waits = Waits(), Waits()
    server.push(Status(503), "ceo ok", model="gpt-ceo")
    server.push(Status(503), Status(503), model="gpt-dev")
    ceo = Agent(name="CEO", model=OpenAIResponsesModel(model="gpt-ceo", openai_client=client))
    dev = Agent(
        name="Developer", model=OpenAIResponsesModel(model="gpt-dev", openai_client=client),
        retry=policy(own_waits, max_attempts=2, initial_delay=2.0),
    )
    agency = Agency(ceo, dev, retry=policy(agency_waits, max_attempts=2))

    assert (await agency.get_response("hi")).final_output == "ceo ok"
    with pytest.raises(ModelUnavailable):
        await agency.get_response("hi", "Developer")

    assert agency_waits.delays == [0.5]
    assert own_waits.delays == [2.0]


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (400, ModelRequestError), (401, ModelAuthenticationError), (403, ModelAuthenticationError),
        (404, ModelRequestError), (422, ModelRequestError),
    ],
)
@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_request_and_auth_errors_fail_at_once_naming_the_agent_never_the_key(
    server: OpenAIServer,
    client: AsyncOpenAI,
    caplog: pytest.LogCaptureFixture,
    code: int,
    error_type: type[ModelError],
    streaming: bool,
) -> None:
    caplog.set_level(logging.DEBUG)
    waits = Waits()
    server.push(Status(code, f"Incorrect API key provided: {API_KEY}", echo_key=True))
    agent = Agent(name="CEO", model=OpenAIResponsesModel(model="gpt-x", openai_client=client), retry=policy(waits))

    with pytest.raises(error_type) as caught:
        await run(Agency(agent), "hi", streaming=streaming, chat_id="auth")

    error = caught.value
    logging.getLogger("test").exception("the turn failed", exc_info=error)  # as an app would log it
    assert len(server.requests) == 1
    assert waits.delays == []
    assert (error.agent, error.chat_id, error.depth) == ("CEO", "auth", 0)
    assert (error.status_code, error.model) == (code, "gpt-x")
    assert "Agent 'CEO' (model 'gpt-x')" in str(error)
    assert f"HTTP {code}" in str(error)
    assert "Incorrect API key provided: ***" in str(error)
    if code in (401, 403):
        assert "API key" in str(error)
    assert error.__cause__ is None
    assert error.__suppress_context__
    assert_no_key(str(error), repr(error), "".join(traceback.format_exception(error)), caplog.text)
    assert "the turn failed" in caplog.text


async def test_a_nested_agents_model_failure_becomes_its_callers_tool_output(
    server: OpenAIServer, client: AsyncOpenAI
) -> None:
    server.push(send_message("Developer", "build"), "The Developer is unavailable.", model="gpt-ceo")
    server.push(Status(401, "bad key", echo_key=True), model="gpt-dev")
    agency = team(MultiProvider(openai_client=client))

    result = await agency.get_response("Build it")

    assert result.final_output == "The Developer is unavailable."
    output = server.requests[2].body["input"][-1]["output"]
    assert output.startswith("Error: Developer failed to answer: ModelAuthenticationError: Agent 'Developer'")
    assert_no_key(output, agency.thread_manager.get_threads("default"))


async def test_no_api_key_names_the_agent_the_model_and_the_ways_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)  # (conftest already removes OPENAI_API_KEY)
    ceo = Agent(name="CEO", model="gpt-4.1")
    agency = Agency(ceo)
    for _ in range(2):  # each turn asks the provider again
        with pytest.raises(ModelAuthenticationError) as caught:
            await agency.get_response("hello")
        error = caught.value
        assert (error.agent, error.model, error.status_code) == ("CEO", "gpt-4.1", None)
        assert str(error).startswith("Agent 'CEO' (model 'gpt-4.1') has no API key: set OPENAI_API_KEY, or run offline")
        assert "--models" in str(error)
        assert "models=" in str(error)

    default = Agent(name="Lead")  # no model: the provider's default
    with pytest.raises(ModelAuthenticationError, match=r"Agent 'Lead' \(the provider's default model\) has no API"):
        await Agency(default).get_response("hello")

    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)  # set later: the same agency now builds its client
    assert ceo.wiring.resolve_model(ceo).model_name == "gpt-4.1"


async def test_a_client_that_finds_no_key_at_its_first_call_is_an_authentication_error() -> None:
    """A provider may build its openai client lazily, at the first call: the same error, not retried."""
    waits = Waits()
    missing = openai.OpenAIError("The api_key client option must be set either by passing api_key to the client "
                                 "or by setting the OPENAI_API_KEY environment variable")
    agent = Agent(name="CEO", model=ScriptedModel([Fail(missing)], name="lazy-model"), retry=policy(waits))
    with pytest.raises(ModelAuthenticationError, match=r"Agent 'CEO' \(model 'lazy-model'\) has no API key"):
        await Agency(agent).get_response("hi")
    assert waits.delays == []

    other = Agent(name="CEO", model=ScriptedModel([Fail(openai.OpenAIError("something else"))]), retry=policy(waits))
    with pytest.raises(ModelError, match="something else") as caught:
        await Agency(other).get_response("hi")
    assert not isinstance(caught.value, ModelAuthenticationError)


async def test_a_stream_cut_after_its_first_events_is_not_retried(server: OpenAIServer, client: AsyncOpenAI) -> None:
    waits = Waits()
    server.push(Reset(after_events=3))
    agent = Agent(name="CEO", model=OpenAIResponsesModel(model="gpt-s", openai_client=client), retry=policy(waits))

    seen: list[str] = []

    async def consume() -> None:
        async for event in Agency(agent).get_response_stream("hi"):
            seen.append(event.type)

    with pytest.raises(ModelUnavailable) as caught:
        await consume()

    assert seen[0] == "agent_started"
    assert seen.count("raw") == 3  # streamed before the cut: these could not be taken back, so no retry
    assert len(server.requests) == 1
    assert waits.delays == []
    assert caught.value.attempts == 1


async def test_unknown_exceptions_from_a_model_pass_through_unretried() -> None:
    waits = Waits()
    model = ScriptedModel([Fail(RuntimeError("a bug"))])
    agent = Agent(name="CEO", model=model, retry=policy(waits))
    with pytest.raises(RuntimeError, match="a bug"):
        await Agency(agent).get_response("hi")
    assert waits.delays == []
    assert len(model.calls) == 1



class FailsBeforeItsFirstEvent(ScriptedModel):
    """Streams nothing at all (`error=None`), or fails when asked for its first event."""

    def __init__(self, error: Exception | None) -> None:
        super().__init__(["unused"])
        self.error = error
        self.streams = 0

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        self.streams += 1
        error = self.error

        async def events() -> AsyncIterator[Any]:
            if error is not None:
                raise error
            return
            yield  # an async generator

        return events()


async def test_unknown_exceptions_before_a_streams_first_event_pass_through_unretried() -> None:
    waits = Waits()
    model = FailsBeforeItsFirstEvent(RuntimeError("a bug"))
    agent = Agent(name="CEO", model=model, retry=policy(waits))
    with pytest.raises(RuntimeError, match="a bug"):
        async for _ in Agency(agent).get_response_stream("hi"):
            pass
    assert waits.delays == []
    assert model.streams == 1


def retrying(inner: Model, waits: Waits) -> RetryingModel:
    return RetryingModel(inner, agent="Solo", model_name="m", policy=policy(waits), timeout=None)


async def read_stream(model: RetryingModel) -> list[str]:
    stream = model.stream_response(None, [{"role": "user", "content": "hi"}], ModelSettings(), [], None, [],
                                   ModelTracing.DISABLED)
    return [event.type async for event in stream]


async def test_the_retrying_models_own_stream_response_gives_the_models_events() -> None:
    waits = Waits()
    assert await read_stream(retrying(ScriptedModel(["Hello there"]), waits)) == [
        event.type async for event in ScriptedModel(["Hello there"]).stream_response(
            None, [], ModelSettings(), [], None, [], ModelTracing.DISABLED
        )
    ]
    assert await read_stream(retrying(FailsBeforeItsFirstEvent(None), waits)) == []  # a stream without events

    failing = ScriptedModel([Fail(ConnectionError("reset"), partial_text="Hel")])
    with pytest.raises(ModelUnavailable, match="reset") as caught:
        await read_stream(retrying(failing, waits))
    assert caught.value.attempts == 1  # cut after its first events: not tried again
    assert len(failing.calls) == 1
    assert waits.delays == []

# -- timeouts --------------------------------------------------------------------------------------------------


# A timed-out client may give up before its request reaches a busy machine's server: the holds are optional, and
# the attempts are counted by the error, not by the server.
@pytest.mark.parametrize("streaming", [False, True], ids=["blocking", "streaming"])
async def test_timeout_raises_model_timeout_naming_agent_and_seconds(
    server: OpenAIServer, client: AsyncOpenAI, streaming: bool
) -> None:
    server.push(Hold(required=False), Hold(required=False))
    agent = Agent(
        name="Slowpoke", model=OpenAIResponsesModel(model="gpt-slow", openai_client=client), timeout=0.25,
        retry=policy(Waits(), max_attempts=2),
    )

    with pytest.raises(ModelTimeout) as caught:
        await run(Agency(agent), "hi", streaming=streaming, chat_id="slow")

    error = caught.value
    assert (error.agent, error.chat_id, error.seconds, error.attempts) == ("Slowpoke", "slow", 0.25, 2)
    assert isinstance(error, ModelUnavailable)
    assert "Agent 'Slowpoke' (model 'gpt-slow') got no answer within timeout=0.25 s (after 2 attempts)" in str(error)


async def test_a_stream_that_stalls_after_its_first_events_times_out_without_a_retry(
    server: OpenAIServer, client: AsyncOpenAI
) -> None:
    waits = Waits()
    stall = Hold("a long answer that stops half way", after_events=5)
    server.push(stall)
    agent = Agent(
        name="CEO", model=OpenAIResponsesModel(model="gpt-stall", openai_client=client), timeout=2.0,
        retry=policy(waits),
    )  # long enough for the first events to arrive on a loaded machine: only the stall may time out
    deltas: list[str] = []

    async def consume() -> None:
        async for event in Agency(agent).get_response_stream("hi"):
            if event.type == "text_delta":
                deltas.append(getattr(event, "delta", ""))

    with pytest.raises(ModelTimeout) as caught:
        await consume()

    assert deltas == ["a"]  # created, in_progress, item added, part added, then the first word; then silence
    assert (caught.value.attempts, caught.value.seconds) == (1, 2.0)
    assert waits.delays == []
    assert len(server.requests) == 1


async def test_a_timed_out_attempt_is_retried(server: OpenAIServer, client: AsyncOpenAI) -> None:
    waits = Waits()
    server.push(Hold(required=False), "second try")
    agent = Agent(
        name="CEO", model=OpenAIResponsesModel(model="gpt-slow", openai_client=client), timeout=0.25,
        retry=policy(waits),
    )
    assert (await Agency(agent).get_response("hi")).final_output == "second try"
    assert waits.delays[0] == 0.5


async def test_the_clients_own_timeout_is_retried_then_a_model_timeout(server: OpenAIServer) -> None:
    waits = Waits()
    server.push(Hold(required=False), Hold(required=False))
    async with AsyncOpenAI(base_url=server.base_url, api_key=API_KEY, timeout=0.25) as impatient:
        agent = Agent(
            name="CEO", model=OpenAIResponsesModel(model="gpt-slow", openai_client=impatient),
            retry=policy(waits, max_attempts=2),
        )
        with pytest.raises(ModelTimeout) as caught:
            await Agency(agent).get_response("hi")
    assert (caught.value.seconds, caught.value.attempts) == (None, 2)
    assert "the model API request timed out (after 2 attempts)" in str(caught.value)
    assert waits.delays == [0.5]


async def test_a_slow_reply_within_the_timeout_is_waited_for(server: OpenAIServer, client: AsyncOpenAI) -> None:
    hold = Hold("worth the wait")
    server.push(hold)
    agent = Agent(name="CEO", model=OpenAIResponsesModel(model="gpt-slow", openai_client=client), timeout=60)
    turn = Agency(agent).get_response("hi")

    import asyncio

    task = asyncio.ensure_future(turn)
    await hold.arrived()
    assert not task.done()
    hold.release()
    assert (await task).final_output == "worth the wait"



async def test_a_stream_within_its_timeout_gives_every_event() -> None:
    async def kinds(seconds: float | None) -> list[str]:
        agent = Agent(name="CEO", model=ScriptedModel(["Hello there, all of you"]), timeout=seconds)
        return [event.type async for event in agent.get_response_stream("hi")]

    assert await kinds(60) == await kinds(None)


class RecordsClosing(ScriptedModel):
    def __init__(self) -> None:
        super().__init__(["Hello there, all of you"])
        self.closed = 0

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        try:
            async for event in super().stream_response(*args, **kwargs):
                yield event
        finally:
            self.closed += 1


@pytest.mark.parametrize("seconds", [None, 60.0], ids=["no timeout", "timeout"])
async def test_a_reader_leaving_early_closes_the_models_stream(seconds: float | None) -> None:
    model = RecordsClosing()
    async with Agent(name="CEO", model=model, timeout=seconds).get_response_stream("hi") as stream:
        async for event in stream:
            if event.type == "raw":
                break
    assert model.closed == 1

def test_bad_retry_and_timeout_settings_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="timeout must be a number of seconds > 0"):
        Agent(name="A", timeout=0)
    with pytest.raises(ConfigError, match=r"retry must be an agency_swarm\.RetryPolicy"):
        Agent(name="A", retry=3)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="max_attempts must be an int >= 1"):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ConfigError, match="initial_delay must be a number of seconds >= 0"):
        RetryPolicy(initial_delay=-1)
    with pytest.raises(ConfigError, match="max_retry_after must be a number of seconds >= 0"):
        RetryPolicy(max_retry_after=float("inf"))
    with pytest.raises(ConfigError, match=r"retry must be an agency_swarm\.RetryPolicy"):
        Agency(Agent(name="A"), retry={"max_attempts": 2})  # type: ignore[arg-type]


# -- LiteLLM ------------------------------------------------------------------------------------------------------


def litellm_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("litellm") is not None


@pytest.mark.skipif(litellm_installed(), reason="litellm is installed: litellm/ names resolve")
async def test_a_litellm_name_without_litellm_says_how_to_install_it() -> None:
    agent = Agent(name="Claude", model="litellm/anthropic/claude-3-5-sonnet")
    with pytest.raises(ConfigError) as caught:
        await Agency(agent).get_response("hi")
    assert "Agent 'Claude' uses model 'litellm/anthropic/claude-3-5-sonnet'" in str(caught.value)
    assert 'needs the litellm extra (litellm is not installed): pip install ".[litellm]"' in str(
        caught.value
    )


@pytest.mark.skipif(
    not litellm_installed(), reason='needs the optional litellm extra: pip install ".[litellm]"'
)
async def test_litellm_models_through_the_local_server(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    from agents.extensions.models.litellm_model import LitellmModel

    assert isinstance(MultiProvider().get_model("litellm/openai/gpt-lite"), LitellmModel)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    server.push(send_message("Developer", "build"), "done via litellm", model="gpt-lite")
    server.push("built", model="gpt-lite-dev")
    def lite(name: str) -> LitellmModel:
        return LitellmModel(model=f"openai/{name}", base_url=server.base_url, api_key=API_KEY)

    ceo = Agent(name="CEO", model=lite("gpt-lite"))
    dev = Agent(name="Developer", model=lite("gpt-lite-dev"))

    result = await Agency([ceo, [ceo, dev]]).get_response("hi")

    assert result.final_output == "done via litellm"
    assert [request.path for request in server.requests] == ["/v1/chat/completions"] * 3
    assert server.requests[0].tool("send_message")["parameters"]["properties"]["recipient_agent"]["enum"] == [
        "Developer"
    ]


# -- cost ----------------------------------------------------------------------------------------------------------


async def test_cost_prices_each_agents_usage_by_its_model(server: OpenAIServer, client: AsyncOpenAI) -> None:
    server.push(
        Reply([send_message("Developer", "build")], usage=Tokens(input=1_000, cached=400, output=100)),
        Reply(["done"], usage=Tokens(input=2_000, cached=0, output=50, reasoning=20)),
        model="gpt-ceo",
    )
    server.push(Reply(["built"], usage=Tokens(input=500_000, output=250_000)), model="gpt-dev")
    agency = team(MultiProvider(openai_client=client))

    result = await agency.get_response("Build it")

    prices = {
        "gpt-ceo": ModelPrice(input=2.0, output=8.0, cached_input=0.5),
        "gpt-dev": {"input": 0.1, "output": 0.4},
        "unused-model": ModelPrice(input=100.0, output=100.0),
    }
    cost = result.cost(prices)
    ceo_cost = (2_600 * 2.0 + 400 * 0.5 + 150 * 8.0) / 1e6
    dev_cost = (500_000 * 0.1 + 250_000 * 0.4) / 1e6
    assert cost.by_agent == pytest.approx({"CEO": ceo_cost, "Developer": dev_cost})
    assert cost.by_model == pytest.approx({"gpt-ceo": ceo_cost, "gpt-dev": dev_cost})
    assert cost.total == pytest.approx(ceo_cost + dev_cost)
    by_model = result.usage_by_model
    assert (by_model["gpt-ceo"].requests, by_model["gpt-ceo"].input_tokens) == (2, 3_000)
    assert by_model["gpt-ceo"].input_tokens_details.cached_tokens == 400
    assert by_model["gpt-dev"].output_tokens == 250_000

    with pytest.raises(ConfigError, match=r"No price for model 'gpt-dev'.*prices\['gpt-dev'\] = ModelPrice"):
        result.cost({"gpt-ceo": prices["gpt-ceo"]})
    with pytest.raises(ConfigError, match="must have 'input' and 'output'"):
        result.cost({"gpt-ceo": {"input": 1.0}, "gpt-dev": {"input": 1.0, "output": 1.0}})
    with pytest.raises(ConfigError, match="output must be a number >= 0"):
        ModelPrice(input=1.0, output=-2)


async def test_cost_names_models_by_the_agents_model_string_or_the_model_objects_name(
    server: OpenAIServer, client: AsyncOpenAI
) -> None:
    server.push(Reply(["hi"], usage=Tokens(input=1_000_000, output=0)))
    agent = Agent(name="Solo", model=OpenAIChatCompletionsModel(model="gpt-chat", openai_client=client))
    result = await Agency(agent).get_response("hello")
    assert result.cost({"gpt-chat": ModelPrice(input=3.0, output=1.0)}).total == pytest.approx(3.0)

    server.push(Reply(["hi"], usage=Tokens(input=0, output=2_000_000)))
    named = Agent(name="Named", model="openai/gpt-prefixed")  # the provider strips "openai/" for the API
    result = await Agency(named, model_provider=MultiProvider(openai_client=client)).get_response("hello")
    assert server.requests[-1].model == "gpt-prefixed"
    assert list(result.usage_by_model) == ["openai/gpt-prefixed"]  # prices use the name the agent was given
    assert result.cost({"openai/gpt-prefixed": ModelPrice(input=3.0, output=1.0)}).by_agent == {"Named": 2.0}


async def test_cost_prices_a_model_object_by_its_own_name_not_its_class() -> None:
    """A model object without a `model` attribute (ScriptedModel, a custom Model) is priced by its `name`."""
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Dev", "go"), "done"], name="gpt-4.1"))
    dev = Agent(name="Dev", model=ScriptedModel(["built"]))  # the default name, "scripted-model"
    result = await Agency(ceo, communication_flows=[(ceo, dev)]).get_response("hi")
    assert list(result.usage_by_model) == ["gpt-4.1", "scripted-model"]
    cost = result.cost({"gpt-4.1": ModelPrice(input=1e6, output=0), "scripted-model": ModelPrice(input=0, output=0)})
    assert cost.by_model == {"gpt-4.1": 20.0, "scripted-model": 0.0}
    with pytest.raises(ConfigError, match=r"No price for model 'gpt-4.1'"):
        result.cost({"scripted-model": ModelPrice(input=0, output=0)})

    class Nameless(ScriptedModel):
        pass

    solo = Agent(name="Solo", model=Nameless(["hi"], name=""))  # an empty name is no name: the class names it
    assert list((await Agency(solo).get_response("hi")).usage_by_model) == ["Nameless"]
