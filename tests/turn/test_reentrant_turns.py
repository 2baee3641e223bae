"""A tool that starts a turn of the chat it runs in fails at once with ReentrantTurn .

Before, the new turn waited for the chat's lock, held by the turn that waits for the tool: a deadlock. Every call
under test here is bounded by GUARD, so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from agency_swarm import Agency, Agent, ConfigError, ReentrantTurn, RunResult, function_tool
from agency_swarm._base._sync import _portal
from agency_swarm.testing import ModelCall, ScriptedModel, Step, ToolCall, send_message

GUARD = 10.0
"""Seconds: only a guard against the deadlock; each of these tests takes milliseconds."""


class DaemonThreads(ThreadPoolExecutor):
    """Each job in a daemon thread of its own. Should the fix regress, a sync tool stuck in the deadlock would
    otherwise keep the test's loop (which joins its executor's threads when it closes) and the interpreter (which
    joins every pool thread at exit) from ever ending."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as error:
                    future.set_exception(error)

        threading.Thread(target=run, daemon=True).start()
        return future

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        return None


@pytest.fixture(autouse=True)
async def _sync_tools_in_daemon_threads() -> AsyncIterator[None]:
    """Sync tools run through the default executor of the loop their turn runs on: the test's, or the loop of
    get_response_sync."""
    asyncio.get_running_loop().set_default_executor(DaemonThreads())
    portal = _portal()
    previous = portal._default_executor  # type: ignore[attr-defined]
    portal.set_default_executor(DaemonThreads())
    yield
    portal._default_executor = previous  # type: ignore[attr-defined]


def answer(tool: str) -> Callable[[ModelCall], Step]:
    """The model calls `tool` once per outer turn and repeats what it returned; an "inner" turn just answers."""

    def script(call: ModelCall) -> Step:
        if call.last_user_message.startswith("inner"):
            return f"inner answer to {call.last_user_message}"
        if call.tool_outputs:
            return "tool said: " + " | ".join(call.tool_outputs)
        return ToolCall(tool)

    return script


