"""README.md and every page of the guide (docs/**/*.md) are tested: each page's fenced `bash` and `python` blocks
run, offline, in order, unless a marker says otherwise. Each page runs on its own, in a scratch directory of its own.

A marker is an HTML comment on the lines just before a block (GitHub and the site do not show it); `docs-test:`
may stand for `readme-test:`:
- `<!-- readme-test: skip (why) -->`: not run (e.g. it needs an API key); counted and reported.
- `<!-- readme-test: except "PREFIX" (why) -->` on a bash block: its commands run, those starting with PREFIX not.
- `<!-- readme-test: output-of "COMMAND" -->`: the block is exactly what COMMAND (run earlier) printed.
- `<!-- readme-test: file NAME -->`: the block is written to NAME in the scratch directory (later blocks use it).
- `<!-- readme-test: a2a -->`: the A2A blocks: the bash block's `agency-swarm serve --a2a` runs (a scripted Developer
  agency in place of its factory) and the python block after it calls that process over A2A.
- `<!-- readme-test: serve -->`: the serving block. A real `agency-swarm serve` (a scripted agency, the token in
  API_TOKEN) listens on 127.0.0.1:8000, or on a free port when 8000 is taken, and the README's exact `curl` line
  runs against it (only `localhost:8000` is rewritten then).
- `<!-- docs-test: deploy -->`: the multi-user deployment block. Its `agency-swarm serve` line runs with every
  option as written but four: `--factory` (a scripted agency), `--store` (the tests' PostgreSQL), `--host` (loopback)
  and `--port` (8000 or a free one); its `export` line's JWT secret is the test's and its OTLP endpoint the test's
  receiver. Its `curl` lines run with `ALICE_TOKEN` and `BOB_TOKEN` set to JWTs the test signs with that secret
  (`localhost:8000` and the chat id, given the test run's prefix, rewritten); the answers, `/metrics` and the
  spans the receiver gets are checked.

Blocks in other languages (yaml, ini, json, text, ...) are not run. Commands run with OPENAI_API_KEY unset and
`.venv/bin` first on PATH: `bash scripts/...` from the repository root (as the set-up says), the others in a scratch
directory; optional arguments written `[like this]` are left out.
Python blocks of a page run one after another with top-level `await` allowed, each in a namespace that first holds
offline stand-ins the pages assume: `ceo`, `dev`, `agency` (scripted models) and `web_search`; a block may redefine
them.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import io
import json
import os
import re
import shlex
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from agency_swarm import Agency, Agent, function_tool
from agency_swarm.testing import ModelCall, ScriptedModel, Step, send_message

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]
BIN = Path(sys.executable).parent
MARKER = re.compile(r"<!--\s*(?:readme|docs)-test:\s*(?P<mode>[\w-]+)(?P<rest>.*?)-->", re.DOTALL)
FENCE = re.compile(r"^```(?P<lang>[\w-]*)\n(?P<body>.*?)^```\n", re.DOTALL | re.MULTILINE)
SERVE_TOKEN = "readme-test-token"
COMMAND_TIMEOUT_S = 60


@dataclass
class Block:
    lang: str
    body: str
    line: int
    mode: str | None = None
    argument: str = ""

    def quoted(self) -> list[str]:
        return re.findall(r'"([^"]+)"', self.argument)

    def commands(self) -> list[str]:
        """The block's shell commands: one a line, comments and `[optional arguments]` left out."""
        found = []
        for line in self.body.splitlines():
            command = re.sub(r"\s+\[[^\]]*\]", "", _without_comment(line)).strip()
            if command:
                found.append(command)
        return found


def _without_comment(line: str) -> str:
    """`cmd --x 'a # b'  # note` -> `cmd --x 'a # b'`: a `#` starts a comment only outside quotes, after a space."""
    quote = None
    for index, char in enumerate(line):
        if quote is not None:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index]
    return line


def readme_blocks(text: str) -> list[Block]:
    blocks = []
    for found in FENCE.finditer(text):
        before = text[: found.start()].rstrip()
        block = Block(lang=found["lang"], body=found["body"], line=text.count("\n", 0, found.start()) + 1)
        marker = MARKER.search(before.rsplit("\n\n", 1)[-1]) if before.endswith("-->") else None
        if marker is not None:
            block.mode, block.argument = marker["mode"], marker["rest"].strip()
        blocks.append(block)
    return blocks


# -- offline stand-ins for what the README's fragments assume --------------------------------------------------


