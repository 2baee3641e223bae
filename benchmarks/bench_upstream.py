"""Upstream agency-swarm 1.x, run only inside benchmarks/.venv-upstream (where `agency_swarm` is upstream's).

Chats are reset with `thread_manager.replace_messages([])`; W5 persists through `save_threads_callback` writing the
whole message list as JSON to one file, as upstream's documentation shows.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_fake_model import Call
from bench_systems import AgencyShaped


class Upstream(AgencyShaped):
    key = "upstream"
    label = "agency-swarm 1.x upstream"

    def delegate(self, recipient: str, message: str) -> Call:
        return Call("send_message", {"recipient_agent": recipient, "message": message, "additional_instructions": ""})

    def build(self, entry: Any, flows: Sequence[tuple[Any, Any]] = ()) -> Any:
        return self.sdk.Agency(entry, communication_flows=list(flows))

    async def ask(self, chat: Any, message: str) -> Any:
        return (await chat.get_response(message)).final_output

    async def stream(self, chat: Any, message: str) -> tuple[int, Any]:
        stream = chat.get_response_stream(message)
        events = 0
        async for _ in stream:
            events += 1
        return events, stream.final_result.final_output

    async def reset(self, chat: Any) -> None:
        chat.thread_manager.replace_messages([])

    async def w5_open(self, entry: Any, directory: Path) -> Any:
        path = directory / "w5.json"

        def save(messages: list[Any]) -> None:
            path.write_text(json.dumps(messages, default=str))

        return self.sdk.Agency(entry, load_threads_callback=lambda: [], save_threads_callback=save)
