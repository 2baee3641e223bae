"""Who calls, in-process (httpx over ASGI): JWTs signed here with HS256, and with RS256/ES256 keys served from a
JWKS on a real HTTP server on 127.0.0.1 (rotation, a bound on refetches, the provider down); every way a token is
refused; static tokens per principal; admins; chats stored before they had owners."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization

from agency_swarm import ConfigError, MemoryThreadStore
from agency_swarm.serving import AuthSettings, create_app
from auth_app import build_agency
from auth_support import (
    AUDIENCE,
    ISSUER,
    SECRET,
    JWKSServer,
    claims,
    ec_key,
    hs256,
    public_jwk,
    rsa_key,
    signed,
    unsigned,
)


def client_for(app: Any, token: str | None = None) -> httpx.AsyncClient:
    headers = {} if token is None else {"authorization": f"Bearer {token}"}
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://app", headers=headers)


class Clock:
    """Monotonic seconds the test moves by hand (the JWKS cache's)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def jwks() -> Iterator[JWKSServer]:
    server = JWKSServer()
    yield server
    server.close()


@pytest.fixture
async def hs_app() -> AsyncIterator[Any]:
    app = create_app(build_agency, store=MemoryThreadStore(), auth=AuthSettings(
        jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE, admin_scope="chats:admin",
    ))
    yield app
    await app.state.agency.aclose()


async def answer(app: Any, token: str, chat_id: str = "c1", message: str = "whoami") -> httpx.Response:
    async with client_for(app, token) as client:
        return await client.post(f"/chats/{chat_id}/messages", json={"message": message})


def refusal(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    assert response.headers["www-authenticate"] == "Bearer"
    error: dict[str, str] = response.json()["error"]
    assert error["type"] == "unauthorized"
    return error["message"]


# -- HS256 ------------------------------------------------------------------------------------------------------------


async def test_an_hs256_jwt_names_the_principal_the_tools_see(hs_app: Any) -> None:
    response = await answer(hs_app, hs256("alice"))
    assert response.status_code == 200, response.text
    assert response.json()["final_output"] == "tool: alice of - in c1"


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        (lambda: hs256("alice", exp=1_000, iat=500), "has expired"),
        (lambda: hs256("alice", aud="another-api"), "not meant for this server"),
        (lambda: hs256("alice", iss="https://evil.test/"), "issuer this server does not trust"),
        (lambda: hs256("alice", exp=None), "has no `exp` claim"),
        (lambda: hs256(None), "has no `sub` claim"),  # type: ignore[arg-type]
        (lambda: hs256("alice", nbf=4_000_000_000), "not valid yet"),
        (lambda: hs256("alice", secret="x" * 48), "not valid (its signature"),
        (lambda: unsigned("alice"), "algorithm is not one this server accepts"),
        (lambda: hs256(""), "is not a principal name"),
        (lambda: hs256("a\nb"), "is not a principal name"),
        (lambda: "not.a.jwt", "not valid (its signature"),
        (lambda: "no-dots-and-not-a-static-token", "Unauthorized."),
    ],
    ids=["expired", "audience", "issuer", "no-exp", "no-sub", "not-yet", "other-secret", "alg-none", "empty-sub",
         "bad-sub", "garbage", "unknown-static"],
)
async def test_every_bad_hs256_token_is_401_saying_why(hs_app: Any, token: Any, reason: str) -> None:
    assert reason in refusal(await answer(hs_app, token()))
    async with client_for(hs_app) as client:
        stored = await hs_app.state.store.load("c1")
        assert stored == {}  # nothing ran
        assert (await client.get("/healthz")).status_code == 200


async def test_no_token_or_another_scheme_is_401(hs_app: Any) -> None:
    async with client_for(hs_app) as client:
        for headers in ({}, {"authorization": f"Basic {hs256('alice')}"}, {"authorization": hs256("alice")}):
            response = await client.get("/chats", headers=headers)
            assert refusal(response) == "Unauthorized."


# -- RS256 / ES256 from a JWKS -----------------------------------------------------------------------------------------


