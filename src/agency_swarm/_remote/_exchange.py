"""One A2A exchange with a remote agent: the message sent (streamed when the card allows), its progress emitted,
safe retries, the reply timeout, and what the task ended as."""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import Any

from .._base._errors import RemoteAgentError
from .._base._events import RemoteProgress
from .._turn._state import Turn
from ._card import fetch_card_async
from ._protocol import DEPTH, EVENT, INTERRUPTIONS, Remote, message_text, meta_of

RETRY_BACKOFF_S = (0.2, 1.0, 3.0)


@dataclass(kw_only=True)
class Outcome:
    """How the remote's task ended: its answer, or waiting for input (`waiting`: the calls it names)."""

    text: str = ""
    task_id: str = ""
    context_id: str = ""
    state: str = ""
    input_required: bool = False
    waiting: list[dict[str, Any]] = field(default_factory=list)


class _Retry(Exception):
    """The remote could not be reached, or its stream broke: sending the same message again is safe."""


async def exchange(agent: Remote, turn: Turn, request: Any) -> Outcome:
    """Send `request`, retrying what is safe, within the agent's reply timeout; RemoteAgentError when it fails."""
    import httpx

    attempts = agent.retries + 1
    last: BaseException | None = None
    try:
        async with asyncio.timeout(agent.reply_timeout), httpx.AsyncClient(
            headers=dict(agent.headers), verify=tls_context()
        ) as http:
            for attempt in range(attempts):
                try:
                    return await _attempt(agent, turn, request, http)
                except _Retry as broken:
                    last = broken.__cause__ or broken
                    if attempt + 1 < attempts:
                        await asyncio.sleep(RETRY_BACKOFF_S[min(attempt, len(RETRY_BACKOFF_S) - 1)])
    except TimeoutError:
        raise _failure(agent, turn, f"did not answer within {agent.reply_timeout:g} s") from None
    reason = f"{type(last).__name__}: {last}" if last is not None else "no answer"
    raise _failure(agent, turn, f"could not be reached after {attempts} attempt(s) ({_short(reason)})")


@functools.cache
def tls_context() -> Any:
    """The TLS settings of every send, made once: httpx makes them anew for each client (it reads the CA bundle),
    which costs more than a send to a remote on localhost."""
    import httpx

    return httpx.create_ssl_context()


async def _attempt(agent: Remote, turn: Turn, request: Any, http: Any) -> Outcome:
    from a2a.client import A2AClientError, ClientConfig, ClientFactory
    from a2a.types.a2a_pb2 import SendMessageRequest
    from a2a.utils.constants import TransportProtocol

    try:
        if agent.card is None:
            agent.card = await fetch_card_async(agent.name, agent.url, agent.headers, http)
        bindings: list[str] = [TransportProtocol.JSONRPC.value, TransportProtocol.HTTP_JSON.value]
        config = ClientConfig(httpx_client=http, streaming=True, supported_protocol_bindings=bindings)
        client = ClientFactory(config).create(agent.card)
        watch = _Watch(agent, turn)
        async for response in client.send_message(SendMessageRequest(message=request)):
            await watch.take(response)
        return await watch.outcome(client)
    except A2AClientError as error:
        if _retryable(error):
            raise _Retry() from error
        raise _failure(agent, turn, f"refused the message ({_short(error.message)})") from None
    except Exception as error:
        if type(error).__module__.startswith(("httpx", "httpcore")):
            raise _Retry() from error
        if type(error).__module__.startswith("a2a."):  # a JSON-RPC or REST error the remote answered with
            said = f"{type(error).__name__}: {_short(str(error))}"
            raise _failure(agent, turn, f"answered with an error ({said})") from None
        raise


