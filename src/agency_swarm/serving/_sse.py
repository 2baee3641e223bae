"""Server-Sent Events: a streamed turn pumped in its own task, and the response that sends its events."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from fastapi.encoders import jsonable_encoder
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from .._base._events import Event, RawModelEvent
from .._base._redact import secret_free_logger
from .._turn._results import ResponseStream
from ._bodies import error_status, result_response
from ._text import utf8

logger = secret_free_logger("agency_swarm.serving")

SSE_KEEPALIVE_SECONDS = 15.0
"""A comment line is sent when a stream has been silent this long, so proxies keep the connection open."""
RAW = RawModelEvent.type
SSE_QUEUE_EVENTS = 64
"""Events buffered between a running turn and a slow client; beyond this the turn waits for the client."""


def _sse_chunk(kind: str, data: Any) -> bytes:
    return utf8(f"event: {kind}\ndata: {json.dumps(data, default=jsonable_encoder, ensure_ascii=False)}\n\n")


async def queued_chunks(queue: asyncio.Queue[bytes | None]) -> AsyncIterator[bytes]:
    """The chunks put in `queue` until None, with a keep-alive comment whenever it stays empty for a while."""
    while True:
        try:
            chunk = await asyncio.wait_for(queue.get(), SSE_KEEPALIVE_SECONDS)
        except TimeoutError:
            yield b": keep-alive\n\n"
            continue
        if chunk is None:
            return
        yield chunk


class _EventPump:
    """Runs a streamed turn in its own task and hands its events, as SSE chunks, to the response.

    Its own task, because the response's task is cancelled by anyio when the client leaves, and anyio cancels
    every later await of that task too: the turn's clean-up (stored outputs, saved threads, released locks) would be
    cut short. Here a disconnect cancels the turn once, and `stop` waits, shielded, until its clean-up is done.
    """

    def __init__(
        self, stream: ResponseStream, events: AsyncIterator[Event], first: Event | None, chat_id: str, raw: bool
    ) -> None:
        self._stream, self._events, self._first, self._chat_id = stream, events, first, chat_id
        self._raw = raw
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue(SSE_QUEUE_EVENTS)
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            async with self._stream:  # leaving it calls stream.aclose(): a cancelled turn is cleaned up and saved
                if self._first is not None and (self._raw or self._first.type != RAW):
                    await self._queue.put(_sse_chunk(self._first.type, self._first.to_dict()))
                async for event in self._events:
                    if self._raw or event.type != RAW:  # most of a short turn's bytes: sent only when asked for
                        await self._queue.put(_sse_chunk(event.type, event.to_dict()))
            done = {"type": "done", "result": result_response(self._stream.result).model_dump(mode="json")}
            await self._queue.put(_sse_chunk("done", done))
        except Exception as exc:  # the turn failed after the response began: the failure is the last event
            status, detail = error_status(exc)
            if status >= 500:
                logger.error("Chat %r (stream): %s", self._chat_id, detail.type, exc_info=exc)
            await self._queue.put(_sse_chunk("error", {"type": "error", "error": detail.model_dump(exclude_none=True)}))
        await self._queue.put(None)

    def chunks(self) -> AsyncIterator[bytes]:
        return queued_chunks(self._queue)

    async def stop(self) -> None:
        """Cancel the turn if it still runs (the client left) and wait until it has been cleaned up."""
        with anyio.CancelScope(shield=True):
            if self._task is None:  # never started: close the turn its first event opened
                await self._stream.aclose()
                return
            if not self._task.done():
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)


class EventStreamResponse(StreamingResponse):
    """`text/event-stream` of a turn's events; the client leaving cancels the turn (what it stored stays)."""

    media_type = "text/event-stream"

    def __init__(self, pump: _EventPump) -> None:
        super().__init__(pump.chunks(), headers={"cache-control": "no-cache", "x-accel-buffering": "no"})
        self._pump = pump

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        # Always watch for the client leaving, whatever ASGI version the server speaks: a turn waiting on a slow
        # model sends nothing for a long time, so a failing send() would notice too late.
        self._pump.start()
        try:
            async with anyio.create_task_group() as group:

                async def stream_then_stop() -> None:
                    with contextlib.suppress(OSError):  # the client left while we wrote
                        await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(stream_then_stop)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        finally:
            await self._pump.stop()


async def event_stream(stream: ResponseStream, chat_id: str, *, raw: bool = False) -> EventStreamResponse:
    """Start the turn up to its first event, so failures before it (paused chat, store down) get a real status.

    `raw`: also send the model's raw Responses-API events (`raw`), which the Python stream always has."""
    events = aiter(stream)
    try:
        first: Event | None = await anext(events)
    except StopAsyncIteration:
        first = None
    return EventStreamResponse(_EventPump(stream, events, first, chat_id, raw))
