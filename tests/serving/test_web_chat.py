"""The web chat page (`agency-swarm serve --ui`) in a real headless Chromium driven by Playwright, against a real
server process with a scripted agency (tests/support/web_chat_app.py): nesting, approvals, a reload mid-turn, model
output as text only, keyboard use, bearer auth. The run writes the README's screenshot (docs/images/web-chat.png)."""

from __future__ import annotations

import base64
import os
import re
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from cut_proxy import CutProxy
from postgres_support import require_postgres
from serving_support import REPO, Gate, Server, start_serve
from web_chat_app import MAX_PART_BYTES, XSS

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect
WAIT_MS = 30_000  # a bound on Playwright's waiting, never a pause
expect.set_options(timeout=WAIT_MS)

SCREENSHOT = REPO / "docs" / "images" / "web-chat.png"
TOKEN = "web-chat-token-3c9d"
BODY = ["--max-body-bytes", str(4 * 1024 * 1024)]  # room for a message's images and files
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PDF = b"%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found:
        return found
    how = "install it with `apt-get install -y chromium` (scripts/test.sh does this when run as root)"
    if os.environ.get("CI") == "true" and os.environ.get("AGENCY_SWARM_SKIP_CHROMIUM") != "1":
        pytest.fail(f"Chromium is missing in CI; {how}.")
    pytest.skip(f"Chromium is not installed; {how}.")


@pytest.fixture(scope="module")
def gate() -> Iterator[Gate]:
    gate = Gate()
    gate.open()
    yield gate
    gate.close()


@pytest.fixture(scope="module")
def server(gate: Gate) -> Iterator[Server]:
    server = start_serve(["--factory", "web_chat_app:build_agency", "--store", "memory", "--ui", *BODY], env=gate.env)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    path = chromium()
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, headless=True, args=["--no-sandbox"])
        yield browser
        browser.close()


def new_page(browser: Any) -> Any:
    """A page in a context of its own (its own sessionStorage); close its context when done."""
    context = browser.new_context(viewport={"width": 1280, "height": 760})
    page = context.new_page()
    page.set_default_timeout(WAIT_MS)
    page.dialogs = []
    page.on("dialog", lambda dialog: (page.dialogs.append(dialog.message), dialog.dismiss()))
    return page


@pytest.fixture
def page(browser: object) -> Iterator[object]:
    page = new_page(browser)
    yield page
    page.context.close()


def opened(page: object, url: str) -> object:
    page.goto(f"{url}/ui")  # type: ignore[attr-defined]
    expect(page.locator("body[data-ready=true]")).to_have_count(1)  # type: ignore[attr-defined]
    return page


def send(page: object, message: str) -> None:
    page.locator("#message").fill(message)  # type: ignore[attr-defined]
    page.locator("#message").press("Enter")  # type: ignore[attr-defined]



def chart_drawn(page: Any) -> None:
    """The chart's <img> has its source and decodes to a picture. Polling a predicate in the page would need
    `eval`, which the page's Content-Security-Policy forbids; `decode()` waits for the image instead."""
    expect(page.locator("#chart")).to_have_attribute("src", re.compile("^blob:"))
    width = page.evaluate("() => { const chart = document.getElementById('chart'); "
                          "return chart.decode().then(() => chart.naturalWidth); }")
    assert width > 0

def test_a_turn_streams_with_the_developer_nested_under_the_ceos_send(server: Server, page: object) -> None:
    opened(page, server.url)
    send(page, "build the login page")
    ceo = page.locator("#turns .turn .agent[data-agent=CEO]").last
    send_call = ceo.locator(".call")
    expect(send_call.locator("> .who")).to_have_text("CEO → Developer")
    expect(send_call.locator("> .asked")).to_have_text("build the login page")
    developer = send_call.locator(".agent.sub[data-agent=Developer]")
    expect(developer.locator("> .text")).to_have_text("Dev did: build the login page")
    expect(send_call.locator("> .output")).to_have_text("answer: Dev did: build the login page")
    expect(ceo.locator("> .text")).to_have_text("CEO: Dev did: build the login page")
    # In order: the send, then inside it the Developer's turn, then the answer; then the CEO's reply.
    order = page.locator("#turns .turn").last.locator(".who, .asked, .text, .output").all_text_contents()
    assert order == [
        "CEO", "CEO → Developer", "build the login page", "Developer answers CEO", "Dev did: build the login page",
        "answer: Dev did: build the login page", "CEO: Dev did: build the login page",
    ]
    expect(page.locator("#turns .usage").last).to_contain_text("requests 3, input 30 tokens, output 15 tokens")
    expect(page.locator("#chats button", has_text="build the login page")).to_have_count(1)
    expect(page.locator("#threads summary")).to_have_text(["user->CEO (4)", "CEO->Developer (2)"])
    chart_drawn(page)
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT))
    assert SCREENSHOT.stat().st_size > 10_000


