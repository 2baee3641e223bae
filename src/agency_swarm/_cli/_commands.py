"""The `agency-swarm` command (typer + rich): run an agency from a config file, draw its chart, run the demo."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.text import Text

from .._base._errors import AgencySwarmError, AttachmentError, ConfigError, ModelAuthenticationError, StoreError
from .._base._extras import MissingExtra
from .._config._python_object import load_python_object
from ._demo import DEFAULT_MESSAGE
from ._serve_options import (
    FLAG,
    AccessLogOption,
    AdditionalInstructionsOption,
    AdminOption,
    AdminScopeOption,
    AgencyOption,
    AuthTokenEnvOption,
    AuthTokensEnvOption,
    ContextSchemaOption,
    CorsOriginOption,
    FactoryOption,
    HostOption,
    InsecureOption,
    JwksUrlOption,
    JwtAudienceOption,
    JwtIssuerOption,
    JwtSecretEnvOption,
    LogFormatOption,
    MaxBodyBytesOption,
    MetricsOption,
    PortOption,
    ServeConfigArgument,
    StoreOption,
    WorkersOption,
    serve_settings,
)

if TYPE_CHECKING:
    from .._agency._agency import Agency
    from ._terminal import TerminalChat

USAGE_ERROR = 2
"""Exit code for bad input (missing file, invalid config, unknown agent): nothing ran."""
STARTUP_FAILURE = 3
"""`serve`'s exit code when the server cannot start (its store unreachable, a worker failing), as uvicorn's."""

app = typer.Typer(
    name="agency-swarm",
    help="Teams of openai-agents agents that message each other through a chart.",
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def run_app(argv: Sequence[str] | None = None) -> int:
    """Run the command line `argv` (default: sys.argv[1:]); returns the exit code instead of exiting."""
    try:
        app(args=None if argv is None else list(argv), prog_name="agency-swarm")
    except SystemExit as done:
        code = done.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def _print_version(asked: bool) -> None:
    if asked:
        from importlib.metadata import PackageNotFoundError, version

        try:
            installed = version("agency-swarm-sdk")
        except PackageNotFoundError:  # run from a source tree that was never installed
            installed = "unknown (not installed)"
        typer.echo(f"agency-swarm {installed}")
        raise typer.Exit(0)


@app.callback(invoke_without_command=True)
def _overview(
    context: typer.Context,
    version: Annotated[
        bool,
        typer.Option("--version", help="Print the installed version and exit.", callback=_print_version,
                     is_eager=True, metavar=FLAG),
    ] = False,
) -> None:
    if context.invoked_subcommand is None:  # a short reminder, like git's, rather than the full help page
        commands = ", ".join(sorted(context.command.commands))  # type: ignore[attr-defined]
        typer.echo(f"usage: agency-swarm COMMAND [ARGS]...\n\ncommands: {commands}\n")
        typer.echo("Run `agency-swarm COMMAND --help` for a command's options; `agency-swarm demo` to see it work.")


# -- errors ------------------------------------------------------------------------------------------------------


def fail(message: str, code: int = USAGE_ERROR) -> NoReturn:
    """One red line on stderr, no traceback, then exit."""
    print_error(message)
    raise typer.Exit(code)


def print_error(message: str) -> None:
    Console(stderr=True).print(Text(f"Error: {' '.join(message.split())}", style="red"), soft_wrap=True)


# -- loading an agency ---------------------------------------------------------------------------------------------


def load_agency(
    config: Path, *, threads_dir: Path | None = None, models: str | None = None, toolkits: str | None = None
) -> Agency:
    """The agency of a config file, or a one-line error and exit code 2; errors name --models and --toolkits."""
    from .._agency._agency import Agency
    from .._config._loader import load_agency as from_config
    from .._config._source import CLI_ARGUMENTS

    _check_config_path(config)
    try:
        return from_config(
            Agency, config, threads_dir=threads_dir,
            models=None if models is None else load_python_object("--models", models),
            toolkits=None if toolkits is None else load_python_object("--toolkits", toolkits),
            arguments=CLI_ARGUMENTS,
        )
    except (AgencySwarmError, OSError) as error:
        fail(str(error))


def load_chart(config: Path) -> Agency:
    """The agency of a config file for drawing only (no tools, models or store needed), or a one-line error."""
    from .._agency._agency import Agency
    from .._config._loader import load_chart as chart_of

    _check_config_path(config)
    try:
        return chart_of(Agency, config)
    except (AgencySwarmError, OSError) as error:
        fail(str(error))


def _check_config_path(config: Path) -> None:
    if not config.exists():
        fail(f"Config file not found: {config}. Pass the path of an agency's YAML or JSON file.")
    if not config.is_file():
        fail(f"{config} is not a file. Pass the path of an agency's YAML or JSON file.")


# -- commands ------------------------------------------------------------------------------------------------------

ConfigArgument = Annotated[
    Path, typer.Argument(help="The agency's YAML (.yaml/.yml) or JSON file.", show_default=False)
]
ToolkitsOption = Annotated[
    str | None,
    typer.Option(
        "--toolkits",
        help="The toolkits the config's agents name: FILE.py:NAME or module:NAME, NAME being a {toolkit name: "
        "\\[tool, ...]} mapping or a function returning one.",  # \[: a literal bracket, not rich markup
        show_default=False,
    ),
]
DurableOption = Annotated[
    bool,
    typer.Option(
        "--durable", help="Run turns as DBOS workflows in the PostgreSQL --store: any worker finishes a dead "
        "worker's turns; Idempotency-Key, background turns, resumable streams (needs the \\[durable] extra).",
        metavar=FLAG,
    ),
]
AgUiOption = Annotated[
    bool,
    typer.Option("--ag-ui", help="Also serve POST /ag-ui for AG-UI clients (needs the \\[ag-ui] extra).", metavar=FLAG),
]
UiOption = Annotated[
    bool,
    typer.Option(
        "--ui", help="Also serve the web chat page at /ui (self-contained; behind the same auth).", metavar=FLAG
    ),
]
DurableQueueOption = Annotated[
    str | None,
    typer.Option(
        "--durable-queue", help="With --durable: the agency's queue (a-z, 0-9, _, -). Default: a queue named after "
        "the agency's chart. A queue another agency's workers use is refused at start.", show_default=False,
    ),
]
A2AOption = Annotated[
    bool,
    typer.Option(
        "--a2a", help="Also serve the agency as an A2A agent: Agent Card at /.well-known/agent-card.json, JSON-RPC "
        "at /a2a/jsonrpc, HTTP+JSON at /a2a/rest (needs the \\[a2a] extra).", metavar=FLAG,
    ),
]
StreamWriteTimeoutOption = Annotated[
    float,
    typer.Option(
        "--stream-write-timeout",
        help="Seconds an event stream's client may take nothing before it is dropped (the turn goes on).",
    ),
]
ModelsOption = Annotated[
    str | None,
    typer.Option(
        "--models",
        help="Models from Python instead of the config's model names: FILE.py:NAME or module:NAME, NAME being an "
        "agents.Model, a {agent or model name: Model} mapping, or a function returning one (e.g. scripted models "
        "from agency_swarm.testing for an offline run).",
        show_default=False,
    ),
]


@app.command("run")
def run_command(
    config: ConfigArgument,
    message: Annotated[
        str | None,
        typer.Option("--message", "-m", help="Send this one message, print the reply, and exit.", show_default=False),
    ] = None,
    chat_id: Annotated[
        str, typer.Option("--chat-id", help="The chat to continue (or start); stored chats resume where they were.")
    ] = "default",
    threads_dir: Annotated[
        Path | None,
        typer.Option("--threads-dir", help="Keep chats as files in this directory (overrides the config's store).",
                     show_default=False),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="The entry point to talk to (default: the config's first entry point).",
                     show_default=False),
    ] = None,
    models: ModelsOption = None,
    toolkits: ToolkitsOption = None,
    attach: Annotated[
        list[Path] | None,
        typer.Option("--attach", help="Send this image or file (a PDF, say) with the first message; repeat for more. "
                     "In the chat, `/attach PATH` adds one to the next message.", show_default=False),
    ] = None,
) -> None:
    """Chat with an agency in the terminal. Ctrl-C cancels the current turn; Ctrl-C again, Ctrl-D or `exit` quits."""
    from .._threads._manager import check_chat_id

    try:
        check_chat_id(chat_id)
    except ConfigError as error:
        fail(str(error))
    agency = load_agency(config, threads_dir=threads_dir, models=models, toolkits=toolkits)
    try:
        agency.entry_point(agent)  # the chart's rule, as in Python and over HTTP
    except ConfigError as error:
        fail(f"--agent: {error}")
    parts = _attachments(agency, attach or [])
    raise typer.Exit(_chat(agency, message=message, chat_id=chat_id, agent=agent, attachments=parts))


def _attachments(agency: Agency, paths: list[Path]) -> list[dict[str, Any]]:
    """The parts of the `--attach` files, each checked now: a bad one fails before any turn (exit 2)."""
    from ._attach import attachment

    limits = agency.thread_manager.attachments.limits
    parts = []
    for path in paths:
        try:
            parts.append(attachment(path, limits))
        except AttachmentError as error:
            fail(f"--attach: {error}")
    if len(parts) > limits.max_parts:
        fail(f"--attach: {len(parts)} files, over the agency's max_parts={limits.max_parts} for one message.")
    return parts


def _chat(
    agency: Agency, *, message: str | None, chat_id: str, agent: str | None, attachments: list[dict[str, Any]]
) -> int:
    from ._terminal import TerminalChat, terminal_reader

    if not os.environ.get("OPENAI_API_KEY"):  # traces could not be exported anyway; the SDK would warn at exit
        import agents

        agents.set_tracing_disabled(True)
    console = Console()
    live = console.is_terminal and not console.is_dumb_terminal
    with asyncio.Runner() as runner:
        session = TerminalChat(
            agency, runner=runner, out=sys.stdout, agent=agent, chat_id=chat_id, echo_user=message is not None,
            console=console if live else None, report_error=print_error, echo_input=not sys.stdin.isatty(),
            read=terminal_reader(), attachments=attachments,
        )
        try:
            if message is not None:
                return _single_turn(session, message)
            try:
                _greet(session, runner)
            except AgencySwarmError as error:  # e.g. the stored chat cannot be read
                print_error(f"{type(error).__name__}: {error}")
                return 1
            return session.interact()
        finally:
            runner.run(agency.aclose())


def _single_turn(session: TerminalChat, message: str) -> int:
    try:
        code = session.send_once(message)
    except ModelAuthenticationError as error:  # no key, or a refused one: set-up to fix, like a bad config
        print_error(f"{type(error).__name__}: {error}")
        return USAGE_ERROR
    except Exception as error:  # the turn failed: say why in one line; stored items stay stored
        print_error(f"{type(error).__name__}: {error}")
        return 1
    return code


def _greet(session: TerminalChat, runner: asyncio.Runner) -> None:
    manager = session.agency.thread_manager
    if manager.store is not None:
        runner.run(manager.ensure_loaded(session.chat_id))
        earlier = len(manager.get_threads(session.chat_id).get(f"user->{session.agent}", []))
        where = f"chat {session.chat_id!r}" + (f", {earlier} stored items" if earlier else ", new")
    else:
        where = f"chat {session.chat_id!r}, kept in memory only (--threads-dir keeps it)"
    session.printer.say(
        f"Talking to {session.agent} ({where}). Ctrl-C cancels a turn; Ctrl-C again, Ctrl-D or `exit` quits."
    )


class ChartFormatName(StrEnum):
    mermaid = "mermaid"
    html = "html"


@app.command("serve")
def serve_command(
    config: ServeConfigArgument = None,
    factory: FactoryOption = None,
    store: StoreOption = None,
    workers: WorkersOption = 1,
    host: HostOption = "127.0.0.1",
    port: PortOption = 8000,
    auth_token_env: AuthTokenEnvOption = None,
    max_body_bytes: MaxBodyBytesOption = 1024 * 1024,
    access_log: AccessLogOption = True,
    stream_write_timeout: StreamWriteTimeoutOption = 30.0,
    models: ModelsOption = None,
    toolkits: ToolkitsOption = None,
    durable: DurableOption = False,
    durable_queue: DurableQueueOption = None,
    a2a: A2AOption = False,
    ag_ui: AgUiOption = False,
    ui: UiOption = False,
    auth_tokens_env: AuthTokensEnvOption = None,
    jwt_secret_env: JwtSecretEnvOption = None,
    jwks_url: JwksUrlOption = None,
    jwt_issuer: JwtIssuerOption = None,
    jwt_audience: JwtAudienceOption = None,
    admin_scope: AdminScopeOption = None,
    admin: AdminOption = None,
    insecure: InsecureOption = False,
    context_schema: ContextSchemaOption = None,
    allow_additional_instructions: AdditionalInstructionsOption = False,
    metrics: MetricsOption = False,
    log_format: LogFormatOption = "text",
    agency: AgencyOption = None,
    cors_origin: CorsOriginOption = None,
) -> None:
    """Serve the agency over HTTP (JSON and Server-Sent Events) with uvicorn; workers share the --store."""
    try:
        from ..serving._serve import serve

        settings = serve_settings(dict(locals()))
        serve(settings, workers=workers, host=host, port=port, access_log=access_log, log_format=log_format)
    except StoreError as error:  # the store cannot be reached: as a worker that fails to start (a manager retries)
        fail(str(error), code=STARTUP_FAILURE)
    except (AgencySwarmError, MissingExtra) as error:
        fail(str(error))


@app.command("visualize")
def visualize_command(
    config: ConfigArgument,
    format: Annotated[
        ChartFormatName, typer.Option("--format", "-f", help="Mermaid text, or a self-contained HTML page.")
    ] = ChartFormatName.mermaid,
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Write to this file instead of stdout.", show_default=False)
    ] = None,
    models: Annotated[str | None, typer.Option("--models", hidden=True)] = None,
    toolkits: Annotated[str | None, typer.Option("--toolkits", hidden=True)] = None,
) -> None:
    """Draw the agency's chart: who the user may address and who may message whom (from the file alone)."""
    del models, toolkits  # accepted as before, but a drawing needs neither tools nor models
    agency = load_chart(config)
    text = agency.visualize(format.value)
    if output is None:
        sys.stdout.write(text)
        return
    try:
        output.write_text(text, encoding="utf-8")
    except OSError as error:
        fail(f"Cannot write {output}: {error.strerror or error}.")
    typer.echo(f"Wrote the {format.value} chart of {len(agency.agents)} agents to {output}")


@app.command("demo")
def demo_command(
    message: Annotated[str, typer.Option("--message", "-m", help="What the user asks the CEO.")] = DEFAULT_MESSAGE,
) -> None:
    """Stream a CEO -> Developer -> QA agency to the terminal (offline unless OPENAI_API_KEY is set)."""
    from ._demo import main as demo_main

    try:
        code = demo_main(message)
    except BrokenPipeError:  # e.g. `agency-swarm demo | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 1
    raise typer.Exit(code)
