"""Durable serving load: turns/s and p50/p99 over HTTP, plain vs `serve --durable`, 1 and 3 workers, 8 and 64
clients; then the recovery time of a durable worker's turns after kill -9.

    .venv/bin/python benchmarks/durable_load.py                 # the table and 5 kills (needs PostgreSQL)
    .venv/bin/python benchmarks/durable_load.py --round-trips   # + PostgreSQL round trips per turn (a second run)
    .venv/bin/python benchmarks/durable_load.py --clients 2 --workers 1 --seconds 0.5 --kills 1   # a smoke run
    AGENCY_SWARM_BENCH_POSTGRES_URL=postgresql://... .venv/bin/python benchmarks/durable_load.py

Method: the agency and the server are serving_load.py's (`agency-swarm serve --factory durable_load:build_agency
--store <PostgreSQL> --workers N [--durable]`: one agent, no tool, a scripted model that waits 20 ms and answers,
one model call per turn). Each server gets a database of its own, made for it and dropped after (CREATE
DATABASE on the server of the URL): nothing else's turns on its DBOS queue, its worker slots or its tables. A client
in this process keeps `--clients` chats busy at once, each posting its turns one after another on its own chat
(blocking `POST /chats/{id}/messages`; durable rows with a new Idempotency-Key per turn), after a warm-up turn per
chat, for `--seconds` (or `--turns` per chat). Latency is each request's wall time at the client; turns/s is the
measured turns over the measured phase; server CPU is the workers' user + system time (/proc), PostgreSQL CPU that
of the database's backends (those alive at the end of the phase), both per turn. The client, the workers and
PostgreSQL share the machine's CPUs.

Durable rows also split the median turn by DBOS's own timestamps (workflow_status): the request until the turn is
enqueued, the queue wait until a worker starts it, the workflow until done, and done until the client has the
response (the waiting request polls the turn's status every 50 ms). `--round-trips` runs each row again with the
workers connected through tests/support/pg_proxy.py (its latencies unused): round trips per turn, minus what the workers
do idle (durable: the queue polled every 50 ms and a heartbeat a second per worker), measured just before.

Recovery: 3 durable workers under load (`--recovery-clients` chats, retrying a failed POST with the same
Idempotency-Key, as a client does). Per kill, one worker is sent SIGKILL in the middle of turns; the turns it was
running are its executor's PENDING workflows at that moment; the recovery time is from the kill until the last of
them completed (DBOS's completed_at), whether uvicorn's restarted worker (same slot: DBOS recovers them at launch)
or another worker after the heartbeat expired (5 s) finished them. The next kill waits until the restarted worker
runs turns again and `--settle` seconds passed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import queue
import re
import signal
import statistics
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import serving_load
from serving_load import MODEL_LATENCY_S, POSTGRES_URL, cpu_seconds, start, stop

from pg_proxy import CountingProxy  # tests/support/pg_proxy.py: serving_load puts tests/support on the path

ANNOUNCE = re.compile(r"durable_load: worker (\d+) is executor (\S+)")
MODES = {"plain": ((), False), "plain+key": ((), True), "durable": (("--durable",), True)}
"""Each mode's serve options and whether its turns carry an Idempotency-Key."""
RECOVERY_TIMEOUT_S = 120.0


class BenchmarkError(Exception):
    """What stops the measurement (after every server is stopped and database dropped)."""


# -- what the workers serve (imported by them as `durable_load`) ---------------------------------------------------


def build_agency(store: Any) -> Any:
    """serving_load's agency; a durable worker says once on stderr which DBOS executor it is, on its first turn."""
    announced: list[bool] = []

    def announce() -> None:
        dbos = sys.modules.get("dbos")  # imported by durable mode only
        if not announced and dbos is not None:
            announced.append(True)
            print(f"durable_load: worker {os.getpid()} is executor {dbos.DBOS.executor_id}", file=sys.stderr,
                  flush=True)

    return serving_load.build_agency(store, serving_load.slow_model(on_call=announce))


