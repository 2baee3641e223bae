"""Agent: an openai-agents Agent that can message other agents and runs its own turn loop."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial
from typing import Any

from agents import Agent as _SDKAgent
from agents import FunctionTool, Model, ModelProvider, MultiProvider

from .._turn._channel import TurnStart
from .._turn._chart import USER
from .._base._errors import ConfigError
from .._turn._hooks import HookTable
from .._turn._loop import _Setup, top_level_turn
from .._turn._outputs import refused_tool
from .._turn._results import ResponseStream, RunResult
from .._model._retry import DEFAULT_RETRY, RetryingModel, RetryPolicy, check_retry, check_timeout, model_label
from .._threads._manager import ThreadManager, check_chat_id

DEFAULT_CHAT_ID = "default"
DEFAULT_MAX_STEPS = 50
DEFAULT_MAX_RECURSION_DEPTH = 5


@dataclass(kw_only=True, eq=False)
class Wiring:
    """Where an agent sits: its threads, whom it may message, the agency-wide settings."""

    thread_manager: ThreadManager
    recipients: dict[str, Agent] = field(default_factory=dict)
    recipient_wirings: dict[str, Wiring] = field(default_factory=dict)
    """Each recipient's wiring in the same agency: an agent shared by two agencies keeps each one's settings."""
    send_tool: FunctionTool | None = None
    shared_instructions: str | None = None
    max_depth: int = DEFAULT_MAX_RECURSION_DEPTH
    model_provider: ModelProvider | None = None
    retry: RetryPolicy | None = None
    """The agency's default for agents without their own `retry`."""
    hooks: HookTable | None = None
    """The agency's AgencyHooks, reduced to the methods it overrides; None when it has none."""
    show_tool_errors: bool = True
    """The agency's default for agents without their own `show_tool_errors`."""
    setups: dict[Agent, _Setup] = field(default_factory=dict)
    """Per agent, the loop's last per-turn setup (tools, prompt, model), reused while its sources are unchanged."""
    _models: dict[str, Model] = field(default_factory=dict)
    _retrying: dict[Agent, RetryingModel] = field(default_factory=dict)
    _last: dict[Agent, tuple[Any, RetryPolicy, float | None, str, RetryingModel]] = field(default_factory=dict)
    """Per agent, the settings its wrapped model was last resolved from: unchanged, they give the same one."""

    def resolve_model(self, agent: Agent) -> RetryingModel:
        """The agent's model behind its RetryPolicy and timeout.

        Resolved at call time, so `agent.model = ...` after the agency is built takes effect.
        """
        model, timeout, name = agent.model, agent.timeout, agent.name
        policy = agent.retry or self.retry or DEFAULT_RETRY
        last = self._last.get(agent)
        if last is not None and last[0] is model and last[1] is policy and last[2] == timeout and last[3] == name:
            return last[4]  # ~1 µs less per agent turn than resolving and comparing again
        wrapped = self._wrapped(agent, policy)
        self._last[agent] = (model, policy, timeout, name, wrapped)
        return wrapped

    def _wrapped(self, agent: Agent, policy: RetryPolicy) -> RetryingModel:
        inner = self._resolve_inner(agent)
        wrapped = self._retrying.get(agent)
        if wrapped is None or not wrapped.wraps(inner, agent=agent.name, policy=policy, timeout=agent.timeout):
            # The name the user wrote identifies the model in errors and price tables.
            label = agent.model if isinstance(agent.model, str) and agent.model else model_label(inner, "")
            wrapped = self._retrying[agent] = RetryingModel(
                inner, agent=agent.name, model_name=label, policy=policy, timeout=agent.timeout
            )
        return wrapped

    def _resolve_inner(self, agent: Agent) -> Model:
        model = agent.model
        if isinstance(model, Model):
            return model
        if model is not None and not isinstance(model, str):
            raise ConfigError(
                f"Agent {agent.name!r} has model={model!r}; use a model name (str) or an agents.Model instance."
            )
        key = model or ""
        resolved = self._models.get(key)
        if resolved is None:
            if self.model_provider is None:
                self.model_provider = MultiProvider()
            try:
                resolved = self._models[key] = self.model_provider.get_model(model)
            except ImportError as error:
                if not key.startswith("litellm/"):
                    raise
                raise ConfigError(
                    f"Agent {agent.name!r} uses model {key!r}, which needs LiteLLM: "
                    "pip install 'agency-swarm-sdk[litellm]'."
                ) from error
        return resolved


