"""An answer an output guardrail blocks never joins the chat: not in `get_threads`, not in the next turn's model
input, on every store, for the entry agent and for a recipient of send_message; `resume` and later turns go on."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from agents import (
    GuardrailFunctionOutput,
    OutputGuardrailTripwireTriggered,
    RunContextWrapper,
    StopAtTools,
    function_tool,
    output_guardrail,
)

from agency_swarm import Agency, Agent, FileThreadStore, MemoryThreadStore, SQLThreadStore, ThreadStore
from agency_swarm.serving import create_app
from agency_swarm.testing import ScriptedModel, ToolCall, send_message
from postgres_support import require_postgres

BLOCKED = "the SECRET is 42"


@output_guardrail(name="no_secrets")
def no_secrets(ctx: RunContextWrapper[Any], agent: Any, output: Any) -> GuardrailFunctionOutput:
    return GuardrailFunctionOutput(output_info="secret found", tripwire_triggered="SECRET" in str(output))


def _memory(_: Path) -> ThreadStore:
    return MemoryThreadStore()


def _file(tmp_path: Path) -> ThreadStore:
    return FileThreadStore(tmp_path / "threads")


def _sqlite(tmp_path: Path) -> ThreadStore:
    return SQLThreadStore(f"sqlite:///{tmp_path / 'threads.db'}")


def _postgres(_: Path) -> ThreadStore:
    return SQLThreadStore(require_postgres())


STORES: dict[str, Callable[[Path], ThreadStore | None]] = {
    "no-store": lambda _: None, "memory": _memory, "file": _file, "sqlite": _sqlite, "postgres": _postgres,
}


@pytest.fixture(params=list(STORES))
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[ThreadStore | None]:
    opened = STORES[request.param](tmp_path)
    yield opened
    if opened is not None:
        await opened.aclose()


@pytest.fixture
def chat_id() -> str:
    return f"blocked-{uuid.uuid4().hex[:10]}"  # the PostgreSQL table outlives the test: chats of its own


def _texts(threads: dict[str, list[dict[str, Any]]]) -> str:
    return repr(threads)


async def _cleanup(agency: Agency, store: ThreadStore | None, chat_id: str) -> None:
    if store is not None:
        await store.delete(chat_id)
    await agency.aclose()


async def test_blocked_entry_answer_is_not_kept(store: ThreadStore | None, chat_id: str) -> None:
    model = ScriptedModel([ToolCall("note", {"text": "milk"}), BLOCKED, "Fine."])

    @function_tool
    def note(text: str) -> str:
        """Write a note down."""
        return f"noted: {text}"

    agent = Agent(name="Assistant", model=model, tools=[note], output_guardrails=[no_secrets])
    agency = Agency([agent], thread_store=store)
    try:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await agency.get_response("Hello", chat_id=chat_id)
        threads = await agency.get_threads(chat_id)
        assert BLOCKED not in _texts(threads)
        assert [item.get("type", item.get("role")) for item in threads["user->Assistant"]] == [
            "user", "function_call", "function_call_output",  # kept, as `Runner` keeps them in its session
        ]
        result = await agency.get_response("Again", chat_id=chat_id)
        assert result.final_output == "Fine."
        assert BLOCKED not in repr(model.calls[-1].input)
        assert [item.get("content") for item in model.calls[-1].input if item.get("role") == "user"] == [
            "Hello", "Again",
        ]
        if store is not None:  # a new process reads the same from the store
            again = Agency([Agent(name="Assistant", model=ScriptedModel([]))], thread_store=store)
            assert BLOCKED not in _texts(await again.get_threads(chat_id))
    finally:
        await _cleanup(agency, store, chat_id)


async def test_resume_after_a_blocked_answer_asks_the_model_again(store: ThreadStore | None, chat_id: str) -> None:
    model = ScriptedModel([BLOCKED, "Fine."])
    agency = Agency([Agent(name="Assistant", model=model, output_guardrails=[no_secrets])], thread_store=store)
    try:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await agency.get_response("Hello", chat_id=chat_id)
        result = await agency.resume(chat_id)
        assert result.final_output == "Fine."
        assert BLOCKED not in repr(model.calls[-1].input)
        assert [item.get("role") for item in (await agency.get_threads(chat_id))["user->Assistant"]] == [
            "user", "assistant",
        ]
    finally:
        await _cleanup(agency, store, chat_id)


async def test_blocked_answer_of_a_recipient_is_not_kept(store: ThreadStore | None, chat_id: str) -> None:
    ceo_model = ScriptedModel.each_turn([send_message("Dev", "What is the secret?"), "Dev could not say."])
    dev_model = ScriptedModel([BLOCKED, "I cannot say."])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Dev", model=dev_model, output_guardrails=[no_secrets])
    agency = Agency([ceo, [ceo, dev]], thread_store=store)
    try:
        result = await agency.get_response("Ask Dev", chat_id=chat_id)
        assert result.final_output == "Dev could not say."
        failure = ceo_model.calls[1].tool_outputs[0]
        assert "output guardrail 'no_secrets' tripped" in failure
        assert BLOCKED not in failure
        threads = await agency.get_threads(chat_id)
        assert BLOCKED not in _texts(threads)
        assert [item.get("role") for item in threads["CEO->Dev"]] == ["user"]
        await agency.get_response("Ask Dev again", chat_id=chat_id)
        assert BLOCKED not in repr(dev_model.calls[-1].input)
        assert [item.get("role") for item in (await agency.get_threads(chat_id))["CEO->Dev"]] == [
            "user", "user", "assistant",
        ]
    finally:
        await _cleanup(agency, store, chat_id)


async def test_blocked_answer_streamed_is_not_kept(chat_id: str) -> None:
    model = ScriptedModel([BLOCKED])
    agency = Agency([Agent(name="Assistant", model=model, output_guardrails=[no_secrets])])
    with pytest.raises(OutputGuardrailTripwireTriggered):
        async for _ in agency.get_response_stream("Hello", chat_id=chat_id):
            pass
    assert BLOCKED not in _texts(await agency.get_threads(chat_id))


@function_tool
def reveal() -> str:
    """Tell the secret."""
    return BLOCKED


WITHHELD = "Output withheld by an output guardrail."


@pytest.mark.parametrize("then", ["next_turn", "resume"])
async def test_blocked_tool_output_is_stored_withheld(store: ThreadStore | None, chat_id: str, then: str) -> None:
    """A tool's output that ended the turn (tool_use_behavior) and tripped an output guardrail: its call keeps an
    output (the thread stays valid), `Runner`'s withheld text, never the blocked one."""
    model = ScriptedModel([ToolCall("reveal"), "Fine."])
    agent = Agent(name="Assistant", model=model, tools=[reveal], output_guardrails=[no_secrets],
                  tool_use_behavior=StopAtTools(stop_at_tool_names=["reveal"]))
    agency = Agency([agent], thread_store=store)
    try:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await agency.get_response("Hello", chat_id=chat_id)
        items = (await agency.get_threads(chat_id))["user->Assistant"]
        assert BLOCKED not in repr(items)
        kinds = [item.get("type", item.get("role")) for item in items]
        assert kinds == ["user", "function_call", "function_call_output"]
        assert items[-1]["output"] == WITHHELD
        if then == "resume":
            result = await agency.resume(chat_id)
        else:
            result = await agency.get_response("Again", chat_id=chat_id)
        assert result.final_output == "Fine."
        assert BLOCKED not in repr(model.calls[-1].input)
        assert WITHHELD in repr(model.calls[-1].input)
    finally:
        await _cleanup(agency, store, chat_id)