def jwks_app(server: JWKSServer, clock: Clock, **options: Any) -> Any:
    settings = AuthSettings(
        jwks_url=server.url, issuer=ISSUER, audience=AUDIENCE, jwks_refresh_seconds=30, jwks_max_age_seconds=600,
        **options,
    )
    app = create_app(build_agency, store=MemoryThreadStore(), auth=settings)
    app.state.access.authenticator.jwks.clock = clock
    return app


async def test_rs256_and_es256_jwts_are_verified_with_the_jwks_keys_and_a_rotation(jwks: JWKSServer) -> None:
    clock, old, curve = Clock(), rsa_key(), ec_key()
    jwks.keys = [public_jwk(old, "old"), public_jwk(curve, "curve")]
    app = jwks_app(jwks, clock)
    assert (await answer(app, signed(old, "old", "alice"))).json()["final_output"] == "tool: alice of - in c1"
    assert (await answer(app, signed(curve, "curve", "bob", "ES256"), "c2")).status_code == 200
    assert jwks.fetches == 1  # cached

    new = rsa_key()
    jwks.keys = [public_jwk(old, "old"), public_jwk(new, "new"), public_jwk(curve, "curve")]  # a rotation begins
    assert "key this server does not know" in refusal(await answer(app, signed(new, "new", "alice")))
    assert jwks.fetches == 1  # the last fetch was under jwks_refresh_seconds ago
    clock.now += 30
    assert (await answer(app, signed(new, "new", "alice"))).status_code == 200
    assert (await answer(app, signed(old, "old", "alice"))).status_code == 200  # both keys are published
    assert jwks.fetches == 2
    jwks.keys = [public_jwk(new, "new"), public_jwk(curve, "curve")]  # the old key is withdrawn
    clock.now += 600  # the keys held are stale: fetched again, without the old one
    assert "key this server does not know" in refusal(await answer(app, signed(old, "old", "alice")))
    assert (await answer(app, signed(new, "new", "alice"))).status_code == 200
    assert jwks.fetches == 3
    await app.state.agency.aclose()


async def test_made_up_key_ids_fetch_the_jwks_at_most_once_per_interval(jwks: JWKSServer) -> None:
    clock, key = Clock(), rsa_key()
    jwks.keys = [public_jwk(key, "k1")]
    app = jwks_app(jwks, clock)
    assert (await answer(app, signed(key, "k1", "alice"))).status_code == 200
    for _ in range(25):
        kid = uuid.uuid4().hex
        assert "does not know" in refusal(await answer(app, signed(key, kid, "mallory")))
    assert jwks.fetches == 1  # the first fetch was under 30 s ago: no more
    clock.now += 30
    for _ in range(25):
        assert "does not know" in refusal(await answer(app, signed(key, uuid.uuid4().hex, "mallory")))
    assert jwks.fetches == 2
    await app.state.agency.aclose()


async def test_algorithm_confusion_is_refused(jwks: JWKSServer) -> None:
    clock, key, curve = Clock(), rsa_key(), ec_key()
    jwks.keys = [public_jwk(key, "rsa"), public_jwk(curve, "ec")]
    pem = key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    # HS256 "signed" with the public key as the HMAC secret: the classic confusion
    hmac_with_public_key = signed_hmac(pem, "rsa", "mallory")
    only_jwks = jwks_app(jwks, clock)
    assert "algorithm is not one this server accepts" in refusal(await answer(only_jwks, hmac_with_public_key))
    both = jwks_app(jwks, clock, jwt_secret=SECRET)  # HS256 accepted, but only with the secret
    assert "not valid (its signature" in refusal(await answer(both, hmac_with_public_key))
    # an RS256 header naming the EC key: a key verifies only tokens of its own algorithm
    assert "key this server does not know" in refusal(await answer(only_jwks, signed(key, "ec", "mallory")))
    assert "algorithm is not one this server accepts" in refusal(await answer(only_jwks, unsigned("mallory")))
    for app in (only_jwks, both):
        await app.state.agency.aclose()


