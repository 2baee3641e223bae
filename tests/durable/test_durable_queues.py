"""Durable workers of different queues on one database (two agencies, or two test runs) keep to their own queue, and
a queue belongs to one agency.

- An agency's queue is named after its chart (agent names, entry points, flows) unless given; `launch` claims it in
  `agency_swarm_queues` and refuses a queue another agency's workers use, or where its turns still wait, naming both
  agencies. The same agency again is accepted; a queue whose agency has neither passes on.

- DBOS dequeues from every queue its application ("agency_swarm") has in the database unless told which to listen
  to: a worker would run another queue's turns with its own agency. `DurableTurns.launch` listens to its queue only.
- The heartbeat table is shared by the workers of every queue: a worker that claims a dead worker of another queue
  puts that worker's turns back on their own queue (it used to look for them on its own queue only, find none, and
  delete the row: nobody would ever hand them back).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

import asyncpg
import pytest
from dbos import DBOS, DBOSClient

from agency_swarm import Agency, Agent, ConfigError, SQLThreadStore
from agency_swarm.durable import DurableTurns
from agency_swarm.durable._queues import AgencyIdentity, claim_queue
from agency_swarm.durable._runner import chat_tag
from agency_swarm.serving import ServeSettings
from agency_swarm.testing import ScriptedModel
from postgres_support import require_postgres


@pytest.fixture
async def client() -> AsyncIterator[DBOSClient]:
    url = require_postgres()
    await asyncio.to_thread(DBOS.migrate, url)  # DBOS's tables, on a database no worker has launched on yet
    made = DBOSClient(system_database_url=url, application_name="agency_swarm")
    yield made
    made.destroy()


async def other_queue_turn(client: DBOSClient, queue: str) -> str:
    """A turn waiting on `queue`, which this process's worker does not serve (as another agency's would)."""
    await client.register_queue_async(queue, partition_concurrency=1, application_name="agency_swarm")
    chat_id = f"queues-{uuid.uuid4().hex[:10]}"
    turn_id = f"{chat_tag(chat_id, queue)}-{uuid.uuid4().hex}"
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
    connection = await asyncpg.connect(require_postgres())
    try:  # the database outlives the tests: leave no queue row behind
        await connection.execute("DELETE FROM agency_swarm_queues WHERE queue_name = $1", turns.queue_name)
    finally:
        await connection.close()


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


# -- a queue belongs to one agency ----------------------------------------------------------------------------------


def answering(name: str) -> Agent:
    return Agent(name=name, model=ScriptedModel(lambda call: f"{name}: {call.last_user_message}"))


SUPPORT = AgencyIdentity(Agency(answering("Support")))
def sales_agency() -> Agency:
    sales = answering("Sales")
    return Agency([sales, [sales, answering("Helper")]])


SALES = AgencyIdentity(sales_agency())


def test_an_agency_s_queue_is_named_after_its_chart_unless_given() -> None:
    same_chart = Agency(Agent(name="Support", instructions="Other words.", model=ScriptedModel(lambda call: "hi")))
    assert AgencyIdentity(same_chart).key == SUPPORT.key  # instructions, tools, models: not the chart
    assert SUPPORT.default_queue() != SALES.default_queue()
    assert SUPPORT.default_queue().startswith("agency_swarm_turns_")
    url = "postgresql://127.0.0.1/test"
    assert DurableTurns(same_chart, database_url=url).queue_name == SUPPORT.default_queue()
    assert DurableTurns(same_chart, database_url=url, queue_name="support-eu").queue_name == "support-eu"
    for bad in ("", "Support", "a b", "x" * 64, "-x"):
        with pytest.raises(ConfigError, match="queue's name must be"):
            DurableTurns(same_chart, database_url=url, queue_name=bad)


def test_durable_queue_goes_with_durable() -> None:
    with pytest.raises(ConfigError, match="add --durable"):
        ServeSettings(factory="durable_app:build_agency", durable_queue="support").check()
    settings = ServeSettings(factory="durable_app:build_agency", durable=True, durable_queue="support")
    assert ServeSettings.from_env(settings.to_env()).durable_options() == {"queue_name": "support"}


@pytest.fixture
async def registry() -> AsyncIterator[tuple[asyncpg.Connection, str]]:
    """A connection and a queue name of this test's own; the queue's row is deleted after."""
    connection = await asyncpg.connect(require_postgres())
    queue = f"claims_{uuid.uuid4().hex[:10]}"
    yield connection, queue
    await connection.execute("DELETE FROM agency_swarm_queues WHERE queue_name = $1", queue)
    await connection.close()


async def test_a_queue_another_agency_s_live_workers_use_is_refused_naming_both(
    registry: tuple[asyncpg.Connection, str],
) -> None:
    connection, queue = registry
    await claim_queue(connection, queue, SUPPORT, expire_after=5)
    await claim_queue(connection, queue, SUPPORT, expire_after=5)  # a second worker of it, or its restart
    with pytest.raises(ConfigError) as refused:
        await claim_queue(connection, queue, SALES, expire_after=5)
    message = str(refused.value)
    owner = f"Durable queue {queue!r} belongs to another agency, of {SUPPORT.described}, which has live workers"
    assert owner in message
    assert f"this agency is of {SALES.described}" in message
    assert "--durable-queue NAME" in message
    assert await connection.fetchval("SELECT agency FROM agency_swarm_queues WHERE queue_name = $1", queue) == (
        SUPPORT.key
    )


async def test_a_queue_passes_on_once_its_agency_has_no_live_worker_and_no_waiting_turn(
    registry: tuple[asyncpg.Connection, str],
) -> None:
    connection, queue = registry
    await claim_queue(connection, queue, SUPPORT, expire_after=5)
    await connection.execute("UPDATE agency_swarm_queues SET beat_at = beat_at - interval '1 hour' "
                             "WHERE queue_name = $1", queue)  # its last worker stopped an hour ago
    await claim_queue(connection, queue, SALES, expire_after=5)
    assert await connection.fetchval("SELECT agency FROM agency_swarm_queues WHERE queue_name = $1", queue) == (
        SALES.key
    )


async def test_a_queue_where_an_agency_s_turns_wait_stays_its_own_without_workers(
    registry: tuple[asyncpg.Connection, str], client: DBOSClient,
) -> None:
    connection, queue = registry
    await claim_queue(connection, queue, SUPPORT, expire_after=5)
    await connection.execute("UPDATE agency_swarm_queues SET beat_at = beat_at - interval '1 hour' "
                             "WHERE queue_name = $1", queue)
    waiting = await other_queue_turn(client, queue)  # Support's turn, which no worker has taken yet
    try:
        with pytest.raises(ConfigError, match="which has 1 unfinished turn on it"):
            await claim_queue(connection, queue, SALES, expire_after=5)
    finally:
        await forget(client, waiting, queue)


async def test_launch_refuses_another_agency_s_queue_and_launches_on_its_own_after(
    registry: tuple[asyncpg.Connection, str],
) -> None:
    connection, queue = registry
    await claim_queue(connection, queue, SUPPORT, expire_after=5)  # Support's workers are live on it
    url = require_postgres()
    agency = Agency(answering("Sales"), thread_store=SQLThreadStore(url))
    refused = DurableTurns(agency, database_url=url, executor_id=f"claims-{queue}", queue_name=queue)
    with pytest.raises(ConfigError, match="belongs to another agency"):
        await refused.launch()
    own = f"{queue}_own"
    turns = DurableTurns(agency, database_url=url, executor_id=f"claims-{queue}", queue_name=own)
    await turns.launch()  # nothing of the refused launch is left in the way
    try:
        handle = await turns.submit("hello", chat_id=f"claims-{queue}")
        assert (await handle.result()).final_output == "Sales: hello"
    finally:
        await connection.execute("DELETE FROM agency_swarm_queues WHERE queue_name = $1", own)
        client = DBOSClient(system_database_url=url)
        try:
            await client.delete_queue_async(own)
        finally:
            client.destroy()
        await close(turns)


async def test_a_worker_whose_queue_another_agency_took_says_so_at_every_beat(
    caplog: pytest.LogCaptureFixture,
) -> None:
    turns = await launched(uuid.uuid4().hex[:8])
    connection = await asyncpg.connect(require_postgres())
    try:
        with caplog.at_level(logging.ERROR, logger="agency_swarm.durable"):
            await turns._supervisor.tick()
            assert "no longer this agency's" not in caplog.text
            # As after this worker was silent (a partition) with no turn left, and another agency started on it.
            await connection.execute("UPDATE agency_swarm_queues SET agency = 'another' WHERE queue_name = $1",
                                     turns.queue_name)
            await turns._supervisor.tick()
        assert f"Durable queue {turns.queue_name!r} is no longer this agency's" in caplog.text
    finally:
        await connection.close()
        await close(turns)


def test_durable_turns_on_an_agency_that_keeps_chats_in_memory_say_so(caplog: pytest.LogCaptureFixture) -> None:
    url = "postgresql://127.0.0.1/test"  # not reached: nothing connects before launch
    with caplog.at_level(logging.WARNING, logger="agency_swarm.durable"):
        DurableTurns(Agency(Agent(name="Support", model=ScriptedModel(lambda call: "hi"))), database_url=url)
    [warning] = [record.getMessage() for record in caplog.records if record.name == "agency_swarm.durable"]
    assert warning.startswith("DurableTurns: this agency keeps its chats in memory (no thread_store)")
    assert "Agency(..., thread_store=SQLThreadStore(<the PostgreSQL URL>))" in warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="agency_swarm.durable"):
        stored = Agency(Agent(name="Support", model=ScriptedModel(lambda call: "hi")), thread_store=SQLThreadStore(url))
        DurableTurns(stored, database_url=url)
    assert [record for record in caplog.records if record.name == "agency_swarm.durable"] == []
