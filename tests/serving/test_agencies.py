"""Several agencies in one app (`create_app({name: factory})`, `agency-swarm serve a.yaml b.yaml`), each under its
own prefix, on its own store or a shared one that keeps their chats apart; and CORS from an explicit allow-list."""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agency_swarm import Agency, Agent, ConfigError, MemoryThreadStore, SQLThreadStore, ThreadStore
from agency_swarm.serving import AuthSettings, ServeSettings, create_app
from agency_swarm.testing import ScriptedModel
from postgres_support import require_postgres
from serving_support import BOUND, live
from test_cancel import Gates, agency_on

ALICE, BOB = f"alice-{uuid.uuid4().hex}", f"bob-{uuid.uuid4().hex}"
AUTH = AuthSettings(tokens={"alice": ALICE, "bob": BOB})


def named(name: str) -> Any:
    def build(store: ThreadStore) -> Agency:
        model = ScriptedModel(lambda call: f"{name} heard {call.last_user_message}")
        return Agency(Agent(name="CEO", model=model), thread_store=store)

    return build


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def shared_store(request: pytest.FixtureRequest, tmp_path: Path) -> ThreadStore:
    if request.param == "memory":
        return MemoryThreadStore()
    if request.param == "sqlite":
        return SQLThreadStore(f"sqlite:///{tmp_path / 'chats.db'}")
    return SQLThreadStore(require_postgres())


@pytest.fixture
async def two_agencies(shared_store: ThreadStore) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app({"support": named("support"), "sales": named("sales")}, store=shared_store, auth=AUTH)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://agencies", headers={"authorization": f"Bearer {ALICE}"}
    ) as client:
        yield client


async def test_two_agencies_on_one_store_never_see_each_others_chats(two_agencies: httpx.AsyncClient) -> None:
    http, chat_id = two_agencies, f"both-{uuid.uuid4().hex[:8]}"
    support = await http.post(f"/support/chats/{chat_id}/messages", json={"message": "help"})
    sales = await http.post(f"/sales/chats/{chat_id}/messages", json={"message": "buy"})
    assert support.json()["final_output"] == "support heard help"
    assert sales.json()["final_output"] == "sales heard buy"  # not a second turn of support's chat
    for name, message in (("support", "help"), ("sales", "buy")):
        threads = (await http.get(f"/{name}/chats/{chat_id}/threads")).json()["threads"]
        assert [item.get("content") for item in threads["user->CEO"] if item.get("role") == "user"] == [message]
        listed = (await http.get(f"/{name}/chats")).json()["chats"]
        assert [(chat["chat_id"], chat["title"]) for chat in listed if chat["chat_id"] == chat_id] == [
            (chat_id, message)
        ]
    assert (await http.delete(f"/support/chats/{chat_id}")).status_code == 204
    assert (await http.get(f"/support/chats/{chat_id}/threads")).json()["threads"] == {}
    assert (await http.get(f"/sales/chats/{chat_id}/threads")).json()["threads"] != {}
    bob = {"authorization": f"Bearer {BOB}"}
    assert (await http.get(f"/sales/chats/{chat_id}/threads", headers=bob)).status_code == 404  # alice's chat
    assert (await http.get("/healthz")).json() == {"status": "ok"}


async def test_each_agency_may_have_its_own_store(tmp_path: Path) -> None:
    stores = {"support": MemoryThreadStore(), "sales": f"sqlite:///{tmp_path / 'sales.db'}"}
    app = create_app({"support": named("support"), "sales": named("sales")}, store=stores)
    async with app.router.lifespan_context(app), httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://agencies"
    ) as http:
        await http.post("/support/chats/c1/messages", json={"message": "one"})
        await http.post("/sales/chats/c1/messages", json={"message": "two"})
        assert list(stores["support"]._chats) == ["c1"]
        assert app.state.agencies["sales"].state.store.url.endswith("sales.db")


