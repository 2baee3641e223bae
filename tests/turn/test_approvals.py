"""Tools that need approval pause the turn; `resume` continues paused turns and turns a crash cut short."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents.tool_context import ToolContext

from agency_swarm import (
    Agency,
    Agent,
    ApprovalRequested,
    ChatPaused,
    ConfigError,
    FileThreadStore,
    Interruption,
    MaxStepsExceeded,
    MemoryThreadStore,
    NothingToResume,
    function_tool,
)
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from agency_swarm.testing import ScriptedModel, ToolCall, send_message

ran: list[str] = []


@function_tool(needs_approval=True)
def delete_file(path: str) -> str:
    """Delete a file."""
    ran.append(f"delete {path}")
    return f"deleted {path}"


@function_tool
def list_files() -> str:
    """List files."""
    ran.append("list")
    return "a.txt b.txt"


async def only_outside_tmp(_context: Any, arguments: dict[str, Any], _call_id: str) -> bool:
    return not str(arguments.get("path", "")).startswith("/tmp/")


@function_tool(needs_approval=only_outside_tmp)
def remove(path: str) -> str:
    """Remove a path."""
    ran.append(f"remove {path}")
    return f"removed {path}"


@pytest.fixture(autouse=True)
def _clear_ran() -> None:
    ran.clear()


def outputs_of(items: list[dict[str, Any]]) -> dict[str, str]:
    return {item["call_id"]: item["output"] for item in items if item.get("type") == "function_call_output"}


def calls_of(items: list[dict[str, Any]]) -> list[str]:
    return [item["call_id"] for item in items if item.get("type") == "function_call"]


def solo(script: list[Any], tools: list[Any]) -> tuple[Agent, ScriptedModel]:
    model = ScriptedModel.each_turn(script)
    return Agent(name="Ops", tools=tools, model=model), model


# -- a pause at the top level ----------------------------------------------------------------------


async def test_a_tool_that_needs_approval_pauses_the_turn_without_running() -> None:
    ops, model = solo([ToolCall("delete_file", {"path": "a.txt"}), "done"], [delete_file])
    agency = Agency(ops)
    result = await agency.get_response("clean up", chat_id="c")
    assert result.paused
    assert result.final_output is None
    [waiting] = result.interruptions
    assert waiting == Interruption(
        agent="Ops", caller="user", depth=0, chat_id="c", call_id=waiting.call_id, tool="delete_file",
        arguments='{"path": "a.txt"}',
    )
    assert ran == []
    items = agency.thread_manager.get_threads("c")["user->Ops"]
    assert calls_of(items) == [waiting.call_id]
    assert outputs_of(items) == {}  # nothing stored for it until someone decides
    assert len(model.calls) == 1


async def test_a_streamed_turn_emits_approval_requested_and_ends() -> None:
    ops, _ = solo([ToolCall("delete_file", {"path": "a.txt"}), "done"], [delete_file])
    agency = Agency(ops)
    stream = agency.get_response_stream("clean up", chat_id="s")
    events = [event async for event in stream]
    kinds = [event.type for event in events]
    assert kinds[-1] == "approval_requested"
    assert "agent_finished" not in kinds
    request = events[-1]
    assert isinstance(request, ApprovalRequested)
    assert (request.tool, request.agent, request.depth) == ("delete_file", "Ops", 0)
    assert stream.result.interruptions[0].call_id == request.call_id
    assert request.to_dict()["type"] == "approval_requested"


async def test_approve_runs_the_call_and_finishes_the_turn() -> None:
    ops, model = solo([ToolCall("delete_file", {"path": "a.txt"}), "done"], [delete_file])
    agency = Agency(ops)
    paused = await agency.get_response("clean up", chat_id="c")
    call_id = paused.interruptions[0].call_id
    result = await agency.resume("c", approve=[call_id])
    assert not result.paused
    assert result.final_output == "done"
    assert ran == ["delete a.txt"]
    assert model.calls[-1].tool_outputs == ["deleted a.txt"]
    items = agency.thread_manager.get_threads("c")["user->Ops"]
    assert outputs_of(items) == {call_id: "deleted a.txt"}
    assert [item.get("content") for item in items if item.get("role") == "user"] == ["clean up"]  # not re-sent
    with pytest.raises(NothingToResume, match="no unfinished turn"):
        await agency.resume("c")


async def test_reject_tells_the_model_and_never_runs_the_tool() -> None:
    ops, model = solo([ToolCall("delete_file", {"path": "a.txt"}), "I left the file alone."], [delete_file])
    agency = Agency(ops)
    paused = await agency.get_response("clean up", chat_id="c")
    result = await agency.resume("c", reject=[paused.interruptions[0].call_id])
    assert result.final_output == "I left the file alone."
    assert ran == []
    assert model.calls[-1].tool_outputs[0] == "Tool execution was not approved."


async def test_a_new_message_to_a_paused_chat_is_refused_until_resume() -> None:
    ops, _ = solo([ToolCall("delete_file", {"path": "a.txt"}), "done"], [delete_file])
    agency = Agency(ops)
    paused = await agency.get_response("clean up", chat_id="c")
    with pytest.raises(ChatPaused, match="resume") as caught:
        await agency.get_response("something else", chat_id="c")
    assert [item.call_id for item in caught.value.interruptions] == [paused.interruptions[0].call_id]
    assert caught.value.chat_id == "c"
    assert [item.get("content") for item in agency.thread_manager.get_threads("c")["user->Ops"]
            if item.get("role") == "user"] == ["clean up"]  # the refused message was not stored


async def test_undecided_calls_pause_again_and_decided_ones_never_run_twice() -> None:
    calls = [ToolCall("delete_file", {"path": "a"}), ToolCall("list_files"), ToolCall("delete_file", {"path": "b"})]
    model = ScriptedModel(lambda call: "done" if call.tool_outputs else calls)
    ops = Agent(name="Ops", tools=[delete_file, list_files], model=model)
    agency = Agency(ops)
    paused = await agency.get_response("go", chat_id="c")
    assert ran == ["list"]  # the call without approval ran at once
    first, second = (item.call_id for item in paused.interruptions)
    again = await agency.resume("c", approve=[first])
    assert [item.call_id for item in again.interruptions] == [second]
    assert ran == ["list", "delete a"]
    result = await agency.resume("c", approve=[second])
    assert result.final_output == "done"
    assert len(model.calls) == 2  # one model call to ask, one after every call had its output
    assert ran == ["list", "delete a", "delete b"]
    items = agency.thread_manager.get_threads("c")["user->Ops"]
    assert sorted(outputs_of(items)) == sorted(calls_of(items))


async def test_resume_takes_any_iterable_of_call_ids_but_not_a_bare_str() -> None:
    """A generator was consumed by the type check and approved nothing, so the turn paused again."""
    calls = [ToolCall("delete_file", {"path": "a"}), ToolCall("delete_file", {"path": "b"})]
    model = ScriptedModel(lambda call: "done" if call.tool_outputs else calls)
    agency = Agency(Agent(name="Ops", tools=[delete_file], model=model))
    paused = await agency.get_response("go", chat_id="c")
    first, second = (item.call_id for item in paused.interruptions)
    with pytest.raises(ConfigError, match=r"not a single str.*approve=\['") as caught:
        await agency.resume("c", approve=first)
    assert first in str(caught.value)
    result = await agency.resume(
        "c", approve=(item.call_id for item in paused.interruptions if item.call_id == first), reject={second}
    )
    assert not result.paused
    assert result.final_output == "done"
    assert ran == ["delete a"]
    assert model.calls[-1].tool_outputs[1] == "Tool execution was not approved."


async def test_needs_approval_can_be_decided_per_call() -> None:
    ops, _ = solo([[ToolCall("remove", {"path": "/tmp/x"}), ToolCall("remove", {"path": "/etc/y"})], "ok"], [remove])
    agency = Agency(ops)
    paused = await agency.get_response("go", chat_id="c")
    assert ran == ["remove /tmp/x"]
    assert [item.arguments for item in paused.interruptions] == ['{"path": "/etc/y"}']


async def test_resume_checks_the_call_ids_it_is_given() -> None:
    ops, _ = solo([ToolCall("delete_file", {"path": "a.txt"}), "done"], [delete_file])
    agency = Agency(ops)
    paused = await agency.get_response("clean up", chat_id="c")
    call_id = paused.interruptions[0].call_id
    with pytest.raises(ConfigError, match=f"not waiting.*{call_id}"):
        await agency.resume("c", approve=["call_nope"])
    with pytest.raises(ConfigError, match="both approved and rejected"):
        await agency.resume("c", approve=[call_id], reject=[call_id])
    with pytest.raises(ConfigError, match="iterable of call ids, not a single str"):
        await agency.resume("c", approve=call_id)
    with pytest.raises(ConfigError, match=r"reject must hold call ids \(str\), got 7"):
        await agency.resume("c", reject=[call_id, 7])  # type: ignore[list-item]
    with pytest.raises(ConfigError, match="approve must be an iterable of call ids"):
        await agency.resume("c", approve=7)  # type: ignore[arg-type]
    with pytest.raises(NothingToResume):
        await agency.resume("never-used")
    assert ran == []


# -- a pause inside a nested agent, persisted, resumed by a new process -------------------------------


def ceo_and_ops(store: Any) -> tuple[Agency, ScriptedModel, ScriptedModel]:
    ceo_model = ScriptedModel.each_turn([send_message("Ops", "delete a.txt"), "Ops says: deleted"])
    ops_model = ScriptedModel.each_turn([ToolCall("delete_file", {"path": "a.txt"}), "deleted it"])
    ceo = Agent(name="CEO", model=ceo_model)
    ops = Agent(name="Ops", tools=[delete_file], model=ops_model)
    return Agency([ceo, [ceo, ops]], thread_store=store), ceo_model, ops_model


async def test_a_pause_in_a_nested_agent_pauses_its_callers_and_resumes_after_a_restart(tmp_path: Path) -> None:
    agency, _, _ = ceo_and_ops(FileThreadStore(tmp_path))
    paused = await agency.get_response("tidy up", chat_id="n")
    [waiting] = paused.interruptions
    assert (waiting.agent, waiting.caller, waiting.depth, waiting.tool) == ("Ops", "CEO", 1, "delete_file")
    threads = agency.thread_manager.get_threads("n")
    assert outputs_of(threads["user->CEO"]) == {}  # the send waits for Ops too
    await agency.aclose()

    restarted, ceo_model, ops_model = ceo_and_ops(FileThreadStore(tmp_path))  # a new process, same files
    with pytest.raises(ChatPaused) as caught:
        await restarted.get_response("hello?", chat_id="n")
    assert [(item.agent, item.caller, item.depth) for item in caught.value.interruptions] == [("Ops", "CEO", 1)]
    events = [event async for event in restarted.resume_stream("n", approve=[waiting.call_id])]
    result = next(event for event in events if event.type == "agent_finished" and event.depth == 0)
    assert result.output == "Ops says: deleted"
    assert ran == ["delete a.txt"]
    assert [(event.type, event.agent) for event in events if event.type in ("message_sent", "agent_finished")] == [
        ("message_sent", "CEO"), ("agent_finished", "Ops"), ("agent_finished", "CEO"),
    ]
    assert len(ops_model.calls) == 1
    assert ops_model.calls[0].tool_outputs == ["deleted a.txt"]
    assert ceo_model.calls[0].tool_outputs == ["deleted it"]
    await restarted.aclose()

    stored = await FileThreadStore(tmp_path).load("n")
    for items in stored.values():
        assert sorted(outputs_of(items)) == sorted(calls_of(items))


# -- a crash: resume goes on from the last stored item ------------------------------------------------


def call_item(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": arguments, "id": f"fc_{call_id}"}


def answer_item(text: str) -> dict[str, Any]:
    return {
        "type": "message", "role": "assistant", "id": "msg_x", "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


SEND = '{"recipient_agent": "Developer", "message": "build it", "additional_instructions": null}'


@function_tool
def build(page: str) -> str:
    """Build a page."""
    ran.append(f"build {page}")
    return f"built {page}"


async def crashed_agency(threads: dict[str, list[dict[str, Any]]]) -> tuple[Agency, ScriptedModel, ScriptedModel]:
    store = MemoryThreadStore()
    for key, items in threads.items():
        await store.append("k", key, items)
    ceo_model = ScriptedModel.each_turn([send_message("Developer", "build it"), "shipped"])
    dev_model = ScriptedModel.each_turn([ToolCall("build", {"page": "home"}), "the page is built"])
    ceo = Agent(name="CEO", model=ceo_model)
    dev = Agent(name="Developer", tools=[build], model=dev_model)
    return Agency([ceo, [ceo, dev]], thread_store=store), ceo_model, dev_model


async def test_resume_after_a_crash_mid_nested_turn_never_runs_a_cut_call_again() -> None:
    """`build` may have run before the crash (its output never reached the store): it is not run a second time for
    the same call id; the Developer's model reads that it was interrupted and decides again."""
    agency, ceo_model, dev_model = await crashed_agency({
        "user->CEO": [{"role": "user", "content": "ship it"}, call_item("c1", "send_message", SEND)],
        "CEO->Developer": [{"role": "user", "content": "build it"}, call_item("d1", "build", '{"page": "home"}')],
    })
    result = await agency.resume("k")
    assert result.final_output == "shipped"
    assert ran == []
    assert dev_model.calls[0].tool_outputs == [INTERRUPTED_OUTPUT]
    assert ceo_model.calls[0].tool_outputs == ["the page is built"]
    threads = agency.thread_manager.get_threads("k")
    assert [item.get("content") for item in threads["CEO->Developer"] if item.get("role") == "user"] == ["build it"]
    assert outputs_of(threads["user->CEO"]) == {"c1": "the page is built"}
    assert result.usage.requests == 2