# -- a database per server ------------------------------------------------------------------------------------


def with_database(url: str, name: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{name}"))


@contextlib.asynccontextmanager
async def fresh_database() -> AsyncIterator[str]:
    """A new database on POSTGRES_URL's server for one server's run (its URL), dropped afterwards."""
    import asyncpg

    name = f"agency_swarm_bench_{uuid.uuid4().hex[:10]}"
    connection = await asyncpg.connect(POSTGRES_URL)
    try:
        await connection.execute(f'CREATE DATABASE "{name}"')
    finally:
        await connection.close()
    url = with_database(POSTGRES_URL, name)
    try:
        await make_schema(url)
        yield url
    finally:
        connection = await asyncpg.connect(POSTGRES_URL)
        try:
            await connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await connection.close()


async def make_schema(url: str) -> None:
    """The store's tables, made before the workers start, as a deployed database has them: no row measures the
    workers making them."""
    from agency_swarm import SQLThreadStore

    store = SQLThreadStore(url)
    try:
        await store.load("bench-schema")
    finally:
        await store.aclose()


def backend_cpu(database: str) -> dict[int, float]:
    """CPU seconds of each PostgreSQL backend connected to `database` (its process title names the database)."""
    found: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if not title.startswith("postgres: ") or f" {database} " not in title:
                continue
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found[int(entry.name)] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return found


# -- the load ---------------------------------------------------------------------------------------------------


@dataclass
class Turn:
    sent: float  # epoch seconds
    latency: float
    turn_id: str | None


@dataclass
class Phase:
    turns: list[Turn] = field(default_factory=list)
    failed: Counter[str] = field(default_factory=Counter)
    """Requests that did not answer 200, by status and error type (warm-up included); not in the figures."""
    wall: float = 0.0
    used: tuple[float, ...] = ()
    """What the meter counted over the measured phase."""
    idle: tuple[float, ...] = ()
    """What the meter counted per second without turns, just before."""


class CpuMeter:
    """The workers' CPU seconds and those of the PostgreSQL backends of their database."""

    def __init__(self, pids: list[int], database: str) -> None:
        self.pids, self.database = pids, database

    def read(self) -> Any:
        return cpu_seconds(self.pids), backend_cpu(self.database)

    def since(self, before: Any) -> tuple[float, ...]:
        server, backends = self.read()
        return server - before[0], sum(cpu - before[1].get(pid, 0.0) for pid, cpu in backends.items())


class TripMeter:
    """Round trips through the counting proxy; each call of `since` also keeps the count of each statement."""

    def __init__(self, proxy: StatementProxy) -> None:
        self.proxy = proxy
        self.statements: list[Counter[str]] = []

    def read(self) -> Any:
        return self.proxy.round_trips, Counter(self.proxy.statements)

    def since(self, before: Any) -> tuple[float, ...]:
        self.statements.append(self.proxy.statements - before[1])
        return (self.proxy.round_trips - before[0],)


def http_client(url: str, clients: int) -> Any:
    import httpx

    limits = httpx.Limits(max_connections=clients + 10, keepalive_expiry=1)  # under uvicorn's 5 s
    return httpx.AsyncClient(base_url=url, timeout=120, limits=limits)


async def post_turn(http: Any, chat_id: str, message: str, keyed: bool, phase: Phase) -> Turn | None:
    """One turn; a failed one is counted in `phase.failed` (and not retried) instead."""
    headers = {"Idempotency-Key": uuid.uuid4().hex} if keyed else {}
    sent, began = time.time(), time.perf_counter()
    response = await http.post(f"/chats/{chat_id}/messages", json={"message": message}, headers=headers)
    if response.status_code != 200:
        phase.failed[f"{response.status_code} {response.json().get('error', {}).get('type')}"] += 1
        return None
    return Turn(sent, time.perf_counter() - began, response.headers.get("turn-id"))


async def drive(
    url: str, prefix: str, clients: int, keyed: bool, limit: tuple[float, int], meter: Any, idle_s: float
) -> Phase:
    """A warm-up turn per chat, `idle_s` without turns (metered), then the chats kept busy (metered) for
    limit = (seconds, or turns per chat if > 0)."""
    seconds, turns = limit
    phase = Phase()
    async with http_client(url, clients) as http:
        await asyncio.gather(*(post_turn(http, f"{prefix}{n}", "warm-up", keyed, phase) for n in range(clients)))
        before = meter.read()
        await asyncio.sleep(idle_s)  # the idle window measured
        phase.idle = tuple(value / idle_s for value in meter.since(before))

        async def chat(number: int) -> None:
            index = 0
            while index < turns if turns else time.perf_counter() < deadline:
                turn = await post_turn(http, f"{prefix}{number}", f"turn {index}", keyed, phase)
                if turn is not None:
                    phase.turns.append(turn)
                index += 1

        before, began = meter.read(), time.perf_counter()
        deadline = began + seconds
        await asyncio.gather(*(chat(number) for number in range(clients)))
        phase.wall = time.perf_counter() - began
        phase.used = meter.since(before)
    return phase


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


async def measured(
    url: str, mode: str, workers: int, clients: int, limit: tuple[float, int], idle_s: float
) -> dict[str, Any]:
    """One row: a server on a database of its own, the load, its figures (and the durable turns' split)."""
    options, keyed = MODES[mode]
    prefix = f"bench-durable-{uuid.uuid4().hex[:8]}-"
    process, base, pids = await asyncio.to_thread(start, workers, url, options, "durable_load:build_agency")
    try:
        meter = CpuMeter(pids, urlsplit(url).path.lstrip("/"))
        phase = await drive(base, prefix, clients, keyed, limit, meter, idle_s)
    finally:
        await asyncio.to_thread(stop, process)
    latencies = [turn.latency for turn in phase.turns]
    row: dict[str, Any] = {
        "turns": len(latencies), "turns_per_s": len(latencies) / phase.wall, "failed": phase.failed,
        "p50_ms": statistics.median(latencies) * 1000, "p99_ms": percentile(latencies, 0.99) * 1000,
        "server_cpu_ms": phase.used[0] / len(latencies) * 1000,
        "postgres_cpu_ms": phase.used[1] / len(latencies) * 1000,
        "idle_cpu_ms": (phase.idle[0] * 1000, phase.idle[1] * 1000),
    }
    if mode == "durable":
        row["split"] = await durable_split(url, phase.turns)
    return row


async def durable_split(url: str, turns: list[Turn]) -> dict[str, float]:
    """Medians (ms) of the request until enqueued, the queue wait, the workflow, and done until the response."""
    import asyncpg

    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch(
            "SELECT workflow_uuid, created_at, started_at_epoch_ms, completed_at FROM dbos.workflow_status "
            "WHERE workflow_uuid = ANY($1::text[])", [turn.turn_id for turn in turns],
        )
    finally:
        await connection.close()
    times = {row["workflow_uuid"]: row for row in rows}
    parts: dict[str, list[float]] = {"enqueue": [], "queue": [], "run": [], "response": []}
    for turn in turns:
        row = times.get(turn.turn_id)
        if row is None or row["started_at_epoch_ms"] is None or row["completed_at"] is None:
            continue
        created, started, completed = row["created_at"], row["started_at_epoch_ms"], row["completed_at"]
        parts["enqueue"].append(created - turn.sent * 1000)
        parts["queue"].append(started - created)
        parts["run"].append(completed - started)
        parts["response"].append((turn.sent + turn.latency) * 1000 - completed)
    return {name: statistics.median(values) if values else float("nan") for name, values in parts.items()}


# -- round trips ----------------------------------------------------------------------------------------------


class ClientMessages:
    """What a PostgreSQL client says on one connection (protocol 3, no TLS), as one label per round trip: the first
    statement it sends or executes in it (the text of a simple query or a Parse, or a Bind's prepared statement)."""

    NO_STATEMENT = "(no statement: Sync, Flush, Close, authentication)"

    def __init__(self) -> None:
        self.buffer = b""
        self.started = False  # the start-up messages (SSLRequest, StartupMessage) have no type byte
        self.prepared: dict[bytes, str] = {}
        self.unlabelled = False

    def feed(self, data: bytes, new_round_trip: bool) -> list[str]:
        labels = []
        if new_round_trip:
            if self.unlabelled:
                labels.append(self.NO_STATEMENT)
            self.unlabelled = True
        self.buffer += data
        while (message := self._next()) is not None:
            text = self._statement(*message)
            if text is not None and self.unlabelled:
                labels.append(text)
                self.unlabelled = False
        return labels

    def _next(self) -> tuple[bytes, bytes] | None:
        buffer = self.buffer
        if not self.started:
            if len(buffer) < 8 or len(buffer) < int.from_bytes(buffer[:4], "big"):
                return None
            length = int.from_bytes(buffer[:4], "big")
            self.started = int.from_bytes(buffer[4:8], "big") == 196608  # protocol 3.0: the StartupMessage
            self.buffer = buffer[length:]
            return b"", b""
        if len(buffer) < 5 or len(buffer) < 1 + int.from_bytes(buffer[1:5], "big"):
            return None
        length = int.from_bytes(buffer[1:5], "big")
        self.buffer = buffer[1 + length:]
        return buffer[:1], buffer[5:1 + length]

    def _statement(self, kind: bytes, body: bytes) -> str | None:
        if kind == b"Q":
            return statement_label(body.split(b"\0", 1)[0])
        if kind == b"P":
            name, query = body.split(b"\0", 2)[:2]
            self.prepared[name] = statement_label(query)
            return self.prepared[name]
        if kind == b"B":
            name = body.split(b"\0", 2)[1]
            return self.prepared.get(name, "(a statement prepared before counting)")
        return None


def statement_label(query: bytes) -> str:
    text = " ".join(query.decode(errors="replace").split()).replace('"', "")
    return text if len(text) <= 90 else text[:87] + "..."


class StatementProxy(CountingProxy):
    """tests/support/pg_proxy.py's round-trip counter, also counting round trips by the statement that starts each."""

    def __init__(self, target_host: str, target_port: int) -> None:
        super().__init__(target_host, target_port)
        self.statements: Counter[str] = Counter()

    async def _connected(self, client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection(*self.target)
        last = {"side": "server"}  # who spoke last on this connection
        messages = ClientMessages()

        async def pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, side: str) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await reader.read(65536):
                    if side == "client":
                        new = last["side"] == "server"
                        self.round_trips += new
                        self.statements.update(messages.feed(data, new))
                    last["side"] = side
                    writer.write(data)
                    await writer.drain()
            writer.close()

        tasks = [asyncio.create_task(pump(client_reader, server_writer, "client")),
                 asyncio.create_task(pump(server_reader, client_writer, "server"))]
        self._tasks.update(tasks)
        await asyncio.gather(*tasks, return_exceptions=True)
        self._tasks.difference_update(tasks)


@dataclass
class Trips:
    per_turn: float
    idle_per_s: float
    statements: list[tuple[str, float]]
    """(statement, round trips it starts per turn), the idle rate taken out, most first."""


async def round_trips(
    url: str, mode: str, workers: int, clients: int, limit: tuple[float, int], idle_s: float
) -> Trips:
    """The row again with the workers' PostgreSQL connections through a counting proxy in this process."""
    parts = urlsplit(url)
    proxy = StatementProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    await proxy.start()
    options, keyed = MODES[mode]
    prefix = f"bench-trips-{uuid.uuid4().hex[:8]}-"
    meter = TripMeter(proxy)
    process, base, _ = await asyncio.to_thread(start, workers, proxy.url(url), options, "durable_load:build_agency")
    try:
        phase = await drive(base, prefix, clients, keyed, limit, meter, idle_s)
    finally:
        await asyncio.to_thread(stop, process)
        await proxy.aclose()
    turns, scale = len(phase.turns), phase.wall / idle_s  # the idle window's counts, scaled to the phase
    idle, used = meter.statements
    statements = {text: (count - idle[text] * scale) / turns for text, count in used.items()}
    ranked = sorted(statements.items(), key=lambda item: -item[1])
    return Trips((phase.used[0] - phase.idle[0] * phase.wall) / turns, phase.idle[0], ranked)


# -- recovery after kill -9 -------------------------------------------------------------------------------------


class WorkerLog:
    """Follows the server's log: when worker pids were ready, their executor ids, the workers uvicorn found dead
    (killed, or hung: not answering its health check within 5 s, as a start-up still importing), and the executors
    whose turns a live worker handed back to the queue when their heartbeat stopped. Keeps every line."""

    def __init__(self, lines: queue.Queue[str | None], pids: list[int]) -> None:
        self.ready_at: dict[int, float] = dict.fromkeys(pids, time.time())  # start() read their start-up
        self.executor: dict[int, str] = {}
        self.announced_at: dict[int, float] = {}
        self.died_at: list[float] = []
        self.handed_back_at: dict[str, float] = {}
        self.lines: list[str] = []
        self._last_started: int | None = None
        self._queue = lines
        threading.Thread(target=self._follow, daemon=True).start()

    def _follow(self) -> None:
        while (line := self._queue.get()) is not None:
            self.lines.append(f"{time.strftime('%H:%M:%S')} {line}")
            if found := re.search(r"Started server process \[(\d+)\]", line):
                self._last_started = int(found.group(1))
            elif "Application startup complete." in line and self._last_started is not None:
                self.ready_at[self._last_started] = time.time()
            elif found := ANNOUNCE.search(line):
                pid = int(found.group(1))
                self.executor[pid], self.announced_at[pid] = found.group(2), time.time()
            elif re.search(r"Child process \[\d+\] died", line):
                self.died_at.append(time.time())
            elif found := re.search(r"Worker (\S+) stopped beating", line):
                self.handed_back_at[found.group(1)] = time.time()

    def tail(self) -> str:
        return "".join(self.lines[-60:])


@dataclass
class Kill:
    pid: int
    executor: str
    killed_at: float
    in_flight: list[str]
    recovery_s: float = float("nan")
    not_done: int = 0
    """Of its turns, how many ended otherwise than done (failed, cancelled)."""
    restart_s: float | None = None
    """When uvicorn's new worker was ready; None if none was within --restart-timeout."""
    handed_back_s: float | None = None
    """When a live worker put its turns back on the queue (heartbeat expired), if one did."""
    deaths: int = 0
    """Workers uvicorn found dead since the kill, the killed one included (more: start-ups it killed as hung)."""


@dataclass
class Tally:
    retried: int = 0
    """Requests sent again with their key: the connection was lost, or the answer was 502/503/504."""
    failed: Counter[str] = field(default_factory=Counter)
    """Turns that ended in another error (a retry would get the same one), by status and type."""


async def keep_busy(http: Any, chat_id: str, stopping: asyncio.Event, tally: Tally) -> None:
    """A client: one turn after another, each retried with its Idempotency-Key until it has its answer."""
    import httpx

    index = 0
    while not stopping.is_set():
        key = uuid.uuid4().hex
        while True:
            try:
                response = await http.post(
                    f"/chats/{chat_id}/messages", json={"message": f"turn {index}"}, headers={"Idempotency-Key": key}
                )
                if response.status_code == 200:
                    break
                if response.status_code not in (502, 503, 504):
                    tally.failed[f"{response.status_code} {response.json().get('error', {}).get('type')}"] += 1
                    break
            except httpx.TransportError:
                pass
            tally.retried += 1
            await asyncio.sleep(0.05)
        index += 1


async def wait_for(condition: Any, seconds: float) -> bool:
    """Whether `condition()` came true within `seconds` (polled every 50 ms)."""
    deadline = time.monotonic() + seconds
    while not await condition():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


EXTRA_KILLS = 3
"""Kills beyond `--kills` allowed when one caught no turn in flight (on a loaded host its turns can end between the
look and the kill)."""


async def kill_one(connection: Any, log: WorkerLog) -> Kill:
    """SIGKILL the worker running the most turns (once one runs any); its executor's PENDING workflows at that moment
    are the turns it had in flight."""
    alive = {executor: pid for pid, executor in log.executor.items() if pid in log.ready_at}
    deadline = time.monotonic() + RECOVERY_TIMEOUT_S
    while True:
        rows = await connection.fetch(
            "SELECT executor_id, count(*) AS running FROM dbos.workflow_status WHERE status = 'PENDING' "
            "AND executor_id = ANY($1::text[]) GROUP BY executor_id ORDER BY running DESC LIMIT 1", list(alive),
        )
        if rows or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.01)
    executor = rows[0]["executor_id"] if rows else next(iter(alive))
    pid = alive[executor]
    killed_at = time.time()
    os.kill(pid, signal.SIGKILL)
    del log.executor[pid]
    rows = await connection.fetch(
        "SELECT workflow_uuid FROM dbos.workflow_status WHERE status = 'PENDING' AND executor_id = $1", executor
    )
    return Kill(pid, executor, killed_at, [row["workflow_uuid"] for row in rows])


