"""Workers starting at once on a new PostgreSQL database: a worker that waited for another to make the schema does
not make it again (its ALTERs would wait for the other workers' appends while holding what those appends need: a
deadlock, seen with three new workers in benchmarks/durable_load.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest

from agency_swarm import SQLThreadStore
from agency_swarm._threads._postgres import _MIGRATION
from postgres_support import require_postgres


@pytest.fixture
async def new_database() -> AsyncIterator[str]:
    url = require_postgres()
    name = f"schema_race_{uuid.uuid4().hex[:10]}"
    admin = await asyncpg.connect(url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
        yield url.rsplit("/", 1)[0] + "/" + name
        await admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
    finally:
        await admin.close()


async def blocked_on_the_schema_lock(connection: asyncpg.Connection) -> None:
    """Returns once some session waits for an advisory lock (each query is a round trip: no pause needed)."""
    query = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
    while not await connection.fetchval(query):
        pass


async def test_a_worker_that_waited_for_the_schema_does_not_make_it_again(new_database: str) -> None:
    maker = await asyncpg.connect(new_database)  # another worker, making the schema
    appender = await asyncpg.connect(new_database)  # another worker, appending once it exists
    waiting = SQLThreadStore(new_database)
    try:
        await maker.execute("SELECT pg_advisory_lock(hashtext('agency_swarm_items schema'))")
        first_use = asyncio.create_task(waiting.load("c"))  # finds no schema, waits for the maker
        await asyncio.wait_for(blocked_on_the_schema_lock(maker), 10)
        for statement in _MIGRATION:
            await maker.execute(statement)
        async with appender.transaction():  # an append in flight: an ALTER TABLE would wait for it
            await appender.fetch("SELECT * FROM agency_swarm_chats FOR SHARE")
            await maker.execute("SELECT pg_advisory_unlock_all()")
            assert await asyncio.wait_for(first_use, 10) == {}
    finally:
        await waiting.aclose()
        await maker.close()
        await appender.close()
