"""Kill -9 at random: `agency-swarm serve --durable --workers 3` on PostgreSQL runs 100 background turns
over 20 chats while the test kills workers mid-turn; uvicorn starts new ones in their place.

With no client action, every turn ends with its answer; each tool call's side effect happened once (at most once
for a call cut short, which is stored with the "interrupted" output); every chat passes the fault suite's invariants
and holds its messages once each, in the order sent; a POST retried with its Idempotency-Key is the same turn; a
client whose event stream is cut, or whose turn's worker is killed, picks it up with Last-Event-ID and gets every
event once. The test prints the recovery time after each kill (kill -> the victim's in-flight turns done).

The run has a database of its own on the test server (DBOS's queue, the worker slots and the chats), so no other
server on the machine takes its turns. DURABLE_KILLS_SEED=<n> replays a run's choices (the test prints its seed).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import re
import secrets
import signal
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import httpx
from dbos import DBOSClient

from agency_swarm import SQLThreadStore
from agency_swarm._threads._thread_items import INTERRUPTED_OUTPUT
from durable_kill_app import EFFECTS, URL_ENV
from faults.harness import check_threads
from postgres_support import require_postgres
from serving_support import STARTUP_TIMEOUT_S, Server, start_serve
from test_serving_durable import sse_line

SEED = int(os.environ.get("DURABLE_KILLS_SEED") or secrets.randbits(32))
CHATS, TURNS_PER_CHAT, WATCHED_CHATS = 20, 5, 4
KILLS = (
    ("streamed", True), ("mid-tool", True), ("any moment", True),
    ("streamed", False), ("after the insert", False), ("any process", False),
)
"""How each kill picks its victim (see `Killer.victim`), in order, and whether it spares the last worker running
turns (the others may leave none: the turns then wait for a restart)."""
MIN_KILLS = 5
LINES_BETWEEN_KILLS = (5, 25)
"""A kill comes after this many of the agency's lines (a random number in the range; a turn prints about 4)."""
PATIENCE_LINES = 150
"""A kill that spares the last worker running turns, or waits for a streamed turn, waits this many more lines at most
(then it kills anyway, mid-tool)."""
ROUND_AFTER_KILLS = (0, 0, 2, 3, 4)
"""Round n of turns (the n-th turn of every chat) is sent once this many kills happened, or every turn sent before
ended: the work lasts until the kills are done, on a fast machine or a slow one."""
DEADLINE_S = 120.0
"""Every turn ends within this long after the first POST (a bound, not a measure: a run takes far less)."""
QUEUE = "agency_swarm_turns"
LINE = re.compile(r"kills: (model|start|recorded) (\d+) (\S+) (\S+) (\S+)$")
DB_PREFIX = "agency_kills_"
STALE_DB_S = 3600


# -- the run's own database ------------------------------------------------------------------------------------


async def make_database(base_url: str) -> str:
    """A fresh database on the test server for this run (stale ones of killed runs, an hour old, are dropped)."""
    name = f"{DB_PREFIX}{int(time.time())}_{uuid.uuid4().hex[:8]}"
    connection = await asyncpg.connect(base_url)
    try:
        for row in await connection.fetch("SELECT datname FROM pg_database WHERE starts_with(datname, $1)", DB_PREFIX):
            stamp = row["datname"].removeprefix(DB_PREFIX).split("_")[0]
            if stamp.isdigit() and int(stamp) < time.time() - STALE_DB_S:
                await connection.execute(f'DROP DATABASE IF EXISTS "{row["datname"]}" WITH (FORCE)')
        await connection.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')  # template1 may be in use
    finally:
        await connection.close()
    parts = urlsplit(base_url)
    url = urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))
    connection = await asyncpg.connect(url)
    try:
        await connection.execute(EFFECTS)
    finally:
        await connection.close()
    return url


async def drop_database(base_url: str, url: str) -> None:
    connection = await asyncpg.connect(base_url)
    try:
        await connection.execute(f'DROP DATABASE IF EXISTS "{urlsplit(url).path.lstrip("/")}" WITH (FORCE)')
    finally:
        await connection.close()


# -- the server's log, read on as workers die and start ----------------------------------------------------------