async def follow_recovery(connection: Any, log: WorkerLog, kill: Kill, restart_timeout: float) -> None:
    """Wait until every turn the killed worker had ended, and for its replacement to run turns (up to
    `restart_timeout` after its turns ended); fill in the times."""

    async def recovered() -> bool:
        rows = await connection.fetch(
            "SELECT status, completed_at FROM dbos.workflow_status WHERE workflow_uuid = ANY($1::text[])",
            kill.in_flight,
        )
        if any(row["status"] in ("PENDING", "ENQUEUED") for row in rows):
            return False
        if rows:
            kill.recovery_s = max(row["completed_at"] or 0 for row in rows) / 1000 - kill.killed_at
            kill.not_done = len([row for row in rows if row["status"] != "SUCCESS"])
        return True

    def replaced() -> int | None:
        new = (pid for pid, at in log.announced_at.items() if at > kill.killed_at and pid in log.ready_at)
        return next(new, None)

    async def back() -> bool:
        return replaced() is not None

    if not await wait_for(recovered, RECOVERY_TIMEOUT_S):
        raise BenchmarkError(f"the turns of killed worker {kill.pid} did not end; the server's log:\n{log.tail()}")
    if await wait_for(back, restart_timeout):
        new = replaced()
        assert new is not None
        kill.restart_s = log.ready_at[new] - kill.killed_at
    kill.deaths = len([at for at in log.died_at if at > kill.killed_at])
    if kill.executor in log.handed_back_at:
        kill.handed_back_s = log.handed_back_at.pop(kill.executor) - kill.killed_at


