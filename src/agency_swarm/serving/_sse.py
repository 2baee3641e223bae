"""Server-Sent Events: a streamed turn pumped in its own task, and the response that sends its events."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any

import anyio
from fastapi.encoders import jsonable_encoder
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .._base._errors import TurnLockLost
from .._base._events import Event, RawModelEvent
from .._base._redact import secret_free_logger
from .._turn._results import ResponseStream
from ._bodies import ErrorDetail, error_status, id_for_header, result_response
from ._text import utf8

logger = secret_free_logger("agency_swarm.serving")

SSE_KEEPALIVE_SECONDS = 15.0
"""A comment line is sent when a stream has been silent this long, so proxies keep the connection open."""
RAW = RawModelEvent.type
SSE_BUFFER_BYTES = 256 * 1024
"""Bytes of events held for one reader that has not taken them yet (one larger event is held alone). Beyond it the
turn waits for the reader, at most the write timeout; docs/design/serving.md says why this number."""
SSE_WRITE_TIMEOUT_SECONDS = 30.0
"""A reader that takes nothing for this long is dropped: its stream ends, the turn goes on without it."""
SEND_PIECE_BYTES = 64 * 1024
"""A larger event goes to the server in pieces: uvicorn buffers what the socket does not take (stopping at 64 KiB,
but only after the whole write), so a stalled reader then holds one piece there rather than one whole event."""
KEEP_ALIVE = b": keep-alive\n\n"
LOCK_LOST = (
    "This worker lost the chat's turn lock (its session with the store ended), so the turn was stopped where it "
    "stood; what it stored stays. Resume the chat or send the message again."
)


def _sse_chunk(kind: str, data: Any, event_id: int | None = None) -> bytes:
    head = "" if event_id is None else f"id: {event_id}\n"
    return utf8(f"{head}event: {kind}\ndata: {json.dumps(data, default=jsonable_encoder, ensure_ascii=False)}\n\n")


def error_chunk(exc: BaseException, chat_id: str) -> bytes:
    """The `error` event ending a stream whose turn failed after the response began (logged when it is a 5xx)."""
    status, detail = error_status(exc)
    if isinstance(exc, TurnLockLost):  # not "the store is unavailable": the lock's session ended, the store is up
        detail = ErrorDetail(type=detail.type, message=LOCK_LOST)
    if status >= 500:
        logger.error("Chat %r (stream): %s", chat_id, detail.type, exc_info=exc)
    return _sse_chunk("error", {"type": "error", "error": detail.model_dump(exclude_none=True)})


class Outbox:
    """The chunks a turn produced that its reader has not taken yet: at most `limit` bytes (or one larger chunk).

    The turn puts, the response takes; `drop` (the reader left, or took nothing for the write timeout) discards
    what is held and everything put later, so a reader that is gone holds no memory and no turn.
    """

    def __init__(self, limit: int = SSE_BUFFER_BYTES) -> None:
        self.limit = limit
        self.size = 0
        self.ended = False  # the turn's last chunk is in
        self.dropped = False
        self._chunks: deque[bytes] = deque()
        self._filled = asyncio.Event()
        self._drained = asyncio.Event()

    def has_room(self, size: int) -> bool:
        return self.dropped or not self._chunks or self.size + size <= self.limit

    def put(self, chunk: bytes) -> None:
        if not self.dropped:
            self._chunks.append(chunk)
            self.size += len(chunk)
            self._filled.set()

    def end(self) -> None:
        self.ended = True
        self._filled.set()

    def drop(self) -> None:
        self.dropped = True
        self._chunks.clear()
        self.size = 0
        self._filled.set()
        self._drained.set()

    async def take(self) -> bytes | None:
        """The next chunk; a keep-alive comment after SSE_KEEPALIVE_SECONDS without one; None at the end."""
        while not self._chunks:
            if self.ended or self.dropped:
                return None
            self._filled.clear()
            try:
                await asyncio.wait_for(self._filled.wait(), SSE_KEEPALIVE_SECONDS)
            except TimeoutError:
                return KEEP_ALIVE
        chunk = self._chunks.popleft()
        self.size -= len(chunk)
        self._drained.set()
        return chunk

    async def room(self, size: int) -> None:
        """Until `size` more bytes fit (or the reader is dropped)."""
        while not self.has_room(size):
            self._drained.clear()
            await self._drained.wait()


class StreamTurns:
    """The streamed turns an app runs: each in its own task, which must be referenced until it ends, and waited
    for when the app shuts down (before the store closes under them); and their readers' write timeout."""

    def __init__(self, write_timeout: float = SSE_WRITE_TIMEOUT_SECONDS) -> None:
        self.write_timeout = write_timeout
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self, pump: EventPump) -> None:
        task = asyncio.create_task(pump.run())
        pump.task = task
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def wait(self) -> None:
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)


