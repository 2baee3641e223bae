"""`DurableTurns`: launches DBOS on the agency's PostgreSQL, submits turns to its queue, and hands out handles."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import socket
import uuid
from collections.abc import AsyncIterator, Iterable, Mapping
from typing import Any, Literal

import asyncpg  # type: ignore[import-untyped]
import psycopg
from agents import TResponseInputItem
from dbos import DBOS, SetEnqueueOptions, SetWorkflowID, WorkflowHandleAsync
from dbos._error import DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError

from .._agency._agency import Agency, rejections
from .._attachments._incoming import Incoming
from .._base._errors import (
    AgencySwarmError,
    ChatPaused,
    ConfigError,
    NothingToResume,
    RunError,
    TurnCancelled,
    TurnLockLost,
    TurnNotRunning,
    UnknownTurn,
)
from .._base._redact import secret_free_logger
from .._telemetry._carry import carried_trace, continued_trace
from .._threads._manager import check_chat_id
from .._threads._running import CANCEL_WAIT_SECONDS
from .._threads._store import MemoryThreadStore
from .._turn._agent import checked_request
from .._turn._results import RunResult
from .._turn._state import CALLER_DEPTH
from ._depth import QueueDepth
from ._observers import Observed, TurnObserver, observed_request, tell_ended, tell_event
from ._queues import AgencyIdentity, checked_queue_name
from ._stream import DurableEvent, EventWriter, read_events, stream_ended
from ._supervisor import Supervisor
from ._workflow import forget, serve_turns, turn_workflow, wait_here

logger = secret_free_logger("agency_swarm.durable")
secret_free_logger("dbos")  # DBOS logs a failed workflow's exception (a tool's, a model's) with its traceback
LOST_LOCK_RETRIES = 3
LAUNCH_ATTEMPTS = 6
LAUNCH_PAUSE_SECONDS = 0.5
"""The first pause between launch attempts; each next one is twice as long (0.5 + 1 + ... + 8 s: 15.5 s in all)."""
OUTCOME_POLL_SECONDS = 0.01
"""How often the outcome of a turn whose stream closed is looked for (it is stored right after the close)."""
"""How often a step whose turn lost its chat's lock runs the turn again before it fails."""
TurnStatus = Literal["queued", "running", "done", "failed", "cancelled"]
_STATUSES: dict[str, TurnStatus] = {
    "ENQUEUED": "queued", "PENDING": "running", "SUCCESS": "done", "ERROR": "failed", "CANCELLED": "cancelled",
    "MAX_RECOVERY_ATTEMPTS_EXCEEDED": "failed",
}


class TurnFailed(AgencySwarmError):
    """A durable turn ended with an error. `kind` says which (`bad_request`, `chat_paused`, `nothing_to_resume`,
    `run_failed`, `internal_error`); the message is the error's own, except for `internal_error` (the log has it)."""

    def __init__(self, message: str, kind: str, error_type: str) -> None:
        super().__init__(message)
        self.kind, self.error_type = kind, error_type

    def __reduce__(self) -> Any:  # DBOS stores a workflow's error pickled: rebuilt from these three
        return (TurnFailed, (str(self), self.kind, self.error_type))


def failure(error: Exception) -> TurnFailed:
    """What a failed turn is stored as (the original's class need not survive pickling)."""
    kinds: list[tuple[type[Exception], str]] = [
        (ChatPaused, "chat_paused"), (NothingToResume, "nothing_to_resume"), (ConfigError, "bad_request"),
        (RunError, "run_failed"),
    ]
    kind = next((name for cls, name in kinds if isinstance(error, cls)), "internal_error")
    message = str(error) if kind != "internal_error" else "The turn failed; the server's log says why."
    return TurnFailed(message, kind, type(error).__name__)


def _warn_if_chats_stay_in_memory(agency: Agency) -> None:
    """Durable turns outlive a worker; chats kept in its memory do not: said once, when the DurableTurns is made."""
    store = agency.thread_manager.store
    if store is None or type(store) is MemoryThreadStore:
        logger.warning(
            "DurableTurns: this agency keeps its chats in memory (no thread_store), so a turn another worker takes "
            "over, or one finished after a restart, starts from an empty chat. Give the agency the store every worker "
            "shares: Agency(..., thread_store=SQLThreadStore(<the PostgreSQL URL>))."
        )


def chat_tag(chat_id: str, queue_name: str) -> str:
    """The start of every turn id of a chat on a queue: a handle for another chat's turn, or another agency's, is
    refused without a lookup, and the same chat id and key on two agencies' queues are two turns."""
    tagged = f"{queue_name}\0{chat_id}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(tagged, digest_size=8).hexdigest()


