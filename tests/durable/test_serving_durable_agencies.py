"""`agency-swarm serve --durable` for two agencies on one PostgreSQL database, with real workers: each agency's queue
is its own (named after its chart), so each answers only its own turns; an agency started on another agency's queue
is refused at start, with a message naming both, while the same agency again is accepted; and a server whose
workers cannot start (the database unreachable) exits non-zero, saying why, with no password in its log."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from agency_swarm import MemoryThreadStore
from agency_swarm.durable._queues import AgencyIdentity
from durable_agencies_app import build_sales, build_support
from postgres_support import require_postgres
from serving_support import REPO, SUPPORT_DIR, Server, free_port, start_serve

EXIT_TIMEOUT_S = 180.0
"""A server that cannot start exits within this long (a bound, not a measure: ~35 s when every launch retries)."""
SUPPORT = AgencyIdentity(build_support(MemoryThreadStore()))
SALES = AgencyIdentity(build_sales(MemoryThreadStore()))


def durable_serve(factory: str, store: str, *options: str) -> list[str]:
    return ["--factory", f"durable_agencies_app:{factory}", "--store", store, "--durable", *options]


@pytest.fixture(scope="module")
def support() -> Iterator[Server]:
    server = start_serve(durable_serve("build_support", require_postgres()), workers=2)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sales() -> Iterator[Server]:
    server = start_serve(durable_serve("build_sales", require_postgres()), workers=2)
    yield server
    server.stop()


def answer(server: Server, message: str) -> tuple[str, str]:
    """(the answering agent, its answer) of one turn on a new chat."""
    chat_id = f"agencies-{uuid.uuid4().hex[:12]}"
    response = httpx.post(f"{server.url}/chats/{chat_id}/messages", json={"message": message}, timeout=60)
    assert response.status_code == 200, response.text
    return response.json()["agent"], response.json()["final_output"]


def serve_until_exit(arguments: list[str], workers: int) -> tuple[int, str]:
    """`agency-swarm serve ARGUMENTS` expected to stop by itself: (its exit code, its stderr)."""
    command = [
        str(Path(sys.executable).with_name("agency-swarm")), "serve", *arguments, "--workers", str(workers),
        "--host", "127.0.0.1", "--port", str(free_port()), "--no-access-log",
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SUPPORT_DIR), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(
            command, cwd=REPO, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, timeout=EXIT_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"`serve` was still running after {EXIT_TIMEOUT_S} s:\n{expired.stderr!r}")
    return done.returncode, done.stderr


def test_two_agencies_on_one_database_each_answer_only_their_own_turns(support: Server, sales: Server) -> None:
    assert SUPPORT.default_queue() != SALES.default_queue()
    sent = [(server, name, f"{name.lower()} {n}") for n in range(10) for server, name in
            ((support, "Support"), (sales, "Sales"))]
    with ThreadPoolExecutor(len(sent)) as pool:  # all at once: both agencies' queues hold turns together
        answers = list(pool.map(lambda each: answer(each[0], each[2]), sent))
    assert answers == [(name, f"{name}: {message}") for _, name, message in sent]


def test_an_agency_started_on_another_agency_s_queue_is_refused_at_start(support: Server) -> None:
    arguments = durable_serve("build_sales", require_postgres(), "--durable-queue", SUPPORT.default_queue())
    code, stderr = serve_until_exit(arguments, workers=2)
    assert code == 3, stderr
    refusal = next(line for line in stderr.splitlines() if "belongs to another agency" in line)
    assert SUPPORT.described in refusal
    assert SALES.described in refusal
    assert "--durable-queue NAME" in refusal
    assert "failed to start" in stderr
    assert answer(support, "still here") == ("Support", "Support: still here")  # the queue stays Support's


def test_the_same_agency_started_again_on_its_queue_is_accepted(support: Server) -> None:
    again = start_serve(durable_serve("build_support", require_postgres()), workers=1)
    try:
        assert answer(again, "again") == ("Support", "Support: again")
    finally:
        again.stop()
    assert answer(support, "and the first") == ("Support", "Support: and the first")


def test_serve_durable_with_an_unreachable_database_exits_non_zero() -> None:
    closed = free_port()  # nobody listens there
    store = f"postgresql://postgres:not-this-password@127.0.0.1:{closed}/test"
    code, stderr = serve_until_exit(durable_serve("build_support", store), workers=2)
    assert code == 3, stderr
    [line] = stderr.splitlines()  # checked before any worker starts: one line
    assert line.startswith("Error: The store postgresql://postgres:***@127.0.0.1:")
    assert "cannot be used: The thread store is unavailable (ConnectionRefusedError)" in line
    assert "not-this-password" not in stderr
