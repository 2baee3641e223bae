"""Remote agents in a chart, over real HTTP between processes: our agency as another agency's member, an agent built
only with the a2a-sdk as a member, and what faults leave behind (a killed remote, a slow one, a bad card)."""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import a2a_app
from agency_swarm import ConfigError, MemoryThreadStore, RemoteAgentError
from serving_support import SUPPORT_DIR, Gate, Server, free_port, start_serve

BOUND = 60


def remote_server(tmp_path: Path, env: dict[str, str] | None = None, port: int | None = None,
                  factory: str = "a2a_app:build_remote", *options: str) -> Server:
    store = f"sqlite:///{tmp_path / 'remote.db'}"
    return start_serve(["--factory", factory, "--store", store, "--a2a", *options], env=env, port=port)


@contextlib.contextmanager
def caller_server(remote_url: str) -> Iterator[Server]:
    server = start_serve(["--factory", "a2a_app:build_caller", "--store", "memory"],
                         env={a2a_app.REMOTE_ENV: remote_url})
    try:
        yield server
    finally:
        server.stop()


async def streamed(url: str, chat: str, message: str, path: str = "messages:stream") -> list[dict[str, Any]]:
    """The events of one streamed turn (or resume) of the caller, as its SSE sends them."""
    body: dict[str, Any] = {"message": message} if path == "messages:stream" else json.loads(message)
    events = []
    async with httpx.AsyncClient(timeout=BOUND) as http, http.stream(
        "POST", f"{url}/chats/{chat}/{path}", json=body
    ) as response:
        assert response.status_code == 200, await response.aread()
        async for line in response.aiter_lines():
            if line.startswith("data: "):
                events.append(json.loads(line.removeprefix("data: ")))
    return events


def shape(event: dict[str, Any]) -> tuple[Any, ...]:
    kind = event["type"]
    if kind == "remote_progress":
        return ("remote", event["kind"], event["agent"], event["depth"])
    return (kind, event.get("agent"), event.get("depth"))


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Server]:
    server = remote_server(tmp_path)
    try:
        yield server
    finally:
        server.stop()


async def test_a_nested_turn_across_two_agencies_streams_in_order(remote: Server) -> None:
    with caller_server(remote.url) as caller:
        events = await streamed(caller.url, "nested", "[qa] the login page")
        async with httpx.AsyncClient() as http:
            threads = (await http.get(f"{caller.url}/chats/nested/threads")).json()["threads"]
    assert [shape(event) for event in events[:-1] if event["type"] != "text_delta"] == [
        ("agent_started", "CEO", 0), ("tool_called", "CEO", 0), ("message_sent", "CEO", 0),
        ("agent_started", "Developer", 1),
        ("remote", "agent_started", "Developer", 1), ("remote", "tool_called", "Developer", 1),
        ("remote", "message_sent", "Developer", 1), ("remote", "agent_started", "QA", 2),
        ("remote", "agent_finished", "QA", 2), ("remote", "tool_output", "Developer", 1),
        ("remote", "agent_finished", "Developer", 1),
        ("agent_finished", "Developer", 1), ("tool_output", "CEO", 0), ("agent_finished", "CEO", 0),
    ]
    answer = "Developer did: [qa] the login page (QA checked: check: [qa] the login page) [seen 1]"
    assert events[-1]["result"]["final_output"] == f"CEO: {answer}"
    pair = threads["CEO->Developer"]
    assert pair[0]["content"] == "[qa] the login page"
    assert pair[-1]["content"][0]["text"] == answer


async def test_the_remote_keeps_the_pair_thread_as_one_conversation(remote: Server) -> None:
    with caller_server(remote.url) as caller:
        await streamed(caller.url, "talk", "first")
        events = await streamed(caller.url, "talk", "second")
    assert events[-1]["result"]["final_output"] == "CEO: Developer did: second [seen 2]"


