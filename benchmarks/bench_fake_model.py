"""A scripted, zero-latency `agents.Model` shared by every system in `compare.py`.

A script is a tuple of steps: a reply text (`str`) or a tool call (`Call`). Which step a model call returns depends
only on its input: the number of tool outputs after the last user message. The model therefore keeps no per-chat
state, so one instance serves repeated turns on one chat and hundreds of concurrent chats alike.

Works with the openai-agents / openai versions of both virtualenvs (ours and the upstream one): every pydantic
object is built with only the fields its installed class declares.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import time
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

from agents import Model, ModelSettings
from agents.items import ModelResponse
from agents.models.interface import ModelTracing
from agents.usage import Usage
from openai.types import responses as rt
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails


@dataclass(frozen=True)
class Call:
    """A step in which the model calls one function tool."""

    name: str
    arguments: dict[str, Any]


Step = str | Call
_OUTPUT_TYPES = frozenset({"function_call_output", "tool_call_output_item"})
_ids = itertools.count(1)


def _new_id(prefix: str) -> str:
    return f"{prefix}_{next(_ids):08x}"


def _field(item: Any, name: str) -> Any:
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def step_index(model_input: str | Sequence[Any]) -> int:
    """Tool outputs since the last user message: the index of the step this call answers with."""
    if isinstance(model_input, str):
        return 0
    count = 0
    for item in reversed(model_input):
        if _field(item, "type") in _OUTPUT_TYPES:
            count += 1
        elif _field(item, "role") == "user":
            break
    return count


def _build(cls: Any, **fields: Any) -> Any:
    """`cls(**fields)` restricted to the fields this openai version declares."""
    known = cls.model_fields
    return cls(**{key: value for key, value in fields.items() if key in known})


class ResponseFactory:
    """Responses-API objects for one step: output items, or the streamed event sequence."""

    def __init__(self, deltas: int = 10) -> None:
        self.deltas = max(1, deltas)
        self._in = _build(InputTokensDetails, cached_tokens=0, cache_write_tokens=0)
        self._out = _build(OutputTokensDetails, reasoning_tokens=0)

    def text_part(self, text: str) -> Any:
        return _build(rt.ResponseOutputText, type="output_text", text=text, annotations=[], logprobs=[])

    def message(self, text: str, item_id: str | None = None, done: bool = True) -> Any:
        return _build(
            rt.ResponseOutputMessage, id=item_id or _new_id("msg"), type="message", role="assistant",
            status="completed" if done else "in_progress", content=[self.text_part(text)] if done else [],
        )

    def function_call(self, step: Call) -> Any:
        return _build(
            rt.ResponseFunctionToolCall, type="function_call", id=_new_id("fc"), call_id=_new_id("call"),
            name=step.name, arguments=json.dumps(step.arguments), status="completed",
        )

    def items(self, step: Step) -> list[Any]:
        return [self.message(step)] if isinstance(step, str) else [self.function_call(step)]

    def response(self, response_id: str, output: list[Any], done: bool) -> Any:
        usage = None
        if done:
            usage = _build(
                rt.ResponseUsage, input_tokens=10, output_tokens=5, total_tokens=15,
                input_tokens_details=self._in, output_tokens_details=self._out,
            )
        return _build(
            rt.Response, id=response_id, object="response", created_at=time.time(), model="fake", output=output,
            tools=[], tool_choice="auto", parallel_tool_calls=True, status="completed" if done else "in_progress",
            usage=usage,
        )

    def events(self, step: Step) -> list[Any]:
        """response.created, the item's events (text deltas or call arguments), response.completed."""
        response_id, seq = _new_id("resp"), itertools.count()
        created = self.response(response_id, [], done=False)
        out: list[Any] = [_build(rt.ResponseCreatedEvent, type="response.created", response=created,
                                 sequence_number=next(seq))]
        item = self._text_events(step, out, seq) if isinstance(step, str) else self._call_events(step, out, seq)
        out.append(_build(rt.ResponseOutputItemDoneEvent, type="response.output_item.done", item=item,
                          output_index=0, sequence_number=next(seq)))
        out.append(_build(rt.ResponseCompletedEvent, type="response.completed",
                          response=self.response(response_id, [item], done=True), sequence_number=next(seq)))
        return out

    def _text_events(self, text: str, out: list[Any], seq: Any) -> Any:
        item_id = _new_id("msg")
        where = {"item_id": item_id, "output_index": 0, "content_index": 0}
        out.append(_build(rt.ResponseOutputItemAddedEvent, type="response.output_item.added",
                          item=self.message("", item_id, done=False), output_index=0, sequence_number=next(seq)))
        out.append(_build(rt.ResponseContentPartAddedEvent, type="response.content_part.added",
                          part=self.text_part(""), sequence_number=next(seq), **where))
        size, extra = divmod(len(text), self.deltas)
        start = 0
        for index in range(self.deltas):  # `deltas` nearly equal pieces
            end = start + size + (index < extra)
            out.append(_build(rt.ResponseTextDeltaEvent, type="response.output_text.delta",
                              delta=text[start:end], logprobs=[], sequence_number=next(seq), **where))
            start = end
        out.append(_build(rt.ResponseTextDoneEvent, type="response.output_text.done", text=text, logprobs=[],
                          sequence_number=next(seq), **where))
        out.append(_build(rt.ResponseContentPartDoneEvent, type="response.content_part.done",
                          part=self.text_part(text), sequence_number=next(seq), **where))
        return self.message(text, item_id)

    def _call_events(self, step: Call, out: list[Any], seq: Any) -> Any:
        item = self.function_call(step)
        pending = item.model_copy(update={"arguments": "", "status": "in_progress"})
        out.append(_build(rt.ResponseOutputItemAddedEvent, type="response.output_item.added", item=pending,
                          output_index=0, sequence_number=next(seq)))
        out.append(_build(rt.ResponseFunctionCallArgumentsDeltaEvent, type="response.function_call_arguments.delta",
                          item_id=item.id, output_index=0, delta=item.arguments, sequence_number=next(seq)))
        out.append(_build(rt.ResponseFunctionCallArgumentsDoneEvent, type="response.function_call_arguments.done",
                          item_id=item.id, output_index=0, arguments=item.arguments, name=item.name,
                          sequence_number=next(seq)))
        return item


