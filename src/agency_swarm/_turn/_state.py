"""The state of a running turn: what all agents of one top-level turn share (`Run`) and one agent's own (`Turn`)."""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from agents import ItemHelpers
from agents.run_context import AgentHookContext
from agents.run_internal.blocked_output import OUTPUT_GUARDRAIL_BLOCKED_TOOL_OUTPUT as OUTPUT_WITHHELD

from .._attachments._incoming import Incoming
from .._base._sync import Inside
from .._model._usage import add_into, usage_of
from .._telemetry._watch import TurnWatch
from .._threads._manager import ConversationThread
from ._channel import EmitEvent
from ._definition import AgentBase, Wiring
from ._results import Interruption
from ._tool_guardrails import GuardrailLog
from ._tracing import TurnTrace

USER_CALLER = "user"
Message = str | list[Any]
"""A turn's message: text, or input items as `Runner` takes them."""

SEND_CALL_ID = "send_call_id"
"""Key of the call id that an agent's incoming message keeps in its thread: `{"role": "user", "content": ...,
"send_call_id": "call_..."}`, or None when no send delivered it (a direct `agent.get_response(sender_name=...)`).
Only threads between agents have it; resume matches a send by it (`delivered`). The model never sees it: the
Responses API rejects unknown fields, and the SDK's Chat Completions converter rejects such an item (`_history`)."""


_NO_REJECTIONS: Mapping[str, str | None] = MappingProxyType({})  # a turn's decisions are replaced, never changed

CALLER_DEPTH: ContextVar[int] = ContextVar("agency_swarm_caller_depth", default=0)
"""How deep in another agency's chart the message that starts a top-level turn was sent (an A2A message says so):
the turn's sends count their depth from there against the depth limit. 0: the user's own message."""


class Run:
    """What every agent of one top-level turn shares: the chat, the user's context and the SDK run context, usage
    records, the sends still open, the user's approval decisions, interruptions, the trace and guardrail results.

    Nothing in it belongs to one agent: that is `Turn`'s. It lives from `_entry` taking the chat's lock to the
    RunResult built from it. Its fields:

    - `depth_base`: the depth the turn's entry agent has in the chart of the agency that sent the message
      (`CALLER_DEPTH`).
    - `message`: the user's message that started the turn, as given (None: a resume); the SDK context's
      `turn_input`.
    - `turn_id`: the id the caller gave this turn: stored with its message, so running it again never starts it
      twice.
    - `inside`: this turn's chat and the turns whose tools started it: what its tools run inside (`INSIDE`).
    - `usage_records`: ((agent, model name), usage) of each model call: every total is summed from these when
      asked.
    - `responses`: each model call's (response, usage): a ModelResponse, or the streamed Response and its usage
      (`RunResult.raw_responses`).
    - `approved`, `rejected`: call ids the user approved in `resume`; those rejected, each with the message the
      model reads (None: the default).
    - `trace`: None when tracing is off: then no span is made anywhere in the turn.
    - `watch`: spans and metrics of the turn (`_telemetry`); None when telemetry is off.
    """

    __slots__ = (
        "_guardrail_log", "_wrapper", "approved", "chat_id", "depth_base", "inside", "interruptions", "message",
        "open_pairs",
        "rejected", "responses", "streaming", "trace", "turn_id", "usage_records", "user_context", "watch",
    )

    def __init__(
        self,
        chat_id: str,
        streaming: bool,
        user_context: Any,
        approved: frozenset[str] = frozenset(),
        rejected: Mapping[str, str | None] | None = None,
        inside: Inside = (),
        turn_id: str | None = None,
        message: Message | None = None,
    ) -> None:
        self.chat_id = chat_id
        self.depth_base = CALLER_DEPTH.get()
        self.message = message
        self.turn_id = turn_id
        self.inside = inside
        self.streaming = streaming
        self.user_context = user_context
        self.usage_records: list[tuple[tuple[str, str], Any]] = []
        self.responses: list[Any] = []
        self.open_pairs: set[tuple[str, str]] | None = None  # made by the first send
        self._wrapper: AgentHookContext[Any] | None = None
        self.approved = approved
        self.rejected: Mapping[str, str | None] = _NO_REJECTIONS if rejected is None else rejected
        self.interruptions: list[Interruption] = []
        self.trace: TurnTrace | None = None
        self._guardrail_log: GuardrailLog | None = None
        self.watch: TurnWatch | None = None

    def context(self) -> AgentHookContext[Any]:
        """The SDK's run context (built on first use: most turns of plain agents never need it)."""
        if self._wrapper is None:
            usage = usage_of(usage for _, usage in self.usage_records)  # every agent's and model's, in call order
            self._wrapper = AgentHookContext(
                context=self.user_context, usage=usage,
                turn_input=[] if self.message is None else input_list(self.message),
            )
        return self._wrapper

    @property
    def guardrail_log(self) -> GuardrailLog:
        """Every tool guardrail result of the turn (made when the first guarded tool runs)."""
        if self._guardrail_log is None:
            self._guardrail_log = GuardrailLog()
        return self._guardrail_log

    def record(self, key: tuple[str, str], usage: Any) -> None:
        """Keep one model response's usage under (agent, model name); it is summed only when someone asks."""
        self.usage_records.append((key, usage))
        if self._wrapper is not None:  # keep the SDK context's usage current (in place) for tools and hooks
            add_into(self._wrapper.usage, usage)