def signed_hmac(secret: bytes, kid: str, sub: str) -> str:
    """HS256 over `secret` whatever it looks like (PyJWT refuses a PEM as an HMAC key, so it is signed by hand)."""

    def part(value: Any) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    head = f"{part({'alg': 'HS256', 'typ': 'JWT', 'kid': kid})}.{part(claims(sub))}"
    signature = hmac.new(secret, head.encode(), hashlib.sha256).digest()
    return f"{head}.{base64.urlsafe_b64encode(signature).decode().rstrip('=')}"


async def test_a_jwks_that_cannot_be_fetched_is_503_then_the_keys_come(jwks: JWKSServer) -> None:
    clock, key = Clock(), rsa_key()
    jwks.keys, jwks.status = [public_jwk(key, "k")], 500
    app = jwks_app(jwks, clock)
    response = await answer(app, signed(key, "k", "alice"))
    assert response.status_code == 503
    assert response.json()["error"]["type"] == "auth_unavailable"
    again = await answer(app, signed(key, "k", "alice"))  # within the interval: not fetched again
    assert again.status_code == 503
    assert jwks.fetches == 1
    jwks.status = 200
    clock.now += 30
    assert (await answer(app, signed(key, "k", "alice"))).status_code == 200
    jwks.status = 500
    clock.now += 600  # stale, and the provider is down: the keys held are used meanwhile
    assert (await answer(app, signed(key, "k", "alice"))).status_code == 200
    await app.state.agency.aclose()


# -- static tokens, admins, settings -----------------------------------------------------------------------------------


async def test_static_tokens_name_their_principals_and_an_admin_reads_every_chat() -> None:
    tokens = {"alice": f"a-{uuid.uuid4().hex}", "bob": f"b-{uuid.uuid4().hex}", "ops": f"o-{uuid.uuid4().hex}"}
    app = create_app(build_agency, store=MemoryThreadStore(), auth=AuthSettings(tokens=tokens, admins=["ops"]))
    assert (await answer(app, tokens["alice"], "hers")).json()["final_output"] == "tool: alice of - in hers"
    async with client_for(app, tokens["bob"]) as bob, client_for(app, tokens["ops"]) as ops:
        assert (await bob.get("/chats/hers/threads")).status_code == 404
        assert (await ops.get("/chats/hers/threads")).json()["threads"]["user->A"][0]["content"] == "whoami"
        assert (await ops.post("/chats/hers/messages", json={"message": "hi"})).status_code == 404  # reads only
        assert (await ops.delete("/chats/hers")).status_code == 404
        assert (await ops.post("/chats/ops-own/messages", json={"message": "hi"})).status_code == 200
    await app.state.agency.aclose()


async def test_an_admin_scope_in_the_jwt_reads_every_chat(hs_app: Any) -> None:
    assert (await answer(hs_app, hs256("alice"), "hers")).status_code == 200
    async with client_for(hs_app, hs256("root", scope="chats:admin openid")) as admin:
        assert (await admin.get("/chats/hers/threads")).status_code == 200
    async with client_for(hs_app, hs256("carol", scope="openid")) as carol:
        assert (await carol.get("/chats/hers/threads")).status_code == 404


async def test_a_chat_stored_before_it_had_an_owner_is_an_admins_only() -> None:
    tokens = {"alice": f"a-{uuid.uuid4().hex}", "ops": f"o-{uuid.uuid4().hex}"}
    store = MemoryThreadStore()
    await store.append("old", "user->A", [{"role": "user", "content": "from before"}])
    app = create_app(build_agency, store=store, auth=AuthSettings(tokens=tokens, admins=["ops"]))
    async with client_for(app, tokens["alice"]) as alice, client_for(app, tokens["ops"]) as ops:
        assert (await alice.get("/chats/old/threads")).status_code == 404
        assert (await alice.post("/chats/old/messages", json={"message": "mine?"})).status_code == 404
        assert (await ops.get("/chats/old/threads")).status_code == 200
        assert (await ops.post("/chats/old/messages", json={"message": "adopted"})).status_code == 200
        assert (await alice.get("/chats/old/threads")).status_code == 404  # ops' now
    await app.state.agency.aclose()


