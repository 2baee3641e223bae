"""A local OpenAI-compatible HTTP server for tests: scripted replies, recorded requests, injected failures.

It serves `POST /v1/responses` and `POST /v1/chat/completions` on 127.0.0.1 (a free port), as JSON or as
Server-Sent Events when the request says `"stream": true`, in the shapes the real API uses, so the real
`openai.AsyncOpenAI` client and openai-agents' `OpenAIResponsesModel` / `OpenAIChatCompletionsModel` parse
them. FastAPI on uvicorn, in a background thread with its own event loop.

A test queues replies with `server.push(...)`; each request takes the next one (from the queue of its model
name when one was filled with `push(..., model=...)`, else from the shared queue):

- `"text"`, `Text(...)`, `ToolCall(...)`, `send_message(...)` (from agency_swarm.testing), or a list of them
  (one response with several output items), or `Reply([...], usage=Tokens(...))` to set the usage;
- `Status(429)` / `Status(401, echo_key=True)` ...: an HTTP error with the API's error body;
- `Reset()`: the connection is reset (RST) before any response; `Reset(after_events=2)` streams two events first;
- `Hold(reply)`: the request blocks until the test calls `hold.release()` (`await hold.arrived()` waits for it),
  or with `after_events=n` a stream stalls after n events;
  `Hold(required=False)` for a client that times out, which may give up before its request even arrives.

Every request is recorded in `server.requests` (path, headers, JSON body, raw bytes).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import socket
import struct
import threading
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from agency_swarm.testing import Text, ToolCall

CREATED_AT = 1_700_000_000


@dataclass(frozen=True, kw_only=True)
class Tokens:
    """The usage one reply reports."""

    input: int = 12
    output: int = 7
    cached: int = 0
    reasoning: int = 0


@dataclass(frozen=True)
class Reply:
    """One successful model response with these output items (texts and tool calls, in order)."""

    items: Sequence[str | Text | ToolCall]
    usage: Tokens = field(default_factory=Tokens)


@dataclass(frozen=True)
class Status:
    """An HTTP error as the API sends it: `{"error": {"message": ..., "type": ..., "code": ...}}`."""

    code: int
    message: str = "scripted failure"
    headers: dict[str, str] = field(default_factory=dict)
    echo_key: bool = False
    """Put the request's full API key into the error message: the worst a provider could do."""


@dataclass(frozen=True)
class Reset:
    """Reset the TCP connection: before any response, or (streaming) after this many SSE events."""

    after_events: int | None = None


class Hold:
    """Block the request until the test calls `release()`; then answer with `reply`.

    `release()` may be called from the test's thread before or after the request arrived. With `after_events`,
    a streamed reply sends that many events first and stalls in the middle of its stream instead.
    """

    def __init__(self, reply: Any = "released", *, required: bool = True, after_events: int | None = None) -> None:
        self.reply = reply
        self.after_events = after_events
        self.required = required
        """False: a client that times out may give up before its request arrives; an unused hold is no error."""
        self._arrived = threading.Event()
        self._lock = threading.Lock()
        self._released = False
        self._wake: Callable[[], None] | None = None

    async def _wait(self) -> None:  # runs on the server's loop
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        with self._lock:
            if not self._released:
                self._wake = lambda: loop.call_soon_threadsafe(event.set)
            else:
                event.set()
        self._arrived.set()
        await event.wait()

    def release(self) -> None:
        with self._lock:
            self._released = True
            wake, self._wake = self._wake, None
        if wake is not None:
            wake()

    async def arrived(self) -> None:
        """Wait (without blocking the caller's loop) until the held request reached the server."""
        if not await asyncio.to_thread(self._arrived.wait, 10.0):
            raise AssertionError("the held request did not arrive within 10 s")


Scripted = Reply | Status | Reset | Hold