def test_the_turns_cost_shows_next_to_its_usage_per_agent_on_hover(server: Server, page: object) -> None:
    opened(page, server.url)
    send(page, "price this")
    usage = page.locator("#turns .turn").last.locator(".usage")
    expect(usage).to_contain_text("requests 3, input 30 tokens, output 15 tokens")
    cost = usage.locator(".cost")  # CEO: 2 calls of 10 + 5 tokens at $1/$2 per 1M; Developer: 1 call at $3/$6
    expect(cost).to_have_text("cost $0.000100")
    expect(cost).to_have_attribute("title", "CEO: $0.000040\nDeveloper: $0.000060")
    send(page, "analyst numbers")  # Analyst's model has no price: the turn's cost is unknown, not zero
    expect(page.locator("#turns .agent.sub[data-agent=Analyst] > .text")).to_have_text("Analyst read: analyst numbers")
    cost = page.locator("#turns .turn").last.locator(".usage .cost")
    expect(cost).to_have_text("cost unknown")
    expect(cost).to_have_attribute("title", "CEO: $0.000040\nAnalyst: unknown")


def test_a_paused_call_is_approved_from_the_page(server: Server, page: object) -> None:
    opened(page, server.url)
    send(page, "approve the deploy")
    call = page.locator(".agent.sub[data-agent=Developer] .call", has_text="Developer calls deploy")
    expect(call.locator("pre.arguments")).to_have_text('{"target": "prod"}')
    expect(page.locator(".status", has_text="Paused")).to_have_count(1)
    call.get_by_role("button", name="Approve").click()
    expect(call.locator("pre.output")).to_have_text("output: deployed prod")
    expect(page.locator("#turns .agent[data-agent=CEO] > .text").last).to_have_text("CEO: Dev: deployed prod")
    expect(call.get_by_role("button", name="Approve")).to_have_count(0)


