"""PostgreSQL turn locks: one session per event loop holds them all; a lost session stops the turns it held.

docs/design/serving.md ("Cross-worker turns", "A lost lock session") says why it is built this way.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._base._errors import StoreError
from .._base._redact import secret_free_logger
from ._pg_cancel import _SQL_ASK_CANCEL, CANCEL_CHANNEL, CancelChannel
from ._running import CancelOutcome
from ._store import ChatVersion

logger = secret_free_logger("agency_swarm")

POSTGRES_CONNECT_TIMEOUT_S = 10.0
POSTGRES_CLOSE_TIMEOUT_S = 10.0
TURN_LOCK_RETRY_S = 0.5
"""A chat locked by another process is tried again this often: its holder's NOTIFY usually comes first, but a
holder that died notifies nobody (the server frees a dead session's locks silently)."""
LOCK_SESSION_TIMEOUT_S = 10.0
"""How long a worker's turn locks outlive a lock session gone silent (network cut, host gone): the server ends the
session after about this long (TCP keepalives and TCP_USER_TIMEOUT), which frees its locks for other workers. The
worker gives the session up after half of it, and stops the turns that held locks on it."""

# Session-level advisory locks on (namespace, chat key). They are taken inside a function so that the chat's version
# is read by a statement that starts after the lock was granted: read in the same statement, it would come from a
# snapshot taken before, and could miss the last items of the turn that just let go. The same function draws the
# hold's fencing token and writes it to the chat row (`lock_token`): the turn's writes carry it and are refused
# once another hold has written its own (the lock was lost meanwhile). Should that write fail, the lock is let go
# before the error is raised: a session-level lock outlives the statement that failed.
#
# The token is random, not a counter, so that its write needs no flush of its own (synchronous_commit off for this
# statement): a crash may lose it, putting back an earlier holder's token, but never one that the next holder
# could draw again. The holders whose tokens were lost are all refused; and none of them had stored anything (a
# stored write flushes the log up to it, this token included). A counter written that way could be handed out
# twice (to the holder before the crash and to the one after); written with a flush, it would cost every turn a
# log flush. docs/design/serving.md ("A lost lock session").
TURN_CHANNEL = "agency_swarm_turn"
TAKE_TURN_SIGNATURE = "agency_swarm_take_fenced_turn(integer,text)"
SQL_CREATE_TAKE_TURN = """
CREATE OR REPLACE FUNCTION agency_swarm_take_fenced_turn(lock_key int4, chat text,
    OUT taken boolean, OUT chat_version bigint, OUT chat_cleared bigint, OUT token bigint)
LANGUAGE plpgsql VOLATILE AS $body$
BEGIN
    taken := pg_try_advisory_lock(hashtext('agency_swarm_turn'), lock_key);
    IF taken THEN
        BEGIN
            PERFORM set_config('synchronous_commit', 'off', true);
            token := 1 + (random() * 4611686018427387903)::bigint;
            INSERT INTO agency_swarm_chats AS c (chat_id, version, cleared, lock_token) VALUES (chat, 0, 0, token)
            ON CONFLICT (chat_id) DO UPDATE SET lock_token = excluded.lock_token
            RETURNING c.version, c.cleared INTO chat_version, chat_cleared;
        EXCEPTION WHEN OTHERS THEN
            PERFORM pg_advisory_unlock(hashtext('agency_swarm_turn'), lock_key);
            RAISE;
        END;
    END IF;
END
$body$"""
_SQL_TRY_TURN = (
    "SELECT taken, chat_version, chat_cleared, token FROM agency_swarm_take_fenced_turn($1::int4, $2::text)"
)
_SQL_END_TURN = (
    "SELECT pg_advisory_unlock(hashtext('agency_swarm_turn'), $1::int4), c.version, c.cleared "
    "FROM (SELECT pg_notify('agency_swarm_turn', $1::int4::text)) AS notified "
    "LEFT JOIN agency_swarm_chats c ON c.chat_id = $2::text"
)


def keepalive(seconds: float) -> tuple[int, int, int, int]:
    """TCP keepalive idle, interval and count (whole seconds) and TCP_USER_TIMEOUT (ms) that give up a silent peer
    after about `seconds`: probes start half-way, and the user timeout ends the connection once `seconds` passed
    with a probe unanswered, or with data unacknowledged."""
    idle = max(1, int(seconds / 2))
    interval = max(1, int(seconds / 10))
    count = max(1, -(-int(seconds - idle) // interval))
    return idle, interval, count, max(1, round(seconds * 1000))


def server_keepalive(seconds: float) -> str:
    """The SET statements that make the server end this session after `seconds` of silence from its client.

    Statements, not startup parameters: a connection pooler in between may refuse unknown startup parameters.
    """
    idle, interval, count, user_timeout = keepalive(seconds)
    return (
        f"SET tcp_keepalives_idle = {idle}; SET tcp_keepalives_interval = {interval}; "
        f"SET tcp_keepalives_count = {count}; SET tcp_user_timeout = {user_timeout}"
    )


def watch_socket(session: Any, seconds: float) -> None:
    """Make this side's kernel end the session after `seconds` of silence from the server (TCP sessions only; the
    options this platform lacks are left out). asyncpg then closes the connection, which its termination listeners
    hear. asyncpg has no public handle on its socket; without one, only the fencing token protects the chat."""
    transport = getattr(session, "_transport", None)
    sock = None if transport is None else transport.get_extra_info("socket")
    if sock is None or sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    idle, interval, count, user_timeout = keepalive(seconds)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for name, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", interval), ("TCP_KEEPCNT", count),
                        ("TCP_USER_TIMEOUT", user_timeout)):
        option = getattr(socket, name, None)
        if option is not None:
            sock.setsockopt(socket.IPPROTO_TCP, option, value)


@dataclass
class KeyLock:
    """An asyncio lock shared by whoever uses one key, forgotten when the last of them is done."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    users: int = 0


def turn_lock_key(chat_id: str) -> int:
    """A chat's 32-bit advisory lock key, the same in every process (two chats sharing one only wait for each other)."""
    return int.from_bytes(hashlib.blake2b(chat_id.encode("utf-8"), digest_size=4).digest(), "big", signed=True)


@dataclass(eq=False)
class HeldTurn:
    """A turn lock this process holds: the session it is on, the chat's version read once it was taken, the hold's
    fencing token, and the task that took it, which is cancelled if that session ends."""

    chat_id: str
    key: int
    session: Any
    version: ChatVersion
    token: int
    task: asyncio.Task[Any] | None
    cancelling: int = 0  # the task's cancellation requests when it took the lock
    stopped: bool = False  # `stop` cancelled the task, and that cancellation is not accounted for yet

    def stop(self) -> None:
        """The lock's session ended: cancel the turn (`lost_lock_cancelled` then says it was this)."""
        if not self.stopped and self.task is not None and not self.task.done():
            self.stopped = True
            self.task.cancel("the session holding this turn's lock ended")

    def lost_lock_cancelled(self) -> bool:
        """Whether a CancelledError leaving the turn is `stop`'s alone (then it is withdrawn, for the caller to raise
        TurnLockLost instead); False when the task was cancelled by someone else too, as asyncio.timeout decides."""
        if not self.stopped or self.task is None:
            return False
        self.stopped = False
        return self.task.uncancel() <= self.cancelling


class TurnLocks:
    """Every turn lock of one event loop's turns, held on ONE dedicated PostgreSQL session.

    Session-level advisory locks, taken with `pg_try_advisory_lock` so the session never blocks and one connection
    serves any number of running turns. A chat busy in another process is waited for here: its holder's unlock
    comes with a NOTIFY, and a try every TURN_LOCK_RETRY_S covers a holder that died. Session locks are re-entrant
    (a second turn of this process would "get" a lock this session holds), so this process's turns of one chat
    queue on an asyncio lock first. docs/design/serving.md compares this with a connection per running turn.

    If the session ends while turns hold locks on it (not because the store closed), those turns are cancelled:
    other workers may take their chats. `timeout` bounds how long a silent session lasts (LOCK_SESSION_TIMEOUT_S);
    None leaves TCP as the system has it.
    """

    def __init__(
        self, dsn: str, asyncpg: Any, timeout: float | None = LOCK_SESSION_TIMEOUT_S,
        cancels: CancelChannel | None = None,
    ) -> None:
        self._dsn, self._asyncpg, self._timeout = dsn, asyncpg, timeout
        self.cancels = cancels or CancelChannel([])
        self._conn: Any = None
        self._queries = asyncio.Lock()  # one statement at a time on the session
        self._local: dict[int, KeyLock] = {}
        self._held: dict[str, HeldTurn] = {}
        self._wakeups: dict[int, asyncio.Event] = {}
        self._orphans: set[asyncio.Task[Any]] = set()
        self._closed = False

    def fence(self, chat_id: str) -> int | None:
        """The fencing token of the chat's turn while this process holds its lock, else None."""
        held = self._held.get(chat_id)
        return None if held is None else held.token

    async def acquire(self, chat_id: str) -> HeldTurn:
        """Wait until this process holds the chat's turn lock; the hold carries the chat's version, read after the
        lock was taken, and its fencing token."""
        key = turn_lock_key(chat_id)
        entry = self._local.get(key)
        if entry is None:
            entry = self._local[key] = KeyLock()
        entry.users += 1
        try:
            await entry.lock.acquire()
            try:
                session, version, token = await self._take(key, chat_id)
            except BaseException:
                entry.lock.release()
                raise
        except BaseException:
            self._forget(key, entry)
            raise
        task = asyncio.current_task()
        held = HeldTurn(chat_id, key, session, version, token, task, 0 if task is None else task.cancelling())
        self._held[chat_id] = held
        if session is not self._conn or session.is_closed():  # it ended as this turn was given the lock
            held.stop()
        return held

    async def release(self, held: HeldTurn) -> None:
        """Unlock; `held.version` becomes the version the turn left behind (unchanged if the unlock failed)."""
        if self._held.get(held.chat_id) is held:
            del self._held[held.chat_id]  # before the unlock, whose failure ends the session: not this turn's loss
        if held.stopped and held.task is not None:  # cancelled, but the turn ended otherwise: withdraw it
            held.stopped = False
            held.task.uncancel()
        try:
            await asyncio.shield(self._unlock(held.key, held.session, held.chat_id, held.version))  # even cancelled
        finally:
            entry = self._local[held.key]
            entry.lock.release()
            self._forget(held.key, entry)

    def _forget(self, key: int, entry: KeyLock) -> None:
        entry.users -= 1
        if entry.users == 0:
            del self._local[key]

    async def _take(self, key: int, chat_id: str) -> tuple[Any, ChatVersion, int]:
        wakeup = self._wakeups[key] = asyncio.Event()  # one taker per key at a time: the asyncio lock above
        try:
            while True:
                wakeup.clear()  # before trying: an unlock between the try and the wait is not missed
                attempt = asyncio.ensure_future(self._query(_SQL_TRY_TURN, key, chat_id))
                try:
                    session, (taken, version, cleared, token) = await asyncio.shield(attempt)
                except asyncio.CancelledError:
                    attempt.add_done_callback(self._unlock_if_taken(key))  # granted as we were cancelled?
                    raise
                if taken:
                    return session, ChatVersion(version or 0, cleared or 0), int(token)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(wakeup.wait(), TURN_LOCK_RETRY_S)
        finally:
            del self._wakeups[key]

    def _unlock_if_taken(self, key: int) -> Callable[[asyncio.Future[Any]], None]:
        def done(attempt: asyncio.Future[Any]) -> None:
            if attempt.cancelled() or attempt.exception() is not None or not attempt.result()[1][0]:
                return
            task = asyncio.ensure_future(self._unlock(key, attempt.result()[0], None, None))
            self._orphans.add(task)
            task.add_done_callback(self._orphans.discard)

        return done

    async def cancel_elsewhere(self, chat_id: str, turn_id: str | None) -> CancelOutcome | None:
        """Ask the process running a turn of the chat (any process on this database) to cancel it: its answer, or
        None when no process runs one."""
        ask, reply = self.cancels.ask(chat_id, turn_id)
        try:
            _, running = await self._query(_SQL_ASK_CANCEL, turn_lock_key(chat_id), ask)
            return await self.cancels.answer(reply) if running[0] else None
        finally:
            self.cancels.forget(reply)

    async def _notify(self, payload: str) -> None:
        async with self._queries:
            if self._conn is not None and not self._conn.is_closed():
                await self._conn.execute("SELECT pg_notify($1, $2)", CANCEL_CHANNEL, payload)

    async def _query(self, query: str, key: int, chat_id: str) -> tuple[Any, Any]:
        async with self._queries:
            if self._closed:  # a turn still waiting when the store closed must not open a new session
                raise StoreError("The thread store was closed while a turn waited for its chat's lock.")
            session = self._conn
            if session is None or session.is_closed():
                session = self._conn = await self._connect()
            return session, await session.fetchrow(query, key, chat_id)

    async def _connect(self) -> Any:
        session = await self._asyncpg.connect(self._dsn, timeout=POSTGRES_CONNECT_TIMEOUT_S)
        try:
            if self._timeout is not None:
                await session.execute(server_keepalive(self._timeout))
                watch_socket(session, self._timeout / 2)  # the worker gives up first: before others may take over
            await session.add_listener(TURN_CHANNEL, self._notified)
            await session.add_listener(CANCEL_CHANNEL, self.cancels.notified(self._notify))
        except BaseException:
            session.terminate()
            raise
        session.add_termination_listener(self._session_ended)
        return session

    def _notified(self, _session: Any, _pid: int, _channel: str, payload: str) -> None:
        with contextlib.suppress(ValueError):
            wakeup = self._wakeups.get(int(payload))
            if wakeup is not None:
                wakeup.set()

    def _session_ended(self, session: Any) -> None:
        """asyncpg: the session closed. Unless the store closed it, the turns holding locks on it lost them."""
        if self._conn is session:
            self._conn = None
        if self._closed:
            return
        lost = [held for held in self._held.values() if held.session is session]
        for held in lost:
            held.stop()
        if lost:
            logger.warning("Turn lock session lost: %d running turn(s) stopped (TurnLockLost)", len(lost))

    async def _unlock(self, key: int, session: Any, chat_id: str | None, version: ChatVersion | None) -> None:
        async with self._queries:
            if session is not self._conn or session.is_closed():
                return  # that session ended, and its locks with it
            try:
                row = await session.fetchrow(_SQL_END_TURN, key, chat_id)
                if version is not None:
                    version.version, version.cleared = row[1] or 0, row[2] or 0
            except Exception as error:
                # A lock that cannot be released would keep the chat busy everywhere until this process exits:
                # ending the session frees it, and this process's other turn locks (those turns are stopped).
                session.terminate()
                self._conn = None
                logger.warning("Turn lock session closed after a failed unlock: %s", type(error).__name__)

    async def close(self) -> None:
        async with self._queries:
            self._closed = True
            session, self._conn = self._conn, None
        if session is not None and not session.is_closed():
            try:
                await asyncio.wait_for(session.close(), POSTGRES_CLOSE_TIMEOUT_S)
            except BaseException:
                session.terminate()
                raise
