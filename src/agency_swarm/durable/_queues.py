"""Which agency a durable queue belongs to: its identity (a hash of its chart, or a name given), its default queue,
and the registry row per queue that refuses a second agency while the first still has workers or turns on it.

Two agencies sharing one queue run each other's turns (a worker runs whatever its queue holds with its own agency),
so each agency has a queue of its own: named after its chart by default (`agency_swarm_turns_<12 hex>`), or given.
`agency_swarm_queues` holds one row per queue with the identity of the agency whose workers use it; its workers
refresh `beat_at` with every heartbeat. A worker of another agency is refused at start while that agency has a
live worker (a beat within `expire_after_seconds`) or unfinished turns on the queue; once it has neither, the queue
passes to the new agency (said in the log).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from typing import Any

import asyncpg  # type: ignore[import-untyped]

from .._agency._agency import Agency
from .._base._errors import ConfigError
from .._base._redact import secret_free_logger

logger = secret_free_logger("agency_swarm.durable")

QUEUE_NAME = re.compile(r"[a-z0-9][a-z0-9_-]{0,62}")
"""A queue's name: it goes into worker ids, logs and DBOS's tables as it is."""
DEFAULT_QUEUE_PREFIX = "agency_swarm_turns_"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS agency_swarm_queues (
    queue_name TEXT PRIMARY KEY,
    agency TEXT NOT NULL,
    described TEXT NOT NULL,
    beat_at TIMESTAMPTZ NOT NULL DEFAULT clock_timestamp()
)"""
_QUEUE_LOCKS = 0x61730003
"""The advisory-lock namespace of queue claims (worker slots and turn locks use their own)."""
_OWNER = """
SELECT agency, described, beat_at > clock_timestamp() - make_interval(secs => $2) AS live
FROM agency_swarm_queues WHERE queue_name = $1"""
_TAKE = """
INSERT INTO agency_swarm_queues (queue_name, agency, described) VALUES ($1, $2, $3)
ON CONFLICT (queue_name) DO UPDATE SET agency = $2, described = $3, beat_at = clock_timestamp()"""
_UNFINISHED = """
SELECT count(*) FROM dbos.workflow_status WHERE queue_name = $1 AND status IN ('ENQUEUED', 'PENDING')"""


class AgencyIdentity:
    """Who an agency is to its queue: `key`, a hash of its chart (agent names, entry points, flows), and
    `described`, how messages name it (the hash and its entry points; never a setting's value)."""

    def __init__(self, agency: Agency) -> None:
        agents, entries = sorted(agency.agents), [agent.name for agent in agency.entry_points]
        chart = {"agents": agents, "entry_points": entries, "flows": sorted(agency.communication_flows)}
        text = json.dumps(chart, sort_keys=True, ensure_ascii=False)
        self.key = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
        self.described = f"chart {self.key} (entry points: {', '.join(entries)}; {len(agents)} agents)"

    def default_queue(self) -> str:
        return f"{DEFAULT_QUEUE_PREFIX}{self.key[:12]}"


def checked_queue_name(name: Any) -> str:
    if not isinstance(name, str) or not QUEUE_NAME.fullmatch(name):
        raise ConfigError(
            "The durable queue's name must be 1-63 characters of a-z, 0-9, _ and -, starting with a letter or digit."
        )
    return name


async def claim_queue(
    connection: asyncpg.Connection, queue: str, identity: AgencyIdentity, expire_after: float
) -> None:
    """Make `queue` this agency's, or raise ConfigError naming both agencies when another one still uses it."""
    with contextlib.suppress(asyncpg.UniqueViolationError):  # two workers making the table at once
        await connection.execute(_SCHEMA)
    async with connection.transaction():
        await connection.execute("SELECT pg_advisory_xact_lock($1, hashtext($2))", _QUEUE_LOCKS, queue)
        owner = await connection.fetchrow(_OWNER, queue, expire_after)
        if owner is not None and owner["agency"] != identity.key:
            unfinished = await _unfinished_turns(connection, queue)
            if owner["live"] or unfinished:
                raise ConfigError(_refusal(queue, owner["described"], identity, bool(owner["live"]), unfinished))
            logger.warning(
                "Durable queue %r passes from the agency of %s (no live worker, no unfinished turn) to this one, "
                "of %s", queue, owner["described"], identity.described,
            )
        await connection.execute(_TAKE, queue, identity.key, identity.described)


async def _unfinished_turns(connection: asyncpg.Connection, queue: str) -> int:
    if await connection.fetchval("SELECT to_regclass('dbos.workflow_status')") is None:
        return 0  # DBOS has not made its tables yet: nothing was ever queued
    count: int = await connection.fetchval(_UNFINISHED, queue)
    return count


def _refusal(queue: str, owner: str, identity: AgencyIdentity, live: bool, unfinished: int) -> str:
    turns = "1 unfinished turn" if unfinished == 1 else f"{unfinished} unfinished turns"
    using = "has live workers on it" if live else f"has {turns} on it"
    return (
        f"Durable queue {queue!r} belongs to another agency, of {owner}, which {using}; this agency is of "
        f"{identity.described}. Two agencies on one queue would run each other's turns. Give this agency a queue "
        "of its own (`agency-swarm serve --durable-queue NAME`, or DurableTurns(queue_name=...)), or leave out "
        "the queue's name to use the queue named after this agency's chart."
    )
