"""RemoteAgent: an A2A agent in another service as a member of an agency chart."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from .._base._errors import ConfigError
from .._turn._agent import Agent
from .._turn._state import Message, RemoteMember, Turn
from ._card import fetch_card
from ._protocol import require_a2a

DEFAULT_REPLY_TIMEOUT_S = 300.0
DEFAULT_RETRIES = 2


@dataclass(kw_only=True, eq=False)
class RemoteAgent(Agent, RemoteMember):
    """An A2A agent at `url` (its base URL, or its Agent Card's URL) as a chart member:
    `Agency([ceo, [ceo, RemoteAgent(name="Developer", url="http://dev:8000")]])`.

    A send to it is an A2A message; each pair thread is one A2A context, so the remote keeps the conversation. Its
    progress joins the caller's stream as `remote_progress` events; its INPUT_REQUIRED pauses the turn for approval
    like a local tool's (resume with the call ids its interruptions name). `headers` go with every request (e.g.
    `{"Authorization": "Bearer ..."}`). `description` defaults to the card's, fetched when the agent is made.
    `reply_timeout`: seconds the remote has for its whole answer; `retries`: further tries when it cannot be reached
    or its stream breaks (the same message id each time: the remote never runs it twice).
    """

    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    reply_timeout: float = DEFAULT_REPLY_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    card: Any = field(default=None, repr=False)
    """The remote's AgentCard (a2a-sdk's type): fetched when the agent is made, or on its first send."""

    def __post_init__(self) -> None:
        super().__post_init__()
        name = self.name
        if not isinstance(self.url, str) or urlsplit(self.url).scheme not in ("http", "https") or not urlsplit(
            self.url
        ).netloc:
            raise ConfigError(f"RemoteAgent {name!r}: url must be an http:// or https:// URL of an A2A agent.")
        if not isinstance(self.headers, Mapping) or not all(
            isinstance(key, str) and isinstance(value, str) for key, value in self.headers.items()
        ):
            raise ConfigError(f"RemoteAgent {name!r}: headers must map header names (str) to values (str).")
        timeout = self.reply_timeout
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout < float("inf"):
            raise ConfigError(f"RemoteAgent {name!r}: reply_timeout must be a number of seconds > 0.")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"RemoteAgent {name!r}: retries must be an int >= 0.")
        if self.tools or self.model is not None or self.instructions is not None:
            raise ConfigError(
                f"RemoteAgent {name!r} runs elsewhere: it takes no tools, model or instructions of its own."
            )
        require_a2a()
        if self.description is None:
            self.card = fetch_card(name, self.url, self.headers)
            self.description = self.card.description or None

    async def remote_turn(self, turn: Turn, message: Message | None, additional_instructions: str | None) -> None:
        from ._turn import remote_turn

        await remote_turn(self, turn, message, additional_instructions)