@dataclass(frozen=True)
class Line:
    """What the served agency printed (see durable_kill_app)."""

    what: str  # "model" (a model call), "start" (the tool, before its first wait) or "recorded" (its row committed)
    pid: int
    executor: str
    call_id: str
    note: str


class Log:
    """Reads the server's log on a thread: the agency's lines (which worker runs which turn) and uvicorn's
    `Started server process [pid]` / `Child process [pid] died`; hands each to the test's loop."""

    def __init__(self, server: Server, loop: asyncio.AbstractEventLoop) -> None:
        self.server, self.loop = server, loop
        self.lines: asyncio.Queue[Line] = asyncio.Queue()
        self.working: dict[int, str] = {}
        """pid -> executor id of the live workers that ran a turn."""
        self.started = list(server.worker_pids)
        self.died: list[int] = []
        self.killed: set[int] = set()
        self.outages: list[list[float | None]] = []
        """[from, to] (time.time(); to None while it lasts): while no live worker ran turns."""
        self.changed = asyncio.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while (line := self.server.lines.get()) is not None:
            self.loop.call_soon_threadsafe(self._line, line.rstrip("\n"))

    def _line(self, line: str) -> None:
        if said := LINE.search(line):
            what, pid, executor, call_id, note = said.groups()
            found = Line(what, int(pid), executor, call_id, note)
            if found.pid not in self.killed and found.pid not in self.working:
                self.working[found.pid] = executor
                if self.outages and self.outages[-1][1] is None:
                    self.outages[-1][1] = time.time()  # a worker runs turns again
            self.lines.put_nowait(found)
        elif started := re.search(r"Started server process \[(\d+)\]", line):
            self.started.append(int(started.group(1)))
        elif died := re.search(r"Child process \[(\d+)\] died", line):
            self.died.append(int(died.group(1)))
        self.changed.set()

    async def wait(self, seconds: float) -> None:
        """Until the log says something new, or `seconds` pass (a polling loop's pace, bounded by its caller)."""
        self.changed.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.changed.wait(), seconds)

    def alive(self) -> set[int]:
        """The worker processes started and not dead (running turns, or still starting)."""
        return {pid for pid in set(self.started) - set(self.died) - self.killed if self.is_worker(pid)}

    def is_worker(self, pid: int) -> bool:
        """Whether `pid` is a process the server started (never kill a stranger that reused a dead worker's pid)."""
        try:
            with open(f"/proc/{pid}/stat") as stat:
                return int(stat.read().rsplit(")", 1)[1].split()[1]) == self.server.process.pid
        except (OSError, ValueError, IndexError):
            return False

    def join(self) -> None:
        self._thread.join(30)


# -- the turns -------------------------------------------------------------------------------------------------


@dataclass
class Turn:
    chat_id: str
    message: str
    turn_id: str = ""
    submitted: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def path(self) -> str:
        return f"/chats/{self.chat_id}/turns/{self.turn_id}"


async def post(client: httpx.AsyncClient, turn: Turn) -> tuple[str, int]:
    """POST the turn in the background with its Idempotency-Key, again while the worker answering dies. Returns
    (its turn id, how many tries it took)."""
    for attempt in range(1, 21):
        try:
            response = await client.post(
                f"/chats/{turn.chat_id}/messages", json={"message": turn.message, "background": True},
                headers={"Idempotency-Key": f"key-{turn.message}"},
            )
        except httpx.TransportError:
            continue  # its worker was killed: the same key again is the same turn
        assert response.status_code == 202, response.text
        turn_id = str(response.json()["turn_id"])
        assert response.headers["location"] == f"/chats/{turn.chat_id}/turns/{turn_id}"
        return turn_id, attempt
    raise AssertionError(f"POST of {turn.message} failed 20 times")


# -- event streams read through cuts and kills ------------------------------------------------------------------


async def sse(lines: AsyncIterator[str]) -> AsyncIterator[dict[str, Any]]:
    """Each whole SSE block as {"id", "event", "data"} (comments skipped; a block cut short is never yielded)."""
    block: dict[str, Any] = {}
    async for line in lines:
        if (whole := sse_line(block, line)) is not None:
            yield whole


@dataclass
class Watched:
    """What a client following one turn's events received, over however many connections it took."""

    turn: Turn
    blocks: list[dict[str, Any]] = field(default_factory=list)
    connections: int = 0
    cut_by_client: bool = False
    cut_by_kill: bool = False
    reading: bool = False