@dataclass(frozen=True, kw_only=True)
class RecordedRequest:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes

    @property
    def model(self) -> str:
        return str(self.body.get("model"))

    @property
    def stream(self) -> bool:
        return bool(self.body.get("stream"))

    def tool(self, name: str) -> dict[str, Any]:
        """A tool definition by name, in either API's shape (Chat Completions nests it under "function")."""
        for tool in self.body.get("tools") or []:
            definition = tool.get("function", tool)
            if definition.get("name") == name:
                return dict(definition)
        raise KeyError(f"no tool {name!r} in the request; tools: {self.tool_names}")

    @property
    def tool_names(self) -> list[str]:
        return [tool.get("function", tool).get("name") for tool in self.body.get("tools") or []]


def as_scripted(spec: Any) -> Scripted:
    if isinstance(spec, Reply | Status | Reset | Hold):
        return spec
    if isinstance(spec, str | Text | ToolCall):
        return Reply([spec])
    if isinstance(spec, list | tuple):
        return Reply(list(spec))
    raise TypeError(f"cannot script a reply from {spec!r}")


class OpenAIServer:
    """The scripted API; `base_url` is what `AsyncOpenAI(base_url=...)` takes."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.base_url = f"http://127.0.0.1:{port}/v1"
        self.requests: list[RecordedRequest] = []
        self.problems: list[str] = []
        self._queues: dict[str | None, deque[Scripted]] = {}
        self._holds: list[Hold] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()

    # -- scripting (test side) ---------------------------------------------------------------
    def push(self, *replies: Any, model: str | None = None) -> None:
        scripted = [as_scripted(reply) for reply in replies]
        with self._lock:
            self._holds.extend(reply for reply in scripted if isinstance(reply, Hold))
            self._queues.setdefault(model, deque()).extend(scripted)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.problems.clear()
            self._queues.clear()
            holds, self._holds = self._holds, []
        for hold in holds:
            hold.release()

    def finish(self) -> list[str]:
        """What went wrong in the test from the server's point of view (unused replies, unexpected requests)."""
        with self._lock:
            problems = list(self.problems)
            for model, queue in self._queues.items():
                unused = [reply for reply in queue if not isinstance(reply, Hold) or reply.required]
                if unused:
                    problems.append(f"{len(unused)} scripted replies for model {model or '(any)'} were never requested")
        self.reset()
        return problems

    def next_reply(self, model: str) -> Scripted | None:
        with self._lock:
            for key in (model, None):
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
            self.problems.append(f"a request for model {model!r} arrived with no scripted reply left")
            return None

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{next(self._ids)}"


# -- the HTTP app ------------------------------------------------------------------------------------


def build_app(server: OpenAIServer) -> FastAPI:
    app = FastAPI()

    @app.post("/v1/responses")
    async def responses(request: Request) -> Response:
        return await _answer(server, request, _responses_json, _responses_sse)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        return await _answer(server, request, _chat_json, _chat_sse)

    return app


def _with_abort(app: FastAPI) -> Callable[..., Any]:
    """Outer ASGI layer: hands the route a way to reset its TCP connection (uvicorn's h11 cycle owns it)."""

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        if scope["type"] == "http" and transport is not None:
            scope["test.abort"] = lambda: _abort(transport)
        await app(scope, receive, send)

    return asgi


def _abort(transport: asyncio.Transport) -> None:
    sock = transport.get_extra_info("socket")
    if sock is not None:  # linger 0: close() sends RST instead of FIN, as a crashed proxy would
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


Render = Callable[[OpenAIServer, str, Reply], Any]


async def _answer(server: OpenAIServer, request: Request, as_json: Render, as_sse: Render) -> Response:
    raw = await request.body()
    body = json.loads(raw)
    recorded = RecordedRequest(path=request.url.path, headers=dict(request.headers), body=body, raw=raw)
    server.requests.append(recorded)
    model = str(body.get("model"))
    reply = server.next_reply(model)
    if reply is None:
        return _error(400, f"test server: no scripted reply left for model {model!r}")
    if isinstance(reply, Hold) and reply.after_events is not None:
        if not recorded.stream:
            raise AssertionError("Hold(after_events=...) needs a streaming request")
        events = as_sse(server, model, as_scripted(reply.reply))
        return _sse_response(_stalled(events, reply.after_events, reply, request.is_disconnected))
    if isinstance(reply, Hold):
        await reply._wait()
        reply = as_scripted(reply.reply)
    match reply:
        case Status():
            message = reply.message
            if reply.echo_key:
                message += f" (key: {recorded.headers.get('authorization', '').removeprefix('Bearer ')})"
            return _error(reply.code, message, reply.headers)
        case Reset(after_events=None):
            request.scope["test.abort"]()
            return Response(status_code=204)  # never reaches the client: the connection is gone
        case Reset(after_events=count):
            if not recorded.stream:
                raise AssertionError("Reset(after_events=...) needs a streaming request")
            events = as_sse(server, model, Reply(["this stream is cut off"]))
            return _sse_response(_cut(events, count, request.scope["test.abort"]))
        case Reply():
            if recorded.stream:
                return _sse_response(_lines(as_sse(server, model, reply)))
            return JSONResponse(as_json(server, model, reply))
        case _:
            raise AssertionError(f"unscripted reply {reply!r}")


