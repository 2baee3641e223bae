"""Durable workers of different queues on one database (two agencies, or two test runs) keep to their own queue.

- DBOS dequeues from every queue its application ("agency_swarm") has in the database unless told which to listen
  to: a worker would run another queue's turns with its own agency. `DurableTurns.launch` listens to its queue only.
- The heartbeat table is shared by the workers of every queue: a worker that claims a dead worker of another queue
  puts that worker's turns back on their own queue (it used to look for them on its own queue only, find none, and
  delete the row: nobody would ever hand them back).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from dbos import DBOSClient

from agency_swarm import Agency, Agent, SQLThreadStore
from agency_swarm.durable import DurableTurns
from agency_swarm.durable._runner import chat_tag
from agency_swarm.testing import ScriptedModel
from postgres_support import require_postgres


@pytest.fixture
async def client() -> AsyncIterator[DBOSClient]:
    made = DBOSClient(system_database_url=require_postgres(), application_name="agency_swarm")
    yield made
    made.destroy()


async def other_queue_turn(client: DBOSClient, queue: str) -> str:
    """A turn waiting on `queue`, which this process's worker does not serve (as another agency's would)."""
    await client.register_queue_async(queue, partition_concurrency=1, application_name="agency_swarm")
    chat_id = f"queues-{uuid.uuid4().hex[:10]}"
    turn_id = f"{chat_tag(chat_id)}-{uuid.uuid4().hex}"
    request = {"chat_id": chat_id, "message": "not for this worker", "recipient_agent": None, "turn_id": turn_id}
    await client.enqueue_async({"workflow_name": "agency_swarm.turn", "queue_name": queue, "workflow_id": turn_id,
                                "queue_partition_key": chat_id, "app_version": "1"}, request)
    return turn_id


async def row(turn_id: str) -> tuple[str, str, str | None]:
    connection = await asyncpg.connect(require_postgres())
    try:
        found = await connection.fetchrow(
            "SELECT status, queue_name, executor_id FROM dbos.workflow_status WHERE workflow_uuid = $1", turn_id)
    finally:
        await connection.close()
    assert found is not None
    return found["status"], found["queue_name"], found["executor_id"]


async def forget(client: DBOSClient, turn_id: str, queue: str) -> None:
    await client.delete_workflow_async(turn_id)
    await client.delete_queue_async(queue)


async def launched(run: str) -> DurableTurns:
    """A worker of its own queue; its heartbeat task never ticks within a test (the tests tick it themselves)."""
    url = require_postgres()
    agency = Agency(Agent(name="A", model=ScriptedModel(lambda call: f"mine: {call.last_user_message}")),
                    thread_store=SQLThreadStore(url))
    turns = DurableTurns(agency, database_url=url, executor_id=f"queues-{run}", queue_name=f"queues_{run}",
                         heartbeat_seconds=300, expire_after_seconds=600)
    await turns.launch()
    return turns


async def close(turns: DurableTurns) -> None:
    await turns.aclose()
    await turns.agency.aclose()


async def test_a_worker_runs_only_the_turns_of_its_own_queue(client: DBOSClient) -> None:
    run = uuid.uuid4().hex[:8]
    other = f"queues_other_{run}"
    foreign = await other_queue_turn(client, other)  # waiting before this worker starts, which then polls at once
    turns = await launched(run)
    try:
        mine = await turns.submit("hello", chat_id=f"queues-{run}")
        assert (await mine.result()).final_output == "mine: hello"
        assert await row(foreign) == ("ENQUEUED", other, None)  # left for the other queue's workers
    finally:
        await forget(client, foreign, other)  # first: DBOS's destroy takes the loop's default executor with it
        await close(turns)


async def test_a_dead_worker_of_another_queue_has_its_turns_put_back_on_its_queue(client: DBOSClient) -> None:
    run = uuid.uuid4().hex[:8]
    other, dead = f"queues_other_{run}", f"queues-dead-{run}"
    foreign = await other_queue_turn(client, other)
    connection = await asyncpg.connect(require_postgres())
    turns = await launched(run)
    try:
        # The other queue's worker `dead` took the turn, then stopped beating an hour ago.
        await connection.execute("UPDATE dbos.workflow_status SET status = 'PENDING', executor_id = $2 "
                                 "WHERE workflow_uuid = $1", foreign, dead)
        await connection.execute("INSERT INTO agency_swarm_executors (executor_id, beat_at) "
                                 "VALUES ($1, clock_timestamp() - interval '1 hour')", dead)
        assert foreign in await turns._supervisor.tick()
        assert await row(foreign) == ("ENQUEUED", other, dead)  # back on its own queue, for its own workers
        assert await connection.fetchval("SELECT count(*) FROM agency_swarm_executors WHERE executor_id = $1",
                                         dead) == 0
    finally:
        await connection.execute("DELETE FROM agency_swarm_executors WHERE executor_id = $1", dead)
        await connection.close()
        await forget(client, foreign, other)  # first: DBOS's destroy takes the loop's default executor with it
        await close(turns)