@function_tool(failure_error_function=None)
def explode() -> str:
    """Fail loudly."""
    raise RuntimeError("boom")


async def test_held_outputs_are_stored_when_a_call_fails(chat_id: str) -> None:
    """Outputs held back for the output guardrails are still stored when the turn fails: no call is left without
    its output."""
    model = ScriptedModel([[ToolCall("reveal"), ToolCall("explode")], "Fine."])
    agent = Agent(name="Assistant", model=model, tools=[reveal, explode], output_guardrails=[no_secrets],
                  tool_use_behavior=StopAtTools(stop_at_tool_names=["reveal"]))
    agency = Agency([agent])
    with pytest.raises(Exception, match="boom"):
        await agency.get_response("Hello", chat_id=chat_id)
    items = (await agency.get_threads(chat_id))["user->Assistant"]
    calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
    outputs = {item["call_id"] for item in items if item.get("type") == "function_call_output"}
    assert len(calls) == 2
    assert calls == outputs
    assert (await agency.get_response("Again", chat_id=chat_id)).final_output == "Fine."


async def test_a_blocked_turn_run_again_with_its_id_never_returns_the_blocked_answer(
    store: ThreadStore | None, chat_id: str
) -> None:
    """A turn id names a turn the thread holds: running it again (a retry, a durable re-run) goes on from what was
    stored. A blocked answer is not there, so it is never handed back as the turn's result."""
    model = ScriptedModel([BLOCKED, "Fine."])
    agency = Agency([Agent(name="Assistant", model=model, output_guardrails=[no_secrets])], thread_store=store)
    try:
        with pytest.raises(OutputGuardrailTripwireTriggered):
            await agency.get_response("Hello", chat_id=chat_id, turn_id="turn-1")
        result = await agency.get_response("Hello", chat_id=chat_id, turn_id="turn-1")
        assert result.final_output == "Fine."
        assert BLOCKED not in repr(result.new_items)
    finally:
        await _cleanup(agency, store, chat_id)


async def test_the_threads_endpoint_leaves_the_blocked_answer_out() -> None:
    def build(store: ThreadStore) -> Agency:
        agent = Agent(name="Assistant", model=ScriptedModel([BLOCKED, "Fine."]), output_guardrails=[no_secrets])
        return Agency([agent], thread_store=store)

    app = create_app(build, store=MemoryThreadStore())
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app") as client:
            blocked = await client.post("/chats/c1/messages", json={"message": "Hello"})
            assert blocked.status_code >= 400
            assert BLOCKED not in blocked.text
            threads = (await client.get("/chats/c1/threads")).json()["threads"]
            assert threads == {"user->Assistant": [{"role": "user", "content": "Hello"}]}
    finally:
        await app.state.agency.aclose()