async def test_the_openapi_document_shows_every_agency_under_its_prefix() -> None:
    app = create_app({"support": named("support"), "sales": named("sales")}, store="memory")
    spec = app.openapi()
    for name in ("support", "sales"):
        assert f"/{name}/chats/{{chat_id}}/messages" in spec["paths"]
        assert f"/{name}/chats/{{chat_id}}/turns/{{turn_id}}:cancel" in spec["paths"]
        post = spec["paths"][f"/{name}/chats/{{chat_id}}/messages"]["post"]
        assert post["operationId"] == f"{name}_post_message"
        links = {link["operationId"] for link in post["responses"]["200"]["links"].values()}
        assert f"{name}_get_threads" in links
    operations = [op["operationId"] for methods in spec["paths"].values() for op in methods.values()]
    assert len(operations) == len(set(operations))
    assert "MessageRequest" in spec["components"]["schemas"]
    assert "/chats/{chat_id}/messages" not in spec["paths"]


def test_what_serves_one_agency_only_is_refused_with_several() -> None:
    factories = {"support": named("support"), "sales": named("sales")}
    for option in ("ag_ui", "a2a", "ui", "durable"):
        with pytest.raises(ConfigError, match=rf"one agency per app.*{option}"):
            create_app(factories, store="memory", **{option: True})
    for bad in ("Support", "chats", "a/b", ""):
        with pytest.raises(ConfigError, match="is not a path prefix"):
            create_app({bad: named("x")}, store="memory")
    with pytest.raises(ConfigError, match="one store for each agency"):
        create_app(factories, store={"support": "memory"})
    with pytest.raises(ConfigError, match="goes with several agencies"):
        create_app(named("x"), store={"x": "memory"})


async def test_a_cancel_in_one_agency_does_not_reach_the_other_on_a_shared_store() -> None:
    gates, other_gates = Gates(), Gates()
    app = create_app({"a": lambda s: agency_on(s, gates), "b": lambda s: agency_on(s, other_gates)}, store="memory")
    async with app.router.lifespan_context(app), httpx.AsyncClient(
        transport=httpx.ASGITransport(app), base_url="http://agencies", timeout=BOUND
    ) as http:
        running = asyncio.create_task(http.post("/a/chats/c1/messages", json={"message": "be slow"}))
        await asyncio.wait_for(gates.in_tool.wait(), BOUND)
        turn_id = app.state.agencies["a"].state.agency.thread_manager.running.find("c1").turn_id
        assert (await http.post(f"/b/chats/c1/turns/{turn_id}:cancel")).status_code == 404
        assert (await http.post(f"/a/chats/c1/turns/{turn_id}:cancel")).status_code == 200
        assert (await running).json()["error"]["type"] == "cancelled"


# -- CORS -------------------------------------------------------------------------------------------------------


async def test_cors_answers_allowed_origins_only_and_preflights_before_authentication() -> None:
    app = create_app(named("one"), store="memory", auth=AUTH, cors_origins=["https://app.example"])
    async with live(app) as url, httpx.AsyncClient(base_url=url, timeout=BOUND) as http:
        preflight = {"access-control-request-method": "POST",
                     "access-control-request-headers": "authorization,content-type,idempotency-key"}
        allowed = await http.options("/chats/c1/messages", headers={"origin": "https://app.example", **preflight})
        assert allowed.status_code == 200  # no token: a browser's preflight carries none
        assert allowed.headers["access-control-allow-origin"] == "https://app.example"
        assert "authorization" in allowed.headers["access-control-allow-headers"].lower()
        refused = await http.options("/chats/c1/messages", headers={"origin": "https://evil.example", **preflight})
        assert refused.status_code == 400
        assert "access-control-allow-origin" not in refused.headers
        auth = {"authorization": f"Bearer {ALICE}"}
        posted = await http.post("/chats/c1/messages", json={"message": "hi"},
                                 headers={"origin": "https://app.example", **auth})
        assert posted.headers["access-control-allow-origin"] == "https://app.example"
        assert "turn-id" in posted.headers["access-control-expose-headers"]
        other = await http.post("/chats/c2/messages", json={"message": "hi"},
                                headers={"origin": "https://evil.example", **auth})
        assert "access-control-allow-origin" not in other.headers  # the browser withholds the answer
    plain = create_app(named("one"), store="memory")  # none by default
    async with live(plain) as url, httpx.AsyncClient(base_url=url, timeout=BOUND) as http:
        answer = await http.get("/healthz", headers={"origin": "https://app.example"})
        assert "access-control-allow-origin" not in answer.headers


