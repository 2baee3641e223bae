"""The event channel: a turn is a coroutine that emits events; `drive` runs it as an async generator of them.

Every agent turn, tool call and send is a plain coroutine, so a nested agent costs a function call, not a stack of
async generators that each event would climb. An event leaves the turn through `await emit(event)`:

- `to_reader` (streaming): the turn yields the event itself; `drive`, which runs the whole turn with `send`, takes
  it and yields it to the reader, then resumes the turn. Any other await (a future, `sleep(0)`) passes through
  `drive` to the task untouched, and what the task sends or throws back goes to the turn.
  A streamed model call read by nobody else hands its whole stream over instead (`Relay`): `drive` reads it and
  yields each event from its own frame.
- `None` (a blocking call without hooks): nobody reads events, so none is built. A blocking turn never emits
  through `to_reader` (hooks are called in place), so blocking calls await the turn coroutine without `drive`.
- a queue (calls running in tasks of their own): the turn's own task takes them from there and emits them.
"""

from __future__ import annotations

import types
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Coroutine, Generator, Iterable
from typing import Any

from .._base._errors import TurnCancelled
from .._base._events import Event
from ._hooks import HookTable, dispatch

TurnStart = Callable[[], Coroutine[Any, Any, object]]
"""Makes a top-level turn's coroutine: `drive` runs it for a stream, a blocking call just awaits it."""

EmitEvent = Callable[[Event], Awaitable[None]]
"""Where a turn's events go: `await emit(event)` returns once the event has been handed over."""


@types.coroutine
def to_reader(event: Event) -> Generator[Event, None, None]:
    """`await to_reader(event)` hands `event` to `drive`, which yields it to the stream's reader.

    The event itself is what the turn yields: no wrapper object per event, and `drive` tells it from a future by
    its type.
    """
    yield event


class _PassThrough:
    """Awaits, in `drive`'s task, what the turn awaited: the task's answer (or exception) returns to the turn."""

    __slots__ = ("awaited",)

    def __init__(self, awaited: Any) -> None:
        self.awaited = awaited

    def __await__(self) -> Generator[Any, Any, Any]:
        return (yield self.awaited)


async def drive(start: TurnStart, finished: Callable[[], None] | None = None) -> AsyncGenerator[Event, None]:
    """Run the turn `start()` makes, yielding the events it emits, in order; call `finished()` once it is over.

    Closing this generator early (the reader broke out) raises `ReaderLeft` in the turn where it stands, at the
    emit it waits on: its clean-up still awaits what it needs (outputs stored, threads saved, locks released), and
    the events it emits meanwhile go nowhere. (Not GeneratorExit: thrown into a coroutine that awaits, Python
    closes the awaited coroutine instead, and a clean-up that awaits would then fail.)
    """
    try:
        turn = start()  # made here, not before: a stream that is never iterated leaves no coroutine unawaited
        send, throw = turn.send, turn.throw
        value: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = send(value) if error is None else throw(error)
            except (StopIteration, ReaderLeft, TurnCancelled):  # over; or its `cancelled` event was the last
                return  # (`result` raises it)
            value = error = None
            if isinstance(yielded, Event):  # the reader gets it; then the turn goes on at once
                try:
                    yield yielded
                except GeneratorExit:
                    break
            elif type(yielded) is Relay:  # read here, each event yielded from this frame; the turn waits
                step, next_event = yielded.step, yielded.events.__anext__
                try:
                    while True:
                        made = step(await next_event())
                        if isinstance(made, Event):
                            yield made
                        else:
                            for event in made:
                                yield event
                except StopAsyncIteration:
                    pass
                except GeneratorExit:  # the reader left: the turn closes the stream where it waits
                    break
                except BaseException as exc:  # the stream failed (or was cancelled): raised where the turn waits
                    error = exc
            else:
                try:
                    value = await _PassThrough(yielded)
                except BaseException as exc:  # cancelled, typically: the turn gets it where it waits
                    error = exc
        await _unwind(send, throw)
    finally:
        if finished is not None:
            finished()


async def _unwind(send: Callable[[Any], Any], throw: Callable[[BaseException], Any]) -> None:
    """The reader left: `ReaderLeft` is raised in the turn, whose clean-up runs to its end; its events go nowhere."""
    value: Any = None
    error: BaseException | None = ReaderLeft()
    while True:
        try:
            yielded = send(value) if error is None else throw(error)
        except (StopIteration, ReaderLeft, TurnCancelled):  # ReaderLeft: only ever thrown in here; the turn is
            return  # cleaned up, the generator closes as asked
        value = error = None
        if type(yielded) is Relay:  # nobody reads a stream opened now
            error = ReaderLeft()
        elif not isinstance(yielded, Event):
            try:
                value = await _PassThrough(yielded)
            except BaseException as exc:
                error = exc


class Relay:
    """A model's stream handed to `drive` whole: `drive` reads it in its own frame and yields to the reader what
    `step` makes of each event, so an event does not climb the turn's stack of coroutines (one frame per nested
    agent, call and send) and back. `await relay` returns once the stream has ended; where the stream or `step`
    failed, or the reader left, that is raised there instead."""

    __slots__ = ("events", "step")

    def __init__(self, events: AsyncIterator[Any], step: Callable[[Any], Event | Iterable[Event]]) -> None:
        self.events = events
        self.step = step

    def __await__(self) -> Generator[Relay, None, None]:
        yield self


class ReaderLeft(BaseException):
    """The stream's reader stopped reading: the turn unwinds (a BaseException, so no `except Exception` stops it)."""


class HookFailed(BaseException):
    """A hook raised: carried past the loop's `except Exception` (which would make it a tool output) to the top."""

    def __init__(self, error: Exception) -> None:
        super().__init__(error)
        self.error = error


def channel(hooks: HookTable | None, streaming: bool) -> EmitEvent | None:
    """The emit of a top-level turn: to the reader, to the agency's hooks, to both, or (blocking, no hooks) none."""
    if hooks is None:
        return to_reader if streaming else None
    table = hooks

    async def to_hooks(event: Event) -> None:
        try:
            await dispatch(table, event)
        except Exception as error:
            raise HookFailed(error) from error
        if streaming:
            await to_reader(event)

    return to_hooks