async def recovery(url: str, args: argparse.Namespace) -> tuple[list[Kill], Tally]:
    """Kill a worker of a loaded durable server `args.kills` times (the series ends early if uvicorn does not get a
    worker back in time: the next kill would leave one fewer)."""
    import asyncpg

    workers, clients = args.recovery_workers, args.recovery_clients
    lines: queue.Queue[str | None] = queue.Queue()
    process, base, pids = await asyncio.to_thread(
        start, workers, url, ("--durable",), "durable_load:build_agency", lines
    )
    log = WorkerLog(lines, pids)
    prefix = f"bench-recovery-{uuid.uuid4().hex[:8]}-"
    stopping, tally, done = asyncio.Event(), Tally(), []
    connection = await asyncpg.connect(url)
    busy: list[asyncio.Task[None]] = []
    try:
        async with http_client(base, clients) as http:
            busy += [asyncio.create_task(keep_busy(http, f"{prefix}{n}", stopping, tally)) for n in range(clients)]

            async def all_announced() -> bool:
                return len(log.executor) >= workers

            if not await wait_for(all_announced, RECOVERY_TIMEOUT_S):
                raise BenchmarkError(f"not every worker ran a turn; the server's log:\n{log.tail()}")
            attempts = args.kills + EXTRA_KILLS  # a kill whose turns all ended just before it measures nothing
            while sum(1 for kill in done if kill.in_flight) < args.kills and len(done) < attempts:
                await asyncio.sleep(args.settle)
                kill = await kill_one(connection, log)
                await follow_recovery(connection, log, kill, args.restart_timeout)
                done.append(kill)
                if kill.restart_s is None:
                    break
            stopping.set()
            await asyncio.gather(*busy)
    finally:
        for task in busy:
            task.cancel()
        await asyncio.gather(*busy, return_exceptions=True)
        await connection.close()
        await asyncio.to_thread(stop, process)
        if args.log_file:
            await asyncio.to_thread(Path(args.log_file).write_text, "".join(log.lines))
    return done, tally


