"""The systems `compare.py` measures, behind one small interface (see `System`).

`Ours` and `RunnerSystem` run in the project's virtualenv; `bench_upstream.Upstream` runs in benchmarks/.venv-upstream.
Every system gets the same `FakeModel`s; only the wiring around them differs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench_fake_model import Call, FakeModel, Step

TOOL_CALLS = [0]  # how many times the W2 tool really ran (checked before timing)


def add_sync(a: int, b: int) -> int:
    """Add two integers."""
    TOOL_CALLS[0] += 1
    return a + b


async def add_async(a: int, b: int) -> int:
    """Add two integers."""
    TOOL_CALLS[0] += 1
    return a + b


def offline_environment() -> None:
    """No network, no tracing, before any SDK is imported."""
    os.environ.setdefault("OPENAI_API_KEY", "offline-benchmark-not-a-key")
    os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # upstream pulls litellm; no price-map download


class System:
    """What a workload needs from a system. A "chat" is whatever `build` returns."""

    key = "abstract"
    label = "abstract"

    def __init__(self) -> None:
        import agents

        agents.set_tracing_disabled(True)

    def model(self, *steps: Step, latency: float = 0.0, deltas: int = 10) -> FakeModel:
        return FakeModel(*steps, latency=latency, deltas=deltas)

    def agent(self, name: str, model: FakeModel, tools: Sequence[Any] = ()) -> Any:
        raise NotImplementedError

    def add_tool(self, sync: bool) -> Any:
        raise NotImplementedError

    def delegate(self, recipient: str, message: str) -> Call:
        raise NotImplementedError

    def build(self, entry: Any, flows: Sequence[tuple[Any, Any]] = ()) -> Any:
        raise NotImplementedError

    async def ask(self, chat: Any, message: str) -> Any:
        raise NotImplementedError

    async def stream(self, chat: Any, message: str) -> tuple[int, Any]:
        raise NotImplementedError

    async def reset(self, chat: Any) -> None:
        """Forget the conversation so the next turn is a first turn (outside the timer)."""

    # W5: one chat persisted under `directory`
    async def w5_open(self, entry: Any, directory: Path) -> Any:
        raise NotImplementedError

    async def w5_close(self, chat: Any) -> None:
        pass


class _OurChat:
    def __init__(self, agency: Any, chat_id: str = "bench-0") -> None:
        self.agency, self.chat_id, self.turn = agency, chat_id, 0


class AgencyShaped(System):
    """An SDK with agency_swarm's shape (`Agent(..., description=...)`, `function_tool`): ours and upstream's."""

    def __init__(self) -> None:
        super().__init__()
        import agency_swarm

        self.sdk = agency_swarm

    def agent(self, name: str, model: FakeModel, tools: Sequence[Any] = ()) -> Any:
        return self.sdk.Agent(
            name=name, instructions=f"You are {name}. Be brief.", description=f"{name} agent.", model=model,
            tools=list(tools),
        )

    def add_tool(self, sync: bool) -> Any:
        return self.sdk.function_tool(add_sync if sync else add_async, name_override="add")


class Ours(AgencyShaped):
    key = "ours"
    label = "agency_swarm (this project)"

    def delegate(self, recipient: str, message: str) -> Call:
        return Call("send_message", {"recipient_agent": recipient, "message": message, "additional_instructions": None})

    def build(self, entry: Any, flows: Sequence[tuple[Any, Any]] = ()) -> Any:
        return _OurChat(self.sdk.Agency(entry, communication_flows=list(flows)))

    async def ask(self, chat: _OurChat, message: str) -> Any:
        return (await chat.agency.get_response(message, chat_id=chat.chat_id)).final_output

    async def stream(self, chat: _OurChat, message: str) -> tuple[int, Any]:
        stream = chat.agency.get_response_stream(message, chat_id=chat.chat_id)
        events = 0
        async for _ in stream:
            events += 1
        return events, stream.result.final_output

    async def reset(self, chat: _OurChat) -> None:
        old = chat.chat_id
        chat.turn += 1
        chat.chat_id = f"bench-{chat.turn}"
        await chat.agency.thread_manager.delete_chat(old)  # keeps the process's state the same size every turn

    async def w5_open(self, entry: Any, directory: Path) -> Any:
        return _OurChat(self.sdk.Agency(entry, threads_dir=directory), chat_id="w5")

    async def w5_close(self, chat: _OurChat) -> None:
        await chat.agency.aclose()


class _RunnerChat:
    def __init__(self, entry: Any, session: Any = None) -> None:
        self.entry, self.session = entry, session


class RunnerSystem(System):
    key = "runner"
    label = "openai-agents Runner"

    def __init__(self) -> None:
        super().__init__()
        import agents

        self.sdk = agents

    def agent(self, name: str, model: FakeModel, tools: Sequence[Any] = ()) -> Any:
        return self.sdk.Agent(name=name, instructions=f"You are {name}. Be brief.", model=model, tools=list(tools))

    def add_tool(self, sync: bool) -> Any:
        return self.sdk.function_tool(add_sync if sync else add_async, name_override="add")

    def delegate(self, recipient: str, message: str) -> Call:
        return Call(f"ask_{recipient.lower()}", {"input": message})

    def build(self, entry: Any, flows: Sequence[tuple[Any, Any]] = ()) -> Any:
        for sender, recipient in flows:
            tool = recipient.as_tool(
                tool_name=f"ask_{recipient.name.lower()}", tool_description=f"Ask {recipient.name} to do a task."
            )
            sender.tools.append(tool)
        return _RunnerChat(entry)

    async def ask(self, chat: _RunnerChat, message: str) -> Any:
        return (await self.sdk.Runner.run(chat.entry, message, session=chat.session)).final_output

    async def stream(self, chat: _RunnerChat, message: str) -> tuple[int, Any]:
        result = self.sdk.Runner.run_streamed(chat.entry, message, session=chat.session)
        events = 0
        async for _ in result.stream_events():
            events += 1
        return events, result.final_output

    async def w5_open(self, entry: Any, directory: Path) -> Any:
        return _RunnerChat(entry, self.sdk.SQLiteSession("w5", db_path=directory / "w5.db"))

    async def w5_close(self, chat: _RunnerChat) -> None:
        chat.session.close()


def load_system(key: str) -> System:
    if key == "ours":
        return Ours()
    if key == "runner":
        return RunnerSystem()
    if key == "upstream":
        from bench_upstream import Upstream

        return Upstream()
    raise SystemExit(f"unknown system {key!r}")
