"""History windows, many concurrent chats, per-chat serialization, and keys never reaching the store."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from agents import function_tool
from openai.types.responses import ResponseReasoningItem

from agency_swarm import Agency, Agent, ChatNotLoaded, ConfigError, MemoryThreadStore
from agency_swarm._turn._history import window_of
from agency_swarm.testing import ModelCall, ScriptedModel, Text, ToolCall, send_message

# -- history_window ---------------------------------------------------------------------------------------


def msg(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"m{n}"}


def call(n: int) -> dict[str, Any]:
    return {"type": "function_call", "call_id": f"c{n}", "name": "t", "arguments": "{}"}


def out(n: int) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": f"c{n}", "output": "ok"}


def test_window_keeps_the_first_item_and_the_last_n() -> None:
    items = [msg(n) for n in range(10)]
    assert window_of(items, 3) == [msg(0), msg(7), msg(8), msg(9)]


def test_window_never_cuts_an_output_from_its_call_or_a_parallel_group() -> None:
    items = [msg(0), msg(1), call(1), call(2), out(1), out(2), msg(2)]
    # the last 3 start at out(2): widen back to the start of the call group
    assert window_of(items, 3) == [msg(0), call(1), call(2), out(1), out(2), msg(2)]


def test_window_never_cuts_a_reasoning_item_from_its_follower() -> None:
    reasoning = {"type": "reasoning", "id": "rs", "summary": []}
    items = [msg(0), msg(1), reasoning, {"type": "message", "role": "assistant", "content": []}, msg(2)]
    assert window_of(items, 2)[1] is reasoning


async def test_history_window_changes_what_the_model_sees_not_what_is_stored() -> None:
    model = ScriptedModel.each_turn(["ok"])
    store = MemoryThreadStore()
    agent = Agent(name="Solo", history_window=2, model=model)
    agency = Agency(agent, thread_store=store)
    for n in range(5):
        await agency.get_response(f"turn {n}", chat_id="w")
    assert model.calls[-1].input == [
        {"role": "user", "content": "turn 0"},
        model.calls[-1].input[1],  # the answer to turn 3
        {"role": "user", "content": "turn 4"},
    ]
    assert model.calls[-1].input[1]["role"] == "assistant"
    assert len((await store.load("w"))["user->Solo"]) == 10  # everything stored: 5 turns of message + answer


@pytest.mark.parametrize("bad", [0, -1, True, "3"])
def test_a_bad_history_window_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigError, match="history_window"):
        Agent(name="Solo", history_window=bad)


# -- many chats at once -----------------------------------------------------------------------------------


def echo(call: ModelCall) -> Any:
    """Delegate the chat's id once, then echo what came back: every item carries its chat's id."""
    if not call.tool_outputs:
        return send_message("Developer", f"id={call.last_user_message}")
    return Text(f"done {call.tool_outputs[-1]}")


async def test_500_concurrent_chats_each_keep_exactly_their_own_items() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel(echo))
    dev = Agent(name="Developer", model=ScriptedModel(lambda call: Text(f"dev {call.last_user_message}")))
    agency = Agency([ceo, [ceo, dev]])
    ids = [f"chat-{n}" for n in range(500)]

    results = await asyncio.gather(*(agency.get_response(chat_id, chat_id=chat_id) for chat_id in ids))

    for chat_id, result in zip(ids, results, strict=True):
        assert result.final_output == f"done dev id={chat_id}"
        threads = agency.thread_manager.get_threads(chat_id)
        text = json.dumps(threads)
        assert text.count("chat-") == text.count(f"{chat_id}") > 0  # no other chat's id anywhere
        assert [i.get("type") for i in threads["user->CEO"]] == [None, "function_call", "function_call_output",
                                                                   "message"]
        assert threads["CEO->Developer"][0] == {
            "role": "user", "content": f"id={chat_id}", "send_call_id": threads["user->CEO"][1]["call_id"]
        }


async def test_two_turns_on_one_chat_run_one_after_the_other_in_arrival_order() -> None:
    release, first_started = asyncio.Event(), asyncio.Event()
    started: list[str] = []

    @function_tool
    async def work(label: str) -> str:
        """Waits for the test."""
        started.append(label)
        first_started.set()
        await release.wait()
        return label

    def script(call: ModelCall) -> Any:
        return Text("ok") if call.tool_outputs else ToolCall("work", {"label": call.last_user_message})

    model = ScriptedModel(script)
    agency = Agency(Agent(name="Solo", tools=[work], model=model))
    first = asyncio.create_task(agency.get_response("first", chat_id="same"))
    second = asyncio.create_task(agency.get_response("second", chat_id="same"))
    await first_started.wait()  # the first turn is inside its tool; the second waits on the chat's lock
    assert started == ["first"]
    release.set()
    await asyncio.gather(first, second)
    items = agency.thread_manager.get_thread("same", "user", "Solo").items
    assert [i.get("content") for i in items if i.get("role") == "user"] == ["first", "second"]
    assert started == ["first", "second"]


async def test_an_abandoned_stream_releases_the_chat() -> None:
    agency = Agency(Agent(name="Solo", model=ScriptedModel.each_turn(["a long answer with words"])))
    async with agency.get_response_stream("one", chat_id="c") as stream:
        async for _ in stream:
            break
    result = await agency.get_response("two", chat_id="c")  # would wait forever if the lock were still held
    assert result.final_output == "a long answer with words"


async def test_keys_and_authorization_headers_never_reach_stored_items() -> None:
    store = MemoryThreadStore()
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "x"), "y"]))
    dev = Agent(name="Developer", model=ScriptedModel(["z"]))
    await Agency([ceo, [ceo, dev]], thread_store=store).get_response("hi", chat_id="k")
    dumped = json.dumps(await store.load("k"))
    assert "sk-" not in dumped
    assert "Authorization" not in dumped
    assert "Bearer" not in dumped


async def test_reasoning_items_are_stored_with_their_follower() -> None:
    class Reasoning(ScriptedModel):
        async def get_response(self, *args: Any, **kwargs: Any) -> Any:
            response = await super().get_response(*args, **kwargs)
            response.output.insert(0, ResponseReasoningItem(id="rs_1", type="reasoning", summary=[]))
            return response

    store = MemoryThreadStore()
    await Agency(Agent(name="Solo", model=Reasoning(["hi"])), thread_store=store).get_response("go", chat_id="r")
    stored = (await store.load("r"))["user->Solo"]
    assert [i.get("type") for i in stored] == [None, "reasoning", "message"]


async def test_a_reasoning_item_left_last_by_a_crash_is_not_sent_again() -> None:
    store = MemoryThreadStore()
    await store.append("r", "user->Solo", [{"role": "user", "content": "go"}, {"type": "reasoning", "id": "rs"}])
    model = ScriptedModel(["fine"])
    await Agency(Agent(name="Solo", model=model), thread_store=store).get_response("again", chat_id="r")
    assert model.calls[0].input == [{"role": "user", "content": "go"}, {"role": "user", "content": "again"}]


def test_a_chat_id_with_a_lone_surrogate_is_an_invalid_chat_id() -> None:
    from agency_swarm import InvalidChatId
    from agency_swarm._threads._manager import check_chat_id

    with pytest.raises(InvalidChatId):
        check_chat_id("a\ud800b")


# -- store failures and secrets ------------------------------------------------------------------------------


class FailingAfter(MemoryThreadStore):
    """Accepts `ok` appends, then fails like a full disk."""

    def __init__(self, ok: int) -> None:
        super().__init__()
        self.ok = ok

    async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
        if self.ok == 0:
            from agency_swarm import StoreError

            raise StoreError("Thread store could not append: [Errno 28] No space left on device")
        self.ok -= 1
        await super().append(chat_id, thread_key, items)


async def test_a_store_failure_fails_the_turn_clearly_and_keeps_what_was_stored() -> None:
    from agency_swarm import StoreError

    store = FailingAfter(ok=2)
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "x"), "y"]))
    dev = Agent(name="Developer", model=ScriptedModel(["z"]))
    with pytest.raises(StoreError, match="No space left"):
        await Agency([ceo, [ceo, dev]], thread_store=store).get_response("hi", chat_id="full")
    stored = await store.load("full")
    assert stored["user->CEO"][0] == {"role": "user", "content": "hi"}
    assert stored["user->CEO"][1]["type"] == "function_call"


async def test_the_api_key_never_reaches_stored_files_or_logs(tmp_path: Any, caplog: pytest.LogCaptureFixture) -> None:
    import logging

    import httpx2
    from agents import OpenAIResponsesModel
    from openai import AsyncOpenAI

    from test_sync_and_real_client import FakeResponsesAPI

    secret = "-".join(["sk", "test", "x" * 24])  # key-shaped, so the test proves a key never reaches a log
    api = FakeResponsesAPI()
    client = AsyncOpenAI(api_key=secret, base_url="http://testserver/v1",
                         http_client=httpx2.AsyncClient(transport=httpx2.MockTransport(api.handler)))
    ceo = Agent(name="CEO", instructions="You are the CEO.",
                model=OpenAIResponsesModel(model="m", openai_client=client))
    dev = Agent(name="Developer", instructions="You are the Developer.",
                model=OpenAIResponsesModel(model="m", openai_client=client))
    caplog.set_level(logging.DEBUG)
    async with Agency([ceo, [ceo, dev]], threads_dir=tmp_path / "threads") as agency:
        result = await agency.get_response("Build it", chat_id="secret-check")
    assert result.final_output.startswith("CEO reports:")
    stored = "".join(path.read_text() for path in (tmp_path / "threads").iterdir())
    assert "Build it" in stored
    assert secret not in stored
    assert "Authorization" not in stored
    assert "Bearer" not in stored
    assert secret not in caplog.text
    await client.close()


async def test_a_fast_calls_output_is_stored_while_a_slower_call_after_it_still_runs() -> None:
    store = MemoryThreadStore()
    first_output_stored = asyncio.Event()
    seen_by_slow: list[list[str]] = []

    @function_tool
    async def fast() -> str:
        """Returns at once."""
        return "quick"

    @function_tool
    async def slow() -> str:
        """Waits until the fast call's output is stored, then looks at the store."""
        await first_output_stored.wait()
        stored = (await store.load("eager"))["user->Solo"]
        seen_by_slow.append([item.get("type") or "user" for item in stored])
        return "late"

    agent = Agent(name="Solo", tools=[fast, slow], model=ScriptedModel([[ToolCall("fast"), ToolCall("slow")], "ok"]))
    agency = Agency(agent, thread_store=store)
    agency.thread_manager.subscribe(
        lambda thread, item: first_output_stored.set() if item.get("type") == "function_call_output" else None
    )
    await agency.get_response("go", chat_id="eager")

    assert seen_by_slow == [["user", "function_call", "function_call", "function_call_output"]]
    stored = (await store.load("eager"))["user->Solo"]
    assert [item.get("output") for item in stored if item.get("type") == "function_call_output"] == ["quick", "late"]


