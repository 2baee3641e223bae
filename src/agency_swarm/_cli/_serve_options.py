"""The options of `agency-swarm serve`, one alias each, so the command's signature stays one line per option."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from .._base._errors import ConfigError

if TYPE_CHECKING:
    from ..serving._serve import ServeSettings

FLAG = ""
"""The metavar of a flag: shown as `--insecure`, not `--insecure <bool>`, as if it took a value."""

ServeConfigArgument = Annotated[
    list[Path] | None,
    typer.Argument(
        help="The agency's YAML or JSON file (or --factory); several files: each agency under /<file stem>.",
        show_default=False,
    ),
]
AgencyOption = Annotated[
    list[str] | None,
    typer.Option(
        "--agency", help="NAME=FILE: serve the agency file under /NAME (repeat for more).", show_default=False,
        metavar="<str>",
    ),
]
CorsOriginOption = Annotated[
    list[str] | None,
    typer.Option(
        "--cors-origin", help="Let browser pages from this origin (https://host[:port]) call the server (repeat "
        "for more); none by default.", show_default=False, metavar="<str>",
    ),
]
FactoryOption = Annotated[
    str | None,
    typer.Option(
        "--factory", help="FILE.py:function or module:function (a module in the current directory, or on "
        "PYTHONPATH) that builds the agency on the store it is given, instead of a file.",
        show_default=False,
    ),
]
StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store", help="Where chats live: a PostgreSQL URL, postgresql://HOST/DB (with user@ and :port as "
        "needed; needed for --workers > 1), an SQLite one, sqlite:///chats.db, or memory. Default: the agency file's "
        "store: (else memory).", show_default=False,
    ),
]
WorkersOption = Annotated[int, typer.Option("--workers", help="Worker processes.")]
HostOption = Annotated[str, typer.Option("--host", help="Address to listen on.")]
PortOption = Annotated[int, typer.Option("--port", help="Port to listen on.")]
AuthTokenEnvOption = Annotated[
    str | None,
    typer.Option(
        "--auth-token-env", help="Require `Authorization: Bearer TOKEN`, TOKEN read from this environment "
        "variable (never from the command line): one principal.", show_default=False,
    ),
]
MaxBodyBytesOption = Annotated[int, typer.Option("--max-body-bytes", help="Larger requests get 413.")]
AccessLogOption = Annotated[
    bool, typer.Option("--access-log/--no-access-log", help="Log every request.", metavar=FLAG)
]
AuthTokensEnvOption = Annotated[
    str | None,
    typer.Option(
        "--auth-tokens-env", help='Static tokens per principal: this environment variable holds {"principal": '
        '"token", ...} as JSON.', show_default=False,
    ),
]
JwtSecretEnvOption = Annotated[
    str | None,
    typer.Option(
        "--jwt-secret-env", help="Accept JWTs signed HS256 with the secret (32 bytes or more) in this environment "
        "variable; `sub` is the principal.", show_default=False,
    ),
]
JwksUrlOption = Annotated[
    str | None,
    typer.Option("--jwks-url", help="Accept JWTs signed RS256/ES256 by a key at this JWKS URL.", show_default=False),
]
JwtIssuerOption = Annotated[
    str | None, typer.Option("--jwt-issuer", help="The `iss` a JWT must carry.", show_default=False)
]
JwtAudienceOption = Annotated[
    str | None, typer.Option("--jwt-audience", help="The `aud` a JWT must carry.", show_default=False)
]
AdminScopeOption = Annotated[
    str | None,
    typer.Option("--admin-scope", help="A JWT scope that may read every chat.", show_default=False),
]
AdminOption = Annotated[
    list[str] | None,
    typer.Option(
        "--admin", help="A principal that may read every chat (repeat for more).", show_default=False, metavar="<str>"
    ),
]
InsecureOption = Annotated[
    bool,
    typer.Option("--insecure", help="Serve without authentication on an address other than loopback.", metavar=FLAG),
]
ContextSchemaOption = Annotated[
    str | None,
    typer.Option(
        "--context-schema", help="module:Model, the pydantic model a request's `context` must match; it reaches "
        "tools as RequestContext.data.", show_default=False,
    ),
]
AdditionalInstructionsOption = Annotated[
    bool,
    typer.Option(
        "--allow-additional-instructions",
        help="Requests may add `additional_instructions` to the entry agent's instructions: whoever can call the "
        "server can then steer the agents (prompt injection).", metavar=FLAG,
    ),
]
MetricsOption = Annotated[
    bool,
    typer.Option("--metrics", help="Serve GET /metrics for Prometheus, summed over the workers.", metavar=FLAG),
]
LogFormatOption = Annotated[
    str,
    typer.Option("--log-format", help="text, or json: one JSON object per line, with the request id and principal."),
]


def serve_sources(files: list[Path], named: list[str]) -> tuple[str | None, tuple[tuple[str, str], ...]]:
    """`serve`'s agency files: one file alone (served at the root, as always), else (name, file) pairs, each file
    named by its stem or by `--agency NAME=FILE`."""
    if len(files) == 1 and not named:
        return str(files[0]), ()
    pairs = [(path.stem, str(path)) for path in files]
    for entry in named:
        name, equals, path = entry.partition("=")
        if not equals or not name or not path:
            raise ConfigError(f"--agency {entry!r}: write NAME=FILE, e.g. --agency support=support.yaml.")
        pairs.append((name, path))
    return None, tuple(pairs)


def serve_settings(options: dict[str, Any]) -> ServeSettings:
    """`serve`'s ServeSettings from its command line (`options`: the command's arguments by name)."""
    from ..serving._auth._serve_options import AuthOptions
    from ..serving._serve import ServeSettings

    auth = AuthOptions(
        tokens_env=options["auth_tokens_env"], jwt_secret_env=options["jwt_secret_env"], jwks_url=options["jwks_url"],
        issuer=options["jwt_issuer"], audience=options["jwt_audience"], admin_scope=options["admin_scope"],
        admins=tuple(options["admin"] or ()), insecure=options["insecure"],
    )
    single, agencies = serve_sources(options["config"] or [], options["agency"] or [])
    return ServeSettings(
        config=single, factory=options["factory"], store=options["store"], agencies=agencies,
        cors_origins=tuple(options["cors_origin"] or ()), auth_token_env=options["auth_token_env"],
        max_body_bytes=options["max_body_bytes"], models=options["models"], toolkits=options["toolkits"],
        durable=options["durable"], durable_queue=options["durable_queue"],
        stream_write_timeout=options["stream_write_timeout"], a2a=options["a2a"], ag_ui=options["ag_ui"],
        ui=options["ui"], auth=auth, context_schema=options["context_schema"],
        allow_additional_instructions=options["allow_additional_instructions"], metrics=options["metrics"],
    )