def reported(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


async def in_daemon_thread(function: Callable[[], Any]) -> Any:
    """`function()` in a daemon thread, awaited with the guard (a deadlocked thread cannot keep pytest running)."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()

    def settle(outcome: Callable[[Any], None], value: Any) -> None:
        if not done.done():
            outcome(value)

    def run() -> None:
        try:
            result = function()
        except BaseException as error:
            loop.call_soon_threadsafe(settle, done.set_exception, error)
        else:
            loop.call_soon_threadsafe(settle, done.set_result, result)

    threading.Thread(target=run, daemon=True).start()
    return await asyncio.wait_for(done, GUARD)


async def outer_turn(agency: Agency, how: str, chat_id: str = "main") -> RunResult:
    """The outer turn, run as a user would run it, bounded by the guard."""
    if how == "awaited":
        return await asyncio.wait_for(agency.get_response("outer", chat_id=chat_id), GUARD)
    if how == "streamed":
        async def drained() -> RunResult:
            stream = agency.get_response_stream("outer", chat_id=chat_id)
            async for _ in stream:
                pass
            return stream.result

        return await asyncio.wait_for(drained(), GUARD)
    assert how == "sync"
    result: RunResult = await in_daemon_thread(lambda: agency.get_response_sync("outer", chat_id=chat_id))
    return result


OUTERS = ["awaited", "streamed", "sync"]
SAME_CHAT = "a tool cannot start a turn of the chat it runs in"


# -- async tools -------------------------------------------------------------------------------------


async def start_from_async_tool(agency: Agency, agent: Agent, how: str) -> None:
    if how == "agency.get_response":
        await agency.get_response("again", chat_id="main")
    elif how == "agency.get_response_stream":
        async for _ in agency.get_response_stream("again", chat_id="main"):
            pass
    elif how == "agent.get_response":
        await agent.get_response("again", chat_id="main")
    elif how == "agent.get_response_stream":
        async for _ in agent.get_response_stream("again", chat_id="main"):
            pass
    elif how == "agency.resume":
        await agency.resume("main")
    elif how == "agency.resume_stream":
        async for _ in agency.resume_stream("main"):
            pass
    else:
        raise AssertionError(how)


@pytest.mark.parametrize("outer", OUTERS)
@pytest.mark.parametrize("how", [
    "agency.get_response", "agency.get_response_stream", "agent.get_response", "agent.get_response_stream",
    "agency.resume", "agency.resume_stream",
])
async def test_an_async_tool_that_starts_a_turn_of_its_own_chat_gets_reentrant_turn_at_once(
    outer: str, how: str
) -> None:
    caught: list[BaseException] = []

    @function_tool
    async def restart() -> str:
        """Starts a turn of the chat it runs in."""
        try:
            await start_from_async_tool(agency, ops, how)
        except Exception as error:
            caught.append(error)
            return reported(error)
        return "started"

    ops = Agent(name="Ops", tools=[restart], model=ScriptedModel(answer("restart")))
    agency = Agency(ops)

    result = await outer_turn(agency, outer)

    [error] = caught
    assert isinstance(error, ReentrantTurn)
    assert isinstance(error, ConfigError)
    assert error.chat_id == "main"
    assert "'main'" in str(error)
    assert SAME_CHAT in str(error)
    assert "send_message" in str(error)
    assert result.final_output == f"tool said: {reported(error)}"
    threads = agency.thread_manager.get_threads("main")
    assert [item["content"] for item in threads["user->Ops"] if item.get("role") == "user"] == ["outer"]


async def test_a_blocking_call_from_an_async_tool_gets_reentrant_turn_too() -> None:
    """get_response_sync from an async tool runs the turn on the background loop: the mark must reach it."""
    caught: list[BaseException] = []

    @function_tool
    async def restart() -> str:
        """Starts a turn of the chat it runs in, blocking."""
        try:
            agency.get_response_sync("again", chat_id="main")
        except Exception as error:
            caught.append(error)
        return "tried"

    agency = Agency(Agent(name="Ops", tools=[restart], model=ScriptedModel(answer("restart"))))
    result = await outer_turn(agency, "awaited")
    assert [type(error) for error in caught] == [ReentrantTurn]
    assert result.final_output == "tool said: tried"


# -- sync tools, in their worker thread ----------------------------------------------------------------


@pytest.mark.parametrize("outer", OUTERS)
@pytest.mark.parametrize("how", ["agency.get_response_sync", "agent.get_response_sync", "agency.resume_sync"])
async def test_a_sync_tool_that_starts_a_turn_of_its_own_chat_gets_reentrant_turn_at_once(outer: str, how: str) -> None:
    caught: list[BaseException] = []

    @function_tool
    def restart() -> str:
        """Starts a turn of the chat it runs in, from its worker thread."""
        try:
            if how == "agency.get_response_sync":
                agency.get_response_sync("again", chat_id="main")
            elif how == "agent.get_response_sync":
                ops.get_response_sync("again", chat_id="main")
            else:
                agency.resume_sync("main")
        except Exception as error:
            caught.append(error)
            return reported(error)
        return "started"

    ops = Agent(name="Ops", tools=[restart], model=ScriptedModel(answer("restart")))
    agency = Agency(ops)

    result = await outer_turn(agency, outer)

    [error] = caught
    assert isinstance(error, ReentrantTurn)
    assert SAME_CHAT in str(error)
    assert result.final_output == f"tool said: {reported(error)}"


# -- what still works ----------------------------------------------------------------------------------


@pytest.mark.parametrize("outer", OUTERS)
@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_a_tool_may_start_a_turn_of_another_chat(outer: str, kind: str) -> None:
    async def other_chat() -> str:
        result = await agency.get_response("inner, from the tool", chat_id="other")
        return str(result.final_output)

    def other_chat_sync() -> str:
        return str(agency.get_response_sync("inner, from the sync tool", chat_id="other").final_output)

    tool = function_tool(other_chat if kind == "async" else other_chat_sync)
    ops = Agent(name="Ops", tools=[tool], model=ScriptedModel(answer(tool.name)))
    agency = Agency(ops)

    result = await outer_turn(agency, outer)

    said = "inner, from the tool" if kind == "async" else "inner, from the sync tool"
    assert result.final_output == f"tool said: inner answer to {said}"
    other = agency.thread_manager.get_threads("other")["user->Ops"]
    assert [item["content"] for item in other if item.get("role") == "user"] == [said]


async def test_a_turn_a_tool_started_on_another_chat_may_not_come_back_to_the_first() -> None:
    """main -> tool -> turn of "other" -> tool -> turn of "main" would wait for main's turn, which waits below."""
    caught: list[BaseException] = []

    @function_tool
    async def hop(chat: str) -> str:
        """Starts a turn of `chat`."""
        try:
            result = await agency.get_response(f"hop to {chat}", chat_id=chat)
        except Exception as error:
            caught.append(error)
            return reported(error)
        return str(result.final_output)

    def script(call: ModelCall) -> Step:
        if call.tool_outputs:
            return f"{call.last_user_message} done: {call.tool_outputs[0]}"
        return ToolCall("hop", {"chat": "main" if call.last_user_message == "hop to other" else "other"})

    agency = Agency(Agent(name="Ops", tools=[hop], model=ScriptedModel(script)))
    result = await asyncio.wait_for(agency.get_response("start", chat_id="main"), GUARD)

    [error] = caught
    assert isinstance(error, ReentrantTurn)
    assert error.chat_id == "main"
    assert result.final_output == f"start done: hop to other done: {reported(error)}"


async def test_the_mark_ends_with_the_tool_call() -> None:
    """After a turn whose tools ran (alone and in parallel), the same task starts that chat's next turn freely."""

    @function_tool
    async def noop() -> str:
        """Does nothing."""
        return "ok"

    def script(call: ModelCall) -> Step:
        return "x" if call.input[-1].get("type") == "function_call_output" else [ToolCall("noop"), ToolCall("noop")]

    ops = Agent(name="Ops", tools=[noop], model=ScriptedModel(script))
    agency = Agency(ops)
    for how in OUTERS:
        assert (await outer_turn(agency, how)).final_output == "x"
    assert (await asyncio.wait_for(agency.get_response("again", chat_id="main"), GUARD)).final_output == "x"
    assert len(ops.model.calls) == 8  # type: ignore[union-attr]


# -- nested agents and parallel calls -------------------------------------------------------------------


@pytest.mark.parametrize("outer", OUTERS)
async def test_a_nested_agents_tools_in_parallel_get_reentrant_turn(outer: str) -> None:
    caught: list[BaseException] = []

    @function_tool
    async def restart_async() -> str:
        """Starts a turn of the chat it runs in."""
        try:
            await agency.get_response("again", chat_id="main")
        except Exception as error:
            caught.append(error)
        return "async tried"

    @function_tool
    def restart_sync() -> str:
        """Starts a turn of the chat it runs in, blocking."""
        try:
            agency.get_response_sync("again", recipient_agent="CEO", chat_id="main")
        except Exception as error:
            caught.append(error)
        return "sync tried"

    ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Developer", "restart"), "relayed"]))
    dev = Agent(
        name="Developer", tools=[restart_async, restart_sync],
        model=ScriptedModel.each_turn([[ToolCall("restart_async"), ToolCall("restart_sync")], "both tried"]),
    )
    agency = Agency([ceo, [ceo, dev]])

    result = await outer_turn(agency, outer)

    assert sorted(type(error).__name__ for error in caught) == ["ReentrantTurn", "ReentrantTurn"]
    assert result.final_output == "relayed"
    assert dev.model.calls[-1].tool_outputs == ["async tried", "sync tried"]  # type: ignore[union-attr]


async def test_an_uncaught_reentrant_turn_is_the_tools_error_output() -> None:
    @function_tool
    async def restart() -> str:
        """Starts a turn of the chat it runs in, without catching anything."""
        await agency.get_response("again", chat_id="main")
        return "unreachable"

    agency = Agency(Agent(name="Ops", tools=[restart], model=ScriptedModel(answer("restart"))))
    result = await outer_turn(agency, "awaited")
    assert "ReentrantTurn" in str(result.final_output)
    assert SAME_CHAT in str(result.final_output)