# -- set-up errors and housekeeping -------------------------------------------------------------------------


def test_conflicting_persistence_options_are_refused(tmp_path: Any) -> None:
    agent = Agent(name="Solo", model=ScriptedModel([]))
    with pytest.raises(ConfigError, match="thread_store or threads_dir"):
        Agency(agent, thread_store=MemoryThreadStore(), threads_dir=tmp_path)
    with pytest.raises(ConfigError, match="callbacks"):
        Agency(agent, thread_store=MemoryThreadStore(), save_threads_callback=lambda chat, threads: None)
    with pytest.raises(ConfigError, match="ThreadStore protocol"):
        Agency(agent, thread_store=object())  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="model_provider"):
        Agency(agent, model_provider="openai")  # type: ignore[arg-type]


async def test_delete_chat_forgets_it_here_and_in_the_store() -> None:
    store = MemoryThreadStore()
    agency = Agency(Agent(name="Solo", model=ScriptedModel.each_turn(["ok"])), thread_store=store)
    await agency.get_response("hi", chat_id="gone")
    await agency.get_response("hi", chat_id="kept")
    await agency.thread_manager.delete_chat("gone")
    assert await store.list_chats() == ["kept"]
    with pytest.raises(ChatNotLoaded, match=r"not loaded in this process .* `await agency.get_threads\('gone'\)"):
        agency.thread_manager.get_threads("gone")  # not held here: {} would only say what memory lacks
    assert await agency.get_threads("gone") == {}  # what the store holds
    result = await agency.get_response("again", chat_id="gone")  # starts afresh
    assert result.new_items[0] == {"role": "user", "content": "again"}
    assert len(agency.thread_manager.get_thread("gone", "user", "Solo").items) == 2


