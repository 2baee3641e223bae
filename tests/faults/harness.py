"""The fault-injection harness: a store and a model that fail at the k-th operation, the scenario they run, and the
invariants checked after every fault (docs/design/faults.md).

One *operation* is a call a turn makes to something that can fail on its own: a store's `load`, `append`,
`list_chats`, `delete` or turn lock, or a model call. Every operation of a case, whatever the store, model or
task, is numbered by one `FaultPlan`; the plan makes operation k fail in one of these ways:

- `raise`: the store raises `StoreError` (the model `RuntimeError`) instead of doing the operation;
- `cancel`: the task running the turn (the caller's: a stream's reader, a request handler) is cancelled instead;
  when the operation runs in a task of the loop's own (a parallel call), the loop passes the cancellation on;
- `raise_after` / `cancel_after` (store writes and reads only): the operation is done (committed), then the call
  raises or is cancelled, as when a connection drops between the commit and its acknowledgement;
- `kill` / `kill_after`: the process dies instead of (or right after) the operation: from then on nothing it does
  reaches a store or a model, and a fresh process on the same store carries on (the crash model; only the sweeps
  that continue in a fresh process inject these);
- `cancel_twice`: cancelled as `cancel`, and cancelled again at the next operation or turn-lock release, that is
  during the turn's own clean-up (only the sweeps that continue in the same process inject these).

`python -m faults.harness STORE MODE CONTINUATION K KIND [TURNS]` (run from tests/) replays one case and prints its
operations, what happened and the threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agents import Model, function_tool
from agents.tool_context import ToolContext

from agency_swarm import Agency, Agent, StoreError
from agency_swarm._threads._manager import ThreadManager
from agency_swarm._threads._store import MemoryThreadStore, ThreadStore
from agency_swarm.testing import ModelCall, ScriptedModel, ToolCall, send_message

POSTGRES_URL = os.environ.get("AGENCY_SWARM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
STORES = ("memory", "file", "sqlite", "postgres")
STORE_KINDS = ("raise", "cancel", "raise_after", "cancel_after")
CALL_KINDS = ("raise", "cancel")  # model calls and turn locks: "after" means nothing more for them
KILL_STORE_KINDS = ("kill", "kill_after")
KILL_CALL_KINDS = ("kill",)
"""The process dies (only sweeps that continue in a fresh process inject these)."""
TWICE_KINDS = ("cancel_twice",)
"""Cancelled, and cancelled again at the next operation or lock release: during the turn's own clean-up (only
sweeps that continue in the same process inject these)."""
HANG_S = 10.0
"""A turn that has not finished after this long is reported as hung (a guard against deadlocks, not a timing
check: a healthy case takes milliseconds)."""

INJECTED: Counter[str] = Counter()
"""Faults that fired, per store, over the whole test session."""
CASES: Counter[str] = Counter()
"""Cases run (fault-free counting runs included), per store."""
SECONDS: Counter[str] = Counter()
"""Wall time of the sweeps, per store (reported, never asserted)."""
CPU_SECONDS: Counter[str] = Counter()
"""CPU time of this process in the sweeps, per store (on a busy machine wall time says little)."""
FAILED: list[Outcome] = []
"""Every case of the session that broke an invariant (for the summary across sweeps at the end of the run)."""


# -- injection -------------------------------------------------------------------------------------------------


class InjectedStoreError(StoreError):
    """The store failure a plan injects."""


class InjectedModelError(RuntimeError):
    """The model failure a plan injects (not a ModelError: nothing retries it)."""


class ProcessKilled(BaseException):
    """The process died at this operation: nothing it does afterwards reaches a store or a model (its clean-up
    code still runs, but every operation it tries raises this again, as if it never happened)."""


@dataclass(frozen=True)
class Op:
    index: int
    label: str
    after_ok: bool
    """Whether "after" kinds apply: the operation has an effect that can be committed before the failure."""

    def kinds(self, *, kill: bool = False, twice: bool = False) -> tuple[str, ...]:
        kinds = STORE_KINDS if self.after_ok else CALL_KINDS
        if kill:
            kinds += KILL_STORE_KINDS if self.after_ok else KILL_CALL_KINDS
        return kinds + TWICE_KINDS if twice else kinds


class FaultPlan:
    """Numbers every operation of one case and makes operation `k` fail as `kind` says (k=0: no fault)."""

    def __init__(self, k: int = 0, kind: str = "raise") -> None:
        self.k, self.kind = k, kind
        self.ops: list[Op] = []
        self.fired: Op | None = None
        self.top: asyncio.Task[Any] | None = None
        """The task running the current top-level action (the caller's): what a cancel cancels."""
        self.dead = False
        """A "kill" fired: every later operation raises ProcessKilled without happening."""
        self.again = False
        """A "cancel_twice" fired: the next operation (or lock release) is cancelled once more."""

    def _tick(self, label: str, after_ok: bool) -> bool:
        op = Op(len(self.ops) + 1, label, after_ok)
        self.ops.append(op)
        if self.dead:
            raise ProcessKilled(f"operation {op.index} ({label}) after the process died")
        self.cleanup_point()
        if op.index != self.k or self.fired is not None or self.kind not in op.kinds(kill=True, twice=True):
            return False
        self.fired = op
        return True

    def cleanup_point(self) -> None:
        """The second cancellation of "cancel_twice", at the first operation after the first one: it lands in
        whatever that operation awaits (the operation itself still goes ahead, as a store call in flight does)."""
        if self.again:
            self.again = False
            self._cancel(f"the second cancellation of the fault at operation {self.k}")

    async def around(self, label: str, call: Callable[[], Awaitable[Any]], *, after_ok: bool = True) -> Any:
        hit = self._tick(label, after_ok)
        after = self.kind.endswith("_after")
        if hit and not after:
            await self._strike(label)
        result = await call()
        if hit and after:
            await self._strike(label)
        return result

    async def before(self, label: str) -> None:
        if self._tick(label, False):
            await self._strike(label)

    async def _strike(self, label: str) -> None:
        where = f"fault injected at operation {self.k} ({label})"
        if self.kind.startswith("kill"):
            self.dead = True
            raise ProcessKilled(where)
        if self.kind.startswith("raise"):
            if label.startswith("model"):
                raise InjectedModelError(where)
            raise InjectedStoreError(where)
        self._cancel(where)
        self.again = self.kind == "cancel_twice"
        # One step for the cancellation to land: here when this task runs the turn; otherwise (a parallel call's
        # task) the turn's own task gets it first and the loop decides what becomes of this one.
        await asyncio.sleep(0)

    def _cancel(self, why: str) -> None:
        """Cancel the task running the turn, as a caller does (a client that leaves, a timeout); the turn's own
        tasks are left to the loop, which is what decides how a cancellation reaches them."""
        task = self.top or asyncio.current_task()
        assert task is not None
        if not task.done():
            task.cancel(why)


def _brief(items: list[dict[str, Any]]) -> str:
    return ", ".join(render_item(item) for item in items)


class FaultyStore:
    """A ThreadStore that passes every call to `inner`, numbering it with the plan (which may make it fail)."""

    def __init__(self, inner: ThreadStore, plan: FaultPlan) -> None:
        self.inner, self.plan = inner, plan

    async def load(self, chat_id: str) -> Any:
        return await self.plan.around("store.load", lambda: self.inner.load(chat_id))

    async def append(self, chat_id: str, thread_key: str, items: list[dict[str, Any]]) -> None:
        label = f"store.append {thread_key} [{_brief(items)}]"
        await self.plan.around(label, lambda: self.inner.append(chat_id, thread_key, items))

    async def list_chats(self) -> list[str]:
        chats: list[str] = await self.plan.around("store.list_chats", self.inner.list_chats)
        return chats

    async def delete(self, chat_id: str) -> None:
        await self.plan.around("store.delete", lambda: self.inner.delete(chat_id))

    async def aclose(self) -> None:
        return None  # the backend closes the store it shares between cases

    def turn_lock(self, chat_id: str) -> contextlib.AbstractAsyncContextManager[None] | None:
        inner = getattr(self.inner, "turn_lock", None)
        lock = inner(chat_id) if inner is not None else None
        return None if lock is None else self._locked(lock)

    @contextlib.asynccontextmanager
    async def _locked(self, lock: contextlib.AbstractAsyncContextManager[None]) -> AsyncIterator[None]:
        await self.plan.before("store.turn_lock")  # before taking it: a lock taken and never released is our bug
        async with lock:
            try:
                yield
            finally:
                self.plan.cleanup_point()  # a second cancellation lands in the release, as it would in production


class FaultyModel(Model):
    """A ScriptedModel whose every call is one operation of the plan; it also checks what the model is given, as
    the Responses API would: every function_call with exactly one function_call_output after it."""

    def __init__(self, inner: ScriptedModel, plan: FaultPlan, agent: str, bad_inputs: list[str]) -> None:
        self.inner, self.plan, self.agent, self.bad_inputs = inner, plan, agent, bad_inputs

    def _check(self, given: Any) -> None:
        if isinstance(given, list):
            self.bad_inputs += [f"{self.agent} was given {problem}" for problem in input_problems(given)]

    async def get_response(self, *args: Any, **kwargs: Any) -> Any:
        self._check(args[1])
        return await self.plan.around(f"model {self.agent}", lambda: self.inner.get_response(*args, **kwargs),
                                      after_ok=False)

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        self._check(args[1])
        await self.plan.before(f"model {self.agent} (streamed)")
        async for event in self.inner.stream_response(*args, **kwargs):
            yield event


def input_problems(items: list[Any]) -> list[str]:
    """What the Responses API would reject in a model's input: calls without outputs, outputs without calls."""
    calls: list[str] = []
    outputs: Counter[str] = Counter()
    problems: list[str] = []
    for item in items:
        kind = item.get("type") if isinstance(item, dict) else None
        if kind == "function_call":
            calls.append(str(item.get("call_id")))
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            outputs[call_id] += 1
            if call_id not in calls:
                problems.append(f"output #{_short(call_id)} without its call before it")
    for call_id in calls:
        if outputs[call_id] != 1:
            problems.append(f"call #{_short(call_id)} with {outputs[call_id]} outputs")
    return problems


# -- stores ----------------------------------------------------------------------------------------------------


class Backend:
    """One backing medium, and the processes of a case on it.

    `process_store()` is the store a process opens: the SQL stores and the memory store are shared by every case
    (each case has chats of its own), while a file directory admits one store at a time, so every process of a
    case opens its own and `end_process` closes it (a dead process's lock goes with it). `load` reads a chat as a
    fresh process would: a new ThreadManager on a store of its own (for files, on a copy of the chat's files, taken
    now: the directory stays the running process's).
    """

    def __init__(self, name: str, where: Path) -> None:
        self.name = name
        self.where = where
        self.opened: list[ThreadStore] = []
        self.chats: list[str] = []
        self._memory = MemoryThreadStore()
        self._shared: ThreadStore | None = None
        self._second: ThreadStore | None = None
        self._reader: ThreadStore | None = None  # files: a store on copies of the chat files, taken at each load

    def open(self, directory: Path | None = None) -> ThreadStore:
        """A new store object on the same data (memory: the same object; two agencies share it)."""
        store: ThreadStore
        if self.name == "memory":
            return self._memory
        if self.name == "file":
            from agency_swarm import FileThreadStore

            store = FileThreadStore(directory or self.where / "threads")
        elif self.name == "sqlite":
            from agency_swarm import SQLiteThreadStore

            store = SQLiteThreadStore(self.where / "threads.db")
        elif self.name == "postgres":
            from agency_swarm import SQLThreadStore

            store = SQLThreadStore(POSTGRES_URL)
        else:
            raise ValueError(self.name)
        self.opened.append(store)
        return store

    def process_store(self) -> ThreadStore:
        """The store a new process opens."""
        if self.name == "file":
            return self.open()
        if self._shared is None:
            self._shared = self.open()
        return self._shared

    def second_store(self) -> ThreadStore:
        """The store a second process opens while the first one's may still be open (not for files)."""
        if self.name == "file":
            return self.open()
        if self._second is None:
            self._second = self.open()
        return self._second

    def fresh_process_store(self) -> ThreadStore:
        """The store a second process opens on the same data once the first one is gone."""
        return self.open() if self.name == "file" else self.second_store()

    async def end_process(self, store: ThreadStore) -> None:
        """The process that opened `store` is gone (a file directory is free again)."""
        if self.name == "file" and store in self.opened:
            await store.aclose()
            self.opened.remove(store)

    def chat(self, tag: str) -> str:
        chat_id = f"flt-{uuid.uuid4().hex[:10]}-{tag}"[:120]
        self.chats.append(chat_id)
        return chat_id

    async def load(self, chat_id: str) -> dict[str, list[dict[str, Any]]]:
        """What a fresh process loads (raises what loading raises)."""
        if self.name != "file":
            return await _fresh_load(self.second_store(), chat_id)
        from agency_swarm._threads._file_store import _stem

        copies = self.where / "fresh-process-copies"
        if self._reader is None:
            copies.mkdir(exist_ok=True)
            self._reader = self.open(copies)
        for suffix in (".jsonl", ".jsonl.quarantine", ".id"):
            source, copy = self.where / "threads" / f"{_stem(chat_id)}{suffix}", copies / f"{_stem(chat_id)}{suffix}"
            if source.exists():
                shutil.copyfile(source, copy)
            else:
                copy.unlink(missing_ok=True)
        return await _fresh_load(self._reader, chat_id)

    async def aclose(self) -> None:
        if self.name == "postgres" and self.chats:  # the database outlives the test: leave it as it was
            store = self.open()
            for chat_id in self.chats:
                await store.delete(chat_id)
        self.chats.clear()
        for store in self.opened:
            with contextlib.suppress(Exception):
                await store.aclose()
        self.opened.clear()


async def _fresh_load(store: ThreadStore, chat_id: str) -> dict[str, list[dict[str, Any]]]:
    manager = ThreadManager(store=store)
    await manager.ensure_loaded(chat_id)
    return manager.get_threads(chat_id, include_marks=True)  # what the store holds, marks included


async def postgres_problem() -> str | None:
    import asyncpg  # type: ignore[import-untyped]

    try:
        connection = await asyncpg.connect(POSTGRES_URL, timeout=5)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"{type(exc).__name__}: {exc}"
    await connection.close()
    return None


# -- the scenario ----------------------------------------------------------------------------------------------

DEV_TASK = "build the page"  # the same words every turn, as a model may well repeat itself
QA_TASK = "write the tests"
CEO_DONE = "CEO: the page is built, deployed and tested."
DEV_DONE = "Developer: built and deployed."
QA_DONE = "QA: tests written."


def ceo_script(call: ModelCall) -> Any:
    last = call.input[-1] if call.input else {}
    if last.get("role") == "user" and "type" not in last:  # a new message: delegate to both at once
        return [send_message("Developer", DEV_TASK), send_message("QA", QA_TASK)]
    return CEO_DONE


def dev_script(call: ModelCall) -> Any:
    done = len(call.tool_outputs)
    if done == 0:
        return ToolCall("build", {"page": "home"})
    if done == 1:
        return ToolCall("deploy", {"env": "prod"})  # needs approval: the turn pauses here
    return DEV_DONE


def qa_script(call: ModelCall) -> Any:
    return ToolCall("review", {"page": "home"}) if not call.tool_outputs else QA_DONE


class Effects:
    """What a case observed besides the threads: runs of the recorded tools (`tool:call_id`, one per run) and model
    inputs the Responses API would refuse. It is the turns' run context, so the tools find it in theirs."""

    def __init__(self) -> None:
        self.runs: list[str] = []
        self.bad_inputs: list[str] = []


@function_tool
async def build(ctx: ToolContext[Effects], page: str) -> str:
    """Builds a page (recorded per call id)."""
    ctx.context.runs.append(f"build:{ctx.tool_call_id}")
    return f"built {page}"


@function_tool(needs_approval=True)
async def deploy(ctx: ToolContext[Effects], env: str) -> str:
    """Deploys to an environment (needs approval; recorded per call id)."""
    ctx.context.runs.append(f"deploy:{ctx.tool_call_id}")
    return f"deployed to {env}"


@function_tool
async def review(ctx: ToolContext[Effects], page: str) -> str:
    """Reviews a page (recorded per call id)."""
    ctx.context.runs.append(f"review:{ctx.tool_call_id}")
    return f"reviewed {page}"


class _Team:
    """CEO, Developer and QA, built once per process role ("first", "second"): building agents costs more than a
    whole case. Their models are re-pointed at each case's plan and record by `build_agency`."""

    def __init__(self) -> None:
        self.models = {
            name: FaultyModel(ScriptedModel(script, name=f"{name}-script"), FaultPlan(), name, [])
            for name, script in (("CEO", ceo_script), ("Developer", dev_script), ("QA", qa_script))
        }
        self.ceo = Agent(name="CEO", description="Delegates.", model=self.models["CEO"])
        self.dev = Agent(name="Developer", description="Builds.", tools=[build, deploy],
                         model=self.models["Developer"])
        self.qa = Agent(name="QA", description="Tests.", tools=[review], model=self.models["QA"])


_TEAMS: dict[str, _Team] = {}


def build_agency(store: ThreadStore, plan: FaultPlan, effects: Effects, role: str = "first") -> Agency:
    """CEO -> Developer (build, deploy needing approval) and CEO -> QA (review); CEO sends to both at once.

    `role` says which process of the case it is: the two processes of a case never share agents or models."""
    team = _TEAMS.get(role)
    if team is None:
        team = _TEAMS[role] = _Team()
    for model in team.models.values():
        model.plan, model.bad_inputs = plan, effects.bad_inputs
        assert isinstance(model.inner, ScriptedModel)
        model.inner.calls.clear()
    return Agency([team.ceo, [team.ceo, team.dev], [team.ceo, team.qa]], thread_store=store)


# -- running a case --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Case:
    store: str
    mode: str  # "blocking" | "streamed"
    continuation: str
    """"same": the process that saw the fault resumes; "fresh": a new process on the same store resumes;
    "message": the same process sends a new message without resuming first."""
    k: int = 0
    kind: str = "none"
    turns: int = 2
    """Scripted turns (each paused for approval, then resumed) before the fault's recovery."""

    def __str__(self) -> str:
        return f"{self.store}/{self.mode}/{self.continuation}/{self.turns} turns k={self.k} {self.kind}"


@dataclass
class Violation:
    invariant: str
    shape: str
    """What went wrong, without ids or counts: violations of one shape share a root cause, usually."""
    phase: str  # "during the fault" | "after the fault" | "recovery" | "after recovery"
    detail: str


@dataclass
class Outcome:
    case: Case
    fired: Op | None = None
    ops: list[Op] = field(default_factory=list)
    scripted: int = 0
    """How many of `ops` the scripted phase made (the rest are the recovery's)."""
    log: list[str] = field(default_factory=list)
    violations: list[Violation] = field(default_factory=list)
    after_fault: str = ""
    final: str = ""

    def describe(self, *, ops: bool = True) -> str:
        lines = [f"case {self.case}: fault at {self.fired.label if self.fired else '(none fired)'}"]
        if ops:
            shown = self.ops[: self.scripted]
            lines.append("  operations: " + "; ".join(f"{op.index}:{op.label.split(' [')[0]}" for op in shown))
        lines += [f"  {entry}" for entry in self.log]
        for violation in self.violations:
            lines.append(f"  VIOLATED {violation.invariant} ({violation.phase}): {violation.detail}")
        if self.after_fault:
            lines.append("  threads in the store after the fault:\n" + _indent(self.after_fault, 4))
        if self.final:
            lines.append("  threads in the store after recovery:\n" + _indent(self.final, 4))
        return "\n".join(lines)


@dataclass
class _Acted:
    status: str  # "ok" | "raised" | "cancelled" | "hung"
    result: Any = None
    error: BaseException | None = None

    def what(self) -> str:
        return self.status if self.error is None else f"raised {type(self.error).__name__}"

    def __str__(self) -> str:
        if self.status == "ok":
            paused = getattr(self.result, "paused", False)
            return "ok, paused" if paused else f"ok: {getattr(self.result, 'final_output', None)!r}"
        if self.status == "raised":
            return f"raised {type(self.error).__name__}: {self.error}"
        return self.status


async def _act(plan: FaultPlan | None, start: Callable[[], Awaitable[Any]]) -> _Acted:
    """Run one top-level action in a task of its own (what a cancel cancels); never raises."""

    async def body() -> Any:
        return await start()

    task = asyncio.create_task(body())
    if plan is not None:
        plan.top = task
    try:
        done, _ = await asyncio.wait({task}, timeout=HANG_S)
        if not done:
            task.cancel()
            await asyncio.wait({task}, timeout=HANG_S)
            return _Acted("hung")
    finally:
        if plan is not None:
            plan.top = None
    if task.cancelled():
        return _Acted("cancelled")
    error = task.exception()
    if error is not None:
        return _Acted("raised", error=error)
    return _Acted("ok", result=task.result())


async def _consume(stream: Any) -> Any:
    async with stream:
        async for _ in stream:
            pass
    return stream.result


def _turn(agency: Agency, mode: str, message: str, chat_id: str, effects: Effects) -> Callable[[], Awaitable[Any]]:
    if mode == "streamed":
        return lambda: _consume(agency.get_response_stream(message, chat_id=chat_id, context=effects))
    return lambda: agency.get_response(message, chat_id=chat_id, context=effects)


def _resume(
    agency: Agency, mode: str, chat_id: str, approve: list[str], effects: Effects
) -> Callable[[], Awaitable[Any]]:
    if mode == "streamed":
        return lambda: _consume(agency.resume_stream(chat_id, approve=approve, context=effects))
    return lambda: agency.resume(chat_id, approve=approve, context=effects)


def _waiting(result: Any) -> list[str]:
    return [item.call_id for item in getattr(result, "interruptions", [])]


SCRIPT = ("turn 1", "approve", "turn 2", "approve")
"""The scripted phase: two turns, each pausing for the deploy approval and resumed with it approved."""
MAX_RECOVERY_ACTIONS = 6


async def run_case(backend: Backend, case: Case) -> Outcome:
    plan = FaultPlan(case.k, case.kind)
    outcome = Outcome(case)
    chat_id = backend.chat(f"{case.mode[0]}{case.continuation[0]}{case.k}{case.kind[:2]}")
    effects = Effects()
    store = backend.process_store()
    try:
        return await _run_case(backend, case, plan, outcome, chat_id, effects, store)
    finally:
        await backend.end_process(store)


async def _run_case(
    backend: Backend, case: Case, plan: FaultPlan, outcome: Outcome, chat_id: str, effects: Effects,
    store: ThreadStore,
) -> Outcome:
    first = build_agency(FaultyStore(store, plan), plan, effects)
    CASES[case.store] += 1

    # 1. the scripted phase, until the action during which the fault fired
    last: _Acted | None = None
    for step in SCRIPT[: 2 * case.turns]:
        if step == "approve":
            if last is None or last.status != "ok" or not _waiting(last.result):
                outcome.log.append("script: nothing waits for approval; the scripted phase ends")
                break
            action = _resume(first, case.mode, chat_id, _waiting(last.result), effects)
        else:
            action = _turn(first, case.mode, step, chat_id, effects)
        last = await _act(plan, action)
        outcome.log.append(f"{step}: {last}")
        if last.status == "hung":
            outcome.violations.append(Violation(COMPLETES, f"{_action(step)} hung", "during the fault", step))
            break
        if plan.fired is not None:
            break
    outcome.fired, outcome.ops, outcome.scripted = plan.fired, plan.ops, len(plan.ops)
    plan.again = False  # a second cancellation belongs to the action the fault hit (it had no clean-up left)
    if plan.fired is not None:
        INJECTED[case.store] += 1
    if outcome.violations:
        return outcome  # a hung task may still hold the chat: nothing more can be learnt from this chat

    # 2. right after the fault: the chat loads, is well formed, and memory equals the store (a dead process holds
    # nothing)
    await _check_state(backend, None if plan.dead else first, chat_id, effects, outcome, phase="after the fault",
                       final=False)

    # 3. recovery: the same process, or a fresh one on the same store, resumes and then takes a new message
    if case.continuation != "fresh" and not plan.dead:
        ok = await _recover(first, case, chat_id, effects, outcome)
        await _check_state(backend, first, chat_id, effects, outcome, phase="after recovery", final=ok)
        return outcome
    await backend.end_process(store)  # the first process is gone: a second one opens the store
    second = backend.fresh_process_store()
    try:
        agency = build_agency(second, FaultPlan(), effects, "second")
        ok = await _recover(agency, case, chat_id, effects, outcome)

        # 4. after recovery: every call answered, nothing twice, every tool once, memory equals the store
        await _check_state(backend, agency, chat_id, effects, outcome, phase="after recovery", final=ok)
    finally:
        await backend.end_process(second)
    return outcome


COMPLETES = "the next turn (or resume) completes"
LOADS = "the chat loads"
PAIRED = "every function_call has exactly one output"
ONCE = "no item is stored twice"
DELIVERED = "a send is delivered once, and answered by its own recipient turn"
TOOL_ONCE = "a recorded tool runs at most once per call id"
SAME = "memory equals what a fresh process loads"
VALID_INPUT = "a model is only given calls with their outputs"


def _action(name: str) -> str:
    return "resume" if name.startswith(("resume", "approve")) else "new turn"


async def _recover(agency: Agency, case: Case, chat_id: str, effects: Effects, outcome: Outcome) -> bool:
    """Resume what is unfinished (approving what waits), then one new turn, to its end; False if it cannot.

    With the "message" continuation a turn the fault cut short is not resumed: the new message comes first (the
    calls left without outputs then get "interrupted" outputs), unless calls wait for approval (that is ChatPaused).
    """
    manager = agency.thread_manager
    sent_new = False
    for _ in range(MAX_RECOVERY_ACTIONS):
        try:
            await manager.ensure_loaded(chat_id)
        except Exception as error:
            outcome.violations.append(Violation(
                LOADS, f"the continuing process cannot load it: {type(error).__name__}", "recovery", _error(error)
            ))
            return False
        threads = manager.get_threads(chat_id, include_marks=True)  # as resume reads it
        entry = threads.get("user->CEO", [])
        # What waits for a decision is the product's answer (ChatPaused.interruptions says the same): a call marked as
        # paused for approval and not started since, in a turn somebody still waits for. A call cut short is never
        # run again (nothing runs twice), so it does not wait.
        waiting = [str(call["call_id"]) for calls in manager.waiting_calls(chat_id).values() for call in calls
                   if call.get("name") == "deploy"]
        unfinished = bool(entry) and not _finished(entry)  # a turn the fault cut short (or one that paused)
        if waiting or (unfinished and (case.continuation != "message" or sent_new)):
            name = f"resume(approve={_short_ids(waiting)})"
            action = _resume(agency, case.mode, chat_id, waiting, effects)
        elif not sent_new:  # "message": a new message settles what the fault cut short, instead of resume
            name, sent_new = "new turn 'after the fault'", True
            action = _turn(agency, case.mode, "after the fault", chat_id, effects)
        else:
            return True
        acted = await _act(None, action)
        outcome.log.append(f"recovery {name}: {acted}")
        if acted.status != "ok":
            what, detail = acted.what(), f"{name} {acted}"
            if waiting and acted.error is not None and not sent_new:  # is there another way on? (a wedged chat)
                other = await _act(None, _turn(agency, case.mode, "after the fault", chat_id, effects))
                outcome.log.append(f"recovery new turn 'after the fault' instead: {other}")
                what += f"; a new message then {other.what()}"
                detail += f"; a new message instead: {other}"
            outcome.violations.append(Violation(COMPLETES, f"{_action(name)} {what}", "recovery", detail))
            return False
        result = acted.result
        if not result.paused and result.final_output != CEO_DONE:
            outcome.violations.append(Violation(
                COMPLETES, f"{_action(name)} ends without the CEO's answer", "recovery",
                f"{name} ended with {result.final_output!r}",
            ))
            return False
    outcome.violations.append(Violation(
        COMPLETES, "never finishes", "recovery", f"still unfinished after {MAX_RECOVERY_ACTIONS} resumes and turns"
    ))
    return False


async def _check_state(
    backend: Backend, agency: Agency | None, chat_id: str, effects: Effects, outcome: Outcome, *, phase: str,
    final: bool,
) -> None:
    try:
        stored = await backend.load(chat_id)
    except Exception as error:
        outcome.violations.append(Violation(LOADS, f"a fresh process's load raises {type(error).__name__}", phase,
                                            _error(error)))
        return
    rendered = render_threads(stored)
    if phase == "after the fault":
        outcome.after_fault = rendered
    else:
        outcome.final = rendered
    for invariant, shape, detail in check_threads(stored, final=final):
        outcome.violations.append(Violation(invariant, shape, phase, detail))
    if effects.bad_inputs:
        outcome.violations.append(Violation(
            VALID_INPUT, re.sub(r"#\d+", "#N", effects.bad_inputs[0].split(" was given ")[1]).replace(
                "call #N with 0 outputs", "a call without its output"), phase,
            "; ".join(effects.bad_inputs),
        ))
        effects.bad_inputs.clear()
    twice = sorted(run for run, count in Counter(effects.runs).items() if count > 1)
    if twice:
        tools = sorted({run.split(":")[0] for run in twice})
        outcome.violations.append(Violation(
            TOOL_ONCE, f"{'/'.join(tools)} ran twice for one call", phase,
            "ran twice: " + ", ".join(f"{run.split(':')[0]}#{_short(run)}" for run in twice),
        ))
    if agency is None:
        return  # the process died: it holds nothing
    manager = agency.thread_manager
    if not manager.is_loaded(chat_id):
        return  # it holds nothing of the chat (a failed load, or it reads the store again next turn)
    held = _nonempty(manager.get_threads(chat_id, include_marks=True))
    shape, difference = diff_threads(held, _nonempty(stored))
    if difference:
        outcome.violations.append(Violation(SAME, shape, phase, difference))


def _error(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"


# -- invariants on stored threads ------------------------------------------------------------------------------


def _finished(items: list[dict[str, Any]]) -> bool:
    last = items[-1] if items else None
    return last is None or (last.get("type") == "message" and last.get("role") == "assistant")


def _unanswered(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    answered = {item.get("call_id") for item in items if item.get("type") == "function_call_output"}
    return [item for item in items if item.get("type") == "function_call" and item.get("call_id") not in answered]


def _is_user(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" and "type" not in item


def _text(item: dict[str, Any]) -> str:
    content = item.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


Problem = tuple[str, str, str]
"""(invariant, shape, detail)."""


def check_threads(threads: dict[str, list[dict[str, Any]]], *, final: bool) -> list[Problem]:
    """Problems of stored threads. `final`: the chat's turns are over, so every call must have its output."""
    problems: list[Problem] = []
    for key, items in threads.items():
        problems += _thread_problems(key, items, final=final)
    problems += check_deliveries(threads)
    return problems


def _thread_problems(key: str, items: list[dict[str, Any]], *, final: bool) -> list[Problem]:
    problems: list[Problem] = []
    calls: Counter[str] = Counter()
    outputs: Counter[str] = Counter()
    ids: Counter[str] = Counter()
    for position, item in enumerate(items):
        kind = item.get("type")
        if item.get("id") and kind != "function_call":  # calls are counted by call id
            ids[str(item["id"])] += 1
        if kind == "function_call":
            calls[str(item.get("call_id"))] += 1
        elif kind == "function_call_output":
            call_id = str(item.get("call_id"))
            outputs[call_id] += 1
            if not calls[call_id]:
                problems.append((PAIRED, "an output without its call before it",
                                 f"{key}: output #{_short(call_id)} (item {position}) has no call before it"))
    for call_id, count in calls.items():
        if count > 1:
            problems.append((ONCE, "a function_call stored twice",
                             f"{key}: call #{_short(call_id)} stored {count} times"))
        if outputs[call_id] > 1:
            problems.append((PAIRED, "a call with several outputs",
                             f"{key}: call #{_short(call_id)} has {outputs[call_id]} outputs"))
        elif final and outputs[call_id] == 0:
            problems.append((PAIRED, "a call without an output after recovery",
                             f"{key}: call #{_short(call_id)} has no output after recovery"))
    problems += [(ONCE, "an item id stored twice", f"{key}: item {item_id} stored {count} times")
                 for item_id, count in ids.items() if count > 1]
    if key.startswith("user->"):  # every top-level message of the scenario is different
        messages = Counter(_text(item) for item in items if _is_user(item))
        problems += [(ONCE, "a user's message stored twice", f"{key}: user message {text!r} stored {count} times")
                     for text, count in messages.items() if count > 1]
    return problems


def _send_calls(threads: dict[str, list[dict[str, Any]]]) -> dict[tuple[str, str], list[tuple[str, str, str | None]]]:
    """{(sender, recipient): [(call id, message, output or None)]} over every thread the sender answers in."""
    sends: dict[tuple[str, str], list[tuple[str, str, str | None]]] = {}
    for key, items in threads.items():
        sender = key.split("->", 1)[1]
        outputs = {item.get("call_id"): item.get("output") for item in items
                   if item.get("type") == "function_call_output"}
        for item in items:
            if item.get("type") != "function_call" or item.get("name") != "send_message":
                continue
            try:
                arguments = json.loads(item.get("arguments") or "{}")
            except ValueError:
                continue
            recipient = str(arguments.get("recipient_agent"))
            output = outputs.get(item.get("call_id"))
            sends.setdefault((sender, recipient), []).append(
                (str(item.get("call_id")), str(arguments.get("message")), None if output is None else str(output))
            )
    return sends


@dataclass
class _Received:
    message: str
    send: str | None
    """The call id of the send that delivered it, when the thread keeps it (`send_call_id`)."""
    answer: str | None = None


def _recipient_turns(items: list[dict[str, Any]]) -> list[_Received]:
    """Each message the recipient thread received, in order, with the answer that ended its turn (if any)."""
    turns: list[_Received] = []
    for item in items:
        if _is_user(item):
            send = item.get("send_call_id")
            turns.append(_Received(_text(item), None if send is None else str(send)))
        elif item.get("type") == "message" and item.get("role") == "assistant" and turns:
            turns[-1].answer = _text(item)
    return turns


def check_deliveries(threads: dict[str, list[dict[str, Any]]]) -> list[Problem]:
    """A send is delivered at most once, and an answer its sender got is the answer of a turn that received it.

    Each send_message call whose output is an answer (not an "Error: ..." refusal, failure or interruption) must
    have a turn of its own in the recipient's thread that ended with that answer: the turn whose message carries the
    send's call id, when the thread keeps call ids; otherwise a distinct turn with the same message and answer. And
    the recipient's thread holds no more messages than there were sends to it.
    """
    problems: list[Problem] = []
    for (sender, recipient), sends in _send_calls(threads).items():
        key = f"{sender}->{recipient}"
        turns = _recipient_turns(threads.get(key, []))
        if len(turns) > len(sends):
            problems.append((DELIVERED, "the recipient holds more messages than there were sends",
                             f"{key} holds {len(turns)} messages for {len(sends)} send_message calls"))
        for send, count in Counter(turn.send for turn in turns if turn.send is not None).items():
            if count > 1:
                problems.append((DELIVERED, "a send's message arrived twice",
                                 f"{key}: the message of send #{_short(send)} arrived {count} times"))
        used: set[int] = set()
        unmatched: list[str] = []
        for call_id, message, output in sends:
            if output is None or output.startswith("Error:"):
                continue
            own = [index for index, turn in enumerate(turns) if turn.send == call_id]
            if own:  # the thread says which turn was this send's
                if any(turns[index].answer == output for index in own):
                    used.update(own)
                else:
                    problems.append((DELIVERED, "a send answered by another turn than its own",
                                     f"send #{_short(call_id)} {key} got {output!r}; its own turn answered "
                                     f"{turns[own[-1]].answer!r}"))
                continue
            match = next((index for index, turn in enumerate(turns) if index not in used and turn.send is None
                          and turn.message == message and turn.answer == output), None)
            if match is None:
                unmatched.append(call_id)
            else:
                used.add(match)
        if unmatched:
            answered = [call_id for call_id, _, out in sends if out is not None and not out.startswith("Error:")]
            problems.append((DELIVERED, "a send answered by no turn of its own",
                             f"sends {_short_ids(answered)} {key} got answers from {recipient}, but no turn of "
                             f"{key} received the message of {_short_ids(unmatched)} and gave that answer (where "
                             "the thread keeps no call ids and messages are alike, which send it was is a guess)"))
    return problems


def _nonempty(threads: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
    return {key: items for key, items in threads.items() if items}


def diff_threads(held: dict[str, list[dict[str, Any]]], stored: dict[str, list[dict[str, Any]]]) -> tuple[str, str]:
    """("", "") when equal; otherwise (shape, where memory and the store part, per thread)."""
    if held == stored:
        return "", ""
    lines: list[str] = []
    ahead = behind = other = False
    for key in sorted(set(held) | set(stored)):
        mine, theirs = held.get(key, []), stored.get(key, [])
        if mine == theirs:
            continue
        same = 0
        while same < min(len(mine), len(theirs)) and mine[same] == theirs[same]:
            same += 1
        extra_mine, extra_theirs = mine[same:], theirs[same:]
        ahead |= bool(extra_mine) and not extra_theirs
        behind |= bool(extra_theirs) and not extra_mine
        other |= bool(extra_mine) and bool(extra_theirs)
        lines.append(
            f"{key}: equal for {same} items; then memory has [{_brief(extra_mine)}] "
            f"and the store has [{_brief(extra_theirs)}]"
        )
    if other or (ahead and behind):
        shape = "memory and the store hold different items"
    elif ahead:
        shape = "memory holds items the store never got"
    else:
        shape = "the store holds items memory does not"
    return shape, "; ".join(lines)


# -- rendering -------------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"(\d+)$")


def _short(call_id: Any) -> str:
    found = _NUMBER.search(str(call_id))
    return found.group(1) if found else str(call_id)


def _short_ids(call_ids: Iterable[str]) -> str:
    return "[" + ", ".join(f"#{_short(call_id)}" for call_id in call_ids) + "]"


def _clip(text: str, size: int = 48) -> str:
    return text if len(text) <= size else text[: size - 3] + "..."


def render_item(item: dict[str, Any]) -> str:
    kind = item.get("type")
    if _is_user(item):
        return f"user {_clip(_text(item))!r}"
    if kind == "function_call":
        arguments = item.get("arguments") or ""
        with contextlib.suppress(ValueError, AttributeError):
            parsed = json.loads(arguments)
            arguments = parsed.get("recipient_agent") if item.get("name") == "send_message" else arguments
        return f"call {item.get('name')}#{_short(item.get('call_id'))}({arguments})"
    if kind == "function_call_output":
        return f"out #{_short(item.get('call_id'))} {_clip(str(item.get('output')), 40)!r}"
    if kind == "message":
        return f"{item.get('role')} {_clip(_text(item))!r}"
    return _clip(json.dumps(item), 60)


def render_threads(threads: dict[str, list[dict[str, Any]]]) -> str:
    if not threads:
        return "(no threads)"
    return "\n".join(f"{key}: " + " | ".join(render_item(item) for item in items) for key, items in threads.items())


def _indent(text: str, spaces: int) -> str:
    return "\n".join(" " * spaces + line for line in text.splitlines())


# -- sweeps and their report -----------------------------------------------------------------------------------


@dataclass
class Sweep:
    outcomes: list[Outcome] = field(default_factory=list)
    injected: int = 0
    seconds: float = 0.0
    stopped: str = ""

    @property
    def failed(self) -> list[Outcome]:
        return [outcome for outcome in self.outcomes if outcome.violations]


def _where(outcome: Outcome) -> str:
    """The operation family and fault kind: `store.append/raise`, `model/cancel`..."""
    if outcome.fired is None:
        return "no fault"
    family = outcome.fired.label.split(" ", 1)[0]
    return f"{family}/{outcome.case.kind}"


def report(sweeps: list[Sweep]) -> str:
    """Violations grouped by invariant and shape, with where they happen and the smallest case of each in full."""
    outcomes = [outcome for sweep in sweeps for outcome in sweep.outcomes]
    failed = [outcome for outcome in outcomes if outcome.violations]
    lines = [f"{len(failed)} of {len(outcomes)} cases violate an invariant"]
    lines += [f"STOPPED: {sweep.stopped}" for sweep in sweeps if sweep.stopped]
    groups: dict[tuple[str, str], list[tuple[Outcome, Violation]]] = {}
    for outcome in failed:
        seen: set[tuple[str, str]] = set()
        for violation in outcome.violations:
            key = (violation.invariant, violation.shape)
            if key not in seen:
                seen.add(key)
                groups.setdefault(key, []).append((outcome, violation))
    for (invariant, shape), members in sorted(groups.items(), key=lambda entry: (entry[0][0], -len(entry[1]))):
        where = Counter(_where(outcome) for outcome, _ in members)
        runs = Counter(f"{o.case.store}/{o.case.mode}/{o.case.continuation}" for o, _ in members)
        phases = Counter(violation.phase for _, violation in members)
        lines.append(f"\n== {invariant}: {shape} -- {len(members)} cases")
        lines.append("   at: " + ", ".join(f"{name} {count}" for name, count in where.most_common()))
        lines.append("   in: " + ", ".join(f"{name} {count}" for name, count in sorted(runs.items())))
        lines.append("   seen: " + ", ".join(f"{name} {count}" for name, count in phases.most_common()))
        outcome, violation = min(members, key=lambda member: (
            member[0].case.store != "memory", member[0].case.mode != "blocking", member[0].case.k
        ))
        lines.append(f"   smallest: {violation.detail}")
        lines.append(_indent(outcome.describe(), 5))
    return "\n".join(lines)


def replay(case: Case) -> str:
    return (f"cd tests && ../.venv/bin/python -m faults.harness {case.store} {case.mode} {case.continuation} "
            f"{case.k} {case.kind} {case.turns}")


def summary(failed: list[Outcome]) -> list[str]:
    """One line per broken invariant and shape across every sweep of the session, with a case that replays it."""
    groups: dict[tuple[str, str], list[Outcome]] = {}
    for outcome in failed:
        for key in dict.fromkeys((violation.invariant, violation.shape) for violation in outcome.violations):
            groups.setdefault(key, []).append(outcome)
    lines = []
    for (invariant, shape), members in sorted(groups.items(), key=lambda entry: -len(entry[1])):
        stores = Counter(outcome.case.store for outcome in members)
        where = Counter(_where(outcome) for outcome in members)
        smallest = min(members, key=lambda outcome: (
            outcome.case.store != "memory", outcome.case.mode != "blocking", outcome.case.k
        ))
        lines.append(f"{len(members):5d} cases  {invariant}: {shape}")
        at = ", ".join(f"{name} {count}" for name, count in where.most_common(6))
        lines.append(f"             stores: {dict(stores)}; at: {at}")
        lines.append(f"             replay: {replay(smallest.case)}")
    return lines


async def sweep(backend: Backend, mode: str, continuation: str, turns: int = 2) -> Sweep:
    """Every operation of the fault-free scripted phase, failed in every way that applies to it, one case each."""
    started, cpu = time.perf_counter(), time.process_time()
    result = Sweep()
    clean = await run_case(backend, Case(backend.name, mode, continuation, turns=turns))
    result.outcomes.append(clean)
    hangs = 0
    for op in clean.ops[: clean.scripted]:
        for kind in op.kinds(kill=continuation == "fresh", twice=continuation == "same"):
            outcome = await run_case(backend, Case(backend.name, mode, continuation, op.index, kind, turns))
            result.outcomes.append(outcome)
            result.injected += outcome.fired is not None
            hangs += any("hung" in violation.detail for violation in outcome.violations)
            if hangs >= 2:
                result.stopped = f"{backend.name}/{mode}/{continuation}: two cases hung; the rest of the sweep skipped"
                break
        if result.stopped:
            break
    FAILED.extend(result.failed)
    result.seconds = time.perf_counter() - started
    SECONDS[backend.name] += result.seconds
    CPU_SECONDS[backend.name] += time.process_time() - cpu
    return result


async def _main(arguments: list[str]) -> None:
    store, mode, continuation, k, kind = arguments[:5]
    turns = int(arguments[5]) if len(arguments) > 5 else 2
    with tempfile.TemporaryDirectory() as where:
        backend = Backend(store, Path(where))
        try:
            outcome = await run_case(backend, Case(store, mode, continuation, int(k), kind, turns))
            print(outcome.describe())
        finally:
            await backend.aclose()


if __name__ == "__main__":
    import agents

    agents.set_tracing_disabled(True)
    asyncio.run(_main(sys.argv[1:]))
