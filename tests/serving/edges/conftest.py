"""The edge suite's servers (one real `agency-swarm serve` per store, for the whole session) and its table: per store
and hostile shape, the worst answer time and peak-RSS growth measured, printed at the end of the run and written to
`edges.txt` in the session's temporary directory."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import xdist_support
from edges.measure import HEALTH_BOUND_S, REQUEST_BOUND_S, TABLE
from serving_support import Server, chat_prefix, delete_chats, start_serve
from test_serving_edges import PEAK_RSS_GROWTH_BOUND_KIB

STORES = ["memory", "file", "sqlite", "postgres"]
AGENCY_FILE = (
    "agents:\n"
    "  CEO: {description: Talks to the user., model: gpt-4.1-mini, instructions: Delegate.}\n"
    "  Developer: {description: Does the work., model: gpt-4.1-mini}\n"
    "chart: {entry_points: [CEO], flows: [[CEO, Developer]]}\n"
    "store: {type: file, dir: threads}\n"
)
WRITTEN: list[Path] = []
TITLE = "edge suite: worst per store and hostile shape"


@pytest.fixture(scope="session")
def edge_prefix() -> Iterator[str]:
    """Chat ids of this session start with it (PostgreSQL outlives the tests: its chats are deleted after)."""
    prefix = chat_prefix("edges")
    yield prefix
    if "postgres" in {store for store, _ in TABLE}:
        delete_chats(prefix)


@pytest.fixture(scope="session", params=STORES)
def edge_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, edge_prefix: str
) -> Iterator[tuple[str, Server]]:
    """(store name, a one-worker server on it), shared by every edge test of that store."""
    if not Path("/proc/self/status").exists():
        pytest.skip("reads the worker's peak memory from /proc")
    store: str = request.param
    directory = tmp_path_factory.mktemp(f"edges-{store}")
    if store == "file":
        config = directory / "agency.yaml"
        config.write_text(AGENCY_FILE)
        arguments = [str(config), "--models", "serving_app:config_models"]
    else:
        if store == "postgres":
            from postgres_support import require_postgres

            url = require_postgres()  # skips, or fails when CI=true, if the server is not there
        else:
            url = "memory" if store == "memory" else f"sqlite:///{directory / 'chats.db'}"
        arguments = ["--factory", "serving_app:build_agency", "--store", url]
    server = start_serve(arguments)
    try:
        yield store, server
    finally:
        server.stop()


@pytest.fixture(scope="session", autouse=True)
def _edge_table_file(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    yield
    if TABLE:
        path = tmp_path_factory.getbasetemp() / "edges.txt"
        path.write_text("\n".join(table_lines()) + "\n")
        WRITTEN.append(path)
        xdist_support.keep_summary(TITLE, [*table_lines(), f"(also in {path})"])


def table_lines() -> list[str]:
    lines = [
        f"bounds: each request answers within {REQUEST_BOUND_S:.0f} s (its timeout), /healthz meanwhile within "
        f"{HEALTH_BOUND_S:.0f} s, peak RSS (VmHWM) grows by less than "
        f"{PEAK_RSS_GROWTH_BOUND_KIB // 1024} MiB",
        f"{'store':<9} {'shape':<22} {'examples':>8} {'worst s':>8} {'worst RSS +KiB':>14} {'probes':>7}  answers",
    ]
    for (store, shape), worst in sorted(TABLE.items(), key=lambda entry: (STORES.index(entry[0][0]), entry[0][1])):
        lines.append(
            f"{store:<9} {shape:<22} {worst.examples:>8} {worst.seconds:>8.3f} {worst.rss_growth_kib:>14} "
            f"{worst.health_probes:>7}  {', '.join(sorted(worst.statuses))}"
        )
    return lines


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not TABLE:
        return
    terminalreporter.section(TITLE)
    for line in table_lines():
        terminalreporter.write_line(line)
    for path in WRITTEN:
        terminalreporter.write_line(f"(also in {path})")