def _error(code: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    kind = "invalid_request_error" if code < 500 else "server_error"
    body = {"error": {"message": message, "type": kind, "param": None, "code": str(code)}}
    return JSONResponse(body, status_code=code, headers={"x-request-id": f"req_{code}", **(headers or {})})


def _sse_response(lines: AsyncIterator[str]) -> StreamingResponse:
    return StreamingResponse(lines, media_type="text/event-stream")


async def _lines(events: list[str]) -> AsyncIterator[str]:
    for event in events:
        yield event


async def _stalled(
    events: list[str], count: int, hold: Hold, gone: Callable[[], Awaitable[bool]]
) -> AsyncIterator[str]:
    for event in events[:count]:
        yield event
    await hold._wait()
    if await gone():  # the client timed out meanwhile: nothing to write to
        return
    for event in events[count:]:
        yield event


async def _cut(events: list[str], count: int, abort: Callable[[], None]) -> AsyncIterator[str]:
    for event in events[:count]:
        yield event
    abort()


def _text_parts(reply: Reply) -> Iterator[str | ToolCall]:
    for item in reply.items:
        yield item.text if isinstance(item, Text) else item


# -- Responses API -------------------------------------------------------------------------------------


def _responses_output(server: OpenAIServer, reply: Reply) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    for item in _text_parts(reply):
        if isinstance(item, str):
            output.append({
                "type": "message", "id": server.new_id("msg"), "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": item, "annotations": [], "logprobs": []}],
            })
        else:
            number = next(server._ids)
            output.append({
                "type": "function_call", "id": f"fc_{number}", "call_id": f"call_{number}", "name": item.name,
                "arguments": item.arguments_json, "status": "completed",
            })
    return output


def _responses_json(server: OpenAIServer, model: str, reply: Reply) -> dict[str, Any]:
    usage = reply.usage
    return {
        "id": server.new_id("resp"), "object": "response", "created_at": CREATED_AT, "model": model,
        "status": "completed", "output": _responses_output(server, reply), "parallel_tool_calls": True,
        "tool_choice": "auto", "tools": [], "error": None, "incomplete_details": None,
        "usage": {
            "input_tokens": usage.input, "input_tokens_details": {"cached_tokens": usage.cached},
            "output_tokens": usage.output, "output_tokens_details": {"reasoning_tokens": usage.reasoning},
            "total_tokens": usage.input + usage.output,
        },
    }


