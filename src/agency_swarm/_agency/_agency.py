"""Agency: setup only. It validates the chart, wires agents to shared threads and settings, and delegates turns."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from types import TracebackType
from typing import Any

from agents import Model, ModelProvider, Tool, TResponseInputItem

from .._attachments._media import AttachmentLimits
from .._base._errors import ConfigError
from .._base._names import SEND_MESSAGE
from .._base._placeholders import check_placeholders
from .._model._retry import RetryPolicy
from .._threads._manager import LoadThreadsCallback, SaveThreadsCallback, ThreadManager, check_chat_id
from .._threads._store import ThreadStore
from .._turn._agent import Agent, check_turn_id, run_turn, stream_turn
from .._turn._cancel import cancel_turn
from .._turn._channel import TurnStart
from .._turn._chart import Chart, parse_chart
from .._turn._definition import DEFAULT_CHAT_ID, DEFAULT_MAX_RECURSION_DEPTH, AgentBase, Wiring, attach
from .._turn._hooks import AgencyHooks, hook_table
from .._turn._loop import resume_turn
from .._turn._results import ResponseStream, RunResult
from .._turn._send_message import build_send_message_tool


class Agency:
    """A team of agents wired by a chart.

    `Agency([ceo, [ceo, dev]])`: a standalone agent is an entry point; `[a, b, c]` lets a message b and
    b message c. `Agency(ceo, communication_flows=[(ceo, dev)])` says the same.
    """

    def __init__(
        self,
        *chart: Any,
        communication_flows: Iterable[Any] | None = None,
        shared_instructions: str | None = None,
        max_recursion_depth: int = DEFAULT_MAX_RECURSION_DEPTH,
        load_threads_callback: LoadThreadsCallback | None = None,
        save_threads_callback: SaveThreadsCallback | None = None,
        thread_store: ThreadStore | None = None,
        threads_dir: str | os.PathLike[str] | None = None,
        max_chats_in_memory: int = 10_000,
        model_provider: ModelProvider | None = None,
        retry: RetryPolicy | None = None,
        hooks: AgencyHooks | None = None,
        show_tool_errors: bool = True,
        attachment_limits: AttachmentLimits | None = None,
    ) -> None:
        if retry is not None and not isinstance(retry, RetryPolicy):
            raise ConfigError(f"retry must be an agency_swarm.RetryPolicy or None, got {type(retry).__name__}.")
        if not isinstance(show_tool_errors, bool):
            raise ConfigError(f"show_tool_errors must be True or False, got {show_tool_errors!r}.")
        self.retry = retry
        """Default RetryPolicy for agents without their own `retry`."""
        self.hooks = hooks
        """AgencyHooks told about every agent's start and end, tool calls and messages, in event order."""
        self._hook_table = hook_table(hooks)
        self.show_tool_errors = show_tool_errors
        if isinstance(max_recursion_depth, bool) or not isinstance(max_recursion_depth, int) or max_recursion_depth < 0:
            raise ConfigError(f"max_recursion_depth must be an int >= 0, got {max_recursion_depth!r}.")
        if shared_instructions is not None and not isinstance(shared_instructions, str):
            raise ConfigError(f"shared_instructions must be a str, got {type(shared_instructions).__name__}.")
        if model_provider is not None and not isinstance(model_provider, ModelProvider):
            raise ConfigError("model_provider must be an agents.ModelProvider (e.g. agents.MultiProvider()).")
        self._chart: Chart = parse_chart(chart, communication_flows)
        self.shared_instructions = shared_instructions
        self.max_recursion_depth = max_recursion_depth
        if threads_dir is not None:
            if thread_store is not None:
                raise ConfigError("Pass either thread_store or threads_dir, not both.")
            from .._threads._file_store import FileThreadStore

            thread_store = FileThreadStore(threads_dir)
        self.thread_manager = ThreadManager(
            store=thread_store, load_threads_callback=load_threads_callback,
            save_threads_callback=save_threads_callback, max_chats_in_memory=max_chats_in_memory,
            attachment_limits=attachment_limits,
        )
        self.thread_manager.recipients = frozenset(self._chart.agents)  # threads for other agents are not loaded
        self.model_provider = model_provider
        self._wire()

    def _wire(self) -> None:
        if self.shared_instructions:
            check_placeholders(self.shared_instructions, "The agency's shared_instructions")
        self._wirings: dict[str, Wiring] = {}
        for agent in self._chart.agents.values():
            if isinstance(agent.instructions, str):
                check_placeholders(agent.instructions, f"The instructions of agent {agent.name!r}")
            recipients: dict[str, AgentBase] = {
                name: self._chart.agents[name] for name in self._chart.recipients_of(agent.name)
            }
            if recipients and any(getattr(tool, "name", None) == SEND_MESSAGE for tool in agent.tools):
                raise ConfigError(
                    f"Agent {agent.name!r} has its own tool named {SEND_MESSAGE!r}, which the agency reserves for "
                    "messaging; rename that tool."
                )
            self._wirings[agent.name] = Wiring(
                thread_manager=self.thread_manager,
                recipients=recipients,
                send_tool=build_send_message_tool(list(recipients.values())) if recipients else None,
                shared_instructions=self.shared_instructions,
                max_depth=self.max_recursion_depth,
                model_provider=self.model_provider,
                retry=self.retry,
                hooks=self._hook_table,
                show_tool_errors=self.show_tool_errors,
            )
        for name, wiring in self._wirings.items():
            wiring.recipient_wirings = {recipient: self._wirings[recipient] for recipient in wiring.recipients}
            attach(self._chart.agents[name], wiring)  # direct agent.get_response(...) calls use this agency

    @classmethod
    def from_config(
        cls,
        path: str | os.PathLike[str],
        *,
        toolkits: Mapping[str, Sequence[Tool]] | None = None,
        model_provider: ModelProvider | None = None,
        thread_store: ThreadStore | None = None,
        threads_dir: str | os.PathLike[str] | None = None,
        models: Model | Mapping[str, Model] | None = None,
    ) -> Agency:
        """An agency described by a YAML (.yaml/.yml) or JSON file; docs/design/config.md has the schema.

        `toolkits` names the tool lists agents ask for by name; `models` maps agent names or model names to
        `agents.Model` instances (or is one model for every agent). `thread_store`/`threads_dir` override the
        file's `store:`. An invalid file raises ConfigFileError naming the file, line and key; nothing is built.
        """
        from .._config._loader import load_agency

        return load_agency(
            cls, path, toolkits=toolkits, model_provider=model_provider, thread_store=thread_store,
            threads_dir=threads_dir, models=models,
        )

    # -- what the chart says ---------------------------------------------------------------------
    @property
    def agents(self) -> dict[str, Agent]:
        """Every agent of the chart by name: entry points and agents reached only through flows."""
        return dict(self._chart.agents)

    @property
    def entry_points(self) -> list[Agent]:
        return list(self._chart.entry_points)

    @property
    def communication_flows(self) -> list[tuple[str, str]]:
        """Directed (sender, recipient) name pairs."""
        return [(sender, recipient) for sender, targets in self._chart.flows.items() for recipient in targets]

    def visualize(self, format: str = "mermaid") -> str:
        """The chart as Mermaid text (`"mermaid"`) or a self-contained HTML page with an SVG drawing (`"html"`)."""
        from .._agency._visualize import visualize

        return visualize(self, format)

    def entry_point(self, recipient_agent: str | Agent | None = None) -> Agent:
        """The agent a user's message to `recipient_agent` (a name or the Agent) goes to; None: the first entry point.

        The chart says whom the user may address: its entry points, the agents standing alone in it. Python calls,
        `agency-swarm run --agent` and HTTP's `recipient_agent` all follow it. An agent reached only through the
        chart's flows answers the agents that may message it, not the user (put it standalone in the chart too to
        let the user address it). Raises ConfigError: "no such agent" for a name the agency does not have, "not an
        entry point" for one of its other agents.
        """
        entries = self._chart.entry_points
        if recipient_agent is None:
            return entries[0]
        name = recipient_agent.name if isinstance(recipient_agent, Agent) else recipient_agent
        agent = self._chart.agents.get(name) if isinstance(name, str) else None
        may = ", ".join(entry.name for entry in entries)
        if agent is None or (isinstance(recipient_agent, Agent) and agent is not recipient_agent):
            known = ", ".join(self._chart.agents)
            raise ConfigError(
                f"No such agent: {name!r} is not in this agency (its agents: {known}); the user may address: {may}."
            )
        if agent not in entries:
            raise ConfigError(
                f"{name!r} is not an entry point of this agency; the user may address: {may}. {name!r} answers the "
                "agents that may message it; to let the user address it too, put it standalone in the chart "
                f"(Agency(..., {name}, ...), or `entry_points:` in an agency file)."
            )
        return agent

    # -- turns (delegated to the agents' own loop) -----------------------------------------------
    async def get_response(
        self,
        message: str | list[TResponseInputItem],
        recipient_agent: str | Agent | None = None,
        *,
        chat_id: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
        turn_id: str | None = None,
    ) -> RunResult:
        """One turn: the user's message to `recipient_agent` (default: the first entry point).

        `message` is text, or input items as `agents.Runner` takes them: e.g. `[{"role": "user", "content":
        [{"type": "input_text", "text": ...}, image_part("photo.png"), file_part("report.pdf")]}]`. Images and files
        given as bytes are checked (`AttachmentLimits`) and stored once; threads hold references to them.

        `turn_id` makes the turn idempotent: it is stored with the message, and a call with an id the chat already
        holds never starts a second turn: it returns the finished turn's result again, or continues the unfinished
        one from its last stored item (after a crash, a timeout, a client's retry).
        """
        agent = self._chart.entry_points[0] if recipient_agent is None else self.entry_point(recipient_agent)
        wiring = self._wirings[agent.name]
        return await run_turn(agent, wiring, message, chat_id, None, context, additional_instructions, turn_id)

    def get_response_stream(
        self,
        message: str | list[TResponseInputItem],
        recipient_agent: str | Agent | None = None,
        *,
        chat_id: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
        turn_id: str | None = None,
    ) -> ResponseStream:
        """The same turn as a stream of events from every agent involved, in order (`turn_id`: as in get_response;
        a finished turn run again streams no events, only its result)."""
        agent = self._chart.entry_points[0] if recipient_agent is None else self.entry_point(recipient_agent)
        wiring = self._wirings[agent.name]
        return stream_turn(agent, wiring, message, chat_id, None, context, additional_instructions, turn_id)

    def get_response_sync(
        self,
        message: str | list[TResponseInputItem],
        recipient_agent: str | Agent | None = None,
        *,
        chat_id: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
        turn_id: str | None = None,
    ) -> RunResult:
        """Blocking form for scripts and notebooks; works inside a running event loop too."""
        from .._base._sync import run_sync

        return run_sync(
            self.get_response(
                message, recipient_agent, chat_id=chat_id, context=context,
                additional_instructions=additional_instructions, turn_id=turn_id,
            )
        )

    # -- reading chats -----------------------------------------------------------------------------
    async def get_threads(
        self, chat_id: str | None = None, *, include_marks: bool = False
    ) -> dict[str, list[dict[str, Any]]]:
        """A chat's threads as {thread key like "user->CEO": [items]}, read from the store if this process has not
        loaded the chat yet; `{}` for a chat that has nothing. The lists and items are copies.

        The items are those the thread's model reads (a message between agents also keeps its `send_call_id`:
        `model_input(items)` leaves it out); `include_marks=True` adds the bookkeeping items the chat stores
        between them (`{"type": "agency_swarm.turn_started", ...}`, approval marks), which no model is handed.
        Waits for a turn of the chat that is running (in this process, or in any process sharing the store), so it
        never returns half a turn. `thread_manager.get_threads` reads only what this process holds in memory.
        """
        chat = check_chat_id(DEFAULT_CHAT_ID if chat_id is None else chat_id)
        return await self.thread_manager.read_threads(chat, include_marks=include_marks)

    # -- pauses and crashes -------------------------------------------------------------------------
    async def resume(
        self,
        chat_id: str | None = None,
        *,
        approve: Iterable[str] = (),
        reject: Iterable[str] | Mapping[str, str | None] = (),
        context: Any = None,
        turn_id: str | None = None,
    ) -> RunResult:
        """Continue the chat's unfinished turn from its last stored item.

        After a pause (`result.paused`): the calls in `approve` run, those in `reject` get a rejection the model
        reads, and calls left undecided pause the turn again. `reject` is an iterable of call ids (the model reads
        "Tool execution was not approved.") or a mapping {call id: the message the model reads instead, or None}.
        After a crash: calls without outputs run again and nested turns go on where they stopped. Raises
        `NothingToResume` when the last turn finished.
        `context`: None keeps the context the paused turn ran with, when it paused in this process (a context is
        never stored: after a restart pass it again). `turn_id`: as in get_response; a resume already started with
        it is continued or its result returned.
        """
        return await self._open_resume(chat_id, approve, reject, context, turn_id, streaming=False)._drain()

    def resume_stream(
        self,
        chat_id: str | None = None,
        *,
        approve: Iterable[str] = (),
        reject: Iterable[str] | Mapping[str, str | None] = (),
        context: Any = None,
        turn_id: str | None = None,
    ) -> ResponseStream:
        """`resume` as a stream of events, like `get_response_stream`."""
        return self._open_resume(chat_id, approve, reject, context, turn_id, streaming=True)

    def resume_sync(
        self,
        chat_id: str | None = None,
        *,
        approve: Iterable[str] = (),
        reject: Iterable[str] | Mapping[str, str | None] = (),
        context: Any = None,
        turn_id: str | None = None,
    ) -> RunResult:
        """Blocking form of `resume`."""
        from .._base._sync import run_sync

        return run_sync(self.resume(chat_id, approve=approve, reject=reject, context=context, turn_id=turn_id))

    def _open_resume(
        self, chat_id: str | None, approve: Iterable[str], reject: Iterable[str] | Mapping[str, str | None],
        context: Any, turn_id: str | None, *, streaming: bool,
    ) -> ResponseStream:
        chat = check_chat_id(DEFAULT_CHAT_ID if chat_id is None else chat_id)
        if turn_id is not None:
            check_turn_id(turn_id)
        approved, rejected = _call_ids("approve", approve), rejections(reject)
        entries = {agent.name: (agent, self._wirings[agent.name]) for agent in self._chart.entry_points}

        def start(stream: ResponseStream) -> TurnStart:
            return resume_turn(
                entries, self.thread_manager, chat_id=chat, context=context, approve=approved, reject=rejected,
                stream=stream, turn_id=turn_id,
            )

        return ResponseStream(start, streaming=streaming)

    # -- cancelling ---------------------------------------------------------------------------------
    async def cancel(self, chat_id: str | None = None, turn_id: str | None = None) -> None:
        """Stop the chat's running turn `turn_id` (None: whichever turn of the chat runs) where it stands: between
        model calls, or inside a tool (asyncio cancellation; the cut call gets the "interrupted" output). Its caller
        gets TurnCancelled, its stream ends with a `cancelled` event, and the chat takes its next turn as usual.

        Reaches a turn running in this process, or, on a PostgreSQL store, in any process sharing it. Returns once the
        turn has stopped. A turn started without `turn_id` is named by `stream.turn_id` (`run-...`). Raises
        UnknownTurn when the chat has no turn of that id, TurnNotRunning when the turn has already ended.
        """
        chat = check_chat_id(DEFAULT_CHAT_ID if chat_id is None else chat_id)
        if turn_id is not None and not isinstance(turn_id, str):
            raise ConfigError(f"turn_id must be a str or None, got {type(turn_id).__name__}.")
        await cancel_turn(self.thread_manager, chat, turn_id)

    # -- lifetime ---------------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Close the thread store (files, database connections). Stored chats stay stored."""
        await self.thread_manager.aclose()

    async def __aenter__(self) -> Agency:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        entries = ", ".join(agent.name for agent in self._chart.entry_points)
        flows = len(self.communication_flows)
        return f"Agency(entry_points=[{entries}], agents={len(self._chart.agents)}, flows={flows})"


