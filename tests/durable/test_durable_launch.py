"""A durable worker launching while PostgreSQL cannot take it yet (out of connections, as when many workers restart
at once) tries again and launches once it can; an error that waiting cannot fix raises at once."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from agency_swarm import Agency, Agent, ConfigError
from agency_swarm.durable import DurableTurns
from agency_swarm.testing import ScriptedModel
from postgres_support import require_postgres


def with_user_and_database(url: str, user: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"{user}@{parts.hostname}:{parts.port or 5432}", path=f"/{database}"))


@pytest.fixture
async def limited() -> AsyncIterator[tuple[str, str]]:
    """A role allowed one connection, owning a database of its own: (its URL, the role)."""
    url = require_postgres()
    name = f"durable_launch_{uuid.uuid4().hex[:8]}"
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(f'CREATE ROLE "{name}" LOGIN CONNECTION LIMIT 1')
        await admin.execute(f'CREATE DATABASE "{name}" OWNER "{name}"')
        yield with_user_and_database(url, name, name), name
    finally:
        await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        await admin.execute(f'DROP ROLE IF EXISTS "{name}"')
        await admin.close()


class Retries(logging.Handler):
    """Calls `on_retry` the first time the worker says it will try to launch again."""

    def __init__(self, on_retry: asyncio.Event) -> None:
        super().__init__(logging.WARNING)
        self.on_retry, self.messages = on_retry, list[str]()

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())
        if "trying again" in record.getMessage():
            self.on_retry.set()


async def test_a_worker_out_of_connections_launches_once_the_database_can_take_it(limited: tuple[str, str]) -> None:
    url, role = limited
    agency = Agency(Agent(name="A", model=ScriptedModel(lambda call: f"done: {call.last_user_message}")))
    turns = DurableTurns(agency, database_url=url, executor_id="launch-1", queue_name="launch_queue")
    retrying = asyncio.Event()
    handler = Retries(retrying)
    logging.getLogger("agency_swarm.durable").addHandler(handler)
    try:
        launching = asyncio.ensure_future(turns.launch())  # its heartbeat connection takes the one allowed
        await asyncio.wait_for(retrying.wait(), 60)  # DBOS found no connection left: the launch was undone
        assert not launching.done()
        admin = await asyncpg.connect(require_postgres())
        try:
            await admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT -1')  # the database can take it now
        finally:
            await admin.close()
        await asyncio.wait_for(launching, 60)
        handle = await turns.submit("hello", chat_id="launch-chat")
        assert (await asyncio.wait_for(handle.result(), 30)).final_output == "done: hello"
    finally:
        logging.getLogger("agency_swarm.durable").removeHandler(handler)
        await turns.aclose()
    assert any("attempt 1 of 6" in message for message in handler.messages)


async def test_an_error_waiting_cannot_fix_raises_at_once() -> None:
    url = with_user_and_database(require_postgres(), "postgres", f"missing_{uuid.uuid4().hex[:8]}")
    turns = DurableTurns(Agency(Agent(name="A", model=ScriptedModel(lambda call: "ok"))), database_url=url)
    with pytest.raises(asyncpg.InvalidCatalogNameError):
        await turns.launch()


@pytest.mark.parametrize(
    ("setting", "value"),
    [("poll_seconds", 0), ("poll_seconds", "fast"), ("pool_size", 0), ("pool_size", 2.5), ("concurrency", True)],
)
def test_settings_out_of_range_are_refused_by_name(setting: str, value: object) -> None:
    agency = Agency(Agent(name="A", model=ScriptedModel(lambda call: "ok")))
    with pytest.raises(ConfigError, match=f"{setting} must be"):
        DurableTurns(agency, database_url="postgresql://127.0.0.1/test", **{setting: value})  # type: ignore[arg-type]
