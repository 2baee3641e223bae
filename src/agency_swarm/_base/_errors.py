"""The exception tree: user errors (bad chart, bad config) and run errors (limits hit during a turn)."""

from __future__ import annotations

from typing import Any


class AgencySwarmError(Exception):
    """Base of every error agency_swarm raises on purpose."""


class ConfigError(AgencySwarmError, ValueError):
    """The caller configured something wrong; nothing ran. The message says what and how to fix it."""


class ChartError(ConfigError):
    """The agency chart is invalid (not an Agent, duplicate names, self-messaging, no entry point...)."""


class RunError(AgencySwarmError):
    """A turn failed while running. Carries where it happened."""

    def __init__(self, message: str, *, agent: str, chat_id: str, depth: int) -> None:
        super().__init__(message)
        self.agent = agent
        self.chat_id = chat_id
        self.depth = depth


class RemoteAgentError(RunError):
    """A remote chart member (`RemoteAgent`) did not answer: unreachable, too slow, or its task failed. Its caller
    reads why, as for any failed send; the chat stays as it was, and the next send tries again."""


class MaxStepsExceeded(RunError):
    """An agent made more model calls in one turn than its `max_steps` allows."""

    def __init__(self, *, agent: str, chat_id: str, depth: int, max_steps: int) -> None:
        super().__init__(
            f"Agent {agent!r} reached max_steps={max_steps} model calls in one turn of chat {chat_id!r} "
            f"(depth {depth}) without a final output. Raise Agent(max_steps=...) or check the tools it loops on.",
            agent=agent,
            chat_id=chat_id,
            depth=depth,
        )
        self.max_steps = max_steps


class OutputValidationError(RunError):
    """The model's final output does not match the agent's `output_type`."""