async def test_resume_when_the_reply_existed_but_never_reached_the_caller() -> None:
    agency, ceo_model, dev_model = await crashed_agency({
        "user->CEO": [{"role": "user", "content": "ship it"}, call_item("c1", "send_message", SEND)],
        "CEO->Developer": [{"role": "user", "content": "build it"}, answer_item("already built")],
    })
    result = await agency.resume("k")
    assert result.final_output == "shipped"
    assert dev_model.calls == []
    assert ceo_model.calls[0].tool_outputs == ["already built"]


async def test_resume_when_the_message_never_reached_the_recipient() -> None:
    agency, _, dev_model = await crashed_agency({
        "user->CEO": [{"role": "user", "content": "ship it"}, call_item("c1", "send_message", SEND)],
    })
    result = await agency.resume("k")
    assert result.final_output == "shipped"
    assert dev_model.calls[0].input == [{"role": "user", "content": "build it"}]


async def test_resume_after_a_crash_before_the_model_answered() -> None:
    agency, ceo_model, _ = await crashed_agency({"user->CEO": [{"role": "user", "content": "ship it"}]})
    result = await agency.resume("k")
    assert result.final_output == "shipped"
    assert ceo_model.calls[0].input == [{"role": "user", "content": "ship it"}]
    assert ran == ["build home"]