async def test_the_remotes_input_required_is_our_pause_and_resume_answers_it(remote: Server) -> None:
    with caller_server(remote.url) as caller:
        paused = await streamed(caller.url, "approve", "[deploy] v4")
        result = paused[-1]["result"]
        assert result["paused"]
        [waiting] = result["interruptions"]
        assert (waiting["agent"], waiting["tool"], waiting["depth"]) == ("Developer", "deploy", 1)
        assert [event["tool"] for event in paused if event["type"] == "approval_requested"] == ["deploy"]
        async with httpx.AsyncClient(timeout=BOUND) as http:
            refused = await http.post(f"{caller.url}/chats/approve/messages", json={"message": "meanwhile"})
        assert refused.status_code == 409  # the chat waits for the decision, as for a local tool
        resumed = await streamed(caller.url, "approve", json.dumps({"approve": [waiting["call_id"]]}),
                                 path="resume:stream")
    assert resumed[-1]["result"]["final_output"] == "CEO: Developer did: [deploy] v4 (deployed to prod) [seen 1]"


async def test_a_remote_killed_mid_turn_is_a_clear_error_and_the_next_turn_works_once_it_is_back(
    tmp_path: Path,
) -> None:
    gate = Gate()
    port = free_port()
    remote = remote_server(tmp_path, env=gate.env, port=port)
    try:
        with caller_server(remote.url) as caller:
            turn = asyncio.create_task(streamed(caller.url, "killed", "[hold] the report"))
            pid, _ = await gate.next_arrival()  # the remote Developer is mid-turn
            os.kill(pid, signal.SIGKILL)
            events = await asyncio.wait_for(turn, BOUND)
            remote.process.wait(BOUND)
            output = events[-1]["result"]["final_output"]
            assert output.startswith("CEO: Error: Developer failed to answer: RemoteAgentError: Remote agent "
                                     "'Developer' could not be reached after 3 attempt(s)"), output
            remote.stop()
            gate.open()
            remote = remote_server(tmp_path, env=gate.env, port=port)
            again = await streamed(caller.url, "killed", "the report, again")
            async with httpx.AsyncClient() as http:
                threads = (await http.get(f"{caller.url}/chats/killed/threads")).json()["threads"]
    finally:
        remote.stop()
        gate.close()
    assert again[-1]["result"]["final_output"] == "CEO: Developer did: the report, again [seen 2]"
    pair = [item.get("content") if item.get("role") == "user" else "answer" for item in threads["CEO->Developer"]]
    assert pair == ["[hold] the report", "the report, again", "answer"]


async def test_a_remote_built_only_with_the_a2a_sdk_is_a_chart_member(tmp_path: Path) -> None:
    port = free_port()
    process = start_echo(port)
    try:
        url = f"http://127.0.0.1:{port}"
        assert process.stdout is not None
        assert await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), BOUND) == "ready\n"
        agency = a2a_app.build_caller(MemoryThreadStore(), url=url)
        assert agency.agents["Developer"].description == "Says back what it is told."
        stream = agency.get_response_stream("hello there", chat_id="echo")
        events = [event async for event in stream]
    finally:
        process.terminate()
        process.wait(BOUND)
        if process.stdout is not None:
            process.stdout.close()
    assert stream.result.final_output == "CEO: echo: hello there"
    progress = [event for event in events if event.type == "remote_progress"]
    assert [(event.agent, event.kind, event.text) for event in progress] == [("Developer", "status", "echoing")]


def start_echo(port: int, *mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(SUPPORT_DIR / "a2a_echo_server.py"), str(port), *mode],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)