async def test_the_single_shared_token_is_one_principal_that_keeps_its_old_chats() -> None:
    token = f"t-{uuid.uuid4().hex}"
    store = MemoryThreadStore()
    await store.append("old", "user->A", [{"role": "user", "content": "from before"}])
    app = create_app(build_agency, store=store, auth_token=token)
    async with client_for(app, token) as client:
        assert (await client.get("/chats/old/threads")).status_code == 200
        assert (await client.post("/chats/old/messages", json={"message": "whoami"})).json()["final_output"] == (
            "tool: default of - in old"
        )
        assert [chat["chat_id"] for chat in (await client.get("/chats")).json()["chats"]] == ["old"]
    await app.state.agency.aclose()


def test_auth_settings_are_checked_and_never_echo_a_secret(jwks: JWKSServer) -> None:
    store = MemoryThreadStore()
    bad: list[tuple[AuthSettings, str]] = [
        (AuthSettings(), "needs tokens, a jwt_secret or a jwks_url"),
        (AuthSettings(jwt_secret="short-secret", issuer=ISSUER, audience=AUDIENCE), "at least 32 bytes"),
        (AuthSettings(jwt_secret=SECRET, audience=AUDIENCE), "set AuthSettings.issuer"),
        (AuthSettings(jwt_secret=SECRET, issuer=ISSUER), "set AuthSettings.audience"),
        (AuthSettings(jwks_url="http://id.example/jwks", issuer=ISSUER, audience=AUDIENCE), "https://"),
        (AuthSettings(tokens={"a": "same-token", "b": "same-token"}), "have the same token"),
        (AuthSettings(tokens={"a": " "}), "must be a non-empty str"),
        (AuthSettings(tokens={"a": "t"}, admins="a"), "not one str"),
    ]
    for settings, problem in bad:
        with pytest.raises(ConfigError, match=problem) as raised:
            create_app(build_agency, store=store, auth=settings)
        assert "same-token" not in str(raised.value)
        assert "short-secret" not in str(raised.value)
    with pytest.raises(ConfigError, match="not both"):
        create_app(build_agency, store=store, auth_token="t", auth=AuthSettings(tokens={"a": "t2"}))
    settings = AuthSettings(tokens={"alice": "hidden-token"}, jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE)
    assert "hidden-token" not in repr(settings)
    assert SECRET not in repr(settings)
    create_app(build_agency, store=store, auth=AuthSettings(jwks_url=jwks.url, issuer=ISSUER, audience=AUDIENCE))


async def test_no_token_value_reaches_the_log(hs_app: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = hs256("alice")
    await answer(hs_app, token)
    await answer(hs_app, token + "x")
    assert token not in caplog.text
    assert SECRET not in caplog.text


async def test_the_guards_hand_the_lifespan_to_the_app() -> None:
    closed: list[bool] = []

    class Tracked(MemoryThreadStore):
        async def aclose(self) -> None:
            closed.append(True)

    app = create_app(build_agency, store=Tracked(), auth=AuthSettings(tokens={"alice": "a-token"}))
    incoming = [{"type": "lifespan.startup"}, {"type": "lifespan.shutdown"}]
    sent: list[str] = []

    async def receive() -> dict[str, Any]:
        return incoming.pop(0)

    async def send(message: dict[str, Any]) -> None:
        sent.append(message["type"])

    await app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, receive, send)
    assert sent == ["lifespan.startup.complete", "lifespan.shutdown.complete"]
    assert closed == [True]  # the app's own lifespan ran: it closes the store