class Feed:
    """What one reader is sent: its Outbox, filled by a producer that waits for room at most the write timeout (then
    the reader is dropped: its buffer is freed, later chunks go nowhere, and the producer need not wait again)."""

    def __init__(self, chat_id: str, write_timeout: float) -> None:
        self.chat_id, self.write_timeout = chat_id, write_timeout
        self.outbox = Outbox()

    async def put(self, chunk: bytes) -> None:
        if not self.outbox.has_room(len(chunk)):
            await self._wait_for_room(len(chunk))
        self.outbox.put(chunk)

    async def _wait_for_room(self, size: int) -> None:
        try:
            async with asyncio.timeout(self.write_timeout):
                await self.outbox.room(size)
        except TimeoutError:
            self.reader_gone(f"took nothing for {self.write_timeout:g} s")

    def reader_gone(self, why: str | None = None) -> None:
        if not self.outbox.dropped:
            self.outbox.drop()
            if why is not None:
                logger.warning("Chat %r: a stream's reader %s and was dropped; the turn goes on", self.chat_id, why)


class EventPump(Feed):
    """Runs a streamed turn in a task of its own and puts its events, as SSE chunks, in its reader's Outbox.

    The task that takes the chat's lock is the one that runs the turn (the store cancels it if the lock's session
    ends): here, not the response's, so a lost lock stops the turn, which ends the stream with an `error` event. The
    turn's life does not depend on its reader: a reader that leaves or is dropped stops receiving, the turn runs to
    its end and releases the chat. A full Outbox makes the turn wait, at most `write_timeout`.
    """

    def __init__(self, stream: ResponseStream, chat_id: str, *, raw: bool, write_timeout: float) -> None:
        super().__init__(chat_id, write_timeout)
        self._stream, self._raw = stream, raw
        self.opened: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.opened.add_done_callback(_retrieved)  # a request that ended first never reads the failure
        self.task: asyncio.Task[None] | None = None
        self._running = False

    async def run(self) -> None:
        try:
            async with self._stream:  # leaving it calls stream.aclose(): a failed turn is cleaned up and saved
                events = aiter(self._stream)
                self._running = True
                await self._first(events)
                async for event in events:
                    await self._event(event)
                self._running = False
            if not self._stream.cancelled:  # a cancelled turn's last event was `cancelled`
                await self.put(_sse_chunk("done", {"type": "done", "result": self._result()}))
        except Exception as exc:
            self._running = False
            if not self.opened.done():  # before the first event: the route answers with the failure's status
                self.opened.set_exception(exc)
                return
            await self.put(error_chunk(exc, self.chat_id))
        finally:
            self._running = False
            if not self.opened.done():
                self.opened.set_exception(RuntimeError("The turn was stopped before its first event."))
            self.outbox.end()

    async def _first(self, events: AsyncIterator[Event]) -> None:
        """The first event (a failure before it, such as a paused chat, gets a real status), then the response."""
        try:
            first: Event | None = await anext(events)
        except StopAsyncIteration:
            first = None
        self.opened.set_result(None)
        if first is not None:
            await self._event(first)

    def _result(self) -> dict[str, Any]:
        result: dict[str, Any] = result_response(self._stream.result).model_dump(mode="json")
        return result

    async def _event(self, event: Event) -> None:
        if self._raw or event.type != RAW:  # most of a short turn's bytes: sent only when asked for
            await self.put(_sse_chunk(event.type, event.to_dict()))

    async def _wait_for_room(self, size: int) -> None:
        """A cancellation arriving while the turn waits for its reader (the lock's session ended: the store cancels
        this task) is handed on to the turn, at its next await."""
        try:
            await super()._wait_for_room(size)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is None or not self._running:
                raise
            task.uncancel()
            task.cancel()  # the turn, suspended at an event, gets it at its next await: it stops as it should


