"""What the loop needs of an agent: its settings (`AgentBase`, which `Agent` extends) and where it sits (`Wiring`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from agents import Agent as _SDKAgent
from agents import FunctionTool, Model, ModelProvider, MultiProvider

from .._base._errors import ConfigError
from .._base._extras import extra_message
from .._model._retry import (
    DEFAULT_RETRY,
    RetryingModel,
    RetryPolicy,
    check_retry,
    check_timeout,
    missing_credentials,
    model_label,
)
from .._threads._manager import ThreadManager
from ._hooks import HookTable
from ._outputs import refused_tool

if TYPE_CHECKING:
    from ._setup import Setup

DEFAULT_CHAT_ID = "default"
DEFAULT_MAX_STEPS = 50
DEFAULT_MAX_RECURSION_DEPTH = 5


@dataclass(kw_only=True, eq=False)
class Wiring:
    """Where an agent sits: its threads, whom it may message, the agency-wide settings."""

    thread_manager: ThreadManager
    recipients: dict[str, AgentBase] = field(default_factory=dict)
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
    setups: dict[AgentBase, Setup] = field(default_factory=dict)
    """Per agent, the loop's last setup (tools, prompt, model), reused while its sources are unchanged
    (`_prepare.reused_setup`)."""
    _models: dict[str, Model] = field(default_factory=dict)
    _retrying: dict[AgentBase, RetryingModel] = field(default_factory=dict)

    def resolve_model(self, agent: AgentBase) -> RetryingModel:
        """The agent's model behind its RetryPolicy and timeout (the same wrapper while they are the same).

        Resolved at call time, so `agent.model = ...` after the agency is built takes effect.
        """
        return self._wrapped(agent, agent.retry or self.retry or DEFAULT_RETRY)

    def _wrapped(self, agent: AgentBase, policy: RetryPolicy) -> RetryingModel:
        inner = self._resolve_inner(agent)
        wrapped = self._retrying.get(agent)
        if wrapped is None or not wrapped.wraps(inner, agent=agent.name, policy=policy, timeout=agent.timeout):
            # The name the user wrote identifies the model in errors and price tables.
            label = agent.model if isinstance(agent.model, str) and agent.model else model_label(inner, "")
            wrapped = self._retrying[agent] = RetryingModel(
                inner, agent=agent.name, model_name=label, policy=policy, timeout=agent.timeout
            )
        return wrapped

    def _resolve_inner(self, agent: AgentBase) -> Model:
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
                    extra_message("litellm", "litellm", f"Agent {agent.name!r} uses model {key!r}, which")
                ) from error
            except Exception as error:  # the OpenAI client is built here, and refuses to be without a key
                failure = missing_credentials(error, agent=agent.name, model=key)
                if failure is None:
                    raise
                raise failure from error
        return resolved


@dataclass(kw_only=True, eq=False)
class AgentBase(_SDKAgent[Any]):
    """An `agents.Agent` plus the settings of ours the loop reads; `Agent` adds the ways to run a turn."""

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



def attach(agent: AgentBase, wiring: Wiring) -> None:
    """Direct `agent.get_response(...)` calls use `wiring` from now on (the agency built last wins)."""
    object.__setattr__(agent, "_wiring", wiring)
