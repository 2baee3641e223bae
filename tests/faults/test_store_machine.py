"""A hypothesis state machine over the ThreadStore API of every store, against a model of what it must hold.

Rules: append; load; delete; list_chats; appends to several threads and chats at once (the store's own
concurrency); turns of an agency on two chats at once; reopen (a new store object on the same files or database,
as a restarted process opens it); and, for the file store, a crash in the middle of a write (a torn last line,
then a new process). After every step each chat loads exactly as the model says.
"""

from __future__ import annotations

import asyncio
import itertools
import shutil
import tempfile
import uuid
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule, run_state_machine_as_test

from agency_swarm import Agency, Agent
from agency_swarm.testing import ModelCall, ScriptedModel
from faults import harness

KEYS = ("user->Echo", "user->CEO", "CEO->Developer")
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=12)  # any text but lone surrogates
CHAT = st.integers(0, 2)
EXAMPLES = {"memory": 40, "file": 30, "sqlite": 20, "postgres": 12}
STEPS = 20


def echo(call: ModelCall) -> str:
    return f"echo {call.last_user_message}"


class StoreMachine(RuleBasedStateMachine):
    store_name: ClassVar[str] = "memory"

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.where = Path(tempfile.mkdtemp(prefix="faults-machine-"))
        self.backend = harness.Backend(self.store_name, self.where)
        self.store = self.backend.open()
        prefix = uuid.uuid4().hex[:8]
        self.chats = [f"m{prefix}-a", f"m{prefix}-b", f"m{prefix} é✓/x".replace("/", "_")]
        self.backend.chats.extend(self.chats)  # deleted from PostgreSQL at the end
        self.expected: dict[str, dict[str, list[dict[str, Any]]]] = {chat: {} for chat in self.chats}
        self.numbers = itertools.count()

    def run(self, coroutine: Any) -> Any:
        return self.loop.run_until_complete(coroutine)

    def item(self, text: str) -> dict[str, Any]:
        number = next(self.numbers)
        return {"role": "user", "content": f"{number}:{text}", "meta": {"n": number, "tags": [text, None, 1.5]}}

    def expect(self, chat: str, key: str, items: list[dict[str, Any]]) -> None:
        self.expected[chat].setdefault(key, []).extend(items)

    # -- the store's own API ---------------------------------------------------------------------------------
    @rule(chat=CHAT, key=st.sampled_from(KEYS), texts=st.lists(TEXT, min_size=1, max_size=3))
    def append(self, chat: int, key: str, texts: list[str]) -> None:
        items = [self.item(text) for text in texts]
        self.run(self.store.append(self.chats[chat], key, items))
        self.expect(self.chats[chat], key, items)

    @rule(chat=CHAT)
    def load(self, chat: int) -> None:
        assert self.run(self.store.load(self.chats[chat])) == self.expected[self.chats[chat]]

    @rule(chat=CHAT)
    def delete(self, chat: int) -> None:
        self.run(self.store.delete(self.chats[chat]))
        self.expected[self.chats[chat]] = {}

    @rule()
    def list_chats(self) -> None:
        listed = set(self.run(self.store.list_chats())) & set(self.chats)  # PostgreSQL may hold other tests' chats
        assert listed == {chat for chat, threads in self.expected.items() if threads}

    @rule(batch=st.lists(st.tuples(CHAT, st.sampled_from(KEYS), st.integers(1, 4)), min_size=2, max_size=4,
                         unique_by=lambda entry: (entry[0], entry[1])))
    def concurrent_appends(self, batch: list[tuple[int, str, int]]) -> None:
        """Several threads and chats written at once, each thread's appends in order."""
        plans = [(self.chats[chat], key, [self.item(f"c{n}") for n in range(count)]) for chat, key, count in batch]

        async def write(chat: str, key: str, items: list[dict[str, Any]]) -> None:
            for item in items:
                await self.store.append(chat, key, [item])

        async def all_at_once() -> None:
            await asyncio.gather(*(write(chat, key, items) for chat, key, items in plans))

        self.run(all_at_once())
        for chat, key, items in plans:
            self.expect(chat, key, items)

    # -- through an agency -------------------------------------------------------------------------------------
    @rule(first=CHAT, second=CHAT, text=TEXT)
    def concurrent_turns(self, first: int, second: int, text: str) -> None:
        """Turns of one agency on two chats (or twice on one chat: they queue) at the same time."""
        agency = Agency(Agent(name="Echo", model=ScriptedModel(echo)), thread_store=self.store)
        chats = [self.chats[first], self.chats[second]]

        async def both() -> list[Any]:
            return list(await asyncio.gather(*(agency.get_response(f"{n}:{text}", chat_id=chat)
                                               for n, chat in enumerate(chats))))

        results = self.run(both())
        for chat, result in zip(chats, results, strict=True):
            assert result.final_output.startswith("echo ")
            self.expect(chat, "user->Echo", result.new_items)

    # -- restarts ----------------------------------------------------------------------------------------------
    @rule()
    def reopen(self) -> None:
        """A new store object on the same data, as a restarted process opens it (memory: the same object)."""
        if self.store_name == "memory":
            return
        self.run(self.store.aclose())
        self.backend.opened.remove(self.store)
        self.store = self.backend.open()

    @precondition(lambda self: self.store_name == "file")
    @rule(chat=CHAT, cut=st.integers(1, 40))
    def crash_mid_write(self, chat: int, cut: int) -> None:
        """The process dies in the middle of an append: a torn last line; a new process must not see it."""
        from agency_swarm._threads._file_store import _stem

        self.run(self.store.aclose())
        self.backend.opened.remove(self.store)
        path = self.where / "threads" / f"{_stem(self.chats[chat])}.jsonl"
        torn = b'{"k":"user->CEO","i":{"role":"user","content":"never committed"}}'[:cut]
        with path.open("ab") as file:
            file.write(torn)
        self.store = self.backend.open()

    @invariant()
    def every_chat_loads_as_expected(self) -> None:
        for chat in self.chats:
            loaded = self.run(self.store.load(chat))
            assert loaded == self.expected[chat], f"{chat}: {harness.render_threads(loaded)}"

    def teardown(self) -> None:
        try:
            self.run(self.backend.aclose())
        finally:
            self.loop.close()
            shutil.rmtree(self.where, ignore_errors=True)


@pytest.mark.parametrize("store", harness.STORES)
def test_the_store_api_matches_a_model_of_its_contents(store: str) -> None:
    if store == "postgres":
        from postgres_support import require_postgres

        require_postgres()
    machine = type(f"{store.title()}StoreMachine", (StoreMachine,), {"store_name": store})
    run_state_machine_as_test(machine, settings=settings(
        max_examples=EXAMPLES[store], stateful_step_count=STEPS, deadline=None, database=None, print_blob=True,
    ))