def test_a_paused_chat_opened_from_the_list_shows_its_waiting_call_and_resumes(server: Server, browser: Any) -> None:
    first = new_page(browser)
    opened(first, server.url)
    send(first, "approve from the list")
    expect(first.locator(".status", has_text="Paused")).to_have_count(1)
    first.context.close()
    page = new_page(browser)  # another tab: nothing of the streamed turn in it
    opened(page, server.url)
    page.locator("#chats button", has_text="approve from the list").click()
    call = page.locator(".agent.sub[data-agent=Developer] .call", has_text="Developer calls deploy")
    expect(call.locator("pre.arguments")).to_have_text('{"target": "prod"}')
    expect(page.locator("#turns .status", has_text="Paused")).to_have_count(1)
    expect(page.locator("#threads .item", has_text="agency_swarm.")).to_have_count(0)  # marks are not shown
    approve = call.get_by_role("button", name="Approve")
    approve.focus()
    page.keyboard.press("Enter")
    expect(call.locator("pre.output")).to_have_text("output: deployed prod")
    expect(page.locator("#turns .agent[data-agent=CEO] > .text")).to_have_text("CEO: Dev: deployed prod")
    expect(page.locator("#turns .turn")).to_have_count(1)
    expect(page.locator("#turns .turn .usage")).to_have_count(1)
    expect(call.get_by_role("button", name="Approve")).to_have_count(0)
    page.reload()  # stored as finished: no buttons any more
    expect(page.locator("#turns .agent[data-agent=CEO] > .text")).to_have_text("CEO: Dev: deployed prod")
    expect(page.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    page.context.close()


def test_a_rejected_call_tells_the_model(server: Server, page: object) -> None:
    opened(page, server.url)
    send(page, "approve nothing")
    call = page.locator(".agent.sub[data-agent=Developer] .call", has_text="Developer calls deploy")
    call.get_by_role("button", name="Reject").click()
    expect(call.locator("pre.output")).to_have_text("output: Tool execution was not approved.")
    expect(page.locator("#turns .agent[data-agent=CEO] > .text").last).to_contain_text("CEO: Dev:")


def test_images_and_pdfs_go_with_the_message_and_show_as_chips(server: Server, page: Any) -> None:
    page.on("filechooser", lambda chooser: None)  # Playwright takes file choosers from now on, before the page asks
    opened(page, server.url)
    page.locator("#message").fill("look at these")
    page.locator("#attach").focus()
    with page.expect_file_chooser() as chooser:  # the paperclip works from the keyboard
        page.keyboard.press("Enter")
    chooser.value.set_files([{"name": "dot.png", "mimeType": "image/png", "buffer": PNG},
                             {"name": "report.pdf", "mimeType": "application/pdf", "buffer": PDF}])
    expect(page.locator("#picked .chip")).to_have_text(["dot.png · 70 B×", f"report.pdf · {len(PDF)} B×"])
    page.locator("#message").press("Enter")
    answer = page.locator("#turns .agent[data-agent=CEO] > .text").last  # the send names the files it passes on
    expect(answer).to_have_text(re.compile(r"^CEO: Dev did: look at these\n\[attachment att_\w+: image/png\]"))
    user = page.locator("#turns .user-message").last
    pdf = f"report.pdf · application/pdf · {len(PDF)} B"
    expect(user.locator(".chip")).to_have_text(["dot.png · image/png · 70 B", pdf])
    expect(user.locator("img.thumb")).to_have_attribute("src", re.compile("^blob:"))  # the picked file, here
    assert user.locator("img.thumb").evaluate("(img) => img.decode().then(() => img.naturalWidth)") == 1
    expect(page.locator("#picked")).to_be_hidden()
    page.reload()  # stored: by reference (name, type, size), no picture of stored data
    user = page.locator("#turns .user-message", has_text="look at these")
    expect(user.locator(".chip")).to_have_text(["image · image/png · 70 B", pdf])
    expect(user.locator("img")).to_have_count(0)
    expect(page.locator("#threads .item", has_text="[report.pdf]")).to_have_count(1)


def test_refused_attachments_are_a_notice_and_the_message_stays(server: Server, page: Any) -> None:
    opened(page, server.url)
    big = {"name": "big.png", "mimeType": "image/png", "buffer": PNG + bytes(MAX_PART_BYTES)}
    fake = {"name": "fake.png", "mimeType": "image/png", "buffer": b"not a picture"}
    for upload, status in ((big, "too_large"), (fake, "type_mismatch")):
        page.locator("#message").fill("refuse " + status)
        page.locator("#files").set_input_files([upload])
        page.locator("#send").click()
        expect(page.locator("#notice")).to_contain_text("The server refused the attachments: ")
        expect(page.locator("#message")).to_have_value("refuse " + status)  # nothing is lost
        expect(page.locator("#picked .chip")).to_have_count(1)
        expect(page.locator("#turns .turn")).to_have_count(0)
        page.get_by_role("button", name="Remove " + upload["name"]).click()
        expect(page.locator("#picked")).to_be_hidden()
    assert page.evaluate("sessionStorage.getItem('agency_swarm.pending')") is None


def test_model_output_with_markup_is_shown_as_text_and_runs_nothing(server: Server, page: object) -> None:
    opened(page, server.url)
    send(page, "xss please")
    developer = page.locator(".agent.sub[data-agent=Developer] > .text").last
    expect(developer).to_have_text(XSS)
    expect(page.locator("#turns .agent[data-agent=CEO] > .text").last).to_have_text("CEO: " + XSS)
    page.reload()  # the stored chat is shown as text too
    expect(page.locator("#turns .agent[data-agent=CEO] > .text").last).to_have_text("CEO: " + XSS)
    expect(page.locator("#threads .item", has_text="<script>")).not_to_have_count(0)
    assert page.locator("#turns img, #turns script, #threads img, #threads script").count() == 0
    assert page.evaluate("window.__pwned") is None
    assert page.dialogs == []


def test_the_page_is_usable_with_the_keyboard_alone(server: Server, page: object) -> None:
    opened(page, server.url)
    for _ in range(40):  # Tab through the page (bounded) until the message box has the focus
        if page.evaluate("document.activeElement && document.activeElement.id") == "message":
            break
        page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.id") == "message"
    page.keyboard.type("typed with keys")
    page.keyboard.press("Enter")
    expect(page.locator("#turns .agent[data-agent=CEO] > .text").last).to_have_text("CEO: Dev did: typed with keys")


def test_a_reload_mid_turn_shows_the_finished_turn_once(server: Server, gate: Gate, page: object) -> None:
    opened(page, server.url)
    gate.shut()
    try:
        send(page, "[hold] slow work")
        _, waiting = gate.arrivals.get(timeout=60)  # the Developer's model waits at the gate: the turn is running
        expect(page.locator(".call > .who", has_text="CEO → Developer")).to_have_count(1)
        page.reload()
        expect(page.locator("body[data-ready=true]")).to_have_count(1)
    finally:
        gate.open()
    waiting.sendall(b"go\n")
    waiting.close()
    answer = "CEO: Dev did: [hold] slow work"
    expect(page.locator("#turns .agent[data-agent=CEO] > .text", has_text=answer)).to_have_count(1)
    expect(page.locator("#turns .user-message", has_text="[hold] slow work")).to_have_count(1)
    expect(page.locator("#turns .agent.sub[data-agent=Developer]")).to_have_count(1)
    expect(page.locator("#threads summary")).to_have_text(["user->CEO (4)", "CEO->Developer (2)"])


@pytest.fixture
def proxy(request: pytest.FixtureRequest) -> Iterator[CutProxy]:
    """A proxy in front of the test's server (its `server` or `durable_server` fixture, by the test's name)."""
    name = "durable_server" if "durable" in request.node.name else "server"
    proxy = CutProxy(request.getfixturevalue(name).url)
    yield proxy
    proxy.close()


def lose_the_connection(page: Any, proxy: CutProxy, said: str) -> None:
    """The network goes down mid-stream (the page's open connections are cut and it is offline), the page says so,
    then the network is back."""
    page.context.set_offline(True)
    assert proxy.cut() > 0
    expect(page.locator("#notice")).to_have_text(re.compile(said))
    page.context.set_offline(False)


def test_a_lost_connection_mid_turn_shows_the_finished_turn_once_from_the_store(
    proxy: CutProxy, gate: Gate, page: Any
) -> None:
    opened(page, proxy.url)
    gate.shut()
    try:
        send(page, "[hold] offline work")
        _, waiting = gate.arrivals.get(timeout=60)
        expect(page.locator(".call > .who", has_text="CEO → Developer")).to_have_count(1)
        lose_the_connection(page, proxy, "connection was lost")  # the turn goes on on the server
    finally:
        gate.open()
    waiting.sendall(b"go\n")
    waiting.close()
    answer = "CEO: Dev did: [hold] offline work"
    expect(page.locator("#turns .agent[data-agent=CEO] > .text", has_text=answer)).to_have_count(1)
    expect(page.locator("#notice")).to_be_hidden()
    expect(page.locator("#turns .user-message", has_text="[hold] offline work")).to_have_count(1)
    expect(page.locator("#turns .agent.sub[data-agent=Developer]")).to_have_count(1)
    expect(page.locator("#threads summary")).to_have_text(["user->CEO (4)", "CEO->Developer (2)"])
    expect(page.locator("#send")).to_be_enabled()


@pytest.fixture(scope="module")
def auth_server() -> Iterator[Server]:
    server = start_serve(
        ["--factory", "web_chat_app:build_agency", "--store", "memory", "--ui", "--auth-token-env", "WEB_CHAT_TOKEN"],
        env={"WEB_CHAT_TOKEN": TOKEN},
    )
    yield server
    server.stop()


def test_with_auth_the_page_asks_for_a_token_and_sends_it_as_a_bearer_header(auth_server: Server, page: object) -> None:
    opened(page, auth_server.url)
    expect(page.locator("#notice")).to_have_text(re.compile("wants a token"))
    page.locator("#token").fill("wrong-token")
    page.locator("#token").press("Enter")
    expect(page.locator("#notice")).to_have_text(re.compile("refused this token"))
    page.locator("#token").fill(TOKEN)
    page.locator("#token").press("Enter")
    expect(page.locator("#notice")).to_be_hidden()
    chart_drawn(page)
    send(page, "with a token")
    expect(page.locator("#turns .agent[data-agent=CEO] > .text").last).to_have_text("CEO: Dev did: with a token")
    assert page.evaluate(f"sessionStorage.getItem('agency_swarm.token') === {TOKEN!r}")


def test_page_headers(server: Server) -> None:
    import httpx

    for path in ("/ui", "/ui/app.js", "/ui/app.css"):
        response = httpx.get(server.url + path)
        assert response.status_code == 200, path
        policy = response.headers["content-security-policy"]
        assert "default-src 'self'" in policy
        assert "unsafe" not in policy
        assert response.headers["x-content-type-options"] == "nosniff"
    page = httpx.get(server.url + "/ui").text
    assert "<script src=\"/ui/app.js\"" in page
    assert "<script>" not in page
    assert "http" not in page
    assert httpx.get(server.url + "/").headers["location"].endswith("ui")


def test_with_auth_the_page_is_public_and_every_call_wants_the_token(auth_server: Server) -> None:
    import httpx

    assert httpx.get(auth_server.url + "/ui").status_code == 200
    assert httpx.get(auth_server.url + "/ui/app.js").status_code == 200
    assert httpx.get(auth_server.url + "/ui/chart.svg").status_code == 401
    assert httpx.get(auth_server.url + "/chats").status_code == 401
    chart = httpx.get(auth_server.url + "/ui/chart.svg", headers={"Authorization": f"Bearer {TOKEN}"})
    assert chart.headers["content-type"].startswith("image/svg+xml")
    assert "<script" not in chart.text
    assert ">Developer<" in chart.text




@pytest.fixture(scope="module")
def durable_server(gate: Gate) -> Iterator[Server]:
    url = require_postgres()
    server = start_serve(
        ["--factory", "web_chat_app:build_agency", "--store", url, "--durable", "--durable-queue", "web_chat_ui",
         "--ui"],
        env=gate.env,
    )
    yield server
    server.stop()


def test_durable_a_reload_mid_turn_goes_on_from_the_turns_events_without_duplicates(
    durable_server: Server, gate: Gate, page: object
) -> None:
    opened(page, durable_server.url)
    gate.shut()
    try:
        send(page, "[hold] durable work")
        _, waiting = gate.arrivals.get(timeout=60)
        expect(page.locator(".call > .who", has_text="CEO → Developer")).to_have_count(1)
        pending = page.evaluate("JSON.parse(sessionStorage.getItem('agency_swarm.pending'))")
        assert pending["turn"], pending  # durable: the turn's id, to read its events again
        page.reload()
        expect(page.locator("body[data-ready=true]")).to_have_count(1)
        expect(page.locator(".call > .who", has_text="CEO → Developer")).to_have_count(1)  # read again, once
    finally:
        gate.open()
    waiting.sendall(b"go\n")
    waiting.close()
    answer = "CEO: Dev did: [hold] durable work"
    expect(page.locator("#turns .agent[data-agent=CEO] > .text", has_text=answer)).to_have_count(1)
    turn = page.locator("#turns .turn").last
    assert turn.locator(".who, .asked, .text, .output").all_text_contents() == [
        "CEO", "CEO → Developer", "[hold] durable work", "Developer answers CEO", "Dev did: [hold] durable work",
        "answer: Dev did: [hold] durable work", answer,
    ]
    expect(page.locator("#turns .user-message", has_text="[hold] durable work")).to_have_count(1)
    expect(turn.locator(".usage")).to_have_count(1)
    assert page.evaluate("sessionStorage.getItem('agency_swarm.pending')") is None


def test_durable_a_lost_connection_mid_turn_reconnects_from_the_last_event_without_duplicates(
    proxy: CutProxy, gate: Gate, page: Any
) -> None:
    opened(page, proxy.url)
    gate.shut()
    try:
        send(page, "[hold] durable offline")
        _, waiting = gate.arrivals.get(timeout=60)
        expect(page.locator(".call > .who", has_text="CEO → Developer")).to_have_count(1)
        lose_the_connection(page, proxy, "reconnecting")
    finally:
        gate.open()
    waiting.sendall(b"go\n")
    waiting.close()
    answer = "CEO: Dev did: [hold] durable offline"
    expect(page.locator("#turns .agent[data-agent=CEO] > .text", has_text=answer)).to_have_count(1)
    expect(page.locator("#notice")).to_be_hidden()
    turn = page.locator("#turns .turn").last
    assert turn.locator(".who, .asked, .text, .output").all_text_contents() == [
        "CEO", "CEO → Developer", "[hold] durable offline", "Developer answers CEO", "Dev did: [hold] durable offline",
        "answer: Dev did: [hold] durable offline", answer,
    ]
    expect(turn.locator(".usage")).to_have_count(1)
    expect(page.locator("#turns .turn")).to_have_count(1)
    assert page.evaluate("sessionStorage.getItem('agency_swarm.pending')") is None
