"""The exception tree: user errors (bad chart, bad config) and run errors (limits hit during a turn)."""

from __future__ import annotations


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
    """A streamed model reported `response.failed`, or its stream ended without a complete response.

    Errors the model client raises itself (e.g. `openai.APIStatusError`) pass through unchanged.
    """


class InvalidChatId(ConfigError):
    """A chat id that is empty, too long, or could address a path or a control sequence."""


class StoreError(AgencySwarmError):
    """A thread store could not read or write (directory not writable, disk full, database down...).

    Items stored before the failure stay readable.
    """


class ItemTooLarge(StoreError, ValueError):
    """One item is larger than the store's `max_item_bytes`."""
