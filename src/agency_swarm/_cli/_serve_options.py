"""The options of `agency-swarm serve`, one alias each, so the command's signature stays one line per option."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

FLAG = ""
"""The metavar of a flag: shown as `--insecure`, not `--insecure <bool>`, as if it took a value."""

ServeConfigArgument = Annotated[
    Path | None, typer.Argument(help="The agency's YAML or JSON file (or --factory).", show_default=False)
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