class _Watch:
    """What one exchange saw: its task (events of any other task are left out), its last status, its artifacts."""

    def __init__(self, agent: Remote, turn: Turn) -> None:
        self.agent, self.turn = agent, turn
        self.task: Any = None
        self.task_id = ""
        self.context_id = ""
        self.status: Any = None
        self.artifacts: list[Any] = []
        self.reply: Any = None

    async def take(self, response: Any) -> None:
        kind = response.WhichOneof("payload")
        if kind == "message":
            self.reply = response.message
            return
        if kind == "task":
            if self.task_id and response.task.id != self.task_id:
                return
            self.task, self.task_id, self.context_id = response.task, response.task.id, response.task.context_id
            self.status = response.task.status
            self.artifacts = list(response.task.artifacts)
            return
        event = getattr(response, kind)
        if self.task_id and event.task_id != self.task_id:
            return  # another task's event: not this exchange's
        self.task_id, self.context_id = self.task_id or event.task_id, self.context_id or event.context_id
        if kind == "artifact_update":
            self.artifacts.append(event.artifact)
        elif kind == "status_update" and not self._final():
            self.status = event.status
            if event.status.HasField("message") and event.status.state == _state("TASK_STATE_WORKING"):
                await self._progress(event.status.message)

    def _final(self) -> bool:
        return self.status is not None and self.status.state in _settled()

    async def _progress(self, message: Any) -> None:
        emit = self.turn.emit
        if emit is None:
            return
        meta = meta_of(message.metadata)
        found = meta.get(EVENT)
        data: dict[str, Any] = found if isinstance(found, dict) else {}
        depth = meta.get(DEPTH)
        await emit(RemoteProgress(
            agent=str(meta.get("agent") or data.get("agent") or self.agent.name),
            caller=str(data.get("caller") or self.turn.caller),
            depth=int(depth) if isinstance(depth, int | float) else self.turn.depth,
            chat_id=self.turn.run.chat_id, remote=self.agent.name, kind=str(data.get("type") or "status"),
            text=message_text(message), data=data,
        ))

    async def outcome(self, client: Any) -> Outcome:
        """The task's end; read again with GetTask when the stream stopped before it (an out-of-order remote)."""
        from a2a.types.a2a_pb2 import GetTaskRequest

        if self.reply is not None:
            return Outcome(text=message_text(self.reply), context_id=self.reply.context_id, state="message")
        if not self.task_id:
            raise _Retry()
        if not self._final():
            task = await client.get_task(GetTaskRequest(id=self.task_id))
            self.status, self.artifacts = task.status, list(task.artifacts)
            if not self._final():
                raise _failure(self.agent, self.turn, "ended its stream before its task finished")
        return self._ended()

    def _ended(self) -> Outcome:
        from a2a.types.a2a_pb2 import TaskState

        state = TaskState.Name(self.status.state)
        said = message_text(self.status.message) if self.status.HasField("message") else ""
        outcome = Outcome(task_id=self.task_id, context_id=self.context_id, state=state, text=said)
        if self.status.state == TaskState.TASK_STATE_COMPLETED:
            texts = [message_text(artifact) for artifact in self.artifacts]
            outcome.text = "\n".join(text for text in texts if text) or said
            return outcome
        if self.status.state in (TaskState.TASK_STATE_INPUT_REQUIRED, TaskState.TASK_STATE_AUTH_REQUIRED):
            found = meta_of(self.status.message.metadata).get(INTERRUPTIONS) if said else None
            outcome.input_required = True
            outcome.waiting = [_waiting(item) for item in found if isinstance(item, dict)] if isinstance(
                found, list) else []
            return outcome
        verb = {"TASK_STATE_FAILED": "failed", "TASK_STATE_CANCELED": "was canceled",
                "TASK_STATE_REJECTED": "refused the message"}.get(state, f"ended as {state}")
        raise _failure(self.agent, self.turn, f"{verb}: {_short(said) or 'no reason given'}")


def _waiting(item: dict[str, Any]) -> dict[str, Any]:
    depth = item.get(DEPTH)
    return {
        "agent": str(item.get("agent")), "caller": str(item.get("caller") or ""), "call_id": str(item.get("call_id")),
        "tool": str(item.get("tool")), "arguments": str(item.get("arguments") or ""),
        DEPTH: int(depth) if isinstance(depth, int | float) else None,
    }


def _state(name: str) -> int:
    from a2a.types.a2a_pb2 import TaskState

    return int(TaskState.Value(name))


def _settled() -> set[int]:
    names = ("COMPLETED", "FAILED", "CANCELED", "REJECTED", "INPUT_REQUIRED", "AUTH_REQUIRED")
    return {_state(f"TASK_STATE_{name}") for name in names}


def _retryable(error: BaseException) -> bool:
    """Not reached, or cut off: a network failure, a timeout, a 502/503/504. Not a refusal."""
    import httpx

    cause = error.__cause__
    if isinstance(cause, httpx.HTTPStatusError):
        return cause.response.status_code in (502, 503, 504)
    return isinstance(cause, httpx.RequestError | httpx.TimeoutException) or "Network communication" in str(error)


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _failure(agent: Remote, turn: Turn, what: str) -> RemoteAgentError:
    return RemoteAgentError(
        f"Remote agent {agent.name!r} {what}.", agent=agent.name, chat_id=turn.run.chat_id, depth=turn.depth
    )