# -- the command ------------------------------------------------------------------------------------------------


def print_rows(args: argparse.Namespace, limit: tuple[float, int]) -> None:
    measure = f"{limit[1]} turns per chat" if limit[1] else f"{limit[0]:g} s"
    print(f"{measure} after a warm-up turn per chat, model latency {MODEL_LATENCY_S * 1000:.0f} ms, "
          f"{os.cpu_count()} CPUs")
    print("| mode | workers | clients | turns | turns/s | p50 ms | above model ms | p99 ms | server CPU ms/turn "
          "| PostgreSQL CPU ms/turn | round trips/turn | idle CPU ms/s, server + PostgreSQL | idle round trips/s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    splits: list[tuple[int, int, dict[str, float], float]] = []
    statements: list[tuple[str, Trips]] = []
    for clients in args.clients:
        for workers in args.workers:
            for mode in args.modes:
                row, trips = asyncio.run(one_row(args, mode, workers, clients, limit))
                if "split" in row:
                    splits.append((workers, clients, row["split"], row["p50_ms"]))
                if trips is not None:
                    statements.append((f"{mode}, {workers} worker(s), {clients} clients", trips))
                print_row(mode, workers, clients, row, trips)
    print_splits(splits)
    for name, trips in statements:
        print(f"\nRound trips per turn by the statement that starts them, {name} (idle rate taken out, top 12):")
        print("| statement | round trips/turn |")
        print("|---|---:|")
        for text, count in trips.statements[:12]:
            print(f"| `{text}` | {count:.2f} |")


def print_row(mode: str, workers: int, clients: int, row: dict[str, Any], trips: Trips | None) -> None:
    above, idle = row["p50_ms"] - MODEL_LATENCY_S * 1000, row["idle_cpu_ms"]
    per_turn, idle_trips = ("-", "-") if trips is None else (f"{trips.per_turn:.1f}", f"{trips.idle_per_s:.0f}")
    failed = ", ".join(f"{count} {kind}" for kind, count in row["failed"].items())
    turns = f"{row['turns']} ({failed} failed)" if failed else str(row["turns"])
    print(f"| {mode} | {workers} | {clients} | {turns} | {row['turns_per_s']:.0f} | {row['p50_ms']:.1f} | "
          f"{above:.1f} | {row['p99_ms']:.1f} | {row['server_cpu_ms']:.2f} | {row['postgres_cpu_ms']:.2f} | "
          f"{per_turn} | {idle[0]:.0f} + {idle[1]:.0f} | {idle_trips} |", flush=True)


def print_splits(splits: list[tuple[int, int, dict[str, float], float]]) -> None:
    if not splits:
        return
    print("\nDurable turns, median ms of each part (DBOS's timestamps; the parts' medians need not add up):")
    print("| workers | clients | request → enqueued | queue wait | workflow (turn + DBOS) | done → response "
          "| p50 total |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for workers, clients, split, p50 in splits:
        print(f"| {workers} | {clients} | {split['enqueue']:.1f} | {split['queue']:.1f} | {split['run']:.1f} | "
              f"{split['response']:.1f} | {p50:.1f} |", flush=True)


async def one_row(
    args: argparse.Namespace, mode: str, workers: int, clients: int, limit: tuple[float, int]
) -> tuple[dict[str, Any], Trips | None]:
    async with fresh_database() as url:
        row = await measured(url, mode, workers, clients, limit, args.idle)
    if not args.round_trips:
        return row, None
    async with fresh_database() as url:
        return row, await round_trips(url, mode, workers, clients, limit, args.idle)


def print_recovery(args: argparse.Namespace) -> None:
    print(f"\nRecovery after kill -9: {args.recovery_workers} durable workers, {args.recovery_clients} clients, "
          f"{args.kills} kills")

    async def run() -> tuple[list[Kill], Tally]:
        async with fresh_database() as url:
            return await recovery(url, args)

    kills, tally = asyncio.run(run())
    print("| kill | turns it was running | its turns back on the queue by | uvicorn's new worker ready s "
          "| all its turns ended s |")
    print("|---:|---:|---|---:|---:|")
    for number, kill in enumerate(kills, 1):
        how = "the new worker's launch (its slot)"
        if kill.handed_back_s is not None:
            how = f"another worker: heartbeat expired ({kill.handed_back_s:.2f} s)"
        back = f"{kill.restart_s:.2f}" if kill.restart_s is not None else f"not within {args.restart_timeout:g} s"
        if kill.deaths > 1:
            back += f" ({kill.deaths - 1} start-up(s) killed as hung)"
        ended = f"{kill.recovery_s:.2f}" + (f" ({kill.not_done} not done)" if kill.not_done else "")
        print(f"| {number} | {len(kill.in_flight)} | {how} | {back} | {ended} |")
    failed = ", ".join(f"{count} {kind}" for kind, count in tally.failed.items()) or "none"
    print(f"\nClients: {tally.retried} requests sent again with their key (connection lost, or 502/503/504); "
          f"turns failed otherwise: {failed}")
    times = [kill.recovery_s for kill in kills if kill.in_flight]
    if times:
        print(f"Recovery time (kill → every turn it was running ended): median {statistics.median(times):.2f} s, "
              f"max {max(times):.2f} s over {len(times)} kills")
    if len(times) < args.kills:
        print(f"(the series stopped after kill {len(kills)}: {len(times)} of them caught turns in flight; "
              f"a worker not back within {args.restart_timeout:g} s ends it too)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, nargs="+", default=[8, 64], help="chats kept busy at once")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--modes", nargs="+", choices=list(MODES), default=["plain", "durable"],
                        help="plain+key: not durable, with an Idempotency-Key per turn")
    parser.add_argument("--seconds", type=float, default=10.0, help="the measured phase of each row")
    parser.add_argument("--turns", type=int, default=0, help="measured turns per chat instead of --seconds")
    parser.add_argument("--idle", type=float, default=2.0, help="seconds without turns before each row's load")
    parser.add_argument("--round-trips", action="store_true", help="count PostgreSQL round trips per turn too")
    parser.add_argument("--skip-recovery", action="store_true")
    parser.add_argument("--skip-load", action="store_true", help="only the recovery measurement")
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--recovery-workers", type=int, default=3)
    parser.add_argument("--recovery-clients", type=int, default=16)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds of load before each kill")
    parser.add_argument("--restart-timeout", type=float, default=60.0,
                        help="seconds to wait for uvicorn's new worker after a kill's turns ended")
    parser.add_argument("--log-file", help="write the recovery server's log there (with the time of each line)")
    args = parser.parse_args()
    if not args.skip_recovery and args.recovery_workers < 2:
        parser.error("--recovery-workers must be 2 or more: with one, uvicorn runs it in its own process, and "
                     "nothing restarts it")
    try:
        if not args.skip_load:
            print_rows(args, (args.seconds, args.turns))
        if not args.skip_recovery:
            print_recovery(args)
    except BenchmarkError as error:
        parser.exit(1, f"durable_load: {error}\n")


if __name__ == "__main__":
    main()