async def test_a_new_message_after_a_crash_repairs_instead_of_resuming() -> None:
    agency, ceo_model, _ = await crashed_agency({
        "user->CEO": [{"role": "user", "content": "ship it"}, call_item("c1", "send_message", SEND)],
    })
    result = await agency.get_response("status?", chat_id="k")
    assert result.final_output == "shipped"
    sent = ceo_model.calls[0].input
    assert sent[-2]["type"] == "function_call_output"
    assert "interrupted" in sent[-2]["output"]
    assert sent[-1] == {"role": "user", "content": "status?"}
    with pytest.raises(NothingToResume):
        await agency.resume("k")


# -- the same text sent twice: resume tells the sends apart by call id -------------------------


class Killed(BaseException):
    """The process died here, as under kill -9: nothing after this point reaches the store."""


class DiesOnce(MemoryThreadStore):
    """A store whose process dies at the first append `dies_at(thread key, items, stored items)` picks: that
    append raises Killed, and no later write (clean-up included) is stored. `revive()` is the restart."""

    def __init__(self, dies_at: Any) -> None:
        super().__init__()
        self.dies_at, self.dead = dies_at, False

    async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
        if self.dead:
            return
        if self.dies_at is not None and self.dies_at(thread_key, items, (await self.load(chat_id)).get(thread_key, [])):
            self.dead = True
            raise Killed()
        await super().append(chat_id, thread_key, items)

    def revive(self) -> None:
        self.dies_at, self.dead = None, False