async def test_a_remote_answering_out_of_order_is_read_in_full(tmp_path: Path) -> None:
    port = free_port()
    process = start_echo(port, "disorder")
    try:
        assert process.stdout is not None
        assert await asyncio.wait_for(asyncio.to_thread(process.stdout.readline), BOUND) == "ready\n"
        agency = a2a_app.build_caller(MemoryThreadStore(), url=f"http://127.0.0.1:{port}")
        result = await agency.get_response("out of order", chat_id="disorder")
        threads = await agency.get_threads("disorder")
    finally:
        process.terminate()
        process.wait(BOUND)
        if process.stdout is not None:
            process.stdout.close()
    assert result.final_output == "CEO: echo: out of order\n(and again)"
    pair = threads["CEO->Developer"]
    assert [pair[0]["content"], pair[-1]["content"][0]["text"]] == ["out of order", "echo: out of order\n(and again)"]


async def test_a_slow_remote_times_out_with_a_clear_error(tmp_path: Path) -> None:
    gate = Gate()
    remote = remote_server(tmp_path, env=gate.env)
    try:
        agency = a2a_app.build_caller(MemoryThreadStore(), url=remote.url, reply_timeout=0.5, retries=0)
        result = await agency.get_response("[hold] slowly", chat_id="slow")
        _, held = await gate.next_arrival()
        held.sendall(b"go\n")
        held.close()
    finally:
        remote.stop()
        gate.close()
    assert result.final_output == (
        "CEO: Error: Developer failed to answer: RemoteAgentError: Remote agent 'Developer' did not answer within "
        "0.5 s."
    )


async def test_the_depth_travels_with_the_message(tmp_path: Path) -> None:
    remote = remote_server(tmp_path, factory="a2a_app:build_shallow_remote")
    try:
        agency = a2a_app.build_caller(MemoryThreadStore(), url=remote.url)
        result = await agency.get_response("[qa] deep work", chat_id="depth")
    finally:
        remote.stop()
    assert "the depth limit (max_recursion_depth=1) is reached" in result.final_output


async def test_a_message_over_the_remotes_limit_is_a_clear_error_and_nothing_is_lost(tmp_path: Path) -> None:
    remote = remote_server(tmp_path, None, None, "a2a_app:build_remote", "--max-body-bytes", "4096")
    try:
        agency = a2a_app.build_caller(MemoryThreadStore(), url=remote.url)
        large = await agency.get_response("x" * 8000, chat_id="large")
        small = await agency.get_response("a small one", chat_id="large")
        threads = await agency.get_threads("large")
    finally:
        remote.stop()
    assert large.final_output.startswith(
        "CEO: Error: Developer failed to answer: RemoteAgentError: Remote agent 'Developer' refused the message"
    ), large.final_output
    assert "413" in large.final_output
    assert small.final_output == "CEO: Developer did: a small one [seen 1]"  # the large one never reached it
    sent = [item["content"] for item in threads["CEO->Developer"] if item.get("role") == "user"]
    assert sent == ["x" * 8000, "a small one"]


def test_a_card_that_does_not_parse_or_cannot_be_fetched_is_a_clear_config_error() -> None:
    class BadCard(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = b'{"name": 3, "supportedInterfaces": "nope"'
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return None

    server = http.server.HTTPServer(("127.0.0.1", 0), BadCard)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        with pytest.raises(ConfigError, match="its agent card does not parse as an A2A Agent Card"):
            a2a_app.build_caller(url=f"http://127.0.0.1:{server.server_address[1]}")
    finally:
        server.shutdown()
        server.server_close()
    with pytest.raises(ConfigError, match=r"its agent card could not be fetched .*pass description="):
        a2a_app.build_caller(url=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(ConfigError, match=r"url must be an http"):
        a2a_app.build_caller(url="ftp://example")


async def test_a_remote_that_is_down_fails_the_send_and_the_chat_stays_consistent() -> None:
    agency = a2a_app.build_caller(MemoryThreadStore(), url=f"http://127.0.0.1:{free_port()}",
                                  description="Not up.", retries=1)
    result = await agency.get_response("anyone?", chat_id="down")
    assert "Developer failed to answer: RemoteAgentError" in result.final_output
    threads = await agency.get_threads("down")
    assert [item.get("content") for item in threads["CEO->Developer"]] == ["anyone?"]
    assert issubclass(RemoteAgentError, Exception)