def rejections(reject: Iterable[str] | Mapping[str, str | None]) -> dict[str, str | None]:
    """`reject` of resume as {call id: the message the model reads, or None for the default}: a mapping as it is,
    an iterable of call ids each with None."""
    if not isinstance(reject, Mapping):
        return dict.fromkeys(sorted(_call_ids("reject", reject)))
    wrong_id = next((call_id for call_id in reject if not isinstance(call_id, str)), None)
    if wrong_id is not None:
        raise ConfigError(f"reject must map call ids (str) to messages, got the key {wrong_id!r}.")
    wrong = next((call_id for call_id, text in reject.items() if text is not None and not isinstance(text, str)), None)
    if wrong is not None:
        raise ConfigError(
            f"reject must map each call id to the message the model reads (a str, or None for the default), got "
            f"{type(reject[wrong]).__name__} for {wrong!r}."
        )
    return dict(reject)


def _call_ids(name: str, ids: Iterable[str]) -> frozenset[str]:
    """`approve` / `reject` of resume: any iterable of call ids, read once (a generator is used up by reading)."""
    if isinstance(ids, str | bytes):
        raise ConfigError(
            f"{name} must be an iterable of call ids, not a single str: write {name}=[{ids!r}]."
        )
    try:
        listed = list(ids)
    except TypeError:
        raise ConfigError(f"{name} must be an iterable of call ids (str), got {type(ids).__name__}.") from None
    wrong = [call_id for call_id in listed if not isinstance(call_id, str)]
    if wrong:
        raise ConfigError(f"{name} must hold call ids (str), got {wrong[0]!r} among them.")
    return frozenset(listed)
