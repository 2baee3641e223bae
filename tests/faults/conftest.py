"""Fault-suite fixtures: a backend per store (PostgreSQL per tests/support/postgres_support.py), and the session's
figures (faults injected, cases, seconds per store) printed at the end of the run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

import xdist_support
from faults import harness

TITLE = "fault injection"


@pytest.fixture
async def fault_backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[harness.Backend]:
    name: str = request.param
    if name == "postgres":
        from postgres_support import require_postgres

        require_postgres()  # skips, or fails when CI=true, if the server is not there
    opened = harness.Backend(name, tmp_path)
    try:
        yield opened
    finally:
        await opened.aclose()


def summary_lines() -> list[str]:
    if not harness.CASES:
        return []
    lines = [
        f"{store:>9}: {harness.INJECTED[store]:5d} faults injected in {harness.CASES[store]:5d} cases, "
        f"{harness.SECONDS[store]:5.1f} s ({harness.CPU_SECONDS[store]:4.1f} s CPU)"
        for store in harness.STORES if harness.CASES[store]
    ]
    lines.append(
        f"{'total':>9}: {sum(harness.INJECTED.values()):5d} faults injected in {sum(harness.CASES.values()):5d} "
        f"cases, {sum(harness.SECONDS.values()):5.1f} s ({sum(harness.CPU_SECONDS.values()):4.1f} s CPU)"
    )
    if harness.FAILED:
        lines.append(
            f"{len(harness.FAILED)} cases broke invariants; each shape once, across every sweep (details above):"
        )
        lines.extend(harness.summary(harness.FAILED))
    return lines


@pytest.fixture(scope="session", autouse=True)
def _summary_for_the_controller() -> Iterator[None]:
    yield
    xdist_support.keep_summary(TITLE, summary_lines())


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    lines = summary_lines()
    if lines:
        terminalreporter.section(TITLE)
        for line in lines:
            terminalreporter.write_line(line)
