"""`agency-swarm serve` as a new user starts it: a --factory in the current directory (module:NAME or FILE.py:NAME),
a store it cannot reach refused at start in one line, and its --help page."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from postgres_support import require_postgres
from serving_support import chat_prefix, delete_chats, free_port, start_serve

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


def serve_until_exit(arguments: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [str(Path(sys.executable).with_name("agency-swarm")), "serve", *arguments, "--port", str(free_port())]
    try:
        return subprocess.run(command, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120,
                              check=False)
    except subprocess.TimeoutExpired as expired:
        pytest.fail(f"`serve` still ran after 120 s (it started on a store it cannot reach):\n{expired.stderr!r}")


@pytest.mark.parametrize(
    ("store", "shown", "kind"),
    [
        ("postgresql://app:not-this-password@no-such-host.invalid:5432/app",
         "postgresql://app:***@no-such-host.invalid:5432/app", "gaierror"),
        ("postgresql://postgres@127.0.0.1:{closed}/test", "postgresql://postgres@127.0.0.1:{closed}/test",
         "ConnectionRefusedError"),
        ("sqlite:///missing/directory/chats.db", "sqlite:///missing/directory/chats.db", "FileNotFoundError"),
    ],
)
def test_plain_serve_refuses_a_store_it_cannot_reach_at_start_in_one_line(
    tmp_path: Path, store: str, shown: str, kind: str
) -> None:
    closed = free_port()  # nobody listens there
    (tmp_path / "myapp.py").write_text(MYAPP)
    done = serve_until_exit(["--factory", "myapp:build_agency", "--store", store.format(closed=closed)], tmp_path)
    assert done.returncode == 3, done.stderr  # as a worker that fails to start: a process manager tries again
    [line] = done.stderr.splitlines()
    assert line.startswith(f"Error: The store {shown.format(closed=closed)} (--store) cannot be used: The thread store "
                           f"is unavailable ({kind}). Check that it is running")
    assert "not-this-password" not in done.stderr
    assert "startup complete" not in done.stdout + done.stderr
    assert not (tmp_path / "missing").exists()


def help_page(*arguments: str) -> str:
    from typer.testing import CliRunner

    from agency_swarm._cli._commands import app

    done = CliRunner().invoke(app, [*arguments, "--help"], env={"COLUMNS": "80", "TERMINAL_WIDTH": "80"})
    assert done.exit_code == 0, done.output
    return " ".join(done.output.replace("│", " ").split())  # the page's words, as wrapped at 80 columns


def test_serve_help_at_80_columns_shows_the_extra_the_store_examples_and_flags_without_values() -> None:
    page = help_page("serve")
    assert "(needs the [durable] extra)" in page  # rich read `[durable]` as markup and dropped it
    assert "postgresql://HOST/DB" in page  # whole, not cut with "…"
    assert "sqlite:///chats.db" in page
    assert "postgresql://user@ho…" not in page
    assert "--durable Run turns as DBOS workflows" in page  # no `<bool>`: it takes no value
    assert "--access-log --no-access-log Log every request." in page


def test_version_reads_as_a_flag_in_the_help() -> None:
    page = help_page()
    assert "--version Print the installed version and exit." in page  # not `--version <bool>`