def count(items: list[dict[str, Any]], role: str) -> int:
    return sum(1 for item in items if item.get("role") == role)


def relaying_ceo() -> ScriptedModel:
    """Sends the Developer the same text every turn, then relays its reply."""
    return ScriptedModel(
        lambda call: f"relayed: {call.tool_outputs[-1]}" if call.tool_outputs else send_message("Developer", "build it")
    )


def numbering_developer() -> ScriptedModel:
    """Answers "build #n" to its n-th message."""
    return ScriptedModel(lambda call: f"build #{count(call.input, 'user')}")


def same_text_agency(store: DiesOnce) -> tuple[Agency, ScriptedModel, ScriptedModel]:
    ceo_model, dev_model = relaying_ceo(), numbering_developer()
    ceo, dev = Agent(name="CEO", model=ceo_model), Agent(name="Developer", model=dev_model)
    return Agency([ceo, [ceo, dev]], thread_store=store), ceo_model, dev_model


DEATHS = {  # where turn 2 dies: (thread key, what the append carries, what is stored before it)
    "before the message reached the Developer":
        lambda key, items, stored: key == "CEO->Developer" and count(items, "user") and count(stored, "user") == 1,
    "before the Developer answered":
        lambda key, items, stored: key == "CEO->Developer" and count(items, "assistant")
        and count(stored, "assistant") == 1,
    "before the CEO read the answer":
        lambda key, items, stored: key == "user->CEO" and any(i.get("type") == "function_call_output" for i in items)
        and any(i.get("type") == "function_call_output" for i in stored),
}