def test_cors_origins_must_be_origins() -> None:
    for bad in ("*", "https://app.example/", "app.example", "https://*.example"):
        with pytest.raises(ConfigError, match="is not an origin"):
            create_app(named("one"), store="memory", cors_origins=[bad])
    with pytest.raises(ConfigError, match="list of origins"):
        create_app(named("one"), store="memory", cors_origins="https://app.example")  # type: ignore[arg-type]


# -- agency-swarm serve with several files ----------------------------------------------------------------------

AGENCY_FILE = (
    "agents:\n"
    "  CEO: {description: Talks to the user., model: gpt-4.1-mini, instructions: Delegate.}\n"
    "  Developer: {description: Does the work., model: gpt-4.1-mini}\n"
    "chart: {entry_points: [CEO], flows: [[CEO, Developer]]}\n"
)


def test_serve_settings_name_several_files_by_stem_or_by_flag(tmp_path: Path) -> None:
    from agency_swarm._cli._serve_options import serve_sources

    support, sales = tmp_path / "support.yaml", tmp_path / "Sales.yaml"
    for path in (support, sales):
        path.write_text(AGENCY_FILE)
    assert serve_sources([support], []) == (str(support), ())
    _, pairs = serve_sources([support], [f"sales={sales}"])
    assert pairs == (("support", str(support)), ("sales", str(sales)))
    with pytest.raises(ConfigError, match="name it: --agency NAME=FILE"):
        ServeSettings(agencies=serve_sources([support, sales], [])[1]).check()
    with pytest.raises(ConfigError, match="write NAME=FILE"):
        serve_sources([], ["sales"])
    with pytest.raises(ConfigError, match="share a name"):
        ServeSettings(agencies=(("a", str(support)), ("a", str(sales)))).check()
    with pytest.raises(ConfigError, match="one agency per app"):
        ServeSettings(agencies=pairs, ag_ui=True).check()
    settings = ServeSettings(agencies=pairs, models="serving_app:config_models", cors_origins=("https://a.example",))
    settings.check()
    env = settings.to_env()
    again = ServeSettings.from_env(env)
    assert (again.agencies, again.cors_origins) == (
        tuple((name, str(Path(path).resolve())) for name, path in pairs), ("https://a.example",)
    )


def test_serve_with_two_agency_files_serves_each_under_its_stem(tmp_path: Path) -> None:
    from serving_app import ceo_answer
    from serving_support import start_serve

    for name in ("support", "sales"):
        (tmp_path / f"{name}.yaml").write_text(AGENCY_FILE)
    server = start_serve([
        str(tmp_path / "support.yaml"), str(tmp_path / "sales.yaml"), "--models", "serving_app:config_models",
        "--cors-origin", "https://app.example",
    ])
    try:
        with httpx.Client(base_url=server.url, timeout=BOUND) as http:
            for name in ("support", "sales"):
                answer = http.post(f"/{name}/chats/c1/messages", json={"message": name},
                                   headers={"origin": "https://app.example"})
                assert re.fullmatch(ceo_answer(1, name), answer.json()["final_output"])  # turn 1 in each
                assert answer.headers["access-control-allow-origin"] == "https://app.example"
            paths = http.get("/openapi.json").json()["paths"]
            assert {"/support/chats/{chat_id}/messages", "/sales/chats/{chat_id}/messages"} <= set(paths)
    finally:
        server.stop()
