"""One model call, blocking or streamed: hooks, retries, the model's span, usage, and the response's items stored."""

from __future__ import annotations

import types
from collections.abc import Awaitable, Generator, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from agents import ModelResponse, ModelSettings, Usage
from agents.models.interface import ModelTracing
from openai.types.responses import Response

from .._base import _sdk
from .._base._errors import ModelError
from .._base._events import Event, HostedItem, raw_model_event, text_delta
from .._base._items import stored_item
from .._model._retry import Attempts, StreamCall
from .._telemetry._watch import ModelCallWatch
from ._channel import Relay, to_reader
from ._history import model_history
from ._outputs import HOSTED_ACTIVITY, unusual_items
from ._setup import Setup
from ._state import Run, Turn
from ._tracing import current

_UNTRACED, _TRACED = ModelTracing.DISABLED, ModelTracing.ENABLED  # a module global is read faster than an Enum member
_USUAL = frozenset({"message", "function_call"})


async def call_model(turn: Turn, setup: Setup, settings: ModelSettings, stream: bool) -> Sequence[Any]:
    """The model's response to the thread, its items stored; returns its output items. A watched turn's call is
    timed and spanned (`_telemetry`) from its first attempt to its usage. Streamed and blocking calls share every
    line but the attempt: a streamed one hands each event to the turn's reader as it arrives (and is retried only
    until the first one has), a blocking one awaits the response."""
    agent, run = turn.agent, turn.run
    if turn.held is not None:  # the last response asked for another call without tools (a hosted call, say)
        stored = turn.store_held()
        if stored is not None:
            await stored
    history: Any = model_history(turn)  # plain dicts in Responses-API input shape
    hooks = agent.hooks
    if hooks is not None:
        await hooks.on_llm_start(run.context(), agent, setup.instructions, history)
    prompt = None if agent.prompt is None else await agent.get_prompt(run.context())
    attempts = Attempts() if stream else None
    watch = None if run.watch is None else run.watch.model_call(turn, setup.usage_key[1])
    try:
        if turn.span is not None:
            response = await _traced(turn, setup, settings, history, _TRACED, prompt, attempts)
        else:  # no span to make current: no context manager entered around the call either
            try:
                response = await _attempt(turn, setup, settings, history, _UNTRACED, prompt, attempts)
            except Exception as error:
                response = await setup.model.retry_after(
                    error, partial(_attempt, turn, setup, settings, history, _UNTRACED, prompt, attempts), attempts)
    except BaseException as failure:
        _call_failed(turn, watch, failure)
        raise
    del history  # the thread's list may have been lent (`model_history`): held by nobody, it is not copied
    usage = response.usage  # a streamed response that reported none: what its adapter says it stands for
    usage = Usage(requests=_sdk.requests_without_usage(response)) if usage is None else usage
    run.record(setup.usage_key, usage)
    if watch is not None:
        watch.end(usage)
    run.responses.append((response, usage))
    if hooks is not None:
        await hooks.on_llm_end(run.context(), agent, _as_model_response(response, usage))
    output = response.output
    usual = len(output) == 1 and output[0].type in _USUAL
    items = [stored_item(output[0])] if usual else unusual_items(output, setup.tools)
    if agent.output_guardrails:  # stored by the loop: now if the response asks for more, else once they pass
        turn.held = items
    else:
        stored = turn.thread.add(items)
        if stored is not None:
            await stored
    if not usual and turn.emit is not None:
        await emit_hosted(turn, items)
    return output


def _call_failed(turn: Turn, watch: ModelCallWatch | None, failure: BaseException) -> None:
    """A call that got no response: its watch ended with the failure; a model's error told the chat and depth (the
    retry wrapper knows the agent only)."""
    if isinstance(failure, ModelError):
        failure.chat_id, failure.depth = turn.run.chat_id, turn.depth
    if watch is not None:
        watch.end(None, failure)


async def _traced(
    turn: Turn, setup: Setup, settings: ModelSettings, history: Any, tracing: ModelTracing, prompt: Any,
    attempts: Attempts | None,
) -> ModelResponse | Response:
    """`call_model`'s attempts with the agent's span current: the model's response span nests under it."""
    call = (turn, setup, settings, history, tracing, prompt, attempts)
    with _model_span(turn):
        try:
            return await _attempt(*call)
        except Exception as error:
            return await setup.model.retry_after(error, partial(_attempt, *call), attempts)


def _attempt(
    turn: Turn, setup: Setup, settings: ModelSettings, history: Any, tracing: ModelTracing, prompt: Any,
    attempts: Attempts | None,
) -> Awaitable[ModelResponse | Response]:
    """One attempt: blocking (`attempts` None), the model's response; streamed, its events read as they come."""
    model, instructions, tools, schema = setup.model, setup.instructions, setup.tools, setup.schema
    if attempts is None:
        return model.attempt(instructions, history, settings, tools, schema, [], tracing, prompt=prompt)
    stream = model.open_stream(instructions, history, settings, tools, schema, [], tracing, prompt=prompt)
    return _streamed(turn, stream, attempts)