class Reader:
    """Follows the events of one chat's turns in order, as a client would: cuts one connection now and then itself,
    loses others when the worker serving it is killed, and reconnects with Last-Event-ID each time."""

    def __init__(self, client: httpx.AsyncClient, turns: list[Turn], rng: random.Random, deadline: float) -> None:
        self.client, self.rng, self.deadline = client, rng, deadline
        self.watched = [Watched(turn) for turn in turns]

    async def run(self) -> None:
        for watched in self.watched:
            await watched.turn.submitted.wait()
            await self.follow(watched)

    async def follow(self, watched: Watched) -> None:
        cut_after = self.rng.choice([None, 1, 2, 3])
        while time.monotonic() < self.deadline:
            headers = {"Last-Event-ID": watched.blocks[-1]["id"]} if watched.blocks else {}
            watched.connections += 1
            try:
                async with self.client.stream("GET", f"{watched.turn.path}/events", headers=headers) as response:
                    assert response.status_code == 200, await response.aread()
                    watched.reading = True
                    received = 0
                    async for block in sse(response.aiter_lines()):
                        watched.blocks.append(block)
                        if block["event"] in ("done", "error"):
                            return
                        received += 1
                        if received == cut_after:
                            cut_after, watched.cut_by_client = None, True
                            break  # the client goes away; it comes back with the last id it saw
            except httpx.TransportError:
                watched.cut_by_kill = True  # the worker serving the stream was killed
            finally:
                watched.reading = False
        raise AssertionError(f"the events of {watched.turn.message} did not end in time")


# -- the kills -------------------------------------------------------------------------------------------------


@dataclass
class Kill:
    how: str
    pid: int
    executor: str
    at: float
    """time.time() of the kill."""
    in_flight: list[str]
    """The turns the victim was running (PENDING on its executor id) when it died."""
    streamed: str | None = None
    """The turn whose event stream a client was reading when its worker was killed ("streamed" kills)."""


class Killer:
    """Kills a worker with -9 every so many lines of the agency's (a random number), picking the victim as `KILLS`
    says among the live workers that ran a turn (or any live one); after each kill, POSTs two turns again with
    their keys (the same turns, not new ones). Kills are paced by the work done, not by the clock: a slow machine
    gets as many."""

    def __init__(
        self, log: Log, dbos: DBOSClient, client: httpx.AsyncClient, rng: random.Random, deadline: float
    ) -> None:
        self.log, self.dbos, self.client, self.rng, self.deadline = log, dbos, client, rng, deadline
        self.kills: list[Kill] = []
        self.readers: list[Reader] = []
        self.submitted: list[Turn] = []
        self.reposted: list[tuple[Turn, str]] = []
        self.killed = asyncio.Event()

    async def run(self) -> None:
        for how, spare in KILLS:
            pid, streamed = await self.next_victim(how, spare)
            await self.kill(how, pid, streamed)
            self.killed.set()
            await self.repost()

    async def next_victim(self, how: str, spare: bool) -> tuple[int, str | None]:
        """Reads the agency's lines until it is time for the next kill, and one says whom to kill. A kill that
        spares the last worker running turns, or waits for a streamed turn, does so for PATIENCE_LINES at most."""
        wait = self.rng.randint(*LINES_BETWEEN_KILLS)
        patience = PATIENCE_LINES
        while True:
            line = await self.log.lines.get()
            wait -= 1
            if wait > 0:
                continue
            patience -= 1
            if spare and len(self.log.working) < 2 and patience > 0:
                continue  # the last one running turns: wait until a restarted worker runs some
            victim = self.victim(how if patience > 0 or how != "streamed" else "mid-tool", line)
            if victim is not None:
                return victim

    async def wait_for_kills(self, count: int, sent: list[Turn]) -> None:
        """Until `count` kills happened, or every turn sent so far ended (the work is never all done before the
        kills: the last rounds of turns wait for them)."""
        while len(self.kills) < count:
            active = await self.dbos.list_workflows_async(
                workflow_ids=[turn.turn_id for turn in sent], status=["ENQUEUED", "PENDING"], load_input=False,
                load_output=False,
            )
            if not active:
                return
            if time.monotonic() >= self.deadline:  # a hang guard, not a speed check: DEADLINE_S is far above need
                raise AssertionError(f"still {len(active)} turns running and {len(self.kills)} kills at the deadline")
            assert_serving(self.log.server)
            self.killed.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.killed.wait(), 0.5)

    def victim(self, how: str, line: Line) -> tuple[int, str | None] | None:
        """(pid, the turn streamed) to kill for this line, or None to wait for another line."""
        alive = sorted(self.log.alive())
        if how == "any process" and alive:  # one that runs turns, or one still starting (launching DBOS, say)
            return self.rng.choice(alive), None
        if line.pid not in self.log.working:
            return None
        if how == "any moment":
            return self.rng.choice(sorted(self.log.working)), None
        if how == "mid-tool" and line.what == "start":
            return line.pid, None  # the tool waits before its insert: no row, the call is cut
        if how == "after the insert" and line.what == "recorded":
            return line.pid, None  # the row is committed, the call's output not yet stored
        if how == "streamed" and line.what == "start":
            read = [watched for reader in self.readers for watched in reader.watched if watched.reading]
            if any(watched.turn.message == line.note for watched in read):
                return line.pid, line.note
        return None

    async def kill(self, how: str, pid: int, streamed: str | None) -> None:
        executor = self.log.working.pop(pid, None)  # None: it had not run a turn yet (its slot is unknown)
        self.log.killed.add(pid)
        assert self.log.is_worker(pid), pid
        os.kill(pid, signal.SIGKILL)
        at = time.time()
        in_flight = [] if executor is None else await self.dbos.list_workflows_async(
            status="PENDING", executor_id=executor, queue_name=QUEUE, load_input=False, load_output=False
        )
        if not self.log.working and not (self.log.outages and self.log.outages[-1][1] is None):
            self.log.outages.append([at, None])  # no worker left running turns
        turns = [status.workflow_id for status in in_flight]
        self.kills.append(Kill(how, pid, executor or "starting", at, turns, streamed))

    async def repost(self) -> None:
        for turn in self.rng.sample(self.submitted, min(2, len(self.submitted))):
            turn_id, _ = await post(self.client, turn)
            self.reposted.append((turn, turn_id))