async def test_deleted_chats_leave_no_lock_behind_and_a_waiting_turn_keeps_its_lock() -> None:
    agency = Agency(Agent(name="Solo", model=ScriptedModel.each_turn(["ok"])))
    manager = agency.thread_manager
    for index in range(50):
        await agency.get_response("hi", chat_id=f"chat-{index}")
        await manager.delete_chat(f"chat-{index}")
    assert manager._locks == {}  # a long-running server deletes many chats: nothing may pile up

    await agency.get_response("hi", chat_id="busy")
    lock = manager.lock("busy")
    await lock.acquire()  # a turn holds the chat; another one queues behind it:
    queued = lock.acquire()
    queued.send(None)  # stepped by hand until it waits on the lock, so no scheduling is involved
    lock.release()  # unlocked now, but the queued turn has not run yet: the lock must stay
    assert manager._drop_idle_lock("busy") is False
    with pytest.raises(StopIteration):
        queued.send(None)  # the queued turn takes the lock
    assert lock.locked()
    lock.release()
    assert manager.lock("busy") is lock


def test_reprs_say_what_they_hold() -> None:
    ceo, dev = Agent(name="CEO", model=ScriptedModel([])), Agent(name="Developer", model=ScriptedModel([]))
    agency = Agency([ceo, [ceo, dev]])
    assert repr(agency) == "Agency(entry_points=[CEO], agents=2, flows=1)"
    assert repr(agency.thread_manager.get_thread("c", "user", "CEO")) == "ConversationThread('c', 'user->CEO', 0 items)"


async def test_with_a_store_idle_chats_leave_memory_and_come_back_whole() -> None:
    store = MemoryThreadStore()
    model = ScriptedModel(lambda call: f"{len(call.input)} items seen")
    agency = Agency(Agent(name="Solo", model=model), thread_store=store, max_chats_in_memory=2)
    for chat_id in ("a", "b", "c"):
        await agency.get_response("first", chat_id=chat_id)
    assert sorted(agency.thread_manager.chat_ids()) == ["b", "c"]  # "a" was the least recently used
    result = await agency.get_response("second", chat_id="a")
    assert result.final_output == "3 items seen"  # first, its answer, second: loaded back from the store
    assert sorted(agency.thread_manager.chat_ids()) == ["a", "c"]


def test_a_bad_memory_limit_is_refused() -> None:
    with pytest.raises(ConfigError, match="max_chats_in_memory"):
        Agency(Agent(name="Solo", model=ScriptedModel([])), max_chats_in_memory=0)
