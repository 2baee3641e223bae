"""Agent: an openai-agents Agent that can message other agents and runs its own turn loop."""

from __future__ import annotations

from collections.abc import Coroutine
from dataclasses import dataclass
from functools import partial
from typing import Any

from agents import TResponseInputItem

from .._attachments._incoming import Incoming, prepare_message
from .._attachments._media import DEFAULT_LIMITS, AttachmentLimits
from .._base._errors import ConfigError
from .._base._names import USER
from .._threads._checks import CALL_MARKS, item_problem
from .._threads._manager import check_chat_id
from ._channel import TurnStart
from ._definition import DEFAULT_CHAT_ID, AgentBase, Wiring
from ._loop import top_level_turn
from ._results import ResponseStream, RunResult
from ._state import Message


@dataclass(kw_only=True, eq=False)
class Agent(AgentBase):
    """An `agents.Agent` plus `description` (shown to agents that may message it) and `max_steps`.

    Outside an agency it works alone with its own in-memory threads; inside one, it uses the agency's.
    """

    async def get_response(
        self,
        message: str | list[TResponseInputItem],
        *,
        chat_id: str | None = None,
        sender_name: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> RunResult:
        """Run one complete turn on the thread sender->self (sender defaults to the user)."""
        return await run_turn(self, self.wiring, message, chat_id, sender_name, context, additional_instructions)

    def get_response_stream(
        self,
        message: str | list[TResponseInputItem],
        *,
        chat_id: str | None = None,
        sender_name: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> ResponseStream:
        """The same turn as an async iterator of events, nested agents' events included."""
        return stream_turn(self, self.wiring, message, chat_id, sender_name, context, additional_instructions)

    def get_response_sync(
        self,
        message: str | list[TResponseInputItem],
        *,
        chat_id: str | None = None,
        sender_name: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> RunResult:
        """Blocking form for scripts and notebooks; works inside a running event loop too."""
        from .._base._sync import run_sync

        return run_sync(
            self.get_response(
                message, chat_id=chat_id, sender_name=sender_name, context=context,
                additional_instructions=additional_instructions,
            )
        )


# -- turns started from outside the loop (by Agent and by Agency) ----------------------------------------------


def checked_request(
    message: Message, chat_id: str | None, sender_name: str | None, additional_instructions: str | None,
    limits: AttachmentLimits = DEFAULT_LIMITS,
) -> tuple[str, str, str | Incoming]:
    """The caller, chat id and message of a new request, after checking what the user passed: a list of input items
    is checked part by part (its images and files against `limits`) and item by item as the model API takes them."""
    prepared = message if type(message) is str else prepare_message(message, limits)
    if isinstance(prepared, Incoming):
        for index, item in enumerate(prepared.items):
            problem = item_problem(item)
            if problem or item.get("type") in CALL_MARKS:
                raise ConfigError(f"message item {index} is {problem or 'a bookkeeping mark'}; send the SDK's "
                                  "input items (e.g. {'role': 'user', 'content': [...]}).")
    if additional_instructions is not None and not isinstance(additional_instructions, str):
        raise ConfigError("additional_instructions must be a str or None.")
    caller = USER if sender_name is None else sender_name
    chat = check_chat_id(DEFAULT_CHAT_ID if chat_id is None else chat_id)
    if caller is not USER and (not isinstance(caller, str) or not caller or "->" in caller):
        raise ConfigError(f"sender_name {caller!r} is not a valid sender; use an agent name or leave it out.")
    return caller, chat, prepared


MAX_TURN_ID_CHARS = 200


def check_turn_id(turn_id: object) -> str:
    """A turn id: a non-blank str of at most `MAX_TURN_ID_CHARS` characters (it is stored with the turn)."""
    if not isinstance(turn_id, str) or not turn_id.strip() or len(turn_id) > MAX_TURN_ID_CHARS:
        raise ConfigError(
            f"turn_id must be a non-blank str of at most {MAX_TURN_ID_CHARS} characters (got "
            f"{type(turn_id).__name__}{'' if not isinstance(turn_id, str) else f' of {len(turn_id)} characters'})."
        )
    return turn_id


def run_turn(
    agent: AgentBase,
    wiring: Wiring,
    message: Message,
    chat_id: str | None,
    sender_name: str | None,
    context: Any,
    additional_instructions: str | None,
    turn_id: str | None = None,
) -> Coroutine[Any, Any, RunResult]:
    """One blocking top-level turn of `agent` placed by `wiring`: the request is checked now, the turn is the
    coroutine returned (callers await it at once: no coroutine of this function's own around the turn's)."""
    limits = wiring.thread_manager.attachments.limits
    caller, chat, prepared = checked_request(message, chat_id, sender_name, additional_instructions, limits)
    if turn_id is not None:
        check_turn_id(turn_id)
    return top_level_turn(agent, wiring, prepared, caller, chat, context, additional_instructions, None, turn_id)


def stream_turn(
    agent: AgentBase,
    wiring: Wiring,
    message: Message,
    chat_id: str | None,
    sender_name: str | None,
    context: Any,
    additional_instructions: str | None,
    turn_id: str | None = None,
) -> ResponseStream:
    """One streamed top-level turn; the request is checked now, the turn starts when the stream is read."""
    limits = wiring.thread_manager.attachments.limits
    caller, chat, prepared = checked_request(message, chat_id, sender_name, additional_instructions, limits)
    if turn_id is not None:
        check_turn_id(turn_id)

    def start(stream: ResponseStream) -> TurnStart:
        return partial(
            top_level_turn, agent, wiring, prepared, caller=caller, chat_id=chat, context=context,
            additional_instructions=additional_instructions, stream=stream, turn_id=turn_id,
        )

    return ResponseStream(start, streaming=True)
