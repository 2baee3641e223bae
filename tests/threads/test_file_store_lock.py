"""One process per FileThreadStore directory: a second process (or a second store in this one) is refused with a
StoreError naming the directory and the store to use instead; closing (or dropping) the store frees it."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import textwrap
from pathlib import Path

import pytest

from agency_swarm import Agency, Agent, FileThreadStore
from agency_swarm._base._errors import StoreError
from agency_swarm.testing import ScriptedModel

REPO = Path(__file__).resolve().parents[2]

OPENER = textwrap.dedent(
    """
    import sys
    from agency_swarm import FileThreadStore
    from agency_swarm._base._errors import StoreError

    try:
        store = FileThreadStore(sys.argv[1])
    except StoreError as error:
        print("refused:", error, flush=True)
        sys.exit(3)
    print("opened", flush=True)
    if sys.argv[2:] == ["hold"]:
        sys.stdin.read()  # keeps the directory until the parent closes our stdin
    """
)


async def opener(directory: Path, *args: str) -> asyncio.subprocess.Process:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return await asyncio.create_subprocess_exec(
        sys.executable, "-c", OPENER, str(directory), *args,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )


async def run_opener(directory: Path) -> tuple[int | None, str]:
    child = await opener(directory)
    stdout, stderr = await asyncio.wait_for(child.communicate(), timeout=60)
    assert not stderr, stderr.decode()
    return child.returncode, stdout.decode()


async def test_a_second_process_on_the_same_directory_is_refused(tmp_path: Path) -> None:
    directory = tmp_path / "threads"
    store = FileThreadStore(directory)
    await store.append("c", "user->CEO", [{"role": "user", "content": "mine"}])

    code, out = await run_opener(directory)
    assert code == 3, out
    assert out.startswith("refused:")
    for part in (str(directory), "another process", "SQLThreadStore", "postgresql://"):
        assert part in out

    await store.aclose()  # now the directory is free
    code, out = await run_opener(directory)
    assert (code, out) == (0, "opened\n")


async def test_this_process_is_refused_while_another_one_holds_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "threads"
    directory.mkdir()
    child = await opener(directory, "hold")
    assert child.stdout is not None
    assert child.stdin is not None
    assert await asyncio.wait_for(child.stdout.readline(), timeout=60) == b"opened\n"

    with pytest.raises(StoreError, match="another process") as caught:
        Agency(Agent(name="CEO", model=ScriptedModel([])), threads_dir=directory)
    assert str(directory) in str(caught.value)

    child.stdin.close()  # the child ends, and with it its lock
    await asyncio.wait_for(child.wait(), timeout=60)
    async with Agency(Agent(name="CEO", model=ScriptedModel(["hi"])), threads_dir=directory) as agency:
        assert (await agency.get_response("hello", chat_id="c")).final_output == "hi"


async def test_a_second_store_in_this_process_takes_over_and_the_first_stops(tmp_path: Path) -> None:
    """A notebook cell (or a script) that builds its agency again gets a working store; the old one refuses."""
    directory = tmp_path / "threads"
    first = FileThreadStore(directory)
    await first.append("c", "user->CEO", [{"role": "user", "content": "one"}])
    second = FileThreadStore(tmp_path / "." / "threads")  # the same directory by another path
    with pytest.raises(StoreError, match="replaced by a newer FileThreadStore") as caught:
        await first.append("c", "user->CEO", [{"role": "user", "content": "lost?"}])
    assert str(directory) in str(caught.value)
    await second.append("c", "user->CEO", [{"role": "user", "content": "two"}])
    assert [item["content"] for item in (await second.load("c"))["user->CEO"]] == ["one", "two"]
    await first.aclose()  # closing the old store leaves the new one's lock alone
    code, out = await run_opener(directory)
    assert code == 3, out
    await second.aclose()


async def test_an_agency_built_again_on_the_same_threads_dir_just_works(tmp_path: Path) -> None:
    old = Agency(Agent(name="CEO", model=ScriptedModel.each_turn(["hi"])), threads_dir=tmp_path)
    await old.get_response("hello", chat_id="c")
    agency = Agency(Agent(name="CEO", model=ScriptedModel.each_turn(["again"])), threads_dir=tmp_path)
    assert (await agency.get_response("hello", chat_id="c")).final_output == "again"
    assert len(agency.thread_manager.get_threads("c")["user->CEO"]) == 4
    with pytest.raises(StoreError, match="replaced by a newer FileThreadStore"):
        await old.get_response("stale", chat_id="new-chat")
    await old.aclose()
    assert (await agency.get_response("still here", chat_id="c")).final_output == "again"
    await agency.aclose()


async def test_a_store_that_is_dropped_frees_the_directory(tmp_path: Path) -> None:
    directory = tmp_path / "threads"
    store = FileThreadStore(directory)
    del store
    gc.collect()
    again = FileThreadStore(directory)
    await again.aclose()


async def test_different_directories_do_not_conflict(tmp_path: Path) -> None:
    one, two = FileThreadStore(tmp_path / "one"), FileThreadStore(tmp_path / "two")
    await one.aclose()
    await two.aclose()


FORKER = textwrap.dedent(
    """
    import asyncio, os, sys
    from agency_swarm import FileThreadStore
    from agency_swarm._base._errors import StoreError

    store = FileThreadStore(sys.argv[1])  # then fork: here, in a fresh interpreter, no thread runs yet
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the forked child reports what using the inherited store does
        try:
            asyncio.run(store.append("c", "user->CEO", [{"role": "user", "content": "from the child"}]))
            said = "appended"
        except StoreError as error:
            said = str(error)
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        print(pipe.read().decode(), flush=True)
    os.waitpid(pid, 0)
    asyncio.run(store.append("c", "user->CEO", [{"role": "user", "content": "from the parent"}]))
    """
)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
async def test_a_forked_child_cannot_write_through_its_parents_store(tmp_path: Path) -> None:
    directory = tmp_path / "threads"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FORKER, str(directory),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env,
    )
    stdout, stderr = await asyncio.wait_for(child.communicate(), timeout=60)
    assert child.returncode == 0, stderr.decode()
    assert "forked" in stdout.decode(), stdout.decode()
    assert "from the child" not in (directory / "c.jsonl").read_text()
    assert "from the parent" in (directory / "c.jsonl").read_text()  # the parent's store still works
