"""An app's access rules, built once from create_app's options: the authenticator, the chat index, the request rules."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import FastAPI
from pydantic import BaseModel

from ..._base._errors import ConfigError
from ..._base._redact import secret_free_logger
from ..._threads._chat_index import ChatIndex, MemoryChatIndex
from ..._threads._chat_indexes import chat_index_for
from ..._threads._store import ThreadStore
from ._chats import add_chat_list_route
from ._context import RequestRules, show_context_schema
from ._jwt import Authenticator
from ._owners import ChatOwners
from ._settings import AuthSettings, legacy_settings

logger = secret_free_logger("agency_swarm.serving")


@dataclass
class Access:
    """`clock`: the wall clock a chat's activity is read from (seconds since the epoch; tests set their own).
    `owners`: the ownership rules on `index`, one for every route that names a chat."""

    authenticator: Authenticator | None
    index: ChatIndex
    rules: RequestRules
    clock: Callable[[], float] = field(default=time.time)
    owners: ChatOwners = field(init=False)

    def __post_init__(self) -> None:
        self.owners = ChatOwners(self.index, lambda: self.clock())

    def add_routes(self, app: FastAPI) -> None:
        """GET /chats, the request rules the routes read, and the declared context schema in the OpenAPI document."""
        app.state.request_rules = self.rules
        add_chat_list_route(app, self.index, protected=self.authenticator is not None)
        if self.rules.context_schema is not None:
            show_context_schema(app, self.rules.context_schema)


def access_for(
    store: ThreadStore, *, auth_token: str | None, auth: AuthSettings | None,
    context_schema: type[BaseModel] | None, allow_additional_instructions: bool,
) -> Access:
    """The app's Access; ConfigError for options that do not fit (checked before the agency is built)."""
    if auth_token is not None and (not isinstance(auth_token, str) or not auth_token.strip()):
        raise ConfigError("auth_token must be a non-empty str, or None to serve without authentication.")
    if auth_token is not None and auth is not None:
        raise ConfigError("Pass auth_token or auth, not both (AuthSettings(tokens=...) holds several tokens).")
    settings = legacy_settings(auth_token) if auth_token is not None else auth
    if settings is not None:
        if not isinstance(settings, AuthSettings):
            raise ConfigError(f"auth must be an agency_swarm.serving.AuthSettings, got {type(settings).__name__}.")
        settings.check()
    rules = RequestRules(context_schema, allow_additional_instructions)
    rules.check()
    index = chat_index_for(store)
    if index is None:
        if settings is not None:
            raise ConfigError(
                f"{type(store).__name__} keeps no chat owners, which authentication needs: serve on a memory, file, "
                "SQLite or PostgreSQL store, or make the store a ChatIndex too."
            )
        logger.warning("%s keeps no chat index: GET /chats lists the chats of this process only", type(store).__name__)
        index = MemoryChatIndex(lambda _chat_id: False)
    return Access(None if settings is None else Authenticator(settings), index, rules)