# -- waiting, and the checks -----------------------------------------------------------------------------------


async def wait_for_turns(dbos: DBOSClient, log: Log, turns: list[Turn], deadline: float) -> dict[str, int]:
    """Polls DBOS until every turn succeeded (until `deadline`); returns each turn's completion time (ms)."""
    waiting = [turn.turn_id for turn in turns]
    completed: dict[str, int] = {}
    while True:
        statuses = await dbos.list_workflows_async(workflow_ids=waiting, load_input=False, load_output=False)
        ended = {status.workflow_id: status for status in statuses if status.status not in ("ENQUEUED", "PENDING")}
        failed = {key: status.status for key, status in ended.items() if status.status != "SUCCESS"}
        assert not failed, f"turns failed: {failed}"
        completed.update({key: int(status.completed_at or 0) for key, status in ended.items()})
        waiting = [turn_id for turn_id in waiting if turn_id not in ended]
        if not waiting:
            return completed
        assert_serving(log.server)
        if time.monotonic() > deadline:
            running = {status.workflow_id: (status.status, status.executor_id) for status in statuses
                       if status.workflow_id not in ended}
            raise AssertionError(f"{len(running)} turns did not end in {DEADLINE_S} s: {running}")
        await log.wait(0.25)


def assert_serving(server: Server) -> None:
    """The server still runs (uvicorn stops every worker when one fails to start: a full database, say)."""
    assert server.process.poll() is None, "the server stopped; its log (printed below) says why"


async def check_turn_results(client: httpx.AsyncClient, turns: list[Turn]) -> None:
    """GET /chats/{id}/turns/{turn_id}: every turn done, with its answer."""
    limit = asyncio.Semaphore(8)

    async def check(turn: Turn) -> None:
        async with limit:
            response = await client.get(turn.path)
        body = response.json()
        assert response.status_code == 200, body
        assert body["status"] == "done", body
        assert body["result"]["final_output"] == f"done: {turn.message}", body

    await asyncio.gather(*(check(turn) for turn in turns))