class ModelError(RunError):
    """The model call failed: the API refused it or kept failing, or a stream reported `response.failed` or
    ended without a complete response.

    The model API's errors (`openai.APIStatusError`, connection errors, timeouts) arrive as the subclasses
    below, after the agent's RetryPolicy gave up; their messages never contain the API key. Other exceptions a
    model raises (a bug, a test's scripted failure) pass through unchanged.
    """

    def __init__(
        self,
        message: str,
        *,
        agent: str,
        chat_id: str,
        depth: int,
        model: str | None = None,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        super().__init__(message, agent=agent, chat_id=chat_id, depth=depth)
        self.model = model
        """The model's name, when known."""
        self.status_code = status_code
        """The HTTP status of the last failed request, when there was one."""
        self.request_id = request_id
        """The provider's request id (`x-request-id`), for its support."""


class ModelAuthenticationError(ModelError):
    """The model API refused the credentials (HTTP 401 or 403). Not retried."""


class ModelRequestError(ModelError):
    """The model API rejected the request itself (HTTP 400, 404, 422...): wrong model name, bad settings. Not
    retried."""


class ModelUnavailable(ModelError):
    """Transient failures (429, 5xx, connection errors, timeouts) on every attempt the RetryPolicy allowed."""

    def __init__(self, message: str, *, attempts: int, **where: Any) -> None:
        super().__init__(message, **where)
        self.attempts = attempts
        """How many times the call was tried."""


class ModelTimeout(ModelUnavailable):
    """No answer within the agent's `timeout` (or the client's own timeout) on every attempt."""

    def __init__(self, message: str, *, seconds: float | None, attempts: int, **where: Any) -> None:
        super().__init__(message, attempts=attempts, **where)
        self.seconds = seconds
        """The agent's `timeout`; None when the client's own timeout expired."""


class ConfigFileError(ConfigError):
    """A config file is invalid. `path` is the file, `line` (1-based) and `key` (e.g. `agents.CEO.temperature`)
    say where the first problem is, when that is known; the message lists every problem found."""

    def __init__(self, message: str, *, path: str, line: int | None = None, key: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.line = line
        self.key = key


class AttachmentError(ConfigError):
    """An image or file in a message was refused before anything of the message was stored.

    `problem` names the rule it broke, one of: "bad_part" (not a part the model API takes), "bad_url", "not_base64",
    "type_mismatch" (the bytes are not the declared type), "unsupported_type", "bad_file_id", "ambiguous" (a part
    with both a URL and data), "no_such_file" (a path that does not exist), "too_large" (a part over the limit),
    "too_many" (more parts than allowed), "message_too_large", "unknown_attachment" (a reference or id this chat
    does not hold). `size` and `limit` (bytes or parts) come with the limits.
    """

    def __init__(self, message: str, *, problem: str, size: int | None = None, limit: int | None = None) -> None:
        super().__init__(message)
        self.problem = problem
        self.size = size
        self.limit = limit


class ChatPaused(ConfigError):
    """A new message reached a chat whose last turn waits for tool approvals; `resume` it first."""

    RESUME_HINT = "call resume(chat_id, approve=[...], reject=[...]) before sending a new message."
    """How the message ends; over HTTP it names `POST /chats/{id}/resume` instead."""

    def __init__(self, message: str, *, chat_id: str, interruptions: list[Any]) -> None:
        super().__init__(message)
        self.chat_id = chat_id
        self.interruptions = interruptions
        """The `Interruption`s still waiting for approve/reject."""


class NothingToResume(ConfigError):
    """`resume` was asked for a chat whose last turn finished (or that has no turn at all)."""

    def __init__(self, message: str, *, chat_id: str) -> None:
        super().__init__(message)
        self.chat_id = chat_id


class ReentrantTurn(ConfigError):
    """A tool (or code it calls) tried to start a turn of the chat it runs in: `get_response`, a stream, `resume`
    or their sync forms. That turn would wait for the running one, which waits for the tool; it is refused at once.
    Use another `chat_id`, or let the agent message another agent with send_message."""

    def __init__(self, message: str, *, chat_id: str) -> None:
        super().__init__(message)
        self.chat_id = chat_id


class TurnCancelled(AgencySwarmError):
    """The turn was cancelled (`Agency.cancel`, or `POST /chats/{id}/turns/{turn_id}:cancel`) and stopped where it
    stood: a call it cut short has the "interrupted" output, and the chat takes its next turn as usual."""

    def __init__(self, message: str, *, chat_id: str, turn_id: str | None) -> None:
        super().__init__(message)
        self.chat_id, self.turn_id = chat_id, turn_id


class UnknownTurn(ConfigError):
    """No turn of that id was submitted to (or runs in) this chat."""


class TurnNotRunning(ConfigError):
    """The turn to cancel has already ended (finished, failed, paused or cancelled): nothing is left to stop."""


class InvalidChatId(ConfigError):
    """A chat id that is empty, too long, or could address a path or a control sequence."""


class ChatNotLoaded(AgencySwarmError, LookupError):
    """`thread_manager.get_threads` reads only what this process holds, and it does not hold this chat (no turn of it
    ran here, it left memory, or it was deleted); `await agency.get_threads(chat_id)` reads what the store holds.
    Nothing is wrong with the set-up (it is not a ConfigError): the chat is elsewhere."""

    def __init__(self, message: str, *, chat_id: str) -> None:
        super().__init__(message)
        self.chat_id = chat_id


class StoreError(AgencySwarmError):
    """A thread store could not read or write (directory not writable, disk full, database down...).

    Items stored before the failure stay readable.
    """


class TurnLockLost(StoreError):
    """A turn's lock on its chat was lost while the turn ran (PostgreSQL: the session holding the worker's turn
    locks ended: network cut, server restart), so the turn was stopped.

    Raised in place of the cancellation when the worker saw its lock session end, and by a write of the turn that
    the store refused because another turn has taken the chat since (its fencing token is stale: nothing of that
    write was stored). What the turn stored before stays valid; the next turn (`resume`, or a new message) goes on
    from it, on this worker or another.
    """

    def __init__(self, message: str, *, chat_id: str) -> None:
        super().__init__(message)
        self.chat_id = chat_id


class ItemTooLarge(StoreError, ValueError):
    """One item is larger than the store's `max_item_bytes`; nothing of that append was stored.

    `index` (the item's place in the append's list), `size` and `limit` (bytes) say which item and by how much,
    when the store tells: the loop uses them to store a too-large tool output as an error output instead.
    """

    def __init__(
        self, message: str, *, index: int | None = None, size: int | None = None, limit: int | None = None
    ) -> None:
        super().__init__(message)
        self.index = index
        self.size = size
        self.limit = limit
