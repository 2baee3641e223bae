"""SQLite's turn locks between processes: exclusive, taken in arrival order, robust to a cancelled or killed waiter.

(Two real processes alternating on one chat: test_shared_store_processes.py.)
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from agency_swarm._threads import _file_turn_locks
from agency_swarm._threads._file_turn_locks import FileTurnLocks, TurnHold

pytestmark = pytest.mark.skipif(not _file_turn_locks.AVAILABLE, reason="flock is POSIX")
BOUND = 20  # seconds: a safety net for the awaits below, never a pause


@pytest.fixture
def queued(monkeypatch: pytest.MonkeyPatch) -> asyncio.Queue[str]:
    """Each turn's place, once it joined its chat's queue (the test then knows it waits in the queue)."""
    places: asyncio.Queue[str] = asyncio.Queue()
    join = FileTurnLocks._join_queue

    async def observed(self: FileTurnLocks, base: str, place_path: str) -> str:
        predecessor = await join(self, base, place_path)
        places.put_nowait(place_path)
        return predecessor

    monkeypatch.setattr(FileTurnLocks, "_join_queue", observed)
    return places


@pytest.fixture
def directory(tmp_path: Path) -> str:
    return str(tmp_path / "t.db.turn-locks")


async def test_the_lock_is_exclusive_and_goes_to_waiters_in_arrival_order(
    directory: str, queued: asyncio.Queue[str]
) -> None:
    stores = [FileTurnLocks(directory) for _ in range(4)]  # four stores exclude each other as processes do
    held = await stores[0].acquire("c")
    order: list[int] = []

    async def turn(number: int) -> None:
        hold = await stores[number].acquire("c")
        order.append(number)
        stores[number].release(hold)

    waiters = []
    for number in (2, 1, 3):
        waiters.append(asyncio.create_task(turn(number)))
        await asyncio.wait_for(queued.get(), BOUND)  # in the queue before the next one asks
    assert order == []
    stores[0].release(held)
    await asyncio.wait_for(asyncio.gather(*waiters), BOUND)
    assert order == [2, 1, 3]
    assert sorted(os.listdir(directory)) == sorted(_names(directory, "c"))  # no place left behind


async def test_a_releasing_holder_that_asks_again_queues_behind_the_waiter(
    directory: str, queued: asyncio.Queue[str]
) -> None:
    mine, other = FileTurnLocks(directory), FileTurnLocks(directory)
    held = await mine.acquire("c")
    waiting = asyncio.create_task(other.acquire("c"))
    await asyncio.wait_for(queued.get(), BOUND)
    mine.release(held)
    again = asyncio.create_task(mine.acquire("c"))  # the releaser wants the chat back at once
    other_hold = await asyncio.wait_for(waiting, BOUND)
    await asyncio.wait_for(queued.get(), BOUND)  # the releaser waits behind the one it released to
    assert not again.done()
    other.release(other_hold)
    mine.release(await asyncio.wait_for(again, BOUND))


async def test_a_cancelled_waiter_leaves_its_place_and_the_next_one_goes_on(
    directory: str, queued: asyncio.Queue[str]
) -> None:
    stores = [FileTurnLocks(directory) for _ in range(3)]
    held = await stores[0].acquire("c")
    cancelled = asyncio.create_task(stores[1].acquire("c"))
    await asyncio.wait_for(queued.get(), BOUND)
    later = asyncio.create_task(stores[2].acquire("c"))
    await asyncio.wait_for(queued.get(), BOUND)
    cancelled.cancel()
    with pytest.raises(asyncio.CancelledError):
        await cancelled
    assert not later.done() or pytest.fail("the lock is still held: the place given up must not hand it on")
    stores[0].release(held)
    stores[2].release(await asyncio.wait_for(later, BOUND))
    assert sorted(os.listdir(directory)) == sorted(_names(directory, "c"))


QUEUE_AND_WAIT = """
import asyncio, sys
from agency_swarm._threads._file_turn_locks import FileTurnLocks

join = FileTurnLocks._join_queue

async def announced(self, base, place_path):
    predecessor = await join(self, base, place_path)
    print("queued", flush=True)
    return predecessor

FileTurnLocks._join_queue = announced

async def main():
    await FileTurnLocks(sys.argv[1]).acquire("c")
    print("held", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


async def test_a_killed_process_in_the_queue_holds_no_one_up(directory: str, queued: asyncio.Queue[str]) -> None:
    mine, later = FileTurnLocks(directory), FileTurnLocks(directory)
    held = await mine.acquire("c")
    child = subprocess.Popen(  # noqa: ASYNC220 - it starts at once; the test then waits for its line in a thread
        [sys.executable, "-c", QUEUE_AND_WAIT, directory], stdout=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    try:
        assert child.stdout is not None
        assert await asyncio.wait_for(asyncio.to_thread(child.stdout.readline), BOUND) == "queued\n"
        waiting = asyncio.create_task(later.acquire("c"))
        await asyncio.wait_for(queued.get(), BOUND)  # behind the child's place
        child.send_signal(signal.SIGKILL)
        child.wait(BOUND)
        mine.release(held)
        later.release(await asyncio.wait_for(waiting, BOUND))
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(BOUND)
        if child.stdout is not None:
            child.stdout.close()
    assert sorted(os.listdir(directory)) == sorted(_names(directory, "c"))  # the dead place was removed


async def test_an_uncontended_turn_makes_no_place(directory: str) -> None:
    locks = FileTurnLocks(directory)
    hold: TurnHold = await locks.acquire("c")
    assert hold.place_path == ""
    locks.release(hold)
    assert os.listdir(directory) == [os.path.basename(locks._base("c"))]


def _names(directory: str, chat_id: str) -> list[str]:
    """What a chat leaves in the directory once every turn is over: its lock file and its tail."""
    base = os.path.basename(FileTurnLocks(directory)._base(chat_id))
    return [base, base + ".tail"]