@pytest.mark.parametrize("death", list(DEATHS))
async def test_resume_after_the_same_text_was_sent_twice_never_hands_back_the_older_reply(death: str) -> None:
    store = DiesOnce(DEATHS[death])
    agency, _, _ = same_text_agency(store)
    first = await agency.get_response("first", chat_id="k")
    assert first.final_output == "relayed: build #1"
    with pytest.raises(Killed):
        await agency.get_response("second", chat_id="k")

    store.revive()
    restarted, ceo_model, dev_model = same_text_agency(store)  # a new process on what the store kept
    result = await restarted.resume("k")

    assert result.final_output == "relayed: build #2"
    assert ceo_model.calls[-1].tool_outputs == ["build #2"]
    assert len(dev_model.calls) == (0 if death == "before the CEO read the answer" else 1)
    developer = restarted.thread_manager.get_threads("k")["CEO->Developer"]
    assert [item["content"] for item in developer if item.get("role") == "user"] == ["build it", "build it"]
    assert count(developer, "assistant") == 2
    for call in dev_model.calls:  # the call id kept with a delivered message never reaches the model
        assert [sorted(item) for item in call.input if item.get("role") == "user"] == [["content", "role"]] * 2


async def test_a_nested_approval_whose_send_already_failed_does_not_hold_the_chat() -> None:
    """The store took Developer's `deploy` call, then reported a failure: the CEO's send failed and the CEO finished.
    Nobody waits for `deploy` any more, so it is not waiting for approval: the next message repairs it."""
    from agency_swarm import MemoryThreadStore, NothingToResume, StoreError

    class LosesTheAck(MemoryThreadStore):
        async def append(self, chat_id: str, key: str, items: list[dict[str, Any]]) -> None:
            await super().append(chat_id, key, items)
            if any(item.get("name") == "deploy" for item in items):
                raise StoreError("connection lost after commit")

    @function_tool(needs_approval=True)
    def deploy() -> str:
        """Deploys."""
        return "deployed"

    ceo = Agent(name="CEO", model=ScriptedModel.each_turn([send_message("Developer", "deploy it"), "done"]))
    dev = Agent(name="Developer", tools=[deploy], model=ScriptedModel.each_turn([ToolCall("deploy"), "ok"]))
    agency = Agency([ceo, [ceo, dev]], thread_store=LosesTheAck())
    first = await agency.get_response("go", chat_id="c")
    assert first.final_output == "done"
    assert not first.interruptions
    with pytest.raises(NothingToResume):
        await agency.resume("c", approve=[])
    second = await agency.get_response("next", chat_id="c")
    assert second.final_output == "done"
    for items in agency.thread_manager.get_threads("c").values():
        calls = {item["call_id"] for item in items if item.get("type") == "function_call"}
        outputs = [item["call_id"] for item in items if item.get("type") == "function_call_output"]
        assert sorted(outputs) == sorted(calls)


# -- what a decision says, and what a resume keeps from the paused turn ---------------------------------------------