def cannot_connect_yet(error: BaseException) -> bool:
    """Whether `error` says the database cannot take a connection now (and may later), from any of the drivers."""
    import sqlalchemy.exc

    while error is not None:
        if isinstance(error, OSError | asyncpg.TooManyConnectionsError | asyncpg.CannotConnectNowError):
            return True
        if isinstance(error, sqlalchemy.exc.OperationalError | psycopg.OperationalError):
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def _check_positive(**numbers: float) -> None:
    for name, number in numbers.items():
        if isinstance(number, bool) or not isinstance(number, int | float) or not number > 0:
            raise ConfigError(f"DurableTurns: {name} must be a number above 0.")
        if name != "poll_seconds" and not isinstance(number, int):
            raise ConfigError(f"DurableTurns: {name} must be a whole number.")


class TurnHandle:
    """A submitted turn: its status, its events (from the start or after an id), and its result when it ends."""

    def __init__(self, turn_id: str, chat_id: str) -> None:
        self.turn_id, self.chat_id = turn_id, chat_id

    async def status(self) -> TurnStatus:
        found = await DBOS.get_workflow_status_async(self.turn_id)
        if found is None:
            raise UnknownTurn(f"Chat {self.chat_id!r} has no turn {self.turn_id!r}.")
        return _STATUSES.get(found.status, "running")

    async def result(self) -> RunResult:
        """The turn's RunResult once it ends (waits); a failed turn raises `TurnFailed`.

        Waiting costs no polling: a turn this process runs tells its waiters when it ends; one that another worker
        runs is followed on its event stream, which PostgreSQL notifications wake, until the stream closes. Then
        the outcome is read as stored (a moment after the end)."""
        waiter = wait_here(self.turn_id)
        elsewhere = asyncio.ensure_future(stream_ended(self.turn_id))
        try:
            await asyncio.wait((waiter.started, waiter.ended, elsewhere), return_when=asyncio.FIRST_COMPLETED)
            if not elsewhere.done() and not waiter.ended.done():  # it runs here: its end is told here
                elsewhere.cancel()
                if await waiter.ended:  # cut short (this worker is stopping): another worker goes on with it
                    await stream_ended(self.turn_id)
            return await self.ended_result()  # as stored: `status()` says done (or failed) from now on
        finally:
            forget(self.turn_id, waiter)
            elsewhere.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await elsewhere  # its error, if any, is ended_result's too

    async def ended_result(self) -> RunResult:
        """The result of a turn whose event stream has ended (its outcome is stored a moment after)."""
        handle: WorkflowHandleAsync[RunResult] = await DBOS.retrieve_workflow_async(self.turn_id)
        try:
            result = await handle.get_result(polling_interval_sec=OUTCOME_POLL_SECONDS)
        except (DBOSAwaitedWorkflowCancelledError, DBOSWorkflowCancelledError):
            raise TurnCancelled(
                f"Turn {self.turn_id!r} of chat {self.chat_id!r} was cancelled.", chat_id=self.chat_id,
                turn_id=self.turn_id,
            ) from None
        return result

    def events(self, after: int | None = None) -> AsyncIterator[DurableEvent]:
        """The turn's events with ids above `after` (every one with None), live until the turn ends."""
        return read_events(self.turn_id, after)