def turn_problems(items: list[dict[str, Any]], turns: list[Turn]) -> list[str]:
    """Each turn whole, once, in the order sent: its mark (its turn id), its message, its `record` call, the call's
    output (its own, or the "interrupted" one when a kill cut the call short), its answer."""
    if len(items) != 5 * len(turns):
        kinds = [item.get("type", item.get("role")) for item in items]
        return [f"{len(items)} items for {len(turns)} turns: {kinds}"]
    problems = []
    for index, turn in enumerate(turns):
        mark, asked, call, output, answer = items[5 * index: 5 * index + 5]
        message = turn.message
        if mark != {"type": "agency_swarm.turn_started", "turn_id": turn.turn_id}:
            problems.append(f"turn {index}: {mark!r} where the mark of {turn.turn_id} belongs")
        if (asked.get("role"), asked.get("content")) != ("user", message):
            problems.append(f"turn {index}: {asked!r} where {message!r} was sent")
        if call.get("type") != "function_call" or json.loads(call.get("arguments", "{}")) != {"note": message}:
            problems.append(f"turn {index}: {call!r} is not the call of {message!r}")
        if output.get("call_id") != call.get("call_id") or output.get("output") not in (
            f"recorded {message}", INTERRUPTED_OUTPUT,
        ):
            problems.append(f"turn {index}: {output!r} is not the output of {call.get('call_id')}")
        text = "".join(part.get("text", "") for part in answer.get("content", [])) if answer.get("type") else ""
        if text != f"done: {message}":
            problems.append(f"turn {index}: the answer is {answer!r}")
    return problems


async def check_chats(url: str, chats: dict[str, list[Turn]]) -> Counter[str]:
    """Every stored chat is well formed (the fault suite's invariants and the turns' shape), and every tool call's
    side effect is there once (at most once for an interrupted call, none for a call no chat holds). Returns how
    many calls were real and how many interrupted (with and without their row)."""
    store = SQLThreadStore(url)
    calls: dict[str, tuple[str, str]] = {}  # call id -> (note, output)
    try:
        for chat_id, turns in chats.items():
            threads = {key: items for key, items in (await store.load(chat_id)).items() if items}
            assert set(threads) == {"user->A"}, threads.keys()
            assert not check_threads(threads, final=True), check_threads(threads, final=True)
            items = threads["user->A"]
            assert not turn_problems(items, turns), turn_problems(items, turns)
            outputs = {item["call_id"]: item["output"] for item in items if item.get("type") == "function_call_output"}
            for item in items:
                if item.get("type") == "function_call":
                    calls[item["call_id"]] = (json.loads(item["arguments"])["note"], outputs[item["call_id"]])
    finally:
        await store.aclose()
    connection = await asyncpg.connect(url)
    try:
        rows = await connection.fetch("SELECT call_id, note FROM durable_kill_effects")
    finally:
        await connection.close()
    effects = Counter(row["call_id"] for row in rows)
    assert all(row["call_id"] in calls and calls[row["call_id"]][0] == row["note"] for row in rows), (
        "a side effect of a call no chat holds", [dict(row) for row in rows if row["call_id"] not in calls])
    tally: Counter[str] = Counter()
    for call_id, (note, output) in calls.items():
        if output == INTERRUPTED_OUTPUT:
            assert effects[call_id] <= 1, (call_id, note, effects[call_id])
            tally[f"interrupted with {effects[call_id]} rows"] += 1
        else:
            assert effects[call_id] == 1, (call_id, note, output, effects[call_id])
            tally["ran once"] += 1
    return tally


async def check_streams(client: httpx.AsyncClient, readers: list[Reader]) -> Counter[str]:
    """What each client received over its connections is every event of the turn once (a full read now), and the
    turn's call is in it once, then its output once (the "interrupted" one when a kill cut it short)."""
    tally: Counter[str] = Counter()
    for watched in (watched for reader in readers for watched in reader.watched):
        async with client.stream("GET", f"{watched.turn.path}/events") as response:
            every = [block async for block in sse(response.aiter_lines())]
        assert watched.blocks == every, (watched.turn.message, watched.blocks, every)
        ids = [int(block["id"]) for block in every if "id" in block]
        assert ids == sorted(set(ids)), ids
        calls = [(block["event"], block["data"]["call_id"]) for block in every
                 if block["event"] in ("tool_called", "tool_output")]
        call_id = calls[0][1] if calls else None  # the turn's one call: called once, then its output once, whatever
        assert calls == [("tool_called", call_id), ("tool_output", call_id)], calls  # the kills (repeats left out)
        assert every[-1]["event"] == "done", every[-1]
        tally["reconnected"] += watched.connections > 1
        tally["cut by the client"] += watched.cut_by_client
        tally["cut by a kill"] += watched.cut_by_kill
    return tally