class EventStreamResponse(StreamingResponse):
    """`text/event-stream` of what a Feed holds. Its producer runs elsewhere (a turn in its own task), or with the
    response (`producer`: it ends with it). A reader that leaves, or takes nothing for the write timeout, is
    dropped; the turn goes on, and what it stores stays readable."""

    media_type = "text/event-stream"

    def __init__(
        self, feed: Feed, *, headers: Mapping[str, str] | None = None,
        producer: Callable[[], Coroutine[Any, Any, None]] | None = None,
    ) -> None:
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no", **(headers or {})}
        super().__init__(_nothing(), headers=headers)
        self._feed, self._producer, self._write_timeout = feed, producer, feed.write_timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Always watch for the client leaving, whatever ASGI version the server speaks: a turn waiting on a slow
        # model sends nothing for a long time, so a failing send() would notice too late.
        try:
            async with anyio.create_task_group() as group:

                async def stream_then_stop() -> None:
                    with contextlib.suppress(OSError):  # the client left while we wrote
                        await self.stream_response(send)
                    group.cancel_scope.cancel()

                if self._producer is not None:
                    group.start_soon(self._producer)
                group.start_soon(stream_then_stop)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            self._feed.reader_gone()  # a no-op once the last chunk was taken

    async def stream_response(self, send: Send) -> None:
        """Each chunk sent within the write timeout, or the reader is dropped and the response ends unfinished
        (the server then closes the connection)."""
        outbox = self._feed.outbox
        try:
            with anyio.fail_after(self._write_timeout):
                await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
            while (chunk := await outbox.take()) is not None:
                for start in range(0, len(chunk), SEND_PIECE_BYTES):  # the server's write buffer holds one piece
                    with anyio.fail_after(self._write_timeout):
                        piece = chunk[start:start + SEND_PIECE_BYTES]
                        await send({"type": "http.response.body", "body": piece, "more_body": True})
            if outbox.dropped:
                return
            with anyio.fail_after(self._write_timeout):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        except TimeoutError:
            self._feed.reader_gone(f"took nothing for {self._write_timeout:g} s")


def _retrieved(future: asyncio.Future[None]) -> None:
    if not future.cancelled():
        future.exception()


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover - makes this an async generator


async def event_stream(
    stream: ResponseStream, chat_id: str, turns: StreamTurns, *, raw: bool = False
) -> EventStreamResponse:
    """Start the turn up to its first event, so failures before it (paused chat, store down) get a real status.

    `raw`: also send the model's raw Responses-API events (`raw`), which the Python stream always has."""
    pump = EventPump(stream, chat_id, raw=raw, write_timeout=turns.write_timeout)
    turns.start(pump)
    try:
        await asyncio.shield(pump.opened)
    except BaseException:
        pump.reader_gone()  # the request ended before the response began: nobody will read; the turn goes on
        raise
    turn_id = stream.turn_id
    return EventStreamResponse(pump, headers=None if turn_id is None else {"turn-id": id_for_header(turn_id)})
