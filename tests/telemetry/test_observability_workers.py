"""`agency-swarm serve --metrics --log-format json` with 2 workers on PostgreSQL: /metrics sums every worker's
turns (a private PROMETHEUS_MULTIPROC_DIR), and each log line is one JSON object carrying the request id."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from observability_support import SECRET_TEXT
from postgres_support import require_postgres
from serving_support import Server, chat_prefix, delete_chats, start_serve
from test_observability import assert_turn_metrics, metric_values, scrape_until

WORKERS = 2
TURNS = 8


@pytest.fixture(scope="module")
def prefix() -> Iterator[str]:
    require_postgres()
    value = chat_prefix("metrics")
    yield value
    delete_chats(value)


@pytest.fixture(scope="module")
def server(prefix: str) -> Iterator[Server]:
    running = start_serve(
        ["--factory", "observability_support:build_priced_agency", "--store", require_postgres(), "--metrics",
         "--log-format", "json"], workers=WORKERS,
        env={"PROMETHEUS_MULTIPROC_DIR": "/nonexistent-left-over", "AGENCY_SWARM_METRICS_FLUSH_SECONDS": "0.1"},
    )
    yield running
    running.stop()


def test_metrics_sum_every_workers_turns(server: Server, prefix: str) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        for index in range(TURNS):
            response = client.post(f"/chats/{prefix}{index}/messages", json={"message": SECRET_TEXT})
            assert response.status_code == 200, response.text
        assert client.post(f"/chats/{prefix}0/messages", json={}).status_code == 422
        texts = [scrape_until(lambda: client.get("/metrics", headers={"connection": "close"}).text, all_written)
                 for _ in range(4)]
    for text in texts:  # whichever worker answers, it sums both workers' values
        values = metric_values(text)
        assert_turn_metrics(values, TURNS)
        assert values[("agency_swarm_turns_total", (("outcome", "completed"),))] == TURNS
        assert values[("agency_swarm_rejected_requests_total", (("reason", "invalid_request"),))] == 1


def all_written(values: dict[tuple[str, tuple[tuple[str, str], ...]], float]) -> bool:
    """Every turn's values written by the worker that ran it (each writes them within its flush interval)."""
    completed = values.get(("agency_swarm_turns_total", (("outcome", "completed"),)))
    return completed == TURNS and values.get(("agency_swarm_active_turns", ())) == 0


def test_log_lines_are_json_objects_with_request_ids(server: Server) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as client:
        response = client.get("/chats/unknown%2Fid/threads", headers={"x-request-id": "req-from-client"})
    assert response.headers["x-request-id"] == "req-from-client"
    lines = [json.loads(line) for line in server.log if line.strip()]
    assert all({"time", "level", "logger", "message"} <= set(line) for line in lines)
    assert any(line["message"].startswith("Started server process") for line in lines)
    assert not any(SECRET_TEXT in json.dumps(line) for line in lines)
