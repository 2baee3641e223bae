"""A remote agent's Agent Card: where it is fetched, and the errors a card that cannot be had or read gives."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .._base._errors import ConfigError
from ._protocol import require_a2a

if TYPE_CHECKING:
    from a2a.types.a2a_pb2 import AgentCard

CARD_PATH = "/.well-known/agent-card.json"
CARD_TIMEOUT_S = 10.0


def card_url(url: str) -> str:
    """The card's address: `url` itself when it names a .json file, else the well-known path under it."""
    return url if url.rstrip("/").endswith(".json") else url.rstrip("/") + CARD_PATH


def parsed_card(name: str, status: int, body: bytes) -> AgentCard:
    """The AgentCard an HTTP answer holds, or a ConfigError saying what is wrong with it."""
    require_a2a()
    from a2a.client.card_resolver import parse_agent_card
    from google.protobuf.json_format import ParseError

    if status != 200:
        raise ConfigError(f"RemoteAgent {name!r}: its agent card answered HTTP {status}; check its url and headers.")
    try:
        data: Any = json.loads(body)
        card = parse_agent_card(data)
    except (ValueError, ParseError) as bad:
        reason = str(bad).splitlines()[0][:200] if str(bad) else type(bad).__name__
        raise ConfigError(
            f"RemoteAgent {name!r}: its agent card does not parse as an A2A Agent Card ({reason})."
        ) from None
    if not card.supported_interfaces:
        raise ConfigError(f"RemoteAgent {name!r}: its agent card lists no interface (supportedInterfaces) to call.")
    return card


def fetch_card(name: str, url: str, headers: Mapping[str, str], timeout: float = CARD_TIMEOUT_S) -> AgentCard:
    """The card, fetched now (blocking): an agency is built before any event loop needs to run."""
    import httpx

    try:
        response = httpx.get(card_url(url), headers=dict(headers), timeout=timeout)
    except httpx.HTTPError as error:
        raise ConfigError(
            f"RemoteAgent {name!r}: its agent card could not be fetched ({type(error).__name__}); start the remote "
            "agent first, or pass description= to build the agency before it is up."
        ) from None
    return parsed_card(name, response.status_code, response.content)


async def fetch_card_async(name: str, url: str, headers: Mapping[str, str], client: Any) -> AgentCard:
    """The card, fetched on the event loop with `client` (an httpx.AsyncClient)."""
    response = await client.get(card_url(url), headers=dict(headers), timeout=CARD_TIMEOUT_S)
    return parsed_card(name, response.status_code, response.content)