def recovery_report(kills: list[Kill], completed: dict[str, int], outages: list[list[float | None]]) -> str:
    """Recovery after each kill: from the kill to the last of its victim's in-flight turns ending, leaving out the
    turns a later kill caught again before they ended (their time is that kill's); split by whether a worker kept
    running turns meanwhile (the slot's restart or a takeover finished them) or every worker was down a while
    (they waited for a restart)."""
    lines: list[str] = []
    figures: dict[str, list[float]] = {"a worker kept running turns": [], "every worker down a while": []}
    for number, kill in enumerate(kills):
        later = {turn_id for other in kills[number + 1:] for turn_id in other.in_flight}
        ends = [completed[turn_id] / 1000 - kill.at for turn_id in kill.in_flight if turn_id not in later]
        down = False
        if ends:
            until = kill.at + max(ends)
            down = any(start is not None and start < until and (end is None or end > kill.at) for start, end in outages)
            figures["every worker down a while" if down else "a worker kept running turns"].append(max(ends))
        lines.append(
            f"  kill -9 {kill.pid} ({kill.executor}, {kill.how}): {len(kill.in_flight)} turns in flight"
            + (f" ({len(kill.in_flight) - len(ends)} killed again later)" if len(ends) < len(kill.in_flight) else "")
            + (f", done {max(ends):.2f} s later" + (" (every worker down a while)" if down else "") if ends else "")
        )
    every = [seconds for times in figures.values() for seconds in times]
    summary = ["recovery after kill -9 (kill -> the victim's in-flight turns done): " + _spread(every)] + [
        f"  {case}: {_spread(times)}" for case, times in figures.items()
    ]
    return "\n".join(summary + lines)


def _spread(times: list[float]) -> str:
    if not times:
        return "no kill"
    return f"median {statistics.median(times):.2f} s, max {max(times):.2f} s over {len(times)} kills"


# -- the test --------------------------------------------------------------------------------------------------


async def test_kill_workers_at_random_every_turn_ends_once_and_well_formed() -> None:
    base_url = require_postgres()
    print(f"\ndurable kills: seed {SEED} (DURABLE_KILLS_SEED={SEED} replays its choices)")
    began = time.monotonic()
    url = await make_database(base_url)
    server: Server | None = None
    log: Log | None = None
    try:
        server = await asyncio.to_thread(
            start_serve,
            ["--factory", "durable_kill_app:build_agency", "--store", url, "--durable", "--durable-queue", QUEUE],
            workers=3, env={URL_ENV: url},
        )
        print(f"durable kills: database and 3 workers up in {time.monotonic() - began:.1f} s")
        log = Log(server, asyncio.get_running_loop())
        await run_the_kills(log, url)
    except BaseException:
        if server is not None:  # what the server said, but the agency's own lines
            print("".join(line for line in server.log if not line.startswith("kills: ")))
        raise
    finally:
        stopping = time.monotonic()
        if server is not None:
            await asyncio.to_thread(server.stop)
        if log is not None:
            log.join()
        await drop_database(base_url, url)
        print(f"durable kills: server stopped and database dropped in {time.monotonic() - stopping:.1f} s")