def _responses_sse(server: OpenAIServer, model: str, reply: Reply) -> list[str]:
    response = _responses_json(server, model, reply)
    started = {**response, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(response["output"]):
        events.extend(_item_events(index, item))
    events.append({"type": "response.completed", "response": response})
    return [
        f"event: {event['type']}\ndata: {json.dumps({**event, 'sequence_number': number})}\n\n"
        for number, event in enumerate(events)
    ]


def _item_events(index: int, item: dict[str, Any]) -> list[dict[str, Any]]:
    if item["type"] == "function_call":
        arguments = item["arguments"]
        half = len(arguments) // 2
        return [
            {"type": "response.output_item.added", "output_index": index,
             "item": {**item, "arguments": "", "status": "in_progress"}},
            *[
                {"type": "response.function_call_arguments.delta", "item_id": item["id"], "output_index": index,
                 "delta": part}
                for part in (arguments[:half], arguments[half:]) if part
            ],
            {"type": "response.function_call_arguments.done", "item_id": item["id"], "output_index": index,
             "name": item["name"], "arguments": arguments},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]
    text = item["content"][0]["text"]
    where = {"item_id": item["id"], "output_index": index, "content_index": 0}
    empty_part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
    words = text.split(" ")
    return [
        {"type": "response.output_item.added", "output_index": index,
         "item": {**item, "status": "in_progress", "content": []}},
        {"type": "response.content_part.added", **where, "part": empty_part},
        *[
            {"type": "response.output_text.delta", **where, "delta": word if n == 0 else " " + word, "logprobs": []}
            for n, word in enumerate(words)
        ],
        {"type": "response.output_text.done", **where, "text": text, "logprobs": []},
        {"type": "response.content_part.done", **where, "part": item["content"][0]},
        {"type": "response.output_item.done", "output_index": index, "item": item},
    ]


# -- Chat Completions ----------------------------------------------------------------------------------


def _chat_usage(usage: Tokens) -> dict[str, Any]:
    return {
        "prompt_tokens": usage.input, "completion_tokens": usage.output, "total_tokens": usage.input + usage.output,
        "prompt_tokens_details": {"cached_tokens": usage.cached},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning},
    }


def _chat_parts(server: OpenAIServer, reply: Reply) -> tuple[str | None, list[dict[str, Any]]]:
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for item in _text_parts(reply):
        if isinstance(item, str):
            texts.append(item)
        else:
            calls.append({
                "id": server.new_id("call"), "type": "function",
                "function": {"name": item.name, "arguments": item.arguments_json},
            })
    return ("".join(texts) if texts else None), calls


def _chat_json(server: OpenAIServer, model: str, reply: Reply) -> dict[str, Any]:
    content, calls = _chat_parts(server, reply)
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": None}
    if calls:
        message["tool_calls"] = calls
    return {
        "id": server.new_id("chatcmpl"), "object": "chat.completion", "created": CREATED_AT, "model": model,
        "choices": [
            {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop", "logprobs": None}
        ],
        "usage": _chat_usage(reply.usage),
    }


def _chat_sse(server: OpenAIServer, model: str, reply: Reply) -> list[str]:
    content, calls = _chat_parts(server, reply)
    chunk_id = server.new_id("chatcmpl")

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": chunk_id, "object": "chat.completion.chunk", "created": CREATED_AT, "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    if content is not None:
        words = content.split(" ")
        chunks.extend(chunk({"content": word if n == 0 else " " + word}) for n, word in enumerate(words))
    for index, call in enumerate(calls):
        function = call["function"]
        chunks.append(chunk({"tool_calls": [
            {"index": index, "id": call["id"], "type": "function",
             "function": {"name": function["name"], "arguments": ""}},
        ]}))
        chunks.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": function["arguments"]}}]}))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    chunks.append({
        "id": chunk_id, "object": "chat.completion.chunk", "created": CREATED_AT, "model": model, "choices": [],
        "usage": _chat_usage(reply.usage),
    })
    return [f"data: {json.dumps(item)}\n\n" for item in chunks] + ["data: [DONE]\n\n"]


# -- running it ------------------------------------------------------------------------------------------


class _Uvicorn(uvicorn.Server):
    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = threading.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets=sockets)
        self.ready.set()


@contextmanager
def serve() -> Iterator[OpenAIServer]:
    """Run the server on 127.0.0.1 (a free port) in a background thread until the block ends."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    server = OpenAIServer(sock.getsockname()[1])
    config = uvicorn.Config(
        _with_abort(build_app(server)), http="h11", lifespan="off", log_config=None, log_level="critical",
        access_log=False, timeout_graceful_shutdown=5,
    )
    runner = _Uvicorn(config)
    thread = threading.Thread(target=runner.run, kwargs={"sockets": [sock]}, name="openai-test-server", daemon=True)
    thread.start()
    try:
        if not runner.ready.wait(10):
            raise RuntimeError("the test OpenAI server did not start within 10 s")
        yield server
    finally:
        server.reset()  # releases held requests, so shutdown does not wait for them
        runner.should_exit = True
        thread.join(10)
        sock.close()
