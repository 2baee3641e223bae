"""The test PostgreSQL: where it is, how to start it, and the skip-or-fail rule every PostgreSQL test follows."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor

import asyncpg
import pytest

from agency_swarm._threads._sql_store import redact_url

POSTGRES_URL = os.environ.get("AGENCY_SWARM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
START_POSTGRES = "pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start"


async def _postgres_problem() -> str | None:
    try:
        conn = await asyncpg.connect(POSTGRES_URL, timeout=5)
    except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        return f"{type(exc).__name__}: {exc}"
    await conn.close()
    return None


def postgres_report() -> str:
    """What scripts/test.sh says before pytest: which PostgreSQL the tests use, how to point them at another, and
    what happens to its tests when it does not answer."""
    problem = asyncio.run(_postgres_problem())
    lines = [
        f"== PostgreSQL for the tests: {redact_url(POSTGRES_URL)} (AGENCY_SWARM_TEST_POSTGRES_URL=postgresql://... "
        "points them at another)"
    ]
    if problem is not None:
        outcome = "they FAIL (CI=true)" if os.environ.get("CI") == "true" else "its tests are SKIPPED"
        lines.append(f"   unreachable ({problem}): {outcome}; start the local one with `{START_POSTGRES}`")
    return "\n".join(lines)


def require_postgres() -> str:
    """The test database's URL; unreachable -> skip, or fail when CI=true (CI must run these)."""
    with ThreadPoolExecutor(1) as pool:  # its own loop: callers may be inside a running one
        problem = pool.submit(asyncio.run, _postgres_problem()).result()
    if problem is not None:
        message = (
            f"PostgreSQL at {redact_url(POSTGRES_URL)} is unreachable ({problem}). Start the local one with "
            f"`{START_POSTGRES}` or point AGENCY_SWARM_TEST_POSTGRES_URL at another."
        )
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return POSTGRES_URL


if __name__ == "__main__":
    print(postgres_report())