@dataclass(slots=True, eq=False)
class Turn:
    """One agent's turn inside a run: who it is, where it sits and reads from, who called it, how deep, where its
    events and spans go, and how it ended (its output, or paused for approvals).

    What stays fixed across its model calls (tools, prompt, model) is its `Setup`; the calls of one response are
    a `Calls`.
    """

    agent: AgentBase
    wiring: Wiring
    thread: ConversationThread
    caller: str
    depth: int
    run: Run
    output: Any = None
    steps: int = 0
    """Model calls this agent's turn has made, those before a pause included: what max_steps counts."""
    paused: bool = False
    """The turn stopped to wait for tool approvals (its own or a nested agent's)."""
    parent_span: Any = None
    """Where this agent's span hangs when tracing: the trace (top level) or the caller's send_message span."""
    span: Any = None
    otel: Any = None
    """This agent's OpenTelemetry span while it runs (before: its send's span), when the turn is watched."""
    emit: EmitEvent | None = None
    """Where this turn's events go; None when nobody reads them (then none is built)."""
    sent_by: str | None = None
    """The call id of the send_message call that delivered this turn's message (None: not a send)."""
    arriving: Incoming | None = None
    """The turn's message given as input items (images and files in it): the items to store, the bytes to store
    before them. None for a text message."""
    held: list[dict[str, Any]] | None = None
    """The last response's items, not stored yet: an agent with output guardrails stores a final answer only once
    they pass (a blocked answer never joins the thread, as under `Runner` with a session). A response that asks for
    more is stored before its tools run (`run_tools`) or the next model call (`call_model`)."""

    release: Callable[[str | None], Awaitable[None] | None] | None = None
    """Stores the outputs of calls that ended the turn (`tool_use_behavior`), held back until the output guardrails
    decide: as they are, or with a replacement text (`Calls.release`)."""

    def store_held(self, *, blocked: bool = False) -> Awaitable[None] | None:
        """Add what is held to the thread; returns the store's append to await, if any. `blocked`: the output
        guardrails blocked the final output: a held answer is dropped, held call outputs are stored as `Runner`'s
        withheld text (their calls need outputs)."""
        items, self.held = self.held, None
        release, self.release = self.release, None
        if release is not None:
            return release(OUTPUT_WITHHELD if blocked else None)
        return None if items is None or blocked else self.thread.add(items)


class RemoteMember(abc.ABC):
    """A chart member whose turns run in another service (`RemoteAgent`): the loop hands its turns to it."""

    @abc.abstractmethod
    async def remote_turn(self, turn: Turn, message: Message | None, additional_instructions: str | None) -> None:
        """The member's whole turn on `turn.thread`, as the loop's own (`message=None`: resume it)."""


AgentTurn = Callable[[Turn, "Message | None", "str | None"], Coroutine[Any, Any, None]]
"""An agent's whole turn (`_loop.run_agent`): handed to the modules that start one, which sit below the loop."""


def input_list(message: Message) -> list[Any]:
    """A message as a list of input items, as `Runner` makes its input one (the context's `turn_input`)."""
    return ItemHelpers.input_to_new_input_list(message)


def incoming(turn: Turn, message: str) -> dict[str, Any]:
    """The item a turn's message is stored as: from another agent, with the call id of the send that carried it."""
    if turn.caller == USER_CALLER:
        return {"role": "user", "content": message}
    return {"role": "user", "content": message, SEND_CALL_ID: turn.sent_by}