async def test_reject_takes_a_message_per_call_for_the_model_to_read() -> None:
    calls = [ToolCall("delete_file", {"path": "a"}), ToolCall("delete_file", {"path": "b"})]
    model = ScriptedModel(lambda call: "done" if call.tool_outputs else calls)
    agency = Agency(Agent(name="Ops", tools=[delete_file], model=model))
    paused = await agency.get_response("go", chat_id="c")
    first, second = (item.call_id for item in paused.interruptions)
    events = [event async for event in agency.resume_stream("c", reject={first: "a is protected.", second: None})]
    assert events[-1].type == "agent_finished"
    assert ran == []
    assert model.calls[-1].tool_outputs == ["a is protected.", "Tool execution was not approved."]


@pytest.mark.parametrize(("reject", "problem"), [
    ({"call_1": 5}, "got int for 'call_1'"),
    ({1: "no"}, "got the key 1"),
])
async def test_reject_as_a_mapping_holds_call_ids_and_messages(reject: Any, problem: str) -> None:
    ops, _ = solo([ToolCall("delete_file", {"path": "a"}), "done"], [delete_file])
    agency = Agency(ops)
    await agency.get_response("go", chat_id="c")
    with pytest.raises(ConfigError, match=problem):
        await agency.resume("c", reject=reject)


@function_tool(needs_approval=True)
def whoami(ctx: ToolContext[Any]) -> str:
    """Say who the user is."""
    ran.append(f"whoami {ctx.context}")
    return str(ctx.context)


async def test_resume_keeps_the_paused_turns_context_unless_given_another() -> None:
    ops, _ = solo([ToolCall("whoami", {}), "done"], [whoami])
    agency = Agency(ops)
    paused = await agency.get_response("who?", chat_id="c", context={"user": "ann"})
    await agency.resume("c", approve=[paused.interruptions[0].call_id])
    paused = await agency.get_response("who now?", chat_id="c", context={"user": "ann"})
    agency.resume_sync("c", approve=[paused.interruptions[0].call_id], context={"user": "bob"})
    assert ran == ["whoami {'user': 'ann'}", "whoami {'user': 'bob'}"]


async def test_a_finished_or_deleted_chat_keeps_no_context() -> None:
    ops, _ = solo([ToolCall("whoami", {}), "done"], [whoami])
    agency = Agency(ops)
    kept = agency.thread_manager.paused_turns
    finished = await agency.get_response("who?", chat_id="finished", context={"user": "ann"})
    await agency.get_response("who?", chat_id="deleted", context={"user": "bob"})
    assert {chat: paused.context for chat, paused in kept.items()} == {
        "finished": {"user": "ann"}, "deleted": {"user": "bob"},
    }
    await agency.resume("finished", approve=[finished.interruptions[0].call_id])
    await agency.thread_manager.delete_chat("deleted")
    assert kept == {}


async def test_a_context_is_never_stored_so_another_process_passes_it_again(tmp_path: Path) -> None:
    ops, _ = solo([ToolCall("whoami", {}), "done"], [whoami])
    agency = Agency(ops, thread_store=FileThreadStore(tmp_path))
    paused = await agency.get_response("who?", chat_id="c", context={"user": "ann"})
    await agency.aclose()
    restarted = Agency(solo([ToolCall("whoami", {}), "done"], [whoami])[0], thread_store=FileThreadStore(tmp_path))
    await restarted.resume("c", approve=[paused.interruptions[0].call_id])
    assert ran == ["whoami None"]
    await restarted.aclose()


async def test_max_steps_counts_the_model_calls_before_a_pause_in_another_process_too(tmp_path: Path) -> None:
    script = [ToolCall("delete_file", {"path": "a"}), ToolCall("list_files", {}), ToolCall("list_files", {}), "done"]

    def ops_agency() -> Agency:
        model = ScriptedModel.each_turn(script)
        ops = Agent(name="Ops", tools=[delete_file, list_files], model=model, max_steps=2)
        return Agency(ops, thread_store=FileThreadStore(tmp_path))

    agency = ops_agency()
    paused = await agency.get_response("go", chat_id="c")
    await agency.aclose()
    restarted = ops_agency()
    with pytest.raises(MaxStepsExceeded) as caught:
        await restarted.resume("c", approve=[paused.interruptions[0].call_id])
    assert caught.value.max_steps == 2
    assert ran == ["delete a", "list"]  # one model call before the pause, one after it
    await restarted.aclose()