@dataclass(kw_only=True, eq=False)
class Agent(_SDKAgent[Any]):
    """An `agents.Agent` plus `description` (shown to agents that may message it) and `max_steps`.

    Outside an agency it works alone with its own in-memory threads; inside one, it uses the agency's.
    """

    description: str | None = None
    """What this agent does; other agents see it in their send_message tool."""
    max_steps: int = DEFAULT_MAX_STEPS
    """The most model calls this agent may make in one turn before MaxStepsExceeded."""
    history_window: int | None = None
    """Send the model only a thread's first item and its last N items (never splitting a tool call from its
    output or a reasoning item from what follows it). Changes what the model sees, never what is stored."""
    retry: RetryPolicy | None = None
    """How failed model calls are retried; None: the agency's `retry`, else RetryPolicy()'s defaults."""
    timeout: float | None = None
    """Seconds to wait for the model: a whole blocking call, or each next event of a streamed one (so a long
    answer that keeps streaming is never cut). A timeout is retried like other transient failures, then raises
    ModelTimeout. None: only the client's own timeout applies."""
    show_tool_errors: bool | None = None
    """Whether the model reads a failed tool's exception (`Error: tool 'x' failed: ValueError: ...`) or only that
    it failed. None: the agency's setting (default True). Argument errors are always explained."""

    # Identity semantics: the SDK's dataclass equality compares every field and makes agents unhashable.
    __eq__ = object.__eq__
    __hash__ = object.__hash__

    def __post_init__(self) -> None:
        super().__post_init__()  # type: ignore[no-untyped-call]
        if self.description is not None and not isinstance(self.description, str):
            raise ConfigError(f"Agent {self.name!r}: description must be a str, got {type(self.description).__name__}.")
        if isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1:
            raise ConfigError(f"Agent {self.name!r}: max_steps must be an int >= 1, got {self.max_steps!r}.")
        window = self.history_window
        if window is not None and (isinstance(window, bool) or not isinstance(window, int) or window < 1):
            raise ConfigError(f"Agent {self.name!r}: history_window must be an int >= 1 or None, got {window!r}.")
        check_retry(self.name, self.retry)
        check_timeout(self.name, self.timeout)
        if self.show_tool_errors is not None and not isinstance(self.show_tool_errors, bool):
            raise ConfigError(f"Agent {self.name!r}: show_tool_errors must be True, False or None.")
        if self.handoffs:
            raise ConfigError(
                f"Agent {self.name!r} has handoffs; agency_swarm agents talk through the agency chart instead: "
                "Agency([a, [a, b]]) lets a message b."
            )
        refused_tool(self.name, self.tools)
        if self.handoff_description is not None and self.description is None:
            self.description = self.handoff_description
        object.__setattr__(self, "_wiring", None)

    # -- wiring (set by Agency) ------------------------------------------------------------------
    @property
    def wiring(self) -> Wiring:
        """Used when this agent is called directly: the last agency built with it, or its own threads."""
        wiring: Wiring | None = self.__dict__.get("_wiring")
        if wiring is None:
            wiring = Wiring(thread_manager=ThreadManager())
            object.__setattr__(self, "_wiring", wiring)
        return wiring

    def _attach(self, wiring: Wiring) -> None:
        object.__setattr__(self, "_wiring", wiring)

    # -- running -------------------------------------------------------------------------------
    async def get_response(
        self,
        message: str,
        *,
        chat_id: str | None = None,
        sender_name: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> RunResult:
        """Run one complete turn on the thread sender->self (sender defaults to the user)."""
        caller, chat = self._checked(message, chat_id, sender_name, additional_instructions)
        return await top_level_turn(self, self.wiring, message, caller, chat, context, additional_instructions, None)

    def get_response_stream(
        self,
        message: str,
        *,
        chat_id: str | None = None,
        sender_name: str | None = None,
        context: Any = None,
        additional_instructions: str | None = None,
    ) -> ResponseStream:
        """The same turn as an async iterator of events, nested agents' events included."""
        return self._stream(message, chat_id, sender_name, context, additional_instructions, self.wiring)

    def _checked(
        self, message: str, chat_id: str | None, sender_name: str | None, additional_instructions: str | None
    ) -> tuple[str, str]:
        """The caller and chat id of a new message, after checking what the user passed."""
        if not isinstance(message, str):
            raise ConfigError(f"message must be a str, got {type(message).__name__}.")
        if additional_instructions is not None and not isinstance(additional_instructions, str):
            raise ConfigError("additional_instructions must be a str or None.")
        caller = USER if sender_name is None else sender_name
        chat = check_chat_id(DEFAULT_CHAT_ID if chat_id is None else chat_id)
        if caller is not USER and (not isinstance(caller, str) or not caller or "->" in caller):
            raise ConfigError(f"sender_name {caller!r} is not a valid sender; use an agent name or leave it out.")
        return caller, chat

    def _stream(
        self,
        message: str,
        chat_id: str | None,
        sender_name: str | None,
        context: Any,
        additional_instructions: str | None,
        wiring: Wiring,
    ) -> ResponseStream:
        caller, chat = self._checked(message, chat_id, sender_name, additional_instructions)

        def start(stream: ResponseStream) -> TurnStart:
            return partial(
                top_level_turn, self, wiring, message, caller=caller, chat_id=chat, context=context,
                additional_instructions=additional_instructions, stream=stream,
            )

        return ResponseStream(start, streaming=True)

    def get_response_sync(
        self,
        message: str,
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