async def _streamed(turn: Turn, stream: StreamCall, attempts: Attempts) -> Response:
    """A streamed attempt: every event to the reader (`raw`, and `text_delta` for text), the completed response.

    With the reader at the other end of the turn (`to_reader`), the stream goes to `drive` whole (`Relay`), which
    reads it; otherwise (hooks, or a call in a task of its own) each event is emitted here."""
    reading = _Reading(turn, stream, attempts)
    emit = turn.emit
    try:
        if emit is to_reader:
            await Relay(stream.events, reading.step)
        else:
            emit = emit if emit is not None else _nowhere
            async for event in stream.events:
                made = reading.step(event)
                if isinstance(made, Event):
                    await emit(made)
                else:
                    for each in made:
                        await emit(each)
    finally:
        await stream.aclose()
    if reading.completed is None:
        raise ModelError("The model's stream ended before response.completed.", agent=reading.name,
                         chat_id=reading.chat_id, depth=reading.depth)
    return reading.completed


class _Reading:
    """What a streamed attempt makes of each event as it arrives, and the completed response it ends with."""

    __slots__ = ("attempts", "caller", "chat_id", "completed", "depth", "name", "stream")

    def __init__(self, turn: Turn, stream: StreamCall, attempts: Attempts) -> None:
        self.name, self.caller, self.depth, self.chat_id = turn.agent.name, turn.caller, turn.depth, turn.run.chat_id
        self.stream, self.attempts = stream, attempts
        self.completed: Response | None = None

    def step(self, event: Any) -> Event | Iterable[Event]:
        """The reader's events for one of the model's: the event itself, and a `text_delta` for text. A failure
        event is handed over before the error is raised."""
        if not self.attempts.started:  # from here on, what failed cannot be tried again
            self.attempts.started = True
            self.stream.began()
        raw = raw_model_event(self.name, self.caller, self.depth, self.chat_id, event)
        kind = event.type
        if kind == "response.output_text.delta":
            return raw, text_delta(self.name, self.caller, self.depth, self.chat_id, event.delta)
        if kind in _LAST_EVENTS:
            if kind == "response.failed" or kind == "error":
                return _then_raise(raw, ModelError(
                    _stream_failure(event), agent=self.name, chat_id=self.chat_id, depth=self.depth))
            self.completed = event.response
        return raw


def _then_raise(event: Event, error: ModelError) -> Iterator[Event]:
    yield event
    raise error


_LAST_EVENTS = frozenset({"response.completed", "response.incomplete", "response.failed", "error"})


@types.coroutine
def _nowhere(event: Event) -> Generator[None, None, None]:
    """Where a streamed call's events go when nobody reads them: `await _nowhere(event)` returns at once."""
    return
    yield


def _stream_failure(event: Any) -> str:
    error = getattr(getattr(event, "response", None), "error", None) or event
    message = getattr(error, "message", None) or str(error)
    return f"The model failed while streaming: {message}"


def _as_model_response(response: ModelResponse | Response, usage: Any) -> ModelResponse:
    """What `on_llm_end` gets: a streamed response as the SDK's ModelResponse, token details included."""
    if isinstance(response, ModelResponse):
        return response
    return ModelResponse(output=list(response.output), response_id=response.id, usage=usage if isinstance(
        usage, Usage) else Usage(
        requests=1, input_tokens=usage.input_tokens, output_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens, input_tokens_details=usage.input_tokens_details,
        output_tokens_details=usage.output_tokens_details,
    ))


def model_responses(run: Run) -> list[ModelResponse]:
    """Every model response of the turn, nested agents' included, as `on_llm_end` got it: `RunResult.raw_responses`
    (converted only when read)."""
    return [_as_model_response(response, usage) for response, usage in run.responses]


def _model_span(turn: Turn) -> AbstractContextManager[Any]:
    """The agent span made current around the model call."""
    assert turn.run.trace is not None  # a turn has a span only when it is traced
    return current(turn.run.trace, turn.span)


async def emit_hosted(turn: Turn, items: list[dict[str, Any]]) -> None:
    """A `hosted_item` event for each hosted tool item of a response, or answer to an MCP approval request."""
    emit = turn.emit
    assert emit is not None
    for item in items:
        kind = item.get("type")
        if kind in HOSTED_ACTIVITY or kind in _MCP_APPROVAL_KINDS:
            await emit(HostedItem(
                agent=turn.agent.name, caller=turn.caller, depth=turn.depth, chat_id=turn.run.chat_id,
                kind=str(kind), item=item,
            ))


_MCP_APPROVAL_KINDS = frozenset({"mcp_approval_request", "mcp_approval_response"})
