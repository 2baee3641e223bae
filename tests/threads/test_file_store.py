"""FileThreadStore: JSON Lines per chat, crash repair, quarantine, file names, modes and failures."""

from __future__ import annotations

import asyncio
import errno
import json
import logging
import os
import re
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiofiles.threadpool.binary import AsyncFileIO

from agency_swarm._base._errors import ConfigError, InvalidChatId, ItemTooLarge, StoreError
from agency_swarm._threads import _file_store as file_store_module
from agency_swarm._threads._file_store import FileThreadStore


def msg(n: int) -> dict[str, Any]:
    return {"role": "user", "content": f"message {n}"}


def item(key: str, n: int, **extra: Any) -> dict[str, Any]:
    """A message with keys of its own (the model API ignores extra keys; the store keeps them)."""
    return {"role": "user", "content": f"{key} {n}", **extra}


def line(key: str, item: dict[str, Any]) -> bytes:
    return json.dumps({"k": key, "i": item}, separators=(",", ":"), ensure_ascii=False).encode() + b"\n"


def call(call_id: str) -> dict[str, Any]:
    return {"type": "function_call", "call_id": call_id, "name": "tool", "arguments": "{}"}


def output(call_id: str) -> dict[str, Any]:
    return {"type": "function_call_output", "call_id": call_id, "output": "done"}


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "threads"


@pytest.fixture
async def store(directory: Path) -> AsyncIterator[FileThreadStore]:
    opened = FileThreadStore(directory)
    yield opened
    await opened.aclose()


def file_of(directory: Path, chat_id: str) -> Path:
    return directory / f"{chat_id}.jsonl"  # the chat ids these tests write by hand need no encoding


def seed(directory: Path, content: bytes) -> Path:
    """Write chat "c"'s file by hand, as a crash or a bad disk left it."""
    directory.mkdir(mode=0o700)
    path = file_of(directory, "c")
    path.write_bytes(content)
    return path


# -- round trips -------------------------------------------------------------------------------
async def test_threads_and_chats_round_trip_in_order(store: FileThreadStore, directory: Path) -> None:
    await store.append("c1", "user->CEO", [msg(1), msg(2)])
    await store.append("c1", "CEO->Dev", [msg(3)])
    await store.append("c2", "user->CEO", [msg(4)])
    await store.append("c1", "user->CEO", [msg(5)])
    assert await store.load("c1") == {"user->CEO": [msg(1), msg(2), msg(5)], "CEO->Dev": [msg(3)]}
    assert await store.load("c2") == {"user->CEO": [msg(4)]}
    assert await store.list_chats() == ["c1", "c2"]
    assert file_of(directory, "c2").read_bytes() == b'{"k":"user->CEO","i":{"role":"user","content":"message 4"}}\n'


async def test_non_ascii_and_lone_surrogates_round_trip(store: FileThreadStore, directory: Path) -> None:
    items = [{"role": "user", "content": "héllo ✓ \n \"q\" \u2028"}, {"role": "user", "content": "a \ud800 alone"}]
    await store.append("c", "user->CEO", items)
    assert "héllo ✓".encode() in file_of(directory, "c").read_bytes()
    assert await store.load("c") == {"user->CEO": items}


async def test_concurrent_appends_to_two_threads_of_one_chat_land_intact(store: FileThreadStore) -> None:
    async def write(key: str) -> None:
        for n in range(30):
            await store.append("c", key, [item(key, n, pad="x" * 5000), item(key, n, second=1)])

    await asyncio.gather(write("user->CEO"), write("CEO->Dev"))
    loaded = await store.load("c")
    for key in ("user->CEO", "CEO->Dev"):
        expected = []
        for n in range(30):
            expected += [item(key, n, pad="x" * 5000), item(key, n, second=1)]
        assert loaded[key] == expected


async def test_a_new_store_on_the_same_directory_loads_everything(directory: Path) -> None:
    first = FileThreadStore(directory)
    await first.append("c1", "user->CEO", [msg(1)])
    await first.append("c2", "user->CEO", [msg(2)])
    await first.aclose()
    second = FileThreadStore(directory)
    assert await second.load("c1") == {"user->CEO": [msg(1)]}
    assert await second.load("c2") == {"user->CEO": [msg(2)]}
    assert await second.list_chats() == ["c1", "c2"]
    await second.append("c1", "user->CEO", [msg(3)])
    assert await second.load("c1") == {"user->CEO": [msg(1), msg(3)]}
    await second.aclose()


async def test_an_unknown_chat_loads_empty_without_creating_a_file(store: FileThreadStore, directory: Path) -> None:
    assert await store.load("nobody") == {}
    assert os.listdir(directory) == []


