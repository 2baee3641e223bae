"""Running the suite on several pytest-xdist workers (`pytest -n 2`): each worker's own PostgreSQL database, the
modules kept on one worker because they share state, and the suites' end-of-run summaries carried from the workers
to the controller that prints them."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest
from xdist.scheduler import LoadScopeScheduling

WORKER = os.environ.get("PYTEST_XDIST_WORKER")
"""`gw0`, `gw1`, ... in a worker; None in a run without workers and in the controller."""
URL_VARIABLE = "AGENCY_SWARM_TEST_POSTGRES_URL"
DEFAULT_URL = "postgresql://postgres@127.0.0.1:5432/test"
SUMMARIES_VARIABLE = "AGENCY_SWARM_TEST_SUMMARIES"
SHARED_FOLDERS = ("edges", "faults", "parity")
"""Their modules share session fixtures (the edge suite's servers) or module-level tallies: one worker runs each."""
TOGETHER = {"test_partition": "netns", "test_durable_partition": "netns"}
"""Both cut links with traffic-control filters on the loopback device: never at once."""


def group_of(path: Path) -> str:
    """The group of a test module, which one worker runs whole: its folder for the shared folders, else the module
    itself (so its module-scoped servers start once)."""
    shared = [part for part in path.parts if part in SHARED_FOLDERS]
    return shared[0] if shared else TOGETHER.get(path.stem, str(path))


class GroupScheduling(LoadScopeScheduling):
    """pytest-xdist's scope scheduling with `group_of` as the scope of a test."""

    def _split_scope(self, nodeid: str) -> str:
        return group_of(Path(nodeid.split("::", 1)[0]))


def use_worker_database() -> None:
    """In a worker: point the tests (and the servers they start, by the environment) at `<test database>_<worker>`,
    made on first use, so no worker sees another's chats, turn locks or DBOS queues. Unreachable: left as it is,
    and the PostgreSQL tests skip, or fail under CI, as they do without workers."""
    if WORKER is None:
        return
    base = os.environ.get(URL_VARIABLE, DEFAULT_URL)
    parts = urlsplit(base)
    name = f"{parts.path.lstrip('/') or 'postgres'}_{WORKER}"
    try:
        asyncio.run(_create_database(base, name))
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
        return
    os.environ[URL_VARIABLE] = urlunsplit(parts._replace(path=f"/{name}"))


async def _create_database(base: str, name: str) -> None:
    connection = await asyncpg.connect(base, timeout=5)
    try:
        if not await connection.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
            with contextlib.suppress(asyncpg.DuplicateDatabaseError):  # made meanwhile by another run
                await connection.execute(f'CREATE DATABASE "{name}" TEMPLATE template0')  # template1 may be in use
    finally:
        await connection.close()


def start_gathering() -> None:
    """In the controller, before the workers start: a directory (named in the environment the workers inherit)
    where they leave their summaries."""
    if WORKER is None and SUMMARIES_VARIABLE not in os.environ:
        os.environ[SUMMARIES_VARIABLE] = tempfile.mkdtemp(prefix="agency-swarm-summaries-")


def keep_summary(title: str, lines: list[str]) -> None:
    """In a worker: leave a suite's summary for the controller to print."""
    directory = os.environ.get(SUMMARIES_VARIABLE)
    if WORKER is None or directory is None or not lines:
        return
    (Path(directory) / f"{title.replace(' ', '-')}-{WORKER}.txt").write_text("\n".join([title, *lines]) + "\n")


def print_gathered(terminalreporter: pytest.TerminalReporter) -> None:
    """In the controller: each summary the workers left, as a section of its own."""
    directory = os.environ.get(SUMMARIES_VARIABLE)
    if directory is None or not Path(directory).is_dir():
        return
    for path in sorted(Path(directory).glob("*.txt")):
        title, *lines = path.read_text().splitlines()
        terminalreporter.section(title)
        for line in lines:
            terminalreporter.write_line(line)
    shutil.rmtree(directory, ignore_errors=True)