async def test_a_verified_hs256_token_is_kept_until_it_expires_and_a_refused_one_is_not() -> None:
    """The second request with a token skips PyJWT; past `exp` plus the leeway (a wall clock moved by hand) the token
    is checked again; a token refused once is checked, and refused, every time."""
    import jwt

    from agency_swarm.serving._auth._jwt import Authenticator, Unauthorized

    now = Clock()
    now.now = float(claims("alice")["exp"]) - 60
    authenticator = Authenticator(AuthSettings(jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE), wall_clock=now)
    decoded: list[str] = []
    original = jwt.decode

    def counting(token: str, *args: Any, **kwargs: Any) -> Any:
        decoded.append(token)
        return original(token, *args, **kwargs)

    token, forged = hs256("alice"), hs256("alice", secret="another-secret-of-at-least-32-bytes!")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jwt, "decode", counting)
        first = await authenticator.principal(f"Bearer {token}".encode())
        assert await authenticator.principal(f"Bearer {token}".encode()) is first
        assert decoded == [token]
        now.now += 60 + 30  # exp plus the 30 s leeway: checked again by PyJWT
        assert (await authenticator.principal(f"Bearer {token}".encode())).name == "alice"
        assert decoded == [token, token]
        for _ in range(2):
            with pytest.raises(Unauthorized):
                await authenticator.principal(f"Bearer {forged}".encode())
        assert decoded == [token, token, forged, forged]


# -- the documented scheme -------------------------------------------------------------------------------------------


def security_dependencies(app: Any) -> list[str]:
    """The FastAPI security dependencies the app's routes (and its agencies' routes) would run per request."""
    from fastapi.routing import APIRoute
    from fastapi.security.base import SecurityBase

    found: list[str] = []
    apps = [app, *getattr(app.state, "agencies", {}).values()]
    for route in [route for each in apps for route in each.routes if isinstance(route, APIRoute)]:
        waiting = list(route.dependant.dependencies)
        while waiting:
            dependant = waiting.pop()
            waiting.extend(dependant.dependencies)
            if isinstance(dependant.call, SecurityBase):
                found.append(f"{route.path}: {type(dependant.call).__name__}")
    return found


def test_the_bearer_scheme_is_documented_without_a_dependency_to_run() -> None:
    """AuthGuard checks the token before any route: the document names the scheme on every route but /healthz, and
    no route resolves a security dependency (or builds credentials nothing reads) per request."""
    token = f"t-{uuid.uuid4().hex}"
    single = create_app(build_agency, store=MemoryThreadStore(), auth_token=token, ag_ui=True)
    several = create_app({"one": build_agency, "two": build_agency}, store=MemoryThreadStore(), auth_token=token)
    bearer = {"HTTPBearer": {"type": "http", "scheme": "bearer"}}
    for app in (single, several):
        assert security_dependencies(app) == []
        spec = app.openapi()
        assert spec["components"]["securitySchemes"] == bearer
        for path, methods in spec["paths"].items():
            for operation in methods.values():
                expected = None if path.endswith("/healthz") else [{"HTTPBearer": []}]
                assert operation.get("security") == expected, path
    assert "/ag-ui" in single.openapi()["paths"]
    open_spec = create_app(build_agency, store=MemoryThreadStore(), ag_ui=True).openapi()
    assert "securitySchemes" not in open_spec["components"]
    assert all("security" not in op for methods in open_spec["paths"].values() for op in methods.values())


async def test_only_a_server_with_static_tokens_hashes_the_token() -> None:
    from agency_swarm.serving._auth import _jwt

    hashed: list[bytes] = []
    original = _jwt.hashlib.sha256

    def recording(data: bytes = b"", **kwargs: Any) -> Any:
        hashed.append(data)
        return original(data, **kwargs)

    token = hs256("alice").encode()
    jwt_only = _jwt.Authenticator(AuthSettings(jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE))
    both = _jwt.Authenticator(AuthSettings(
        tokens={"ops": f"o-{uuid.uuid4().hex}"}, jwt_secret=SECRET, issuer=ISSUER, audience=AUDIENCE,
    ))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_jwt.hashlib, "sha256", recording)
        assert (await jwt_only.principal(b"Bearer " + token)).name == "alice"
        assert token not in hashed
        assert (await both.principal(b"Bearer " + token)).name == "alice"
        assert token in hashed
