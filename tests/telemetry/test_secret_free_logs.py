"""No key-shaped string reaches a log: exceptions a tool's or a model's own code raises are logged through one
redaction (the one model-API errors already went through), on every logger of the library."""

from __future__ import annotations

import logging

import httpx
import pytest

from agency_swarm import Agency, Agent, MemoryThreadStore, ThreadStore, function_tool
from agency_swarm._base._redact import redact_secrets
from agency_swarm.serving import create_app
from agency_swarm.testing import Fail, ScriptedModel, ToolCall

KEY = "sk-" + "A1b2C3d4E5" * 4  # sk- and 40 characters
TOKEN = ".".join(["eyJ" + "hbGciOiJIUzI1NiJ9", "payload", "signature"])  # a JWT's shape, built at run time


@function_tool
def leaky(query: str) -> str:
    """Fails, quoting its credentials as some client libraries do."""
    raise RuntimeError(f"request with api_key={KEY} (Authorization: Bearer {TOKEN}) failed for {query}")


def assert_secret_free(caplog: pytest.LogCaptureFixture) -> None:
    assert caplog.records, "nothing was logged"
    assert KEY not in caplog.text
    assert KEY[10:30] not in caplog.text
    assert TOKEN not in caplog.text
    assert "sk-***" in caplog.text  # what is left says what was there


async def test_a_tools_hidden_error_is_logged_without_its_key(caplog: pytest.LogCaptureFixture) -> None:
    model = ScriptedModel([ToolCall("leaky", {"query": "weather"}), "sorry"])
    agency = Agency(Agent(name="Ops", model=model, tools=[leaky], show_tool_errors=False))
    with caplog.at_level(logging.WARNING, logger="agency_swarm"):
        await agency.get_response("go")
    assert_secret_free(caplog)
    assert "Tool 'leaky' failed; its error is hidden from the model" in caplog.text
    assert "RuntimeError: request with api_key=sk-*** (Authorization: Bearer ***) failed for weather" in caplog.text


def failing_model_agency(store: ThreadStore) -> Agency:
    model = ScriptedModel([Fail(RuntimeError(f"upstream refused key {KEY}")), Fail(RuntimeError(f"again {KEY}"))])
    return Agency(Agent(name="CEO", model=model), thread_store=store)


async def test_a_models_error_in_a_served_turn_is_logged_without_its_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.ERROR, logger="agency_swarm")
    app = create_app(failing_model_agency, store=MemoryThreadStore())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
        answered = await client.post("/chats/c/messages", json={"message": "hi"})
        streamed = await client.post("/chats/d/messages:stream", json={"message": "hi"})
    assert answered.status_code == 500
    assert KEY not in answered.text
    assert KEY not in streamed.text
    assert_secret_free(caplog)
    assert "RuntimeError: upstream refused key sk-***" in caplog.text
    assert len([record for record in caplog.records if record.name == "agency_swarm.serving"]) == 2


def test_one_redaction_for_keys_and_bearer_tokens() -> None:
    text = f"key {KEY}, header 'Authorization: Bearer {TOKEN}', url ?auth=Bearer%20{TOKEN}, rk-abcdef123"
    redacted = redact_secrets(text, ["hunter2-secret"])
    assert redacted == "key sk-***, header 'Authorization: Bearer ***', url ?auth=Bearer%20***, rk-***"
    assert redact_secrets(redacted) == redacted
    assert redact_secrets("password hunter2-secret here", ["hunter2-secret"]) == "password *** here"
    for plain in ("the bearer of bad news", "max tokens reached", "task-1234567", "risk-averse"):
        assert redact_secrets(plain) == plain


def test_every_logger_of_the_library_redacts(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    names = ["agency_swarm", "agency_swarm.serving", "agency_swarm.durable", "agency_swarm._threads._file_store",
             "agency_swarm._threads._writes", "openai.agents"]
    from agency_swarm import durable as _durable  # noqa: F401  (its loggers are made on import)
    from agency_swarm._threads import _file_store, _writes  # noqa: F401

    for name in names:
        try:
            raise ValueError(f"{name} saw {KEY}")
        except ValueError as error:
            logging.getLogger(name).error("failed: %s", error, exc_info=True)
    assert_secret_free(caplog)
    assert len(caplog.records) == len(names)

