"""`agency-swarm serve` as a new user starts it: a --factory in the current directory (module:NAME or FILE.py:NAME),
a store it cannot reach refused at start in one line, and its --help page."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from postgres_support import require_postgres
from serving_support import chat_prefix, delete_chats, start_serve

MYAPP = """\
from agency_swarm import Agency, Agent
from agency_swarm.testing import ScriptedModel


def build_agency(store):
    model = ScriptedModel(lambda call: f"myapp heard: {call.last_user_message}")
    return Agency(Agent(name="CEO", model=model), thread_store=store)
"""


def ask(url: str, chat_id: str, message: str) -> str:
    response = httpx.post(f"{url}/chats/{chat_id}/messages", json={"message": message}, timeout=60)
    assert response.status_code == 200, response.text
    answer: str = response.json()["final_output"]
    return answer


@pytest.mark.parametrize("factory", ["myapp:build_agency", "myapp.py:build_agency"])
def test_a_factory_in_the_current_directory_is_served(tmp_path: Path, factory: str) -> None:
    (tmp_path / "myapp.py").write_text(MYAPP)
    server = start_serve(["--factory", factory], cwd=tmp_path)
    try:
        assert ask(server.url, "c1", "hello") == "myapp heard: hello"
    finally:
        server.stop()


def test_every_worker_process_imports_the_factory_from_the_current_directory(tmp_path: Path) -> None:
    store = require_postgres()
    (tmp_path / "myapp.py").write_text(MYAPP)
    server = start_serve(["--factory", "myapp:build_agency", "--store", store], workers=2, cwd=tmp_path)
    prefix = chat_prefix("factory")
    try:
        assert len(server.worker_pids) == 2
        for number in range(4):  # whichever worker takes a request built its agency from ./myapp.py
            assert ask(server.url, f"{prefix}{number}", "hi") == "myapp heard: hi"
    finally:
        server.stop()
        delete_chats(prefix)
