"""Scripted models for tests: play a script of replies and tool calls, record every input (public helpers)."""

from __future__ import annotations

import itertools
import json
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from agents import AgentOutputSchemaBase, Handoff, Model, ModelResponse, ModelSettings, Tool, Usage
from agents.models.interface import ModelTracing
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFunctionCallArgumentsDeltaEvent,
    ResponseFunctionCallArgumentsDoneEvent,
    ResponseFunctionToolCall,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
    ResponseOutputText,
    ResponseStreamEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
    ResponseUsage,
)
from openai.types.responses.response_usage import InputTokensDetails, OutputTokensDetails
from pydantic import BaseModel

__all__ = [
    "Fail",
    "ModelCall",
    "ScriptExhausted",
    "ScriptedModel",
    "Step",
    "Text",
    "ToolCall",
    "send_message",
]

_ids = itertools.count(1)
_RUN = uuid.uuid4().hex[:8]  # ids stay unique across processes sharing one store, as the real API's are


@dataclass(frozen=True)
class Text:
    """A reply with this text (a plain `str` step means the same)."""

    text: str


@dataclass(frozen=True)
class ToolCall:
    """The model calls tool `name` with `arguments` (a dict, or a raw string to test malformed JSON)."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)

    @property
    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass(frozen=True)
class Fail:
    """The model call raises `error`; when streamed, after streaming `partial_text` first."""

    error: BaseException
    partial_text: str = ""


def send_message(
    recipient: str, message: str, additional_instructions: str | None = None, attachments: list[str] | None = None
) -> ToolCall:
    """A `send_message` call as the model would make it; `attachments`: ids of attachments it passes on."""
    arguments: dict[str, Any] = {
        "recipient_agent": recipient, "message": message, "additional_instructions": additional_instructions,
    }
    if attachments is not None:
        arguments["attachments"] = attachments
    return ToolCall("send_message", arguments)


Step: TypeAlias = "str | Text | ToolCall | Fail | BaseModel | Sequence[str | ToolCall | Text | BaseModel]"
"""One model response. A list means several output items at once (e.g. parallel tool calls). Any other
Responses-API output item (a `ResponseReasoningItem`, a hosted web search call, an `McpApprovalRequest`...) is
returned as it is."""


@dataclass(kw_only=True)
class ModelCall:
    """What the model was asked, as recorded by ScriptedModel."""

    system_instructions: str | None
    input: list[dict[str, Any]]
    tools: list[Tool]
    model_settings: ModelSettings
    output_schema: AgentOutputSchemaBase | None
    stream: bool
    prompt: Any = None

    @property
    def tool_names(self) -> list[str]:
        return [tool.name for tool in self.tools]

    def tool_schema(self, name: str) -> dict[str, Any]:
        for tool in self.tools:
            if tool.name == name:
                schema: dict[str, Any] = getattr(tool, "params_json_schema", {})
                return schema
        raise KeyError(f"no tool named {name!r}; tools were {self.tool_names}")

    @property
    def last_user_message(self) -> str:
        """The text of the last user message (of a list of parts: its text parts, one per line)."""
        for item in reversed(self.input):
            if item.get("role") == "user":
                content = item.get("content")
                if isinstance(content, str):
                    return content
                if isinstance(content, list) and all(isinstance(part, dict) for part in content):
                    return "\n".join(str(part.get("text")) for part in content if part.get("type") == "input_text")
                return json.dumps(content)
        return ""

    @property
    def tool_outputs(self) -> list[str]:
        """Outputs of tool calls since the last user message, oldest first."""
        outputs: list[str] = []
        for item in reversed(self.input):
            if item.get("role") == "user":
                break
            if item.get("type") == "function_call_output":
                outputs.append(str(item.get("output")))
        return outputs[::-1]


class ScriptExhausted(AssertionError):
    """The model was called more times than its script has steps."""


Script: TypeAlias = "Sequence[Step] | Callable[[ModelCall], Step]"


class ScriptedModel(Model):
    """An `agents.Model` that plays a script, in `get_response` and `stream_response` alike.

    `ScriptedModel(["hello"])` answers once; `ScriptedModel([send_message("Dev", "do it"), "done"])` delegates
    and then answers; `ScriptedModel(lambda call: f"echo {call.last_user_message}")` computes each reply.
    `ScriptedModel.each_turn([...])` restarts the script at every new user message, so one model can serve
    many turns and concurrent chats. Every call is recorded in `calls`.
    """

    def __init__(
        self,
        script: Script,
        *,
        name: str = "scripted-model",
        input_tokens: int = 10,
        output_tokens: int = 5,
    ) -> None:
        self.name = name
        self.calls: list[ModelCall] = []
        self._script = script
        self._per_turn = False
        self._input_tokens = input_tokens
        self._output_tokens = output_tokens

    @classmethod
    def each_turn(cls, steps: Sequence[Step], **kwargs: Any) -> ScriptedModel:
        """Step k of every turn is chosen by the number of tool outputs since the last user message."""
        model = cls(steps, **kwargs)
        model._per_turn = True
        return model

    # -- choosing the step ------------------------------------------------------------------------
    def _record(self, system: str | None, input: str | list[Any], settings: ModelSettings, tools: list[Tool],
                schema: AgentOutputSchemaBase | None, stream: bool, prompt: Any) -> ModelCall:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else [dict(item) for item in input]
        call = ModelCall(system_instructions=system, input=items, tools=list(tools), model_settings=settings,
                         output_schema=schema, stream=stream, prompt=prompt)
        self.calls.append(call)
        return call

    def _step(self, call: ModelCall) -> Step:
        script = self._script
        if callable(script):
            return script(call)
        index = len(call.tool_outputs) if self._per_turn else len(self.calls) - 1
        if index >= len(script):
            raise ScriptExhausted(
                f"{self.name} was called {index + 1} times but its script has {len(script)} steps; "
                f"last user message: {call.last_user_message!r}"
            )
        return script[index]

    # -- building Responses-API objects -----------------------------------------------------------
    def _usage(self) -> ResponseUsage:
        return ResponseUsage(
            input_tokens=self._input_tokens,
            input_tokens_details=InputTokensDetails.model_validate(
                {name: 0 for name in ("cached_tokens", "cache_write_tokens") if name in InputTokensDetails.model_fields}
            ),
            output_tokens=self._output_tokens,
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
            total_tokens=self._input_tokens + self._output_tokens,
        )

    def _items(self, step: Step) -> list[Any]:
        if isinstance(step, Fail):
            raise step.error
        if isinstance(step, str):
            step = Text(step)
        parts = [step] if isinstance(step, (Text, ToolCall, BaseModel)) else list(step)
        items: list[Any] = []
        for part in parts:
            if isinstance(part, str):
                part = Text(part)
            if isinstance(part, Text):
                items.append(_message(part.text))
            elif isinstance(part, ToolCall):
                number = next(_ids)
                items.append(ResponseFunctionToolCall(
                    type="function_call", id=f"fc_{_RUN}_{number}", call_id=f"call_{_RUN}_{number}", name=part.name,
                    arguments=part.arguments_json, status="completed",
                ))
            elif isinstance(part, BaseModel) and isinstance(getattr(part, "type", None), str):
                items.append(part)  # any other output item, as the API would return it
            else:
                raise TypeError(
                    f"{self.name}: a script step must be str, Text, ToolCall, Fail, an output item or a list; "
                    f"got {part!r}"
                )
        return items

    # -- agents.Model -----------------------------------------------------------------------------
    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> ModelResponse:
        call = self._record(system_instructions, input, model_settings, tools, output_schema, False, prompt)
        output = self._items(self._step(call))
        usage = Usage(requests=1, input_tokens=self._input_tokens, output_tokens=self._output_tokens,
                      total_tokens=self._input_tokens + self._output_tokens)
        return ModelResponse(output=list(output), usage=usage, response_id=f"resp_{next(_ids)}")

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
    ) -> AsyncIterator[ResponseStreamEvent]:
        call = self._record(system_instructions, input, model_settings, tools, output_schema, True, prompt)
        step = self._step(call)
        events = _Events(f"resp_{next(_ids)}")
        yield events.created()
        if isinstance(step, Fail):
            if step.partial_text:
                for event in events.text(_message(step.partial_text), complete=False):
                    yield event
            raise step.error
        output = self._items(step)
        for item in output:
            if isinstance(item, ResponseOutputMessage):
                stream = events.text(item)
            elif isinstance(item, ResponseFunctionToolCall):
                stream = events.call(item)
            else:
                stream = events.item(item)
            for event in stream:
                yield event
        yield events.completed(output, self._usage())


def _message(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        type="message", id=f"msg_{_RUN}_{next(_ids)}", role="assistant", status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[], logprobs=[])],
    )


_WORDS = re.compile(r"\s*\S+\s*|\s+")


class _Events:
    """The Responses-API event sequence, numbered, for one streamed response."""

    def __init__(self, response_id: str) -> None:
        self.response_id = response_id
        self.sequence = itertools.count()
        self.index = 0

    def _response(
        self, output: list[Any], status: Literal["completed", "in_progress"], usage: ResponseUsage | None
    ) -> Response:
        return Response(
            id=self.response_id, created_at=time.time(), model="scripted-model", object="response", output=output,
            tool_choice="auto", tools=[], parallel_tool_calls=True, status=status, usage=usage,
        )

    def created(self) -> ResponseCreatedEvent:
        return ResponseCreatedEvent(
            type="response.created", sequence_number=next(self.sequence),
            response=self._response([], "in_progress", None),
        )

    def completed(self, output: list[Any], usage: ResponseUsage) -> ResponseCompletedEvent:
        return ResponseCompletedEvent(
            type="response.completed", sequence_number=next(self.sequence),
            response=self._response(output, "completed", usage),
        )

    def text(self, message: ResponseOutputMessage, complete: bool = True) -> list[ResponseStreamEvent]:
        index, seq = self.index, self.sequence
        self.index += 1
        text = message.content[0].text if message.content and isinstance(message.content[0], ResponseOutputText) else ""
        started = message.model_copy(update={"content": [], "status": "in_progress"})
        empty = ResponseOutputText(type="output_text", text="", annotations=[], logprobs=[])
        events: list[ResponseStreamEvent] = [
            ResponseOutputItemAddedEvent(type="response.output_item.added", item=started, output_index=index,
                                         sequence_number=next(seq)),
            ResponseContentPartAddedEvent(type="response.content_part.added", item_id=message.id, output_index=index,
                                          content_index=0, part=empty, sequence_number=next(seq)),
        ]
        for chunk in _WORDS.findall(text):
            events.append(ResponseTextDeltaEvent(type="response.output_text.delta", item_id=message.id,
                                                 output_index=index, content_index=0, delta=chunk, logprobs=[],
                                                 sequence_number=next(seq)))
        if not complete:
            return events
        events += [
            ResponseTextDoneEvent(type="response.output_text.done", item_id=message.id, output_index=index,
                                  content_index=0, text=text, logprobs=[], sequence_number=next(seq)),
            ResponseContentPartDoneEvent(type="response.content_part.done", item_id=message.id, output_index=index,
                                         content_index=0, part=message.content[0], sequence_number=next(seq)),
            ResponseOutputItemDoneEvent(type="response.output_item.done", item=message, output_index=index,
                                        sequence_number=next(seq)),
        ]
        return events

    def item(self, item: Any) -> list[ResponseStreamEvent]:
        """Any other output item: added, then done."""
        index, seq = self.index, self.sequence
        self.index += 1
        return [
            ResponseOutputItemAddedEvent(type="response.output_item.added", item=item, output_index=index,
                                         sequence_number=next(seq)),
            ResponseOutputItemDoneEvent(type="response.output_item.done", item=item, output_index=index,
                                        sequence_number=next(seq)),
        ]

    def call(self, item: ResponseFunctionToolCall) -> list[ResponseStreamEvent]:
        index, seq = self.index, self.sequence
        self.index += 1
        started = item.model_copy(update={"arguments": "", "status": "in_progress"})
        return [
            ResponseOutputItemAddedEvent(type="response.output_item.added", item=started, output_index=index,
                                         sequence_number=next(seq)),
            ResponseFunctionCallArgumentsDeltaEvent(type="response.function_call_arguments.delta",
                                                    item_id=item.id or "", output_index=index, delta=item.arguments,
                                                    sequence_number=next(seq)),
            ResponseFunctionCallArgumentsDoneEvent(type="response.function_call_arguments.done",
                                                   item_id=item.id or "", output_index=index,
                                                   arguments=item.arguments, sequence_number=next(seq)),
            ResponseOutputItemDoneEvent(type="response.output_item.done", item=item, output_index=index,
                                        sequence_number=next(seq)),
        ]