async def run_the_kills(log: Log, url: str) -> None:
    rng = random.Random(SEED)
    run = uuid.uuid4().hex[:8]
    chats: dict[str, list[Turn]] = {}
    for index in range(CHATS):
        chat_id = f"kill-{run}-c{index:02d}"
        chats[chat_id] = [Turn(chat_id, f"{chat_id}-t{number}") for number in range(TURNS_PER_CHAT)]
    every = [chats[chat_id][number] for number in range(TURNS_PER_CHAT) for chat_id in chats]  # round after round
    dbos = DBOSClient(system_database_url=url)
    try:
        async with httpx.AsyncClient(base_url=log.server.url, timeout=httpx.Timeout(60, connect=10)) as client:
            started = time.monotonic()
            killer = Killer(log, dbos, client, rng, started + DEADLINE_S)
            watched = rng.sample(sorted(chats), WATCHED_CHATS)
            killer.readers = [Reader(client, chats[chat_id], rng, killer.deadline) for chat_id in watched]
            retried, completed = await run_turns(killer, every)
            elapsed = time.monotonic() - started
            await check_turn_results(client, every)
            streams = await check_streams(client, killer.readers)
        effects = await check_chats(url, chats)
        queued = await dbos.list_workflows_async(queue_name=QUEUE, load_input=False, load_output=False)
        assert len(queued) == len(every), f"{len(queued)} turns for {len(every)} messages: a retried POST made one"
    finally:
        dbos.destroy()
    kills = killer.kills
    print(
        f"durable kills: {len(every)} turns in {elapsed:.1f} s, {len(kills)} kills; tool calls: {dict(effects)}; "
        f"POSTs retried after a cut: {retried}, re-POSTed with their key: {len(killer.reposted)}; "
        f"streams: {dict(streams)}\n{recovery_report(kills, completed, log.outages)}"
    )
    assert all(turn_id == turn.turn_id for turn, turn_id in killer.reposted), killer.reposted
    assert len(kills) >= MIN_KILLS, f"only {len(kills)} kills before every turn ended"
    assert any(kill.streamed for kill in kills), "no worker was killed while a client read its turn's events"
    assert streams["cut by the client"], "no client cut its stream and came back with Last-Event-ID"
    await wait_for_restarts(log, kills)


async def run_turns(killer: Killer, every: list[Turn]) -> tuple[int, dict[str, int]]:
    """POST every turn, round after round (so a chat's turns one after another, in order), while the killer kills
    and the readers read; wait until every turn ended. Returns (POSTs retried after a cut, each turn's completion
    time in ms)."""
    tasks = [asyncio.create_task(reader.run()) for reader in killer.readers]
    killing = asyncio.create_task(killer.run())
    retried = 0
    try:
        for number in range(TURNS_PER_CHAT):  # round n: the n-th turn of every chat
            await killer.wait_for_kills(ROUND_AFTER_KILLS[number], killer.submitted)
            for turn in every[number * CHATS: (number + 1) * CHATS]:
                turn.turn_id, tries = await post(killer.client, turn)
                retried += tries > 1
                turn.submitted.set()
                killer.submitted.append(turn)
        completed = await wait_for_turns(killer.dbos, killer.log, every, killer.deadline)
        await asyncio.wait_for(asyncio.gather(*tasks), max(1.0, killer.deadline - time.monotonic()))
    finally:
        killing.cancel()
        for task in tasks:
            task.cancel()
        outcomes = await asyncio.gather(killing, *tasks, return_exceptions=True)
    errors = [outcome for outcome in outcomes if isinstance(outcome, Exception)
              and not isinstance(outcome, asyncio.CancelledError)]
    assert not errors, errors
    return retried, completed


async def wait_for_restarts(log: Log, kills: list[Kill]) -> None:
    """uvicorn noticed every kill and started a worker in its place (bounded: it looks twice a second). The only
    other deaths allowed are of workers still starting: uvicorn kills one as hung when it does not answer its
    health check in `timeout_worker_healthcheck` (5 s), which a spawned worker importing the SDK on a busy machine
    may take; it never ran a turn (it never logged `Started server process`), and uvicorn starts another."""
    killed = {kill.pid for kill in kills}
    try:
        async with asyncio.timeout(STARTUP_TIMEOUT_S):  # a hang guard: a restart is a worker's start, however slow
            while not (killed <= set(log.died) and len(log.started) >= 3 + len(kills)):
                await log.wait(0.5)
    except TimeoutError:
        raise AssertionError(
            f"uvicorn did not replace every killed worker within {STARTUP_TIMEOUT_S} s: killed {sorted(killed)}, "
            f"died {log.died}, started {log.started}"
        ) from None
    unexpected = set(log.died) - killed
    assert not unexpected & set(log.started), f"workers died that the test did not kill: {unexpected}"
    if unexpected:
        print(f"  uvicorn killed {len(unexpected)} workers still starting (no health check answer in 5 s)")
