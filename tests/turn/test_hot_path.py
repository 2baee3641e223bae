"""What the turn's fast paths remember must follow changes: a reassigned model, retry policy or timeout."""

from __future__ import annotations

import pytest
from agents import Model, ModelProvider

from agency_swarm import Agency, Agent
from agency_swarm._model._retry import RetryPolicy
from agency_swarm.testing import ScriptedModel


class Names(ModelProvider):
    def get_model(self, model_name: str | None) -> Model:
        return ScriptedModel.each_turn([f"I am {model_name}"])


async def test_a_model_reassigned_between_turns_answers_the_next_turn() -> None:
    agent = Agent(name="Solo", model=ScriptedModel(["first"]))
    agency = Agency(agent)
    assert (await agency.get_response("one")).final_output == "first"
    agent.model = ScriptedModel(["second"])
    assert (await agency.get_response("two")).final_output == "second"


async def test_a_changed_retry_policy_or_timeout_gets_a_new_wrapper() -> None:
    agent = Agent(name="Solo", model=ScriptedModel.each_turn(["ok"]))
    agency = Agency(agent)
    await agency.get_response("one")
    wiring = agency._wirings["Solo"]
    first = wiring.resolve_model(agent)
    assert wiring.resolve_model(agent) is first  # nothing changed: the same wrapper

    agent.retry = RetryPolicy(max_attempts=1)
    second = wiring.resolve_model(agent)
    assert second is not first
    assert second.policy is agent.retry  # type: ignore[attr-defined]

    agent.timeout = 7.0
    third = wiring.resolve_model(agent)
    assert third.timeout == 7.0  # type: ignore[attr-defined]
    assert (await agency.get_response("two")).final_output == "ok"


async def test_a_model_name_keeps_its_wrapper_and_label() -> None:
    agent = Agent(name="Solo", model="gpt-4.1-mini")
    agency = Agency(agent, model_provider=Names())
    wiring = agency._wirings["Solo"]
    wrapped = wiring.resolve_model(agent)
    agent.model = "".join(["gpt-4.1", "-mini"])  # equal, but another str object
    assert wiring.resolve_model(agent) is wrapped
    assert wrapped.model_name == "gpt-4.1-mini"  # type: ignore[attr-defined]
    assert (await agency.get_response("one")).final_output == "I am gpt-4.1-mini"
    agent.model = "gpt-4.1"
    assert wiring.resolve_model(agent).model_name == "gpt-4.1"  # type: ignore[attr-defined]
    assert (await agency.get_response("two")).final_output == "I am gpt-4.1"


PIECES = [None, "", "plain", "for {{agent_name}}"]


@pytest.mark.parametrize("shared", PIECES)
@pytest.mark.parametrize("own", PIECES)
@pytest.mark.parametrize("extra", PIECES)
async def test_the_system_prompt_joins_shared_own_and_additional_instructions(
    shared: str | None, own: str | None, extra: str | None
) -> None:
    model = ScriptedModel(["ok"])
    agent = Agent(name="Solo", instructions=own, model=model)
    await Agency(agent, shared_instructions=shared).get_response("hi", additional_instructions=extra)
    parts = [part.replace("{{agent_name}}", "Solo") for part in (shared, own, extra) if part]
    assert model.calls[0].system_instructions == ("\n\n".join(parts) if parts else None)


def _output_items() -> list[object]:
    from openai.types.responses import (
        ResponseFunctionToolCall,
        ResponseOutputMessage,
        ResponseOutputRefusal,
        ResponseOutputText,
        ResponseReasoningItem,
    )

    text = ResponseOutputText(type="output_text", text="hi", annotations=[])
    annotated = ResponseOutputText(
        type="output_text", text="see", annotations=[{"type": "url_citation", "url": "https://x", "title": "x",
                                                      "start_index": 0, "end_index": 3}],  # type: ignore[list-item]
    )
    with_logprobs = ResponseOutputText(type="output_text", text="p", annotations=[], logprobs=[])
    message = {"id": "m1", "role": "assistant", "status": "completed", "type": "message"}
    return [
        ResponseOutputMessage(content=[text], **message),  # type: ignore[arg-type]
        ResponseOutputMessage(content=[with_logprobs, text], **message),  # type: ignore[arg-type]
        ResponseOutputMessage(content=[annotated], **message),  # type: ignore[arg-type]
        ResponseOutputMessage(content=[ResponseOutputRefusal(type="refusal", refusal="no")], **message),  # type: ignore[arg-type]
        ResponseOutputMessage.model_construct(content=[text], id="m2", role="assistant", type="message"),
        ResponseOutputMessage.model_validate({**message, "content": [], "extra_field": 1}),
        ResponseFunctionToolCall(type="function_call", call_id="c1", name="add", arguments='{"a": 1}'),
        ResponseFunctionToolCall(
            type="function_call", call_id="c2", name="add", arguments="{}", id="f", status="completed"
        ),
        ResponseFunctionToolCall.model_validate({"type": "function_call", "call_id": "c3", "name": "n", "arguments": "",
                                                 "surprise": {"nested": True}}),
        ResponseReasoningItem(id="r1", type="reasoning", summary=[]),
        ResponseFunctionToolCall.model_validate({
            "type": "function_call", "call_id": "c4", "name": "n", "arguments": "{}",
            "caller": {"type": "program", "caller_id": "prog_1"},
        }),
        _without_annotations_set(text),
        _with_status(ResponseOutputMessage(content=[text], **message), _Status("completed")),  # type: ignore[arg-type]
    ]


class _Status(str):
    """A str subclass: not a plain str, so the item goes through pydantic's serializer."""


def _without_annotations_set(text: object) -> object:
    from openai.types.responses import ResponseOutputMessage

    part = text.model_copy()  # type: ignore[attr-defined]
    part.__pydantic_fields_set__.discard("annotations")
    return ResponseOutputMessage(id="m3", role="assistant", status="completed", type="message", content=[part])


def _with_status(message: object, status: str) -> object:
    message.__dict__["status"] = status
    return message


@pytest.mark.parametrize("item", _output_items())
def test_stored_items_are_exactly_what_pydantic_dumps(item: object) -> None:
    from agency_swarm._base._items import stored_item

    expected = item.model_dump(exclude_unset=True)  # type: ignore[attr-defined]
    stored = stored_item(item)
    assert stored == expected
    assert list(stored) == list(expected)  # same key order, so stored files read the same
    assert [list(part) for part in stored.get("content", [])] == [list(part) for part in expected.get("content", [])]


def test_the_keywordless_event_builders_make_the_same_events() -> None:
    from agency_swarm._base._events import RawModelEvent, TextDelta, raw_model_event, text_delta

    where = {"agent": "A", "caller": "user", "depth": 1, "chat_id": "c"}
    raw = raw_model_event("A", "user", 1, "c", {"type": "x"})
    delta = text_delta("A", "user", 1, "c", "Hi")
    assert type(raw) is RawModelEvent
    assert type(delta) is TextDelta
    assert raw == RawModelEvent(**where, data={"type": "x"})
    assert delta == TextDelta(**where, delta="Hi")
    assert raw.to_dict() == RawModelEvent(**where, data={"type": "x"}).to_dict()
    assert delta.to_dict() == {"type": "text_delta", **where, "delta": "Hi"}
