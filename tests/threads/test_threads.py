"""Per-pair threads: keys, contents, chats, RunResult.new_items, load/save callbacks, chat ids, serialization."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from agents import AgentHooks

from agency_swarm import Agency, Agent, ConfigError, function_tool
from agency_swarm.testing import Fail, ModelCall, ScriptedModel, Step, ToolCall, send_message

Threads = dict[str, list[dict[str, Any]]]


def delegating_ceo(final: str = "done") -> ScriptedModel:
    """Each turn: forward the user's message to the Developer, then answer `final: <Developer's reply>`."""

    def script(call: ModelCall) -> Step:
        if not call.tool_outputs:
            return send_message("Developer", f"task: {call.last_user_message}")
        return f"{final}: {call.tool_outputs[-1]}"

    return ScriptedModel(script, name="ceo")


def echo_dev() -> ScriptedModel:
    return ScriptedModel(lambda call: f"built {call.last_user_message}", name="dev")


def build(
    ceo_model: ScriptedModel | None = None, dev_model: ScriptedModel | None = None, **agency_kwargs: Any
) -> tuple[Agency, ScriptedModel, ScriptedModel]:
    ceo_model = ceo_model or delegating_ceo()
    dev_model = dev_model or echo_dev()
    ceo = Agent(name="CEO", description="Leads", model=ceo_model)
    dev = Agent(name="Developer", description="Codes", model=dev_model)
    return Agency([ceo, [ceo, dev]], **agency_kwargs), ceo_model, dev_model


def as_model_sees(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A thread between agents as its model reads it: incoming messages without the send's call id."""
    return [{key: value for key, value in item.items() if key != "send_call_id"} for item in items]


def outputs_answer_every_call(threads: Threads) -> None:
    for key, items in threads.items():
        calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
        answered = {item["call_id"] for item in items if item.get("type") == "function_call_output"}
        assert set(calls) <= answered, f"{key} has function_calls without outputs: {set(calls) - answered}"


async def run_turn(agency: Agency, message: str, chat_id: str, *, streaming: bool) -> Any:
    if not streaming:
        return (await agency.get_response(message, chat_id=chat_id)).final_output
    stream = agency.get_response_stream(message, chat_id=chat_id)
    async for _ in stream:
        pass
    return stream.result.final_output


class Store:
    """load/save callbacks over a dict, recording every call."""

    def __init__(self, data: dict[str, Threads] | None = None) -> None:
        self.data: dict[str, Threads] = data if data is not None else {}
        self.loads: list[str] = []
        self.saves: list[tuple[str, Threads]] = []

    def load(self, chat_id: str) -> Threads:
        self.loads.append(chat_id)
        return self.data.get(chat_id, {})

    def save(self, chat_id: str, threads: Threads) -> None:
        self.saves.append((chat_id, threads))
        self.data[chat_id] = json.loads(json.dumps(threads))

    async def aload(self, chat_id: str) -> Threads:
        return self.load(chat_id)

    async def asave(self, chat_id: str, threads: Threads) -> None:
        self.save(chat_id, threads)

    def callbacks(self, kind: str) -> dict[str, Callable[..., Any]]:
        if kind == "sync":
            return {"load_threads_callback": self.load, "save_threads_callback": self.save}
        return {"load_threads_callback": self.aload, "save_threads_callback": self.asave}


# -- keys and contents --------------------------------------------------------------------------------


async def test_thread_keys_are_sender_arrow_recipient() -> None:
    agency, _, _ = build()
    await agency.get_response("landing page", chat_id="c1")
    threads = agency.thread_manager.get_threads("c1")
    assert sorted(threads) == ["CEO->Developer", "user->CEO"]
    assert agency.thread_manager.get_threads("never-used") == {}


async def test_recipient_thread_holds_what_its_model_saw() -> None:
    agency, ceo_model, dev_model = build()
    result = await agency.get_response("landing page", chat_id="c1")
    assert result.final_output == "done: built task: landing page"

    thread = agency.thread_manager.get_thread("c1", "CEO", "Developer")
    seen = dev_model.calls[-1].input
    assert seen == [{"role": "user", "content": "task: landing page"}]
    assert as_model_sees(thread.items[: len(seen)]) == seen
    send = agency.thread_manager.get_thread("c1", "user", "CEO").items[1]
    assert thread.items[0] == {"role": "user", "content": "task: landing page", "send_call_id": send["call_id"]}
    (reply,) = thread.items[len(seen) :]
    assert reply["type"] == "message"
    assert reply["role"] == "assistant"
    assert reply["content"][0]["text"] == "built task: landing page"
    assert (thread.chat_id, thread.sender, thread.recipient, thread.key) == ("c1", "CEO", "Developer", "CEO->Developer")

    # The entry agent's thread likewise: its last model call saw everything but its final answer.
    ceo_thread = agency.thread_manager.get_thread("c1", "user", "CEO")
    ceo_seen = ceo_model.calls[-1].input
    assert ceo_thread.items[: len(ceo_seen)] == ceo_seen
    assert len(ceo_thread.items) == len(ceo_seen) + 1
    assert ceo_thread.items[0] == {"role": "user", "content": "landing page"}
    assert [item.get("type") for item in ceo_seen[1:]] == ["function_call", "function_call_output"]
    assert ceo_seen[1]["name"] == "send_message"
    assert ceo_seen[2]["call_id"] == ceo_seen[1]["call_id"]
    assert ceo_seen[2]["output"] == "built task: landing page"


class RecordsModelInput(AgentHooks[Any]):
    def __init__(self) -> None:
        self.inputs: list[list[Any]] = []

    async def on_llm_start(self, context: Any, agent: Any, system_prompt: Any, input_items: list[Any]) -> None:
        self.inputs.append(list(input_items))


@pytest.mark.parametrize("how", ["plain", "history_window", "streamed", "hooks"])
async def test_the_send_call_id_kept_with_a_message_never_reaches_the_model(how: str) -> None:
    """Every path that hands a thread between agents to a model leaves the call id out: the Responses API rejects
    unknown fields, and the SDK's Chat Completions converter rejects the item."""
    hooks = RecordsModelInput()
    agency, _, dev_model = build()
    dev = agency.agents["Developer"]
    if how == "history_window":
        dev.history_window = 2
    if how == "hooks":
        dev.hooks = hooks
    for message in ("first", "second", "third"):
        await run_turn(agency, message, "c1", streaming=how == "streamed")
    await dev.get_response("directly", chat_id="c1", sender_name="CEO")  # no send: the id is None

    stored = agency.thread_manager.get_thread("c1", "CEO", "Developer").items
    incoming = [item for item in stored if item.get("role") == "user"]
    assert [item["send_call_id"] is None for item in incoming] == [False, False, False, True]
    seen = [call.input for call in dev_model.calls] + hooks.inputs
    assert len(seen) == (8 if how == "hooks" else 4)
    for items in seen:
        assert all("send_call_id" not in item for item in items)
    first = [item for item in dev_model.calls[-1].input if item.get("role") == "user"]
    expected = ["task: first", "task: second", "task: third", "directly"]
    windowed = [expected[0], expected[-1]]  # the first item and the last two (the third answer, "directly")
    assert [item["content"] for item in first] == (windowed if how == "history_window" else expected)
    assert all(call.stream == (how == "streamed") for call in dev_model.calls[:3])


async def test_recipient_thread_keeps_history_across_turns() -> None:
    agency, ceo_model, dev_model = build()
    await agency.get_response("first", chat_id="c1")
    after_first = list(agency.thread_manager.get_thread("c1", "CEO", "Developer").items)
    await agency.get_response("second", chat_id="c1")

    assert len(dev_model.calls) == 2
    second_input = dev_model.calls[1].input
    assert second_input[: len(after_first)] == as_model_sees(after_first)
    assert second_input[len(after_first) :] == [{"role": "user", "content": "task: second"}]
    # The CEO also sees the whole first turn in its second turn.
    ceo_first_turn_items = 4  # user, function_call, function_call_output, answer
    assert ceo_model.calls[2].input[0] == {"role": "user", "content": "first"}
    assert ceo_model.calls[2].input[ceo_first_turn_items] == {"role": "user", "content": "second"}


async def test_chats_never_share_items() -> None:
    agency, _, dev_model = build()
    await agency.get_response("alpha", chat_id="a")
    await agency.get_response("beta", chat_id="b")
    await agency.get_response("alpha again", chat_id="a")

    a = agency.thread_manager.get_threads("a")
    b = agency.thread_manager.get_threads("b")
    assert "beta" not in json.dumps(a)
    assert "alpha" not in json.dumps(b)
    assert dev_model.calls[1].input == [{"role": "user", "content": "task: beta"}]
    assert all("beta" not in json.dumps(call.input) for call in (dev_model.calls[0], dev_model.calls[2]))
    ids_a = {id(item) for items in a.values() for item in items}
    ids_b = {id(item) for items in b.values() for item in items}
    assert not ids_a & ids_b
    assert sorted(agency.thread_manager.chat_ids()) == ["a", "b"]


async def test_default_chat_is_continued() -> None:
    agency, ceo_model, _ = build()
    first = await agency.get_response("one")
    second = await agency.get_response("two")
    assert first.chat_id == second.chat_id == "default"
    assert ceo_model.calls[2].input[0] == {"role": "user", "content": "one"}
    assert set(agency.thread_manager.get_threads("default")) == {"user->CEO", "CEO->Developer"}
    assert agency.thread_manager.chat_ids() == ["default"]


async def test_new_items_are_exactly_this_turns_items() -> None:
    agency, _, _ = build()
    first = await agency.get_response("one", chat_id="c")
    thread = agency.thread_manager.get_thread("c", "user", "CEO")
    assert first.new_items == thread.items
    count = len(thread.items)

    second = await agency.get_response("two", chat_id="c")
    assert second.new_items == thread.items[count:]
    assert second.new_items[0] == {"role": "user", "content": "two"}
    assert [item.get("type") for item in second.new_items[1:]] == ["function_call", "function_call_output", "message"]
    assert second.new_items[-1]["content"][0]["text"] == "done: built task: two"
    assert first.new_items + second.new_items == thread.items


async def test_new_items_of_a_streamed_turn() -> None:
    agency, _, _ = build()
    await agency.get_response("one", chat_id="c")
    count = len(agency.thread_manager.get_thread("c", "user", "CEO").items)
    stream = agency.get_response_stream("two", chat_id="c")
    async for _ in stream:
        pass
    thread = agency.thread_manager.get_thread("c", "user", "CEO")
    assert stream.result.new_items == thread.items[count:]
    assert stream.result.new_items[0] == {"role": "user", "content": "two"}
    assert stream.result.final_output == "done: built task: two"


# -- load / save callbacks ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_load_once_per_chat_and_save_after_every_turn(kind: str) -> None:
    store = Store()
    agency, _, _ = build(**store.callbacks(kind))

    await agency.get_response("one", chat_id="c1")
    await agency.get_response("two", chat_id="c1")
    await agency.get_response("three", chat_id="c2")
    stream = agency.get_response_stream("four", chat_id="c1")
    async for _ in stream:
        pass

    assert store.loads == ["c1", "c2"]
    assert [chat for chat, _ in store.saves] == ["c1", "c1", "c2", "c1"]
    for chat, threads in store.saves:
        assert set(threads) == {"user->CEO", "CEO->Developer"}, chat
    assert store.saves[-1][1] == agency.thread_manager.get_threads("c1")
    assert store.saves[2][1] == agency.thread_manager.get_threads("c2")
    # Each save is a snapshot of that moment: the first save holds one turn only.
    assert [item.get("content") for item in store.saves[0][1]["user->CEO"] if item.get("role") == "user"] == ["one"]


@pytest.mark.parametrize("kind", ["sync", "async"])
async def test_new_agency_continues_a_saved_chat(kind: str) -> None:
    store = Store()
    first, _, _ = build(**store.callbacks(kind))
    await first.get_response("first task", chat_id="c1")
    saved = store.data["c1"]

    second, ceo_model, dev_model = build(**store.callbacks(kind))
    result = await second.get_response("second task", chat_id="c1")

    assert result.final_output == "done: built task: second task"
    ceo_input = ceo_model.calls[0].input
    assert ceo_input[: len(saved["user->CEO"])] == saved["user->CEO"]
    assert ceo_input[len(saved["user->CEO"]) :] == [{"role": "user", "content": "second task"}]
    dev_input = dev_model.calls[0].input
    assert dev_input[: len(saved["CEO->Developer"])] == as_model_sees(saved["CEO->Developer"])
    assert dev_input[-1] == {"role": "user", "content": "task: second task"}
    assert result.new_items[0] == {"role": "user", "content": "second task"}
    assert store.loads == ["c1", "c1"]


async def test_reading_a_thread_before_the_first_turn_does_not_skip_loading() -> None:
    store = Store()
    first, _, _ = build(**store.callbacks("sync"))
    await first.get_response("first task", chat_id="c1")
    saved = store.data["c1"]

    second, ceo_model, _ = build(**store.callbacks("sync"))
    second.thread_manager.get_thread("c1", "user", "CEO")  # e.g. a UI showing the conversation
    await second.get_response("second task", chat_id="c1")

    assert store.loads == ["c1", "c1"]
    assert ceo_model.calls[0].input[: len(saved["user->CEO"])] == saved["user->CEO"]
    assert store.data["c1"]["user->CEO"][: len(saved["user->CEO"])] == saved["user->CEO"]


async def test_new_agency_continues_a_chat_saved_to_a_json_file(tmp_path: Path) -> None:
    def path(chat_id: str) -> Path:
        return tmp_path / f"{chat_id}.json"

    def load(chat_id: str) -> Threads:
        file = path(chat_id)
        return json.loads(file.read_text()) if file.exists() else {}

    def save(chat_id: str, threads: Threads) -> None:
        path(chat_id).write_text(json.dumps(threads))

    first, _, _ = build(load_threads_callback=load, save_threads_callback=save)
    await first.get_response("first task", chat_id="c1")
    on_disk = json.loads(path("c1").read_text())
    assert set(on_disk) == {"user->CEO", "CEO->Developer"}

    second, ceo_model, dev_model = build(load_threads_callback=load, save_threads_callback=save)
    await second.get_response("second task", chat_id="c1")
    assert ceo_model.calls[0].input[: len(on_disk["user->CEO"])] == on_disk["user->CEO"]
    assert dev_model.calls[0].input[: len(on_disk["CEO->Developer"])] == as_model_sees(on_disk["CEO->Developer"])
    assert ceo_model.calls[0].input[0] == {"role": "user", "content": "first task"}
    after = json.loads(path("c1").read_text())
    assert after["user->CEO"][: len(on_disk["user->CEO"])] == on_disk["user->CEO"]
    assert len(after["user->CEO"]) == 2 * len(on_disk["user->CEO"])


@pytest.mark.parametrize("streaming", [False, True])
async def test_save_runs_when_a_turn_fails_part_way(streaming: bool) -> None:
    store = Store()
    ceo_model = ScriptedModel([send_message("Developer", "build"), Fail(RuntimeError("boom"))])
    agency, _, _ = build(ceo_model, ScriptedModel(["built"]), **store.callbacks("sync"))

    with pytest.raises(RuntimeError, match="boom"):
        await run_turn(agency, "go", "c1", streaming=streaming)

    assert [chat for chat, _ in store.saves] == ["c1"]
    saved = store.saves[0][1]
    assert set(saved) == {"user->CEO", "CEO->Developer"}
    assert [item.get("type") for item in saved["user->CEO"][1:]] == ["function_call", "function_call_output"]
    outputs_answer_every_call(saved)
    assert saved == agency.thread_manager.get_threads("c1")


async def test_save_runs_when_a_function_tool_turn_fails() -> None:
    @function_tool
    def lookup(query: str) -> str:
        """Look something up."""
        return f"found {query}"

    store = Store()
    ceo_model = ScriptedModel(
        [[ToolCall("lookup", {"query": "x"}), ToolCall("lookup", {"query": "y"})], Fail(RuntimeError("boom"))]
    )
    ceo = Agent(name="CEO", model=ceo_model, tools=[lookup])
    agency = Agency(ceo, **store.callbacks("sync"))
    with pytest.raises(RuntimeError, match="boom"):
        await agency.get_response("go", chat_id="c1")
    (saved,) = [threads for _, threads in store.saves]
    outputs_answer_every_call(saved)
    assert [item["output"] for item in saved["user->CEO"] if item.get("type") == "function_call_output"] == [
        "found x",
        "found y",
    ]


async def test_a_failed_turn_leaves_the_chat_usable() -> None:
    ceo_model = ScriptedModel([send_message("Developer", "build"), Fail(RuntimeError("boom")), "recovered"])
    agency, _, _ = build(ceo_model, ScriptedModel(["built"]))
    with pytest.raises(RuntimeError, match="boom"):
        await agency.get_response("go", chat_id="c1")
    result = await agency.get_response("again", chat_id="c1")
    assert result.final_output == "recovered"
    seen = ceo_model.calls[-1].input
    assert seen[0] == {"role": "user", "content": "go"}
    assert seen[-1] == {"role": "user", "content": "again"}
    outputs_answer_every_call({"seen": seen})


async def test_loaded_orphan_function_call_is_repaired_before_the_model_sees_it() -> None:
    orphan = {"type": "function_call", "call_id": "call_lost", "name": "send_message", "arguments": "{}"}
    store = Store({"c1": {"user->CEO": [{"role": "user", "content": "earlier"}, orphan]}})
    ceo_model = ScriptedModel(["fine"])
    agency, _, _ = build(ceo_model, **store.callbacks("sync"))
    await agency.get_response("now", chat_id="c1")

    seen = ceo_model.calls[0].input
    assert seen[0] == {"role": "user", "content": "earlier"}
    assert seen[1] == orphan
    assert seen[2]["type"] == "function_call_output"
    assert seen[2]["call_id"] == "call_lost"
    assert isinstance(seen[2]["output"], str)
    assert seen[2]["output"]
    assert seen[3] == {"role": "user", "content": "now"}
    outputs_answer_every_call(store.saves[-1][1])


async def test_loaded_parallel_orphans_get_outputs_after_the_calls() -> None:
    calls = [
        {"type": "function_call", "call_id": f"call_{n}", "name": "send_message", "arguments": "{}"} for n in (1, 2)
    ]
    store = Store({"c1": {"user->CEO": [{"role": "user", "content": "earlier"}, *calls]}})
    ceo_model = ScriptedModel(["fine"])
    agency, _, _ = build(ceo_model, **store.callbacks("sync"))
    await agency.get_response("now", chat_id="c1")
    seen = ceo_model.calls[0].input
    assert seen[1:3] == calls
    assert [(item["type"], item["call_id"]) for item in seen[3:5]] == [
        ("function_call_output", "call_1"),
        ("function_call_output", "call_2"),
    ]
    assert seen[5] == {"role": "user", "content": "now"}


async def test_loaded_answered_call_is_left_alone() -> None:
    items = [
        {"role": "user", "content": "earlier"},
        {"type": "function_call", "call_id": "call_ok", "name": "send_message", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_ok", "output": "answered"},
    ]
    store = Store({"c1": {"user->CEO": [dict(item) for item in items]}})
    ceo_model = ScriptedModel(["fine"])
    agency, _, _ = build(ceo_model, **store.callbacks("sync"))
    await agency.get_response("now", chat_id="c1")
    assert ceo_model.calls[0].input == [*items, {"role": "user", "content": "now"}]


@pytest.mark.parametrize(
    ("loaded", "named"),
    [
        ([{"role": "user", "content": "hi"}], "list"),
        ({"userCEO": []}, "'userCEO'"),
        ({"user->CEO->Developer": []}, "'user->CEO->Developer'"),
        ({"user->CEO": ["hi"]}, "'user->CEO'"),
        ({"user->CEO": {"role": "user"}}, "'user->CEO'"),
        ("user->CEO", "str"),
    ],
)
async def test_load_callback_with_bad_shape(loaded: Any, named: str) -> None:
    saves: list[str] = []
    ceo_model = ScriptedModel(["never"])
    agency, _, _ = build(
        ceo_model, load_threads_callback=lambda chat_id: loaded, save_threads_callback=lambda c, t: saves.append(c)
    )
    with pytest.raises(ConfigError, match="load_threads_callback") as caught:
        await agency.get_response("hi", chat_id="c1")
    assert named in str(caught.value)
    assert "'c1'" in str(caught.value)
    assert ceo_model.calls == []


async def test_load_callback_returning_none_is_a_new_chat() -> None:
    ceo_model = ScriptedModel(["hello"])
    agency, _, _ = build(ceo_model, load_threads_callback=lambda chat_id: None)
    assert (await agency.get_response("hi", chat_id="c1")).final_output == "hello"
    assert ceo_model.calls[0].input == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("chat_id", [123, "", " ", "\u3000 ", "x" * 300, "a\nb", "tab\there"])
async def test_bad_chat_ids_are_rejected_before_any_callback(chat_id: Any) -> None:
    store = Store()
    agency, ceo_model, _ = build(**store.callbacks("sync"))
    with pytest.raises(ConfigError, match="chat_id"):
        await agency.get_response("hi", chat_id=chat_id)
    with pytest.raises(ConfigError, match="chat_id"):
        async for _ in agency.get_response_stream("hi", chat_id=chat_id):
            pass
    assert store.loads == []
    assert store.saves == []
    assert ceo_model.calls == []


async def test_longest_allowed_chat_id_works() -> None:
    agency, _, _ = build(ScriptedModel(["ok", "ok"]))
    chat_id = "x" * 200
    assert (await agency.get_response("hi", chat_id=chat_id)).chat_id == chat_id
    multibyte = "é" * 127  # 254 UTF-8 bytes
    assert (await agency.get_response("hi", chat_id=multibyte)).chat_id == multibyte


@pytest.mark.parametrize(
    ("chat_id", "problem"),
    [
        (" ", "chat_id is only whitespace; use a name with at least one visible character."),
        ("   ", "chat_id is only whitespace"),
        ("x" * 201, "chat_id is too long (201 characters); use at most 200 characters and 255 UTF-8 bytes."),
        ("é" * 200, "chat_id is too long (400 UTF-8 bytes, 200 characters); use at most 255 UTF-8 bytes"),
        ("é" * 128, "chat_id is too long (256 UTF-8 bytes, 128 characters); use at most 255 UTF-8 bytes"),
    ],
)
def test_a_refused_chat_id_says_which_rule_it_breaks(chat_id: str, problem: str) -> None:
    from agency_swarm import InvalidChatId
    from agency_swarm._threads._manager import check_chat_id

    with pytest.raises(InvalidChatId) as refused:
        check_chat_id(chat_id)
    assert problem in str(refused.value)
    assert check_chat_id(" a ") == " a "  # whitespace around a visible name is still a name


# -- concurrency --------------------------------------------------------------------------------------


async def test_concurrent_turns_on_one_chat_are_serialized() -> None:
    active = 0
    most_active = 0

    @function_tool
    async def work(task: str) -> str:
        """Do some work that yields to the event loop a few times."""
        nonlocal active, most_active
        active += 1
        most_active = max(most_active, active)
        for _ in range(5):
            await asyncio.sleep(0)  # a bare yield so another turn could interleave here
        active -= 1
        return f"worked on {task}"

    def script(call: ModelCall) -> Step:
        if not call.tool_outputs:
            return ToolCall("work", {"task": call.last_user_message})
        return f"answer to {call.last_user_message}"

    ceo = Agent(name="CEO", model=ScriptedModel(script), tools=[work])
    agency = Agency(ceo)
    first, second = await asyncio.gather(
        agency.get_response("first", chat_id="c"), agency.get_response("second", chat_id="c")
    )

    assert most_active == 1
    assert first.final_output == "answer to first"
    assert second.final_output == "answer to second"
    items = agency.thread_manager.get_thread("c", "user", "CEO").items
    assert len(items) == 8
    assert first.new_items + second.new_items == items or second.new_items + first.new_items == items
    for turn in (first.new_items, second.new_items):
        assert [item.get("type", item.get("role")) for item in turn] == [
            "user",
            "function_call",
            "function_call_output",
            "message",
        ]
        assert turn[1]["call_id"] == turn[2]["call_id"]


async def test_concurrent_turns_on_different_chats_both_complete() -> None:
    agency, _, _ = build()
    a, b = await asyncio.gather(agency.get_response("alpha", chat_id="a"), agency.get_response("beta", chat_id="b"))
    assert a.final_output == "done: built task: alpha"
    assert b.final_output == "done: built task: beta"
    assert "beta" not in json.dumps(agency.thread_manager.get_threads("a"))


async def test_concurrent_first_turns_load_a_chat_once() -> None:
    loads: list[str] = []

    async def load(chat_id: str) -> Threads:
        loads.append(chat_id)
        for _ in range(3):
            await asyncio.sleep(0)  # a bare yield, so the other turn could try to load meanwhile
        return {"user->CEO": [{"role": "user", "content": "stored"}]}

    ceo_model = ScriptedModel(lambda call: f"answer to {call.last_user_message}")
    agency = Agency(Agent(name="CEO", model=ceo_model), load_threads_callback=load)
    await asyncio.gather(agency.get_response("one", chat_id="c"), agency.get_response("two", chat_id="c"))
    assert loads == ["c"]
    items = agency.thread_manager.get_thread("c", "user", "CEO").items
    assert [item["content"] for item in items if item.get("role") == "user"] == ["stored", "one", "two"]


async def test_a_failing_turn_does_not_block_the_next_one_on_the_chat() -> None:
    ceo_model = ScriptedModel([Fail(RuntimeError("boom")), "fine"])
    agency = Agency(Agent(name="CEO", model=ceo_model))
    failed, ok = await asyncio.gather(
        agency.get_response("one", chat_id="c"), agency.get_response("two", chat_id="c"), return_exceptions=True
    )
    assert isinstance(failed, RuntimeError)
    assert not isinstance(ok, BaseException)
    assert ok.final_output == "fine"


async def test_callbacks_use_the_default_chat_id() -> None:
    store = Store()
    agency, _, _ = build(**store.callbacks("sync"))
    await agency.get_response("hi")
    assert store.loads == ["default"]
    assert [chat for chat, _ in store.saves] == ["default"]


async def test_loaded_threads_of_other_pairs_are_saved_back() -> None:
    old = [{"role": "user", "content": "from a retired agent"}]
    store = Store({"c1": {"Boss->Intern": [dict(item) for item in old]}})
    agency, _, _ = build(ScriptedModel(["ok"]), **store.callbacks("sync"))
    await agency.get_response("hi", chat_id="c1")
    saved = store.saves[-1][1]
    assert saved["Boss->Intern"] == old
    assert set(saved) == {"Boss->Intern", "user->CEO"}
