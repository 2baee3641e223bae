"""What a load keeps from the model: items the model API would refuse (quarantined by the file store, skipped with
one warning by the other stores) and threads of agents that are not in the chart."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import Agency, Agent, FileThreadStore, MemoryThreadStore, SQLiteThreadStore
from agency_swarm._threads._checks import item_problem
from agency_swarm.testing import ScriptedModel, send_message

GOOD_CALL = {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": "{}"}
BAD_CALL = {"type": "function_call", "call_id": "c2", "name": "lookup"}  # no arguments: the API refuses it


def hello(text: str = "hello") -> dict[str, Any]:
    return {"role": "user", "content": text}


def done(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "ok"}


def answer(text: str) -> dict[str, Any]:
    return {"id": f"msg_{text}", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}


def team(store: Any, *, ceo_script: list[Any] | None = None) -> tuple[Agency, ScriptedModel]:
    model = ScriptedModel.each_turn(ceo_script or ["on it"])
    ceo = Agent(name="CEO", model=model)
    dev = Agent(name="Developer", model=ScriptedModel.each_turn(["built"]))
    return Agency([ceo, [ceo, dev]], thread_store=store), model


def test_our_own_items_are_valid_and_junk_is_not() -> None:
    assert item_problem({"type": "agency_swarm.awaiting_approval", "call_id": "c1"}) == ""
    assert item_problem({"type": "agency_swarm.approved_run", "call_id": "c1"}) == ""
    assert item_problem({"role": "user", "content": "hi", "send_call_id": "call_1"}) == ""
    for item in (GOOD_CALL, done("c1"), answer("hi"), {"type": "reasoning", "id": "rs_1", "summary": []}):
        assert item_problem(item) == ""
    assert item_problem({"foo": "bar"}).startswith("not an item the model API accepts (")
    assert item_problem(BAD_CALL) == "not an item the model API accepts (arguments: Field required)"
    assert item_problem({"type": 7}) == "its type is not one the model API knows"


def skipped(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [record.getMessage() for record in caplog.records if "skipped" in record.getMessage()]


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="agency_swarm._threads._checks")
    return caplog


JUNK_THREAD = [hello(), {"foo": "bar"}, GOOD_CALL, done("c1"), BAD_CALL, done("c2"), answer("fine")]
KEPT = [hello(), GOOD_CALL, done("c1"), answer("fine")]


async def test_a_sql_store_row_the_model_api_would_refuse_is_skipped_with_one_warning_and_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteThreadStore(tmp_path / "chats.db")
    await store.append("c", "user->CEO", JUNK_THREAD)
    agency, model = team(store)
    await agency.get_response("next", chat_id="c")
    assert model.calls[0].input == [*KEPT, hello("next")]  # the junk never reaches the model
    assert skipped(caplog) == [
        "SQLiteThreadStore: chat 'c', thread 'user->CEO': item 1 skipped: not an item the model API accepts "
        "(EasyInputMessageParam.content: Field required). It stays in the store; the model is not sent it",
        "SQLiteThreadStore: chat 'c', thread 'user->CEO': item 4 skipped: not an item the model API accepts "
        "(arguments: Field required). It stays in the store; the model is not sent it",
        "SQLiteThreadStore: chat 'c', thread 'user->CEO': item 5 skipped: a function_call_output whose "
        "function_call (item 4) was skipped. It stays in the store; the model is not sent it",
    ]
    assert "bar" not in caplog.text  # names the row, never its contents
    assert (await store.load("c"))["user->CEO"][:7] == JUNK_THREAD  # skipped, not deleted: the store is shared
    await agency.get_response("again", chat_id="c")
    assert len(skipped(caplog)) == 3  # once per load, not per turn
    await agency.aclose()


async def test_a_load_callbacks_junk_is_skipped_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    loaded = {"user->CEO": [hello(), reasoning, {"type": "message", "role": "assistant", "content": 5}]}
    ceo = Agent(name="CEO", model=ScriptedModel(["ok"]))
    saved: list[dict[str, Any]] = []
    agency = Agency(ceo, load_threads_callback=lambda chat_id: json.loads(json.dumps(loaded)),
                    save_threads_callback=lambda chat_id, threads: saved.append(threads))
    assert await agency.get_threads("c") == {"user->CEO": [hello()]}  # the reasoning item lost its follower too
    assert [text.split(": ", 1)[1].split(" skipped")[0] for text in skipped(caplog)] == [
        "chat 'c', thread 'user->CEO': item 1", "chat 'c', thread 'user->CEO': item 2",
    ]
    assert all(text.startswith("CallbackThreadStore: ") for text in skipped(caplog))
    await agency.get_response("hi", chat_id="c")
    assert saved[-1]["user->CEO"][:3] == loaded["user->CEO"]  # the user's own storage keeps what it had


async def test_junk_another_process_added_is_skipped_when_a_held_chat_catches_up(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryThreadStore()
    reader, _ = team(store)
    await reader.get_response("one", chat_id="c")  # held here, as of the store's version
    await store.append("c", "user->CEO", [{"foo": "bar"}, hello("two")])  # another writer, since
    assert (await reader.get_threads("c"))["user->CEO"][2:] == [hello("two")]
    assert [text.split(": ", 1)[1].split(" skipped")[0] for text in skipped(caplog)] == [
        "chat 'c', thread 'user->CEO': item 2",  # its place in the thread, not in what was read
    ]


async def test_a_file_store_line_that_is_no_item_is_quarantined_and_the_model_never_sees_it(tmp_path: Path) -> None:
    lines = [{"k": "user->CEO", "i": item} for item in (hello(), {"foo": "bar"}, answer("fine"))]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    agency, model = team(FileThreadStore(tmp_path))
    await agency.get_response("next", chat_id="c")
    assert model.calls[0].input == [hello(), answer("fine"), hello("next")]
    assert (tmp_path / "c.jsonl.quarantine").read_text().startswith("2\tvalid JSON, but not an item the model API")
    await agency.aclose()


# -- threads of agents that are not in the chart --------------------------------------------------------------


async def test_a_thread_for_an_agent_not_in_the_chart_is_not_loaded_and_stays_stored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store = MemoryThreadStore()
    await store.append("c", "user->CEO", [hello()])
    await store.append("c", "CEO->Ghost", [hello("for a removed agent")])
    await store.append("c", "Boss->CEO", [hello("a sender_name= label")])  # senders may be anyone
    agency, _ = team(store)
    assert list(await agency.get_threads("c")) == ["user->CEO", "Boss->CEO"]
    warnings = [record.getMessage() for record in caplog.records if "not loaded" in record.getMessage()]
    assert warnings == [
        "chat 'c': thread(s) 'CEO->Ghost' not loaded: their recipient is not an agent of this agency's chart "
        "(renamed or removed?). They stay in the store; add the agent back to use them, or delete the chat."
    ]
    await agency.get_response("go on", chat_id="c")
    assert "CEO->Ghost" in await store.load("c")


async def test_a_nested_turn_still_works_after_a_reload_with_marks_and_send_ids(tmp_path: Path) -> None:
    """Our own bookkeeping (send_call_id on incoming messages) passes the check on load."""
    ceo_script = [send_message("Developer", "build"), "shipped"]
    async with team(FileThreadStore(tmp_path), ceo_script=ceo_script)[0] as first:
        await first.get_response("go", chat_id="c")
        before = first.thread_manager.get_threads("c")
    assert "send_call_id" in before["CEO->Developer"][0]
    async with team(FileThreadStore(tmp_path))[0] as restarted:
        assert await restarted.get_threads("c") == before
    assert not (tmp_path / "c.jsonl.quarantine").exists()
