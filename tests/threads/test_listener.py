"""Every item a thread gets is handed on at once: what durable stores build on."""

from __future__ import annotations

from typing import Any

import pytest

from agency_swarm import Agency, Agent, ConfigError, ConversationThread
from agency_swarm.testing import ScriptedModel, send_message


async def test_listener_sees_every_item_in_order_as_it_is_added() -> None:
    ceo = Agent(name="CEO", model=ScriptedModel([send_message("Developer", "build"), "done"]))
    dev = Agent(name="Developer", model=ScriptedModel(["built"]))
    agency = Agency([ceo, [ceo, dev]])
    seen: list[tuple[str, Any]] = []

    def listener(thread: ConversationThread, item: dict[str, Any]) -> None:
        # at the moment of the call the item is already the thread's last one: nothing is batched
        assert thread.items[-1] is item
        seen.append((thread.key, item.get("type") or item.get("role")))

    agency.thread_manager.subscribe(listener)
    await agency.get_response("go")

    assert seen == [
        ("user->CEO", "user"),
        ("user->CEO", "function_call"),
        ("CEO->Developer", "user"),
        ("CEO->Developer", "message"),
        ("user->CEO", "function_call_output"),
        ("user->CEO", "message"),
    ]


def test_subscribe_rejects_a_non_callable() -> None:
    agency = Agency(Agent(name="CEO", model=ScriptedModel(["hi"])))
    with pytest.raises(ConfigError, match="callable"):
        agency.thread_manager.subscribe("not a function")  # type: ignore[arg-type]