def _ceo_script(call: ModelCall) -> Step:
    if not call.tool_outputs:
        return send_message("Developer", f"Please do: {call.last_user_message}")
    return f"Done: {call.tool_outputs[-1]}"


def stand_ins() -> dict[str, Any]:
    @function_tool
    def web_search(query: str) -> str:
        """Search the web."""
        return f"results for {query}"

    ceo = Agent(name="CEO", description="Talks to the user.", model=ScriptedModel(_ceo_script))
    dev = Agent(name="Developer", description="Writes code.", model=ScriptedModel.each_turn(["written"]))
    return {"ceo": ceo, "dev": dev, "agency": Agency([ceo, [ceo, dev]]), "web_search": web_search}


# -- running blocks ----------------------------------------------------------------------------------------------


def command_env(**extra: str) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    env["PATH"] = os.pathsep.join([str(BIN), env.get("PATH", "")])
    env.update(extra)
    return env


def run_command(command: str, scratch: Path, **env: str) -> subprocess.CompletedProcess[str]:
    where = ROOT if command.startswith("bash scripts/") else scratch
    done = subprocess.run(
        command, shell=True, cwd=where, env=command_env(**env), capture_output=True, text=True,
        timeout=COMMAND_TIMEOUT_S, check=False, stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 0, f"command `{command}` failed ({done.returncode}):\n{done.stdout}{done.stderr}"
    return done


def run_python(block: Block, namespace: dict[str, Any], page: str = "README.md") -> None:
    namespace.update(stand_ins())
    code = compile(block.body, f"{page}:{block.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    with contextlib.redirect_stdout(io.StringIO()):
        pending = eval(code, namespace)  # a coroutine when the block awaits at top level
        if pending is not None:
            asyncio.run(_finish(pending))


async def _finish(pending: Any) -> None:
    await pending


def write_file(block: Block, scratch: Path) -> None:
    target = scratch / block.argument.split()[0]
    target.write_text(block.body)
    for named in re.findall(r"instructions_file:\s*([^\s,}]+)", block.body):  # files it names, so it loads
        (target.parent / named).parent.mkdir(parents=True, exist_ok=True)
        (target.parent / named).write_text("Write the answer.")


@dataclass
class Tally:
    python: int = 0
    commands: int = 0
    outputs: int = 0
    files: int = 0
    not_run: list[str] = field(default_factory=list)


def page_name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def all_blocks() -> list[tuple[str, Block]]:
    return [(page_name(page), block) for page in PAGES for block in readme_blocks(page.read_text())]


def run_page(page: Path, scratch: Path) -> Tally:
    """Every block of one page, in order, as the module docstring says."""
    tally = Tally()
    printed: dict[str, str] = {}  # command -> its stdout, for output-of blocks
    namespace: dict[str, Any] = {}  # shared by the page's python blocks, as in one notebook
    for block in readme_blocks(page.read_text()):
        where = f"{page_name(page)}:{block.line}"
        if block.mode in ("skip", "serve", "a2a", "deploy"):  # serve, a2a, deploy: the tests below run them
            tally.not_run.append(f"{where} {block.mode} {block.argument}")
        elif block.mode == "output-of":
            assert printed[block.quoted()[0]] == block.body, f"{where} is not what the command prints"
            tally.outputs += 1
        elif block.mode == "file":
            write_file(block, scratch)
            tally.files += 1
        elif block.lang == "python":
            run_python(block, namespace, page_name(page))
            tally.python += 1
        elif block.lang == "bash":
            excluded = block.quoted() if block.mode == "except" else []
            for command in block.commands():
                if any(command.startswith(prefix) for prefix in excluded):
                    tally.not_run.append(f"{where} `{command}`: {block.argument}")
                    continue
                printed[command] = run_command(command, scratch).stdout
                tally.commands += 1
        else:
            assert block.mode is None, f"{where}: marker {block.mode!r} on a {block.lang or 'text'} block"
    return tally


@pytest.mark.parametrize("page", PAGES, ids=page_name)
def test_every_block_of_the_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from postgres_support import POSTGRES_URL

    monkeypatch.chdir(tmp_path)  # files the blocks write land here
    (tmp_path / "photo.png").write_bytes((ROOT / "examples" / "agentflow" / "flag.png").read_bytes())
    (tmp_path / "report.pdf").write_bytes(b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n")  # files it names
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("API_TOKEN", SERVE_TOKEN)
    monkeypatch.setenv("DATABASE_URL", POSTGRES_URL)  # the durable example: the tests' database
    tally = run_page(page, tmp_path)
    print(f"{page_name(page)}: {tally.python} python blocks and {tally.commands} commands ran, {tally.outputs} "
          f"outputs compared, {tally.files} files written; not run: {tally.not_run}")
    if page == README:
        assert tally.python >= 1, tally
        assert tally.commands >= 1, tally
        assert tally.outputs == 1, tally
        assert any("bash scripts/test.sh" in skipped for skipped in tally.not_run), "the test command is not run"


def test_the_guide_runs_its_examples_and_skips_few() -> None:
    """Most blocks run; the few that do not (a real model, an install) say why."""
    blocks = [(page, block) for page, block in all_blocks() if block.lang in ("python", "bash")]
    skipped = [f"{page}:{block.line}" for page, block in blocks if block.mode == "skip"]
    assert sum(block.lang == "python" and block.mode is None for _, block in blocks) >= 24
    assert len(skipped) <= 10, skipped  # each names the test that runs the same instead
    assert all(block.argument.startswith("(") for _, block in blocks if block.mode == "skip"), "a skip says why"


# -- the serving block: a real server and the README's curl line ---------------------------------------------------

SERVED_AGENCY = """\
agents:
  CEO: {description: Talks to the user., model: gpt-4.1-mini, instructions: Delegate.}
  Developer: {description: Does the work., model: gpt-4.1-mini}
chart: {supervisor: CEO, workers: [Developer]}
"""


def readme_port() -> int:
    """8000, as the README's curl line says, when it is free; else any free port (the line is rewritten)."""
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", 8000))
        except OSError:
            probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def test_the_guide_serving_block_answers_its_curl_line(tmp_path: Path) -> None:
    from serving_app import ceo_answer
    from serving_support import start_serve

    [block] = [block for _, block in all_blocks() if block.mode == "serve"]
    commands = block.commands()
    [curl] = [command for command in commands if command.startswith("curl ")]
    assert any(command.startswith("agency-swarm serve agency.yaml") for command in commands)
    assert "API_TOKEN" in next(command for command in commands if command.startswith("export "))
    config = tmp_path / "agency.yaml"
    config.write_text(SERVED_AGENCY)
    port = readme_port()
    server = start_serve(
        [str(config), "--models", "serving_app:config_models", "--auth-token-env", "API_TOKEN"],
        port=port, env={"API_TOKEN": SERVE_TOKEN},
    )
    try:
        line = curl if port == 8000 else curl.replace("localhost:8000", f"localhost:{port}")
        answer = run_command(line, tmp_path, API_TOKEN=SERVE_TOKEN).stdout
    finally:
        server.stop()
    body = json.loads(answer)
    assert re.fullmatch(ceo_answer(1, "Build it"), body["final_output"]), body  # the scripted CEO answered
    assert body["chat_id"] == "c42"
    assert shlex.split(curl)[:3] == ["curl", "-H", "Authorization: Bearer $API_TOKEN"]  # the token from the env


def test_no_fenced_block_hides_from_this_test_by_indentation() -> None:
    """A fence indented (inside a list item) is not one `readme_blocks` sees: it would never run."""
    indented = [
        f"{page_name(page)}:{n}" for page in PAGES
        for n, line in enumerate(page.read_text().splitlines(), 1) if re.match(r"\s+```", line)
    ]
    assert indented == [], f"{indented}: put these blocks at the start of the line"


def test_the_a2a_page_blocks_run_across_two_processes(tmp_path: Path) -> None:
    from serving_support import free_port, start_serve

    bash, python = [block for _, block in all_blocks() if block.mode == "a2a"]
    [command] = bash.commands()
    arguments = shlex.split(command)
    assert arguments[:2] == ["agency-swarm", "serve"]
    assert "--a2a" in arguments
    port = 8001 if _free(8001) else free_port()
    arguments[arguments.index("--factory") + 1] = "a2a_app:build_remote"  # scripted: offline
    arguments[arguments.index("--port") + 1] = str(port)
    server = start_serve(arguments[2:], port=port)
    try:
        namespace = stand_ins()
        body = python.body.replace("localhost:8001", f"localhost:{port}")
        code = compile(body, f"docs/a2a.md:{python.line}", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            pending = eval(code, namespace)
            if pending is not None:
                asyncio.run(_finish(pending))
    finally:
        server.stop()
    assert namespace["dev"].description == "Writes and deploys code."  # from the remote's card
    assert printed.getvalue() == "Done: Developer did: Please do: Ship the login page [seen 1]\n"


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


# -- the deployment block: two JWT users, PostgreSQL, 4 workers, OTLP traces and /metrics, for real -----------------

DEPLOY_FACTORY = "observability_support:build_priced_agency"
DEPLOY_SECRET = "readme-test-jwt-secret-of-at-least-32-bytes"
USERS = ("alice", "bob")


def option(arguments: list[str], name: str) -> str:
    return arguments[arguments.index(name) + 1]


def deploy_arguments(command: str, store: str, port: int) -> list[str]:
    """The documented serve line's arguments: the factory, store, host and port the test's, the rest as written."""
    arguments = shlex.split(command)
    assert arguments[:2] == ["agency-swarm", "serve"], command
    given = {"--factory": DEPLOY_FACTORY, "--store": store, "--host": "127.0.0.1", "--port": str(port)}
    for name, value in given.items():
        arguments[arguments.index(name) + 1] = value
    return arguments[2:]


def deploy_env(export: str, arguments: list[str], receiver_url: str) -> dict[str, str]:
    """What the `export` line sets, for the test: its JWT secret variable, the endpoint at the test's receiver (its
    batches sent every 100 ms); PGPASSWORD is not needed by the tests' database."""
    names = {word.split("=", 1)[0] for word in shlex.split(export)[1:]}
    secret_variable = option(arguments, "--jwt-secret-env")
    assert names == {secret_variable, "PGPASSWORD", "OTEL_EXPORTER_OTLP_ENDPOINT"}, names
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver_url, "OTEL_BSP_SCHEDULE_DELAY": "100"}
    return {secret_variable: DEPLOY_SECRET, **endpoint}


def user_tokens(arguments: list[str]) -> dict[str, str]:
    """ALICE_TOKEN and BOB_TOKEN: HS256 JWTs of `alice` and `bob` for the issuer and audience the line names."""
    import time

    import jwt

    claims = {"iss": option(arguments, "--jwt-issuer"), "aud": option(arguments, "--jwt-audience"),
              "exp": int(time.time()) + 600}
    return {f"{user.upper()}_TOKEN": jwt.encode({**claims, "sub": user}, DEPLOY_SECRET, algorithm="HS256")
            for user in USERS}


def deploy_curl(command: str, port: int, prefix: str) -> str:
    assert any(f"Authorization: Bearer ${user.upper()}_TOKEN" in shlex.split(command) for user in USERS), command
    command = re.sub(r"/chats/([^/\s]+)/", lambda found: f"/chats/{prefix}{found[1]}/", command)
    return command.replace("localhost:8000", f"localhost:{port}")


def deploy_answer(command: str, scratch: Path, tokens: dict[str, str]) -> str:
    """What the curl printed; /metrics read until it counts Alice's turn (the worker that ran it writes its values
    within a flush interval, and another worker may answer the scrape)."""
    if not command.endswith("/metrics"):
        return run_command(command, scratch, **tokens).stdout
    from test_observability import scrape_until

    return scrape_until(lambda: run_command(command, scratch, **tokens).stdout,
                        lambda values: values.get(("agency_swarm_turns_total", (("outcome", "completed"),)), 0) >= 1)


def test_the_deployment_block_serves_two_users_on_postgresql_with_traces_and_metrics(tmp_path: Path) -> None:
    from observability_support import otlp_receiver
    from postgres_support import require_postgres
    from serving_support import chat_prefix, delete_chats, start_serve

    store = require_postgres()
    [block] = [block for _, block in all_blocks() if block.mode == "deploy"]
    commands = block.commands()
    [export] = [command for command in commands if command.startswith("export ")]
    [serve] = [command for command in commands if command.startswith("agency-swarm serve ")]
    curls = [command for command in commands if command.startswith("curl ")]
    assert len(commands) == 2 + len(curls) == 5, commands  # nothing else in the block goes unrun
    port, prefix = readme_port(), chat_prefix("deploy")
    arguments = deploy_arguments(serve, store, port)
    assert option(arguments, "--workers") == "4"
    assert "--metrics" in arguments
    with otlp_receiver() as receiver:
        server = start_serve(arguments, workers=4, port=port, env=deploy_env(export, arguments, receiver.url))
        try:
            tokens = user_tokens(arguments)
            printed = [deploy_answer(deploy_curl(curl, port, prefix), tmp_path, tokens) for curl in curls]
            traced = receiver.wait_for(lambda spans: {"alice", "bob"} <= {
                span.attributes.get("enduser.id") for span in spans} and any(
                span.name == "turn CEO" for span in spans), timeout=60)
        finally:
            server.stop()
            delete_chats(prefix)
    assert traced, [span.name for span in receiver.spans]
    check_deployment_answers(curls, printed)
    check_deployment_trace(receiver.spans)
    assert all(json.loads(line)["message"] for line in server.log if line.strip())  # JSON log lines


def check_deployment_answers(curls: list[str], printed: list[str]) -> None:
    """Alice's turn answered with its cost; Bob got 404 for her chat; /metrics counts the turn, all workers summed."""
    from test_observability import metric_values

    answers = dict(zip(curls, printed, strict=True))
    [turn] = [answers[curl] for curl in curls if "/messages" in curl]
    body = json.loads(turn)
    assert body["final_output"] == "CEO reports: built", body
    assert body["cost_usd"] > 0, body
    assert set(body["cost_by_agent"]) == {"CEO", "Developer"}, body
    [denied] = [answers[curl] for curl in curls if "$BOB_TOKEN" in curl]
    head, _, rest = denied.replace("\r\n", "\n").partition("\n\n")  # curl -i: the head, a blank line, the body
    assert head.split()[:2] == ["HTTP/1.1", "404"], denied
    assert json.loads(rest)["error"]["type"] == "not_found", rest
    [metrics] = [answers[curl] for curl in curls if curl.endswith("/metrics")]
    values = metric_values(metrics)
    assert values[("agency_swarm_turns_total", (("outcome", "completed"),))] == 1, metrics
    assert values[("agency_swarm_cost_usd_total", (("agent", "CEO"), ("model", "gpt-4o")))] > 0


def check_deployment_trace(spans: list[Any]) -> None:
    """Alice's request is one trace: the HTTP span its root, the turn under it; Bob's 404 is a span of his."""
    [root] = [span for span in spans if span.name == "POST /chats/{chat_id}/messages"]
    assert root.attributes["enduser.id"] == "alice"
    assert root.attributes["http.response.status_code"] == 200
    assert root.parent_id == b""
    [turn] = [span for span in spans if span.name == "turn CEO"]
    assert (turn.trace_id, turn.parent_id) == (root.trace_id, root.span_id)
    in_trace = {span.name for span in spans if span.trace_id == root.trace_id}
    assert {"invoke_agent CEO", "invoke_agent Developer", "chat gpt-4o", "chat gpt-4o-mini"} <= in_trace, in_trace
    [denied] = [span for span in spans if span.attributes.get("enduser.id") == "bob"]
    assert denied.attributes["http.response.status_code"] == 404


# -- what a new user looks for: attaching a tool, an approval that pauses, what hooks are given --------------------


def block_with(text: str) -> Block:
    [block] = [block for _, block in all_blocks() if block.lang == "python" and text in block.body]
    return block


def test_the_guide_attaches_a_tool_and_its_approval_example_pauses_on_its_own_tool() -> None:
    namespace: dict[str, Any] = {}
    run_python(block_with("tools=[write_file]"), namespace)
    assert namespace["result"].final_output == "hello.py is written."
    approvals = block_with("needs_approval=True")
    assert "tools=[delete_branch]" in approvals.body  # the tool it defines is the agent's
    paused_first: list[bool] = []
    namespace = {}
    original = Agency.get_response

    async def noting(self: Agency, *args: Any, **kwargs: Any) -> Any:
        result = await original(self, *args, **kwargs)
        paused_first.append(result.paused)
        return result

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Agency, "get_response", noting)
        run_python(approvals, namespace)
    assert paused_first == [True]  # it paused for delete_branch, and was resumed with the approval
    assert namespace["result"].final_output == "Cleaned up."


def test_the_guide_names_each_hook_with_the_event_it_is_given() -> None:
    import inspect

    from agency_swarm import AgencyHooks

    readme = " ".join((ROOT / "docs" / "guides" / "approvals.md").read_text().split())
    for name, method in inspect.getmembers(AgencyHooks, inspect.isfunction):
        if name.startswith("on_"):
            event = method.__annotations__["event"]  # a name: the hooks module postpones its annotations
            assert f"`{name}({event})`" in readme, name
