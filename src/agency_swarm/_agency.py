"""Agency: setup only. It validates the chart, wires agents to shared threads and settings, and delegates turns."""

from __future__ import annotations

import os
from collections.abc import Iterable
from types import TracebackType
from typing import Any

from agents import ModelProvider

from ._agent import DEFAULT_MAX_RECURSION_DEPTH, Agent, Wiring
from ._chart import Chart, parse_chart
from ._errors import ConfigError
from ._results import ResponseStream, RunResult
from ._send_message import SEND_MESSAGE, build_send_message_tool
from ._store import ThreadStore
from ._threads import LoadThreadsCallback, SaveThreadsCallback, ThreadManager


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
    ) -> None:
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
            from ._file_store import FileThreadStore

            thread_store = FileThreadStore(threads_dir)
        self.thread_manager = ThreadManager(
            store=thread_store, load_threads_callback=load_threads_callback,
            save_threads_callback=save_threads_callback, max_chats_in_memory=max_chats_in_memory,
        )
        self.model_provider = model_provider
        self._wire()

    def _wire(self) -> None:
        self._wirings: dict[str, Wiring] = {}
        for agent in self._chart.agents.values():
            recipients = {name: self._chart.agents[name] for name in self._chart.recipients_of(agent.name)}
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
            )
        for name, wiring in self._wirings.items():
            wiring.recipient_wirings = {recipient: self._wirings[recipient] for recipient in wiring.recipients}
            self._chart.agents[name]._attach(wiring)  # direct agent.get_response(...) calls use this agency

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

    def _recipient(self, recipient_agent: str | Agent | None) -> Agent:
        if recipient_agent is None:
            return self._chart.entry_points[0]
        name = recipient_agent.name if isinstance(recipient_agent, Agent) else recipient_agent
        agent = self._chart.agents.get(name) if isinstance(name, str) else None
        if agent is None or (isinstance(recipient_agent, Agent) and agent is not recipient_agent):
            known = ", ".join(self._chart.agents)
            raise ConfigError(f"recipient_agent {recipient_agent!r} is not in this agency; its agents are: {known}.")
        return agent

    # -- turns (delegated to the agents' own loop) -----------------------------------------------
    async def get_response(
        self,
        message: str,
        recipient_agent: str | Agent | None = None,
        *,
        chat_id: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> RunResult:
        """One turn: the user's message to `recipient_agent` (default: the first entry point)."""
        stream = self._open(message, recipient_agent, chat_id, context, additional_instructions, streaming=False)
        return await stream._drain()

    def get_response_stream(
        self,
        message: str,
        recipient_agent: str | Agent | None = None,
        *,
        chat_id: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> ResponseStream:
        """The same turn as a stream of events from every agent involved, in order."""
        return self._open(message, recipient_agent, chat_id, context, additional_instructions, streaming=True)

    def get_response_sync(
        self,
        message: str,
        recipient_agent: str | Agent | None = None,
        *,
        chat_id: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> RunResult:
        """Blocking form for scripts and notebooks; works inside a running event loop too."""
        from ._sync import run_sync

        return run_sync(
            self.get_response(
                message, recipient_agent, chat_id=chat_id, context=context,
                additional_instructions=additional_instructions,
            )
        )

    def _open(
        self,
        message: str,
        recipient_agent: str | Agent | None,
        chat_id: str | None,
        context: Any,
        additional_instructions: str | None,
        *,
        streaming: bool,
    ) -> ResponseStream:
        agent = self._recipient(recipient_agent)
        return agent._open(
            message, chat_id, None, context, additional_instructions, streaming=streaming,
            wiring=self._wirings[agent.name],
        )

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