class FakeModel(Model):
    """`agents.Model` playing `steps`; `latency` seconds are awaited before each response (0: no await at all)."""

    def __init__(self, *steps: Step, latency: float = 0.0, deltas: int = 10) -> None:
        self.steps = steps
        self.latency = latency
        self.factory = ResponseFactory(deltas)
        self.calls = 0

    def _step(self, model_input: str | Sequence[Any]) -> Step:
        index = step_index(model_input)
        return self.steps[index] if index < len(self.steps) else "[script exhausted]"

    async def get_response(self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> ModelResponse:
        self.calls += 1
        if self.latency:
            await asyncio.sleep(self.latency)
        usage = Usage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
        return ModelResponse(output=self.factory.items(self._step(input)), usage=usage, response_id=_new_id("resp"))

    async def stream_response(  # type: ignore[override]
        self, system_instructions: Any, input: Any, *args: Any, **kwargs: Any
    ) -> AsyncIterator[Any]:
        self.calls += 1
        if self.latency:
            await asyncio.sleep(self.latency)
        for event in self.factory.events(self._step(input)):
            yield event


# -- the physical limit: the same awaits with nothing around them ------------------------------------------------

_CALL_ARGS: tuple[Any, ...] = ()


def inputs_for_steps(steps: int) -> list[list[dict[str, Any]]]:
    """Inputs that make a model answer with step 0, 1, ... (a user message plus k call/output pairs)."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "Please do the task."}]
    out = []
    for k in range(steps):
        out.append(list(items))
        items += [{"type": "function_call", "call_id": f"c{k}", "name": "t", "arguments": "{}"},
                  {"type": "function_call_output", "call_id": f"c{k}", "output": "ok"}]
    return out


async def await_model(model: FakeModel, model_input: list[Any], stream: bool) -> int:
    """One model call as a runner makes it, and nothing else. Returns the number of stream events."""
    global _CALL_ARGS
    if not _CALL_ARGS:
        _CALL_ARGS = (ModelSettings(), [], None, [], ModelTracing.DISABLED)
    kwargs = {"previous_response_id": None, "conversation_id": None, "prompt": None}
    if not stream:
        await model.get_response(None, model_input, *_CALL_ARGS, **kwargs)
        return 0
    events = 0
    async for _ in model.stream_response(None, model_input, *_CALL_ARGS, **kwargs):
        events += 1
    return events
