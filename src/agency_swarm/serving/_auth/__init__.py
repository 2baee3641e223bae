"""Who calls the server and what a request may carry: principals (static tokens, JWTs), chat ownership, GET /chats
and the request context that reaches tools.

`_principal` (Principal, RequestContext), `_settings` (AuthSettings), `_jwt` (JWT and JWKS), `_owners` (whose chat
it is: the rules every route that names a chat goes by), `_guards` (the ASGI guards: authentication, then
ownership), `_chats` (GET /chats), `_context` (per-request context and instructions).
"""