class DurableTurns:
    """Runs an agency's top-level turns as DBOS workflows on one queue in PostgreSQL (one per process).

    The queue belongs to this agency: `queue_name` (a-z, 0-9, _ and -), else `agency_swarm_turns_<12 hex>` named after
    the agency's chart (its agents' names, entry points and flows). `launch` refuses (ConfigError) a queue another
    agency's workers use, or one where another agency's turns wait (docs/design/durable.md).

    `executor_id` must be stable per worker slot and distinct between live workers: a restarted worker with the same
    id recovers its own unfinished turns at launch; the others take over the turns of a worker whose heartbeat
    stopped for `expire_after_seconds`. Without one, the worker takes the first free slot `<host name>-<queue>-<n>`.
    `concurrency` turns run at once per worker; a chat's turns run one at a time, in the order submitted.
    `poll_seconds` is how often the worker looks for queued turns: a turn waits half of it on average before it
    starts, and an idle worker spends CPU on every look (docs/design/durable.md has the figures). `pool_size`
    caps this worker's connections to DBOS's tables (the store has its own).
    """

    def __init__(
        self,
        agency: Agency,
        *,
        database_url: str,
        executor_id: str | None = None,
        application_version: str = "1",
        queue_name: str | None = None,
        concurrency: int = 16,
        heartbeat_seconds: float = 1.0,
        expire_after_seconds: float = 5.0,
        poll_seconds: float = 0.05,
        pool_size: int = 10,
    ) -> None:
        if not isinstance(agency, Agency):
            raise ConfigError(f"DurableTurns needs an Agency, got {type(agency).__name__}.")
        if not isinstance(database_url, str) or not database_url.startswith(("postgresql://", "postgres://")):
            raise ConfigError("DurableTurns needs database_url='postgresql://...': DBOS keeps its queue there.")
        if executor_id is not None and (not isinstance(executor_id, str) or not executor_id.strip()):
            raise ConfigError("executor_id must be a non-blank str, stable per worker slot (e.g. 'worker-1').")
        if not 0 < heartbeat_seconds < expire_after_seconds:
            raise ConfigError("heartbeat_seconds must be above 0 and below expire_after_seconds.")
        _check_positive(concurrency=concurrency, pool_size=pool_size, poll_seconds=poll_seconds)
        _warn_if_chats_stay_in_memory(agency)
        self.identity = AgencyIdentity(agency)
        queue_name = self.identity.default_queue() if queue_name is None else checked_queue_name(queue_name)
        self.agency, self.executor_id, self.queue_name = agency, executor_id or "", queue_name
        self._url, self._version, self._concurrency = database_url, application_version, concurrency
        self._poll_seconds, self._pool_size = poll_seconds, pool_size
        self._supervisor = Supervisor(
            database_url, executor_id, queue_name, self.identity, heartbeat_seconds, expire_after_seconds
        )
        self._queue: Any = None
        self._observers: dict[str, TurnObserver] = {}
        self._depth = QueueDepth(database_url, queue_name)

    def observe(self, name: str, observer: TurnObserver) -> None:
        """Tell `observer` the events and the end of every turn submitted with `observed=Observed(name, ...)`, from
        inside the turn's step: on whichever worker runs the turn, and again when a worker runs it after a crash.
        Every worker registers the same observers before it launches (a turn names its observer, not its code)."""
        self._observers[name] = observer

    async def launch(self) -> None:
        """Start DBOS (its schema is made on first use), this worker's queue and its heartbeat.

        A database that cannot take the worker yet (unreachable, starting, or out of connections, as when many
        workers restart at once) is tried again, `LAUNCH_ATTEMPTS` times in all with growing pauses; other errors
        raise at once."""
        for attempt in range(1, LAUNCH_ATTEMPTS + 1):
            try:
                await self._launch_once()
                return
            except Exception as error:
                await self._undo_launch()
                if attempt == LAUNCH_ATTEMPTS or not cannot_connect_yet(error):
                    raise
                pause = LAUNCH_PAUSE_SECONDS * 2 ** (attempt - 1)
                logger.warning(
                    "Durable worker could not launch (%s, attempt %d of %d); trying again in %.1f s",
                    type(error).__name__, attempt, LAUNCH_ATTEMPTS, pause,
                )
                await asyncio.sleep(pause)  # a back-off before the next attempt, not a wait for an event

    async def _undo_launch(self) -> None:
        self._queue = None
        with contextlib.suppress(Exception):
            await self._supervisor.stop()
        serve_turns(None)
        with contextlib.suppress(Exception):
            DBOS.destroy(destroy_registry=False)

    async def _launch_once(self) -> None:
        self.executor_id = await self._supervisor.connect(f"{socket.gethostname()}-{self.queue_name}")
        DBOS(config={
            "name": "agency_swarm", "system_database_url": self._url, "executor_id": self.executor_id,
            "application_version": self._version, "log_level": "WARNING", "sys_db_pool_size": self._pool_size,
        })
        # Else DBOS dequeues from every queue its application has in the database: another DurableTurns' turns,
        # run with this agency.
        DBOS.listen_queues([self.queue_name])
        serve_turns(self._run)
        DBOS.launch()
        self._queue = await DBOS.register_queue_async(
            self.queue_name, worker_concurrency=self._concurrency, partition_concurrency=1,
            polling_interval_sec=self._poll_seconds,
            on_conflict="always_update",
        )
        await self._supervisor.start()

    async def aclose(self) -> None:
        await self._depth.aclose()
        await self._supervisor.stop()
        serve_turns(None)
        DBOS.destroy(destroy_registry=False)

    async def queue_depth(self) -> int | None:
        """How many of this queue's turns wait to start, on every worker (None: the database did not answer)."""
        return await self._depth.read()

    async def submit(
        self, message: str | list[TResponseInputItem], *, chat_id: str, recipient_agent: str | None = None,
        key: str | None = None, context: Any = None, additional_instructions: str | None = None,
        observed: Observed | None = None, caller_depth: int = 0,
    ) -> TurnHandle:
        """Queue a turn; the same `key` on the same chat is the same turn (never a second one), whatever its state.

        `message`: text or input items, as in `Agency.get_response`. Images and files given as bytes are checked
        and stored in the agency's store now, once; the queued request holds references to them, never the bytes.
        `context` (the run context, as in `Agency.get_response`) and `additional_instructions` are stored with the
        turn (DBOS pickles them): the worker that runs it, any worker, gets them; the context's class must be
        importable there. `observed`: the observer (`observe`) told of the turn, and what it is told with it;
        `caller_depth`: the depth of the turn's entry agent in the chart of the agency that sent the message."""
        if recipient_agent is not None:
            try:
                self.agency.entry_point(recipient_agent)  # the chart's rule: only its entry points are addressed
            except ConfigError as error:
                raise ConfigError(f"recipient_agent: {error}") from None
        if additional_instructions is not None and not isinstance(additional_instructions, str):
            raise ConfigError("additional_instructions must be a str or None.")
        manager = self.agency.thread_manager
        _, chat_id, prepared = checked_request(message, chat_id, None, None, manager.attachments.limits)
        if isinstance(prepared, Incoming):
            await manager.attachments.keep(chat_id, prepared.blobs)
            message = prepared.items  # type: ignore[assignment]
        request: dict[str, Any] = {"chat_id": chat_id, "message": message, "recipient_agent": recipient_agent}
        if context is not None:
            request["context"] = context
        if additional_instructions is not None:
            request["additional_instructions"] = additional_instructions
        if caller_depth:
            request["caller_depth"] = caller_depth
        return await self._enqueue(observed_request(request, observed), key, "")

    async def resume(
        self,
        *,
        chat_id: str,
        approve: Iterable[str] = (),
        reject: Iterable[str] | Mapping[str, str | None] = (),
        key: str | None = None,
        context: Any = None,
        observed: Observed | None = None,
    ) -> TurnHandle:
        """Queue a resume of the chat's unfinished turn (`Agency.resume`), durably: the same `key` is the same
        resume. `reject` as in `Agency.resume`: call ids, or {call id: the message the model reads, or None}; the
        messages are stored with the request. Decisions on calls that do not wait fail the resume (`TurnFailed`,
        kind bad_request). `context` and `observed`: as in `submit` (the resumed turn runs with it)."""
        chat_id = check_chat_id(chat_id)
        approved = sorted(approve)
        if any(not isinstance(call_id, str) for call_id in approved):
            raise ConfigError("approve and reject must hold call ids (str).")
        decisions = {"approve": approved, "reject": dict(sorted(rejections(reject).items()))}
        request: dict[str, Any] = {"chat_id": chat_id, "resume": decisions}
        if context is not None:
            request["context"] = context
        return await self._enqueue(observed_request(request, observed), key, "r")

    async def _enqueue(self, request: dict[str, Any], key: str | None, kind: str) -> TurnHandle:
        if self._queue is None:
            raise ConfigError("DurableTurns: call `await launch()` first.")
        if key is not None and (not isinstance(key, str) or not key or len(key) > 255):
            raise ConfigError("key must be a non-empty str of at most 255 characters.")
        chat_id = request["chat_id"]
        request["turn_id"] = turn_id = self.turn_id(chat_id, key, resume=kind == "r")
        trace = carried_trace(turn_id)
        if trace is not None:  # the turn's spans join this request's trace, whichever worker runs it
            request["trace"] = trace
        with SetWorkflowID(turn_id), SetEnqueueOptions(queue_partition_key=chat_id):
            await self._queue.enqueue_async(turn_workflow, request)
        return TurnHandle(turn_id, chat_id)

    def turn_id(self, chat_id: str, key: str | None, *, resume: bool = False) -> str:
        """The id of the turn `submit` (or, `resume`, `resume`) queues on `chat_id` with `key` (a new one each call
        without a key): known before the turn is queued."""
        suffix = uuid.uuid4().hex if key is None else hashlib.blake2b(key.encode(), digest_size=16).hexdigest()
        return f"{chat_tag(chat_id, self.queue_name)}-{'r' if resume else ''}{suffix}"

    async def cancel(self, chat_id: str, turn_id: str) -> None:
        """Cancel the turn: a queued one never runs, a running one stops where it stands (on whichever worker runs
        it: `Agency.cancel`); its status becomes `cancelled`, its events end with `cancelled`, and waiting for its
        result raises TurnCancelled. UnknownTurn for a turn the chat never had, TurnNotRunning once it ended."""
        handle = self.handle(chat_id, turn_id)
        if await handle.status() in ("done", "failed", "cancelled"):
            raise TurnNotRunning(f"Turn {turn_id!r} of chat {chat_id!r} has ended: nothing to cancel.")
        try:  # running: it stops, writes its `cancelled` event and the stream's end, and cancels its workflow
            await self.agency.cancel(chat_id, turn_id)
        except (TurnNotRunning, UnknownTurn):  # queued: it is not started any more (or stopped, if it just started)
            await DBOS.cancel_workflow_async(turn_id)
            with contextlib.suppress(TurnNotRunning, UnknownTurn):
                await self.agency.cancel(chat_id, turn_id)
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stream_ended(turn_id), CANCEL_WAIT_SECONDS)
        await DBOS.cancel_workflow_async(turn_id)  # its status says cancelled from now on (a no-op if it did so)

    def handle(self, chat_id: str, turn_id: str) -> TurnHandle:
        """The handle of a turn submitted to `chat_id` (by any worker); UnknownTurn if the id is not that chat's."""
        chat_id = check_chat_id(chat_id)
        tag = chat_tag(chat_id, self.queue_name)
        if not isinstance(turn_id, str) or not turn_id.startswith(tag + "-") or len(turn_id) > 80:
            raise UnknownTurn(f"Chat {chat_id!r} has no turn {turn_id!r}.")
        return TurnHandle(turn_id, chat_id)

    async def _run(self, request: dict[str, Any], writer: EventWriter) -> RunResult:
        """The turn itself, inside its workflow's step: streamed, each event written to the turn's stream.

        A turn that lost its chat's lock (TurnLockLost: this worker was cut off, and another took the turn over)
        is run again: the call waits for the chat, then returns the turn's result, or goes on with it, so both
        runs of the step end with the same result."""
        for attempt in range(LOST_LOCK_RETRIES + 1):
            try:
                with continued_trace(request.get("trace")):
                    result = await self._streamed(request, writer)
            except TurnLockLost:
                if attempt == LOST_LOCK_RETRIES:
                    raise
                continue
            result.tool_guardrails = None  # guardrail objects hold functions: not stored with the workflow's output
            return result
        raise AssertionError("unreachable")

    async def _streamed(self, request: dict[str, Any], writer: EventWriter) -> RunResult:
        observer = self._observer_of(request)
        token = CALLER_DEPTH.set(int(request.get("caller_depth", 0)))
        try:
            stream = self._stream_of(request)
            try:
                async with stream:
                    async for event in stream:
                        await writer.write(event)
                        await tell_event(observer, request, event)
                await writer.end()
            except TurnLockLost:
                raise
            except Exception as error:
                failed = failure(error)
                writer.hold({"type": "turn_failed", "kind": failed.kind, "message": str(failed)})
                await writer.end()
                await tell_ended(observer, request, failed)
                raise failed from None
        finally:
            CALLER_DEPTH.reset(token)
        if stream.cancelled:  # its events ended with `cancelled`: the workflow is cancelled too, not failed
            turn_id, chat_id = request["turn_id"], request["chat_id"]
            await tell_ended(observer, request, TurnCancelled(
                f"Turn {turn_id!r} of chat {chat_id!r} was cancelled.", chat_id=chat_id, turn_id=turn_id
            ))
            await DBOS.cancel_workflow_async(turn_id)
        else:
            await tell_ended(observer, request, stream.result)
        result: RunResult = stream.result
        return result

    def _observer_of(self, request: dict[str, Any]) -> TurnObserver | None:
        named = request.get("observed")
        if named is None:
            return None
        observer = self._observers.get(named["name"])
        if observer is None:  # a worker that serves less than the one that queued the turn (say, without A2A)
            logger.warning(
                "Turn %s is observed by %r, which this worker does not have (DurableTurns.observe): serve every "
                "worker of a queue alike", request["turn_id"], named["name"],
            )
        return observer

    def _stream_of(self, request: dict[str, Any]) -> Any:
        chat_id, turn_id, decisions = request["chat_id"], request["turn_id"], request.get("resume")
        if decisions is not None:
            return self.agency.resume_stream(
                chat_id, approve=decisions["approve"], reject=decisions["reject"], turn_id=turn_id,
                context=request.get("context"),
            )
        return self.agency.get_response_stream(
            request["message"], request["recipient_agent"], chat_id=chat_id, turn_id=turn_id,
            context=request.get("context"), additional_instructions=request.get("additional_instructions"),
        )