async def test_more_chats_than_open_handles(store: FileThreadStore) -> None:
    store.max_open_files = 2
    for round_ in range(2):
        for n in range(5):
            await store.append(f"c{n}", "user->CEO", [msg(round_)])
    assert len(store._handles) <= 2
    for n in range(5):
        assert await store.load(f"c{n}") == {"user->CEO": [msg(0), msg(1)]}


# -- crash repair ------------------------------------------------------------------------------
async def test_a_torn_last_line_is_cut_off_and_the_next_append_follows_it(
    directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    good = line("user->CEO", msg(1)) + line("CEO->Dev", msg(2))
    torn = line("user->CEO", msg(3))[:20]
    seed(directory, good + torn)
    store = FileThreadStore(directory)
    with caplog.at_level(logging.WARNING, logger="agency_swarm._threads._file_store"):
        assert await store.load("c") == {"user->CEO": [msg(1)], "CEO->Dev": [msg(2)]}
    assert file_of(directory, "c").read_bytes() == good
    assert "torn last line" in caplog.text
    assert "message" not in caplog.text  # never item contents
    assert (directory / "c.jsonl.quarantine").read_bytes() == b"3\ttorn last line\t" + torn + b"\n"
    await store.append("c", "user->CEO", [msg(4)])
    assert file_of(directory, "c").read_bytes() == good + line("user->CEO", msg(4))
    assert await store.load("c") == {"user->CEO": [msg(1), msg(4)], "CEO->Dev": [msg(2)]}
    await store.aclose()


async def test_invalid_json_ending_the_file_counts_as_torn(directory: Path) -> None:
    good = line("user->CEO", msg(1))
    seed(directory, good + b'{"k":"user->CEO","i":{"ro\n')
    store = FileThreadStore(directory)
    assert await store.load("c") == {"user->CEO": [msg(1)]}  # no warning: filterwarnings=error would raise
    assert file_of(directory, "c").read_bytes() == good
    await store.aclose()


async def test_an_append_without_a_load_first_cuts_a_torn_tail(directory: Path) -> None:
    good = line("user->CEO", msg(1))
    seed(directory, good + b'{"k":"user->C')
    store = FileThreadStore(directory)
    await store.append("c", "user->CEO", [msg(2)])
    assert file_of(directory, "c").read_bytes() == good + line("user->CEO", msg(2))
    assert b"torn last line" in (directory / "c.jsonl.quarantine").read_bytes()
    await store.aclose()


def moved(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The quarantine reports logged so far: the only channel (no RuntimeWarning: pytest's filterwarnings=error
    would fail any test that got one)."""
    return [record.getMessage() for record in caplog.records if " moved to " in record.getMessage()]


@pytest.fixture
def caplog(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="agency_swarm._threads._file_store")
    return caplog


REFUSED = "valid JSON, but not an item the model API accepts ("
NOT_ITEMS = [
    (b'{"k":"user->CEO","i":{"foo":"bar"}}', REFUSED),
    (b'{"i":{"foo":"bar"}}', "corrupt line ("),
    (b'{"k":"user->CEO","i":{"type":"function_call","name":"f"}}', REFUSED + "arguments: "),
    (b'{"k":"user->CEO","i":{"type":"no_such_kind"}}', "valid JSON, but its type is not one the model API knows"),
    (b'{"k":"user->CEO","i":{"type":"agency_swarm.approved_run"}}', "valid JSON, but an approval mark without a "),
]


@pytest.mark.parametrize(
    ("bad", "reason"),
    [(bad, "corrupt line (") for bad in (
        b'{"k":"user->CEO","i":{"role":', b"\x00\x00\x00", b"", b'{"k":"no arrow","i":{}}', b'{"k":"a->b","i":[]}'
    )] + NOT_ITEMS,
)
async def test_a_corrupt_middle_line_or_one_that_is_no_item_is_quarantined_and_logged_once(
    directory: Path, caplog: pytest.LogCaptureFixture, bad: bytes, reason: str
) -> None:
    first, last = line("user->CEO", msg(1)), line("user->CEO", msg(3))
    path = seed(directory, first + bad + b"\n" + last)
    store = FileThreadStore(directory)
    assert await store.load("c") == {"user->CEO": [msg(1), msg(3)]}
    assert len(moved(caplog)) == 1
    assert moved(caplog)[0].startswith(f"{path}: line 2 moved to {path}.quarantine: {reason}")
    assert "bar" not in caplog.text  # never the line's contents
    assert path.read_bytes() == first + last
    assert (directory / "c.jsonl.quarantine").read_bytes().startswith(b"2\t" + reason.encode())
    assert (directory / "c.jsonl.quarantine").read_bytes().endswith(b"\t" + bad + b"\n")
    assert await store.load("c") == {"user->CEO": [msg(1), msg(3)]}
    assert len(moved(caplog)) == 1  # moved once, reported once
    await store.append("c", "user->CEO", [msg(4)])
    assert await store.load("c") == {"user->CEO": [msg(1), msg(3), msg(4)]}
    await store.aclose()


@pytest.mark.parametrize("broken", ["not JSON", "not an item"])
async def test_a_quarantined_function_call_takes_its_output_along(
    directory: Path, caplog: pytest.LogCaptureFixture, broken: str
) -> None:
    broken_call = line("user->CEO", call("c1"))[:-10] + b"\n"
    if broken == "not an item":
        broken_call = line("user->CEO", {**call("c1"), "arguments": None})
    kept = [line("user->CEO", msg(1)), line("CEO->Dev", call("c1")), line("CEO->Dev", output("c1"))]
    path = seed(directory, kept[0] + broken_call + kept[1] + line("user->CEO", output("c1")) + kept[2])
    store = FileThreadStore(directory)
    loaded = await store.load("c")
    messages = moved(caplog)
    assert len(messages) == 2
    assert any("line 2 moved" in text and ("corrupt line" in text or "not an item" in text) for text in messages)
    assert any("line 4 moved" in text and "function_call_output" in text for text in messages)
    # the other thread's call c1 keeps its output: call ids are per thread
    assert loaded == {"user->CEO": [msg(1)], "CEO->Dev": [call("c1"), output("c1")]}
    assert path.read_bytes() == b"".join(kept)
    quarantine = (directory / "c.jsonl.quarantine").read_bytes().splitlines()
    assert [entry.split(b"\t")[0] for entry in quarantine] == [b"2", b"4"]
    await store.aclose()


async def test_a_quarantined_output_leaves_its_call_for_the_thread_manager(
    directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken_output = b'{"k":"user->CEO","i":{"type":"function_call_o\n'
    seed(directory, line("user->CEO", call("c1")) + broken_output + line("user->CEO", msg(2)))
    store = FileThreadStore(directory)
    assert await store.load("c") == {"user->CEO": [call("c1"), msg(2)]}
    assert [text.split(": ", 1)[1][:12] for text in moved(caplog)] == ["line 2 moved"]
    await store.aclose()


async def test_a_reasoning_item_goes_with_its_quarantined_follower(
    directory: Path, caplog: pytest.LogCaptureFixture
) -> None:
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    broken = b'{"k":"user->CEO","i":{"ty\n'
    seed(directory, line("user->CEO", msg(1)) + line("user->CEO", reasoning) + broken + line("user->CEO", msg(3)))
    store = FileThreadStore(directory)
    assert await store.load("c") == {"user->CEO": [msg(1), msg(3)]}
    assert sorted(text.split(": line ")[1][:1] for text in moved(caplog)) == ["2", "3"]
    assert "reasoning item" in (directory / "c.jsonl.quarantine").read_text()
    await store.aclose()


# -- files, names and modes --------------------------------------------------------------------
async def test_directory_is_0700_and_files_are_0600_whatever_the_umask(directory: Path) -> None:
    old = os.umask(0)
    try:
        store = FileThreadStore(directory)
        await store.append("c", "user->CEO", [msg(1)])
        path = file_of(directory, "c")
        path.write_bytes(path.read_bytes() + b"garbage\n" + line("user->CEO", msg(2)))
        await store.aclose()
        store = FileThreadStore(directory)
        await store.load("c")  # line 2 is quarantined: the file is rewritten
        await store.aclose()
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(directory).st_mode) == 0o700
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600  # rewritten by the repair
    assert stat.S_IMODE(os.stat(directory / "c.jsonl.quarantine").st_mode) == 0o600
    assert sorted(os.listdir(directory)) == ["c.jsonl", "c.jsonl.quarantine"]  # no temp file left


BAD_IDS = ["", "a/b", "../etc", "..", ".", "a\\b", "nul\x00", "tab\there", "x" * 300, "é" * 128]


@pytest.mark.parametrize("bad", BAD_IDS)
async def test_bad_chat_ids_are_refused_before_touching_the_disk(
    store: FileThreadStore, directory: Path, tmp_path: Path, bad: str
) -> None:
    before = sorted(os.listdir(tmp_path)), sorted(os.listdir(directory))
    with pytest.raises(InvalidChatId):
        await store.append(bad, "user->CEO", [msg(1)])
    with pytest.raises(InvalidChatId):
        await store.load(bad)
    with pytest.raises(InvalidChatId):
        await store.delete(bad)
    assert (sorted(os.listdir(tmp_path)), sorted(os.listdir(directory))) == before


WEIRD_IDS = ["a b", "ü-ñ", "x%2Fy", ".hidden", "...", "~tilde", "CON", "a.jsonl", "emoji 🎉", "é" * 127, "%" * 200]


async def test_weird_but_valid_chat_ids_round_trip(directory: Path, tmp_path: Path) -> None:
    store = FileThreadStore(directory)
    for n, chat_id in enumerate(WEIRD_IDS):
        await store.append(chat_id, "user->CEO", [msg(n)])
    assert os.listdir(tmp_path) == ["threads"]  # nothing outside the directory
    assert all(len(name) <= 255 and "/" not in name for name in os.listdir(directory))
    assert await store.list_chats() == sorted(WEIRD_IDS)
    await store.aclose()
    reopened = FileThreadStore(directory)
    assert await reopened.list_chats() == sorted(WEIRD_IDS)
    for n, chat_id in enumerate(WEIRD_IDS):
        assert await reopened.load(chat_id) == {"user->CEO": [msg(n)]}
    for chat_id in WEIRD_IDS:
        await reopened.delete(chat_id)
    assert os.listdir(directory) == []
    await reopened.aclose()


async def test_list_chats_ignores_empty_and_foreign_files(store: FileThreadStore, directory: Path) -> None:
    await store.append("real", "user->CEO", [msg(1)])
    (directory / "empty.jsonl").write_bytes(b"")
    (directory / "not.ours.jsonl").write_bytes(b"x\n")
    (directory / "notes.txt").write_bytes(b"x\n")
    (directory / "~deadbeef.jsonl").write_bytes(b"x\n")  # hashed name without its id file
    assert await store.list_chats() == ["real"]


# -- limits and failures -----------------------------------------------------------------------
async def test_an_item_too_large_raises_and_writes_nothing(directory: Path) -> None:
    store = FileThreadStore(directory, max_item_bytes=200)
    await store.append("c", "user->CEO", [msg(1)])
    before = file_of(directory, "c").read_bytes()
    with pytest.raises(ItemTooLarge, match=r"item 1 of thread 'user->CEO' in chat 'c' is \d+ bytes") as caught:
        await store.append("c", "user->CEO", [msg(2), {"text": "y" * 500}, msg(3)])
    assert "yyy" not in str(caught.value)
    await store.append("c2", "user->CEO", [msg(1)])
    with pytest.raises(ItemTooLarge):
        await store.append("new", "user->CEO", [{"text": "y" * 500}])
    assert file_of(directory, "c").read_bytes() == before
    assert not file_of(directory, "new").exists()
    await store.aclose()


async def test_items_that_are_not_json_or_bad_keys_are_refused(store: FileThreadStore, directory: Path) -> None:
    with pytest.raises(StoreError, match="cannot be stored as JSON"):
        await store.append("c", "user->CEO", [msg(1), {"blob": object()}])
    with pytest.raises(ConfigError, match="sender->recipient"):
        await store.append("c", "no arrow", [msg(1)])
    with pytest.raises(ConfigError, match="list of dicts"):
        await store.append("c", "user->CEO", ["text"])  # type: ignore[list-item]
    assert os.listdir(directory) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a 0500 directory anyway")
async def test_an_unwritable_directory_raises_store_error(store: FileThreadStore, directory: Path) -> None:
    await store.append("old", "user->CEO", [msg(1)])
    os.chmod(directory, 0o500)
    try:
        with pytest.raises(StoreError, match=re.escape(str(directory)) + r".*Permission denied"):
            await store.append("new", "user->CEO", [msg(2)])
        assert await store.load("old") == {"user->CEO": [msg(1)]}
    finally:
        os.chmod(directory, 0o700)


async def test_a_full_disk_raises_store_error_and_keeps_what_was_stored(
    store: FileThreadStore, directory: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    await store.append("c", "user->CEO", [msg(1)])
    before = file_of(directory, "c").read_bytes()

    async def disk_full(file: AsyncFileIO, data: bytes) -> None:
        await file.write(data[:15])  # part of the append reached the file, then the disk filled up
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(store, "_write", disk_full)
    with pytest.raises(StoreError, match=re.escape(str(file_of(directory, "c"))) + r".*No space left on device"):
        await store.append("c", "user->CEO", [msg(2), msg(3)])
    assert file_of(directory, "c").read_bytes() == before  # the partial write was cut back
    assert await store.load("c") == {"user->CEO": [msg(1)]}
    monkeypatch.undo()
    await store.append("c", "user->CEO", [msg(4)])
    assert await store.load("c") == {"user->CEO": [msg(1), msg(4)]}


async def test_durable_appends_fsync(directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    real_fsync = os.fsync

    def counting_fsync(fd: int) -> None:
        synced.append(fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", counting_fsync)
    store = FileThreadStore(directory, durable=True)
    for n in range(5):
        await store.append("c", "user->CEO", [msg(n)])
    assert len(synced) >= 5
    assert await store.load("c") == {"user->CEO": [msg(n) for n in range(5)]}
    await store.aclose()
    synced.clear()
    quick = FileThreadStore(directory)
    await quick.append("c", "user->CEO", [msg(5)])
    assert synced == []
    await quick.aclose()


# -- delete, list, close -----------------------------------------------------------------------
async def test_delete_and_list_chats(store: FileThreadStore, directory: Path) -> None:
    await store.append("a", "user->CEO", [msg(1)])
    await store.append("b", "user->CEO", [msg(2)])
    (directory / "a.jsonl.quarantine").write_bytes(b"1\tcorrupt\tx\n")
    assert await store.list_chats() == ["a", "b"]
    await store.delete("a")
    await store.delete("unknown")
    assert await store.list_chats() == ["b"]
    assert await store.load("a") == {}
    assert sorted(os.listdir(directory)) == ["b.jsonl"]
    await store.append("a", "user->CEO", [msg(3)])  # a deleted chat starts over
    assert await store.load("a") == {"user->CEO": [msg(3)]}


async def test_aclose_is_idempotent_and_later_calls_raise(directory: Path) -> None:
    store = FileThreadStore(directory)
    await store.append("c", "user->CEO", [msg(1)])
    await store.aclose()
    await store.aclose()
    for attempt in (store.load("c"), store.append("c", "user->CEO", [msg(2)]), store.list_chats(), store.delete("c")):
        with pytest.raises(StoreError, match="closed"):
            await attempt
    assert await FileThreadStore(directory).load("c") == {"user->CEO": [msg(1)]}


def test_a_directory_that_is_a_file_is_a_store_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(StoreError, match="not a directory"):
        FileThreadStore(tmp_path / "file")
    with pytest.raises(ConfigError, match="max_item_bytes"):
        FileThreadStore(tmp_path / "x", max_item_bytes=0)


def block_with_a_directory(path: Path) -> None:
    path.mkdir()


async def test_a_chat_file_that_cannot_be_opened_raises_store_error(store: FileThreadStore, directory: Path) -> None:
    await store.append("old", "user->CEO", [msg(1)])
    block_with_a_directory(file_of(directory, "new"))  # fails for root too, unlike a 0500 directory
    with pytest.raises(StoreError, match=r"cannot open .*new\.jsonl for appending: .*Is a directory"):
        await store.append("new", "user->CEO", [msg(2)])
    with pytest.raises(StoreError, match=r"cannot read .*new\.jsonl"):
        await store.load("new")
    assert await store.load("old") == {"user->CEO": [msg(1)]}


class ShortWrites:
    """A file whose writes take a few bytes at a time, then none (as a full disk can)."""

    def __init__(self, limit: int) -> None:
        self.data = bytearray()
        self.limit = limit

    def fileno(self) -> int:
        return -1

    def write_fd(self, fd: int, chunk: memoryview) -> int:
        assert fd == -1
        taken = bytes(chunk[: min(7, self.limit - len(self.data))])
        self.data += taken
        return len(taken)

    async def write(self, chunk: memoryview) -> int:
        return self.write_fd(-1, chunk)


@pytest.mark.parametrize("size", [40, file_store_module.INLINE_WRITE_BYTES + 1])  # on the loop's thread; in a worker
async def test_short_writes_are_continued_and_a_stalled_write_is_an_error(
    store: FileThreadStore, monkeypatch: pytest.MonkeyPatch, size: int
) -> None:
    patient = ShortWrites(limit=size)
    monkeypatch.setattr(file_store_module, "_write_fd", patient.write_fd)
    await store._write(patient, b"x" * size)  # type: ignore[arg-type]
    assert patient.data == b"x" * size
    stalled = ShortWrites(limit=10)
    monkeypatch.setattr(file_store_module, "_write_fd", stalled.write_fd)
    with pytest.raises(OSError, match=f"stored nothing after 10 of {size} bytes"):
        await store._write(stalled, b"x" * size)  # type: ignore[arg-type]
