// The web chat page: the caller's chats, a turn as it streams (each agent's turn nested under the send that started
// it), approvals, each pair's thread and the chart. Everything from the server or a model is shown as text
// (textContent), never parsed as HTML.
"use strict";

(() => {
  const TOKEN_KEY = "agency_swarm.token";
  const CHAT_KEY = "agency_swarm.chat";
  const PENDING_KEY = "agency_swarm.pending";
  const RECONNECTS = 20;
  const $ = (id) => document.getElementById(id);
  const state = { chat: null, busy: false, chartShown: false, files: [] };

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = typeof text === "string" ? text : JSON.stringify(text);
    return node;
  }

  function notice(text) {
    $("notice").textContent = text || "";
    $("notice").hidden = !text;
  }

  class ApiError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  function headers(extra, form) {
    const all = { ...(form ? {} : { "Content-Type": "application/json" }), ...(extra || {}) };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) all.Authorization = "Bearer " + token;
    return all;
  }

  async function api(path, options) {
    const form = options && options.body instanceof FormData;  // the browser writes its multipart header
    const response = await fetch(path, { ...(options || {}), headers: headers((options || {}).headers, form) });
    if (response.status === 401) {
      $("token-form").hidden = false;
      const had = sessionStorage.getItem(TOKEN_KEY);
      throw new ApiError(401, had ? "The server refused this token: enter a valid one above."
        : "This server wants a token: enter it above (it is kept in this tab only).");
    }
    if (!response.ok) {
      let message = "The server answered " + response.status + ".";
      try {
        const body = await response.json();
        if (body && body.error && body.error.message) message = body.error.message;
      } catch (ignored) { /* not JSON */ }
      throw new ApiError(response.status, message);
    }
    return response;
  }

  const chatPath = (chat) => "/chats/" + encodeURIComponent(chat);

  function newChatId() {
    const bytes = new Uint8Array(8);
    crypto.getRandomValues(bytes);
    return "chat-" + Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
  }

  // -- Server-Sent Events over fetch (a bearer header; EventSource cannot send one) ----------------------------

  async function* sseEvents(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n/g, "\n");
      let cut;
      while ((cut = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        const event = { id: null, type: "message", data: "" };
        for (const line of block.split("\n")) {
          if (line.startsWith(":")) continue;
          const colon = line.indexOf(":");
          const field = colon < 0 ? line : line.slice(0, colon);
          const text = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
          if (field === "id") event.id = text;
          else if (field === "event") event.type = text;
          else if (field === "data") event.data += (event.data ? "\n" : "") + text;
        }
        if (event.data) yield { id: event.id, type: event.type, data: JSON.parse(event.data) };
      }
    }
  }

  // -- cost: the result's estimate in USD (null when a model it called has no price) ------------------------

  function dollars(amount) {
    if (amount === null || amount === undefined) return "unknown";
    const digits = amount >= 1 ? 2 : amount >= 0.01 ? 4 : 6;
    return "$" + amount.toFixed(digits);
  }

  function costView(result) {
    const total = el("span", "cost", "cost " + dollars(result.cost_usd));
    const byAgent = Object.entries(result.cost_by_agent || {}).map(([agent, amount]) => agent + ": " + dollars(amount));
    total.title = byAgent.join("\n");
    total.setAttribute("aria-label", total.textContent + (byAgent.length ? " (" + byAgent.join(", ") + ")" : ""));
    return total;
  }

  // -- attachments: chips with the name, type and size; a picture only of a file picked here (a blob: URL) ----------

  function sizeText(bytes) {
    if (typeof bytes !== "number") return "";
    if (bytes < 1024) return bytes + " B";
    return bytes < 1024 * 1024 ? (bytes / 1024).toFixed(1) + " KB" : (bytes / 1024 / 1024).toFixed(1) + " MB";
  }

  function attachmentChips(attachments) {
    const box = el("div", "attachments");
    for (const a of attachments) {
      const chip = el("span", "chip");
      if (a.url) {
        const thumb = el("img", "thumb");
        thumb.src = a.url;
        thumb.alt = "";
        chip.append(thumb);
      }
      chip.append(el("span", "chip-text", [a.name, a.type, sizeText(a.size)].filter(Boolean).join(" · ")));
      box.append(chip);
    }
    return box;
  }

  function attachmentsOf(item) {  // a stored message's images and files, by reference (never their data)
    if (!Array.isArray(item.content)) return [];
    return item.content.filter((part) => part.type === "input_image" || part.type === "input_file").map((part) => ({
      name: part.filename || (part.type === "input_image" ? "image" : "file"),
      type: (part.attachment && part.attachment.media_type) || "", size: part.attachment && part.attachment.size,
    }));
  }

  function picked() {
    const box = $("picked");
    box.replaceChildren();
    state.files.forEach((file, index) => {
      const chip = el("span", "chip", file.name + " · " + sizeText(file.size));
      const remove = el("button", "remove", "×");
      remove.type = "button";
      remove.setAttribute("aria-label", "Remove " + file.name);
      remove.addEventListener("click", () => {
        state.files.splice(index, 1);
        picked();
        $("attach").focus();
      });
      chip.append(remove);
      box.append(chip);
    });
    box.hidden = !state.files.length;
  }

  // -- one turn, as events arrive ---------------------------------------------------------------------------

  class TurnView {
    constructor(message, into, attachments) {
      this.root = el("div", "turn");
      const user = el("div", "user-message", message);
      if (attachments && attachments.length) user.append(attachmentChips(attachments));
      this.root.append(user);
      this.invocations = new Map();
      this.lanes = new Map();
      this.calls = new Map();
      this.waiting = new Map();
      this.decisions = new Map();
      (into || $("turns")).append(this.root);
    }

    laneKey(e) { return e.caller + ">" + e.agent; }

    lane(e) {
      const stack = this.lanes.get(this.laneKey(e));
      if (stack && stack.length) return stack[stack.length - 1];
      return this.started({ ...e, send_call_id: null, message: "" });
    }

    handle(e) {
      const handlers = {
        agent_started: () => this.started(e), text_delta: () => this.delta(e), tool_called: () => this.called(e),
        message_sent: () => this.sent(e), tool_output: () => this.output(e), hosted_item: () => this.hosted(e),
        approval_requested: () => this.approval(e), agent_finished: () => this.finished(e),
        done: () => this.done(e.result), error: () => this.failed(e.error),
      };
      if (handlers[e.type]) handlers[e.type]();
      const turns = $("turns");
      turns.scrollTop = turns.scrollHeight;
    }

    started(e) {
      const key = e.send_call_id || "";
      let invocation = this.invocations.get(key);
      if (!invocation) {
        const box = el("div", e.send_call_id ? "agent sub" : "agent");
        box.dataset.agent = e.agent;
        box.append(el("div", "who", e.send_call_id ? e.agent + " answers " + e.caller : e.agent));
        const call = e.send_call_id && this.calls.get(e.send_call_id);
        (call ? call.box : this.root).append(box);
        invocation = { box, text: null };
        this.invocations.set(key, invocation);
      }
      const stack = this.lanes.get(this.laneKey(e)) || [];
      stack.push(invocation);
      this.lanes.set(this.laneKey(e), stack);
      return invocation;
    }

    delta(e) {
      const invocation = this.lane(e);
      if (!invocation.text) {
        invocation.text = el("div", "text", "");
        invocation.box.append(invocation.text);
      }
      invocation.text.textContent += e.delta;
    }

    called(e) {
      const invocation = this.lane(e);
      invocation.text = null;
      if (this.calls.has(e.call_id)) return;
      const box = el("div", "call");
      box.dataset.callId = e.call_id;
      const head = el("div", "who", e.agent + " calls " + e.tool);
      box.append(head);
      if (e.tool !== "send_message") box.append(el("pre", "arguments", e.arguments));
      invocation.box.append(box);
      this.calls.set(e.call_id, { box, head, tool: e.tool });
    }

    sent(e) {
      const call = this.calls.get(e.call_id) || (this.called({ ...e, tool: "send_message" }), this.calls.get(e.call_id));
      call.head.textContent = e.agent + " → " + e.recipient;
      if (!call.asked) {
        call.asked = el("div", "asked", e.message);
        call.box.append(call.asked);
      }
    }

    output(e) {
      const call = this.calls.get(e.call_id);
      if (!call || call.output) return;
      const label = call.tool === "send_message" ? "answer: " : "output: ";
      call.output = el("pre", "output", label + e.output);
      call.box.append(call.output);
      if (call.approval) call.approval.remove();
    }

    hosted(e) {
      this.lane(e).box.append(el("pre", "call", e.kind + ": " + JSON.stringify(e.item)));
    }

    approval(e) {
      if (!this.calls.has(e.call_id)) this.called(e);
      const call = this.calls.get(e.call_id);
      if (call.approval || call.output) return;
      const row = el("div", "approval");
      row.append(el("span", null, e.agent + " asks to run " + e.tool + "."));
      const approve = el("button", null, "Approve");
      const reject = el("button", null, "Reject");
      approve.type = reject.type = "button";
      approve.addEventListener("click", () => this.decide(e.call_id, true, row));
      reject.addEventListener("click", () => this.decide(e.call_id, false, row));
      row.append(approve, reject);
      call.box.append(row);
      call.approval = row;
      this.waiting.set(e.call_id, row);
    }

    decide(callId, approved, row) {
      this.decisions.set(callId, approved);
      for (const button of row.querySelectorAll("button")) button.disabled = true;
      row.append(el("span", "status", approved ? " approved" : " rejected"));
      if ([...this.waiting.keys()].every((id) => this.decisions.has(id))) {
        const approve = [], reject = [];
        for (const [id, yes] of this.decisions) (yes ? approve : reject).push(id);
        this.waiting.clear();
        this.decisions.clear();
        streamTurn(chatPath(state.chat) + "/resume:stream", { approve, reject }, this).catch(shown);
      }
    }

    finished(e) {
      const stack = this.lanes.get(this.laneKey(e)) || [];
      const invocation = stack.pop() || this.lane(e);
      invocation.box.classList.add("done");
      if (!invocation.box.querySelector(":scope > .text") && e.output !== null && e.output !== undefined) {
        invocation.box.append(el("div", "text", e.output));
      }
    }

    done(result) {
      const usage = result.usage || {};
      const parts = ["requests " + usage.requests, "input " + usage.input_tokens + " tokens",
        "output " + usage.output_tokens + " tokens"];
      const line = el("div", "usage", "Usage: " + parts.join(", "));
      line.title = Object.entries(result.usage_by_agent || {})
        .map(([agent, u]) => agent + ": " + u.total_tokens + " tokens").join("\n");
      line.append(" · ", costView(result));
      this.root.append(line);
      if (result.paused) this.root.append(el("div", "status", "Paused: approve or reject each call above."));
    }

    failed(error) {
      this.root.append(el("div", "error", (error && error.message) || "The turn failed."));
    }
  }

  // -- streaming a turn, reconnecting in durable mode ---------------------------------------------------------

  function remember(pending) {
    if (pending) sessionStorage.setItem(PENDING_KEY, JSON.stringify(pending));
    else sessionStorage.removeItem(PENDING_KEY);
  }

  async function pump(response, view, pending) {
    let ended = false;
    for await (const event of sseEvents(response)) {
      if (pending && event.id !== null) {
        pending.last = event.id;
        remember(pending);
      }
      view.handle(event.data);
      if (event.type === "done" || event.type === "error") ended = true;
    }
    return ended;
  }

  async function streamTurn(path, body, view, message) {
    setBusy(true);
    let pending = null;
    try {
      let response;
      try {
        response = await api(path, { method: "POST", body: body instanceof FormData ? body : JSON.stringify(body) });
      } catch (refused) {
        refused.unsent = true;  // nothing of the turn began
        throw refused;
      }
      const turn = response.headers.get("turn-id");
      pending = { chat: state.chat, message: message || null, turn, last: null };
      remember(pending);
      let ended = false;
      try {
        ended = await pump(response, view, turn ? pending : null);
      } catch (lost) {
        if (!turn) throw lost;
      }
      if (!ended && !turn) throw new Error("The stream ended before the turn did.");
      if (!ended && turn) {
        notice("The connection was lost; reconnecting to the turn…");
        await reconnect(view, pending);
        notice("");
      }
      remember(null);
    } catch (error) {
      if (pending && !pending.turn) {
        notice("The connection was lost; the turn goes on on the server. Showing the chat as it is stored.");
        remember(null);
        await waitForStored(state.chat, pending.message);
      } else {
        throw error;
      }
    } finally {
      setBusy(false);
      refreshSide();
    }
  }

  async function reconnect(view, pending) {
    for (let attempt = 0; attempt < RECONNECTS; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, Math.min(500 * (attempt + 1), 5000)));
      try {
        const extra = pending.last === null ? {} : { "Last-Event-ID": pending.last };
        const path = chatPath(pending.chat) + "/turns/" + encodeURIComponent(pending.turn) + "/events";
        const response = await api(path, { headers: extra });
        if (await pump(response, view, pending)) return;
      } catch (error) {
        if (error instanceof ApiError && (error.status === 404 || error.status === 405)) {
          // Not durable: a turn's events are not kept to read again, but the turn goes on and its items are stored.
          await waitForStored(pending.chat, pending.message);
          return;
        }
        if (error instanceof ApiError && error.status !== 503) throw error;
      }
    }
    throw new Error("The connection was lost and could not be restored; reload the page to see the chat.");
  }

  // -- a stored chat ---------------------------------------------------------------------------------------------

  function itemText(item) {
    if (typeof item.content === "string") return item.content;
    if (Array.isArray(item.content)) {
      return item.content.map((part) => part.text || "[" + (part.filename || part.type || "part") + "]").join("\n");
    }
    return "";
  }

  function textOf(item) {  // only the text of a message (its images and files are shown as chips)
    if (!Array.isArray(item.content)) return itemText(item);
    return item.content.filter((part) => typeof part.text === "string").map((part) => part.text).join("\n");
  }

  // A chat as stored, with its bookkeeping marks (`?marks=true`): the calls that wait for approval are those marked
  // as waiting, not started since and without an output. The marks themselves are not shown.
  const MARK = "agency_swarm.";

  function withoutMarks(threads) {
    const shown = {}, waiting = new Set();
    for (const [key, items] of Object.entries(threads)) {
      const awaiting = new Set(), answered = new Set();
      for (const item of items) {
        if (item.type === MARK + "awaiting_approval") awaiting.add(item.call_id);
        else if (item.type === MARK + "approved_run") awaiting.delete(item.call_id);
        else if (item.type === "function_call_output") answered.add(item.call_id);
      }
      for (const id of awaiting) if (!answered.has(id)) waiting.add(id);
      shown[key] = items.filter((item) => !(typeof item.type === "string" && item.type.startsWith(MARK)));
    }
    return { threads: shown, waiting };
  }

  function replaySegment(view, stored, items, caller, agent, depth, sendCallId) {
    const base = { agent, caller, depth };
    view.handle({ ...base, type: "agent_started", send_call_id: sendCallId, message: "" });
    let answered = false;
    for (const item of items) {
      if (item.type === "function_call") {
        view.handle({ ...base, type: "tool_called", tool: item.name, call_id: item.call_id, arguments: item.arguments });
        if (item.name === "send_message") replaySend(view, stored, agent, depth, item);
        if (stored.waiting.has(item.call_id)) view.handle({ ...base, type: "approval_requested", tool: item.name,
          call_id: item.call_id, arguments: item.arguments });
      } else if (item.type === "function_call_output") {
        view.handle({ ...base, type: "tool_output", call_id: item.call_id, output: String(item.output) });
      } else if (item.role === "assistant") {
        view.handle({ ...base, type: "text_delta", delta: itemText(item) });
        answered = true;
      }
    }
    if (answered) view.handle({ ...base, type: "agent_finished", send_call_id: sendCallId, output: null });
    return answered;
  }

  function replaySend(view, stored, sender, depth, call) {
    let args = {};
    try { args = JSON.parse(call.arguments); } catch (ignored) { /* shown as sent */ }
    const recipient = String(args.recipient_agent || "");
    view.handle({ agent: sender, type: "message_sent", recipient, message: String(args.message || ""),
      call_id: call.call_id });
    const items = stored.threads[sender + "->" + recipient] || [];
    const start = items.findIndex((item) => item.send_call_id === call.call_id);
    if (start < 0) return;
    const rest = items.slice(start + 1);
    const next = rest.findIndex((item) => item.role === "user");
    replaySegment(view, stored, next < 0 ? rest : rest.slice(0, next), sender, recipient, depth + 1, call.call_id);
  }

  // Draws the stored chat; true once its last turn is settled (answered, or paused for approvals).
  function replayChat(stored) {
    $("turns").replaceChildren();
    const fragment = document.createDocumentFragment();
    let finished = true;
    for (const [key, items] of Object.entries(stored.threads)) {
      if (!key.startsWith("user->")) continue;
      const agent = key.slice("user->".length);
      let segment = null;
      const flush = () => {
        if (!segment) return;
        finished = replaySegment(segment.view, stored, segment.items, "user", agent, 0, null);
        if (segment.view.waiting.size) {
          segment.view.root.append(el("div", "status", "Paused: approve or reject each call above."));
          finished = true;
        }
      };
      for (const item of items) {
        if (item.role === "user") {
          flush();
          segment = { view: new TurnView(textOf(item), fragment, attachmentsOf(item)), items: [] };
        } else if (segment) {
          segment.items.push(item);
        }
      }
      flush();
    }
    $("turns").append(fragment);
    return finished;
  }

  async function loadChat(chat) {
    const response = await api(chatPath(chat) + "/threads?marks=true");
    return withoutMarks((await response.json()).threads || {});
  }

  async function loadThreads(chat) {
    return (await loadChat(chat)).threads;
  }

  // Plain mode after a lost stream: the turn goes on on the server; read the stored chat until its last turn is
  // settled. While the network is down the reads fail; they are tried again (a refusal by the server is not).
  async function waitForStored(chat, message) {
    for (let attempt = 0; attempt < 120 && state.chat === chat; attempt++) {
      let stored = null;
      try {
        stored = await loadChat(chat);
      } catch (error) {
        if (error instanceof ApiError && error.status !== 503) throw error;
      }
      if (stored) {
        const finished = replayChat(stored);
        showThreads(stored.threads);
        const entry = Object.entries(stored.threads).find(([key]) => key.startsWith("user->"));
        const hasMessage = !message || (entry && entry[1].some((item) => item.role === "user" && textOf(item) === message));
        if (finished && hasMessage) {
          notice("");
          return;
        }
      }
      await new Promise((resolve) => setTimeout(resolve, 1000));
    }
  }

  function showThreads(threads) {
    const box = $("threads");
    box.replaceChildren();
    for (const [key, items] of Object.entries(threads)) {
      const details = el("details", "thread");
      details.append(el("summary", null, key + " (" + items.length + ")"));
      for (const item of items) {
        const who = item.role || item.type || "item";
        let text = itemText(item);
        if (item.type === "function_call") text = item.name + " " + item.arguments;
        if (item.type === "function_call_output") text = String(item.output);
        details.append(el("div", "item", who + ": " + text));
      }
      box.append(details);
    }
  }

  // -- the chat list, the side panel, the composer ------------------------------------------------------------

  async function refreshChats() {
    const response = await api("/chats?limit=50");
    const list = $("chats");
    list.replaceChildren();
    for (const chat of (await response.json()).chats || []) {
      const button = el("button", null, chat.title || chat.chat_id);
      button.type = "button";
      button.dataset.chatId = chat.chat_id;
      button.setAttribute("aria-current", String(chat.chat_id === state.chat));
      button.addEventListener("click", () => openChat(chat.chat_id).catch(shown));
      const item = el("li");
      item.append(button);
      list.append(item);
    }
  }

  async function refreshChart() {
    if (state.chartShown) return;
    const response = await api("/ui/chart.svg");
    $("chart").src = URL.createObjectURL(await response.blob());
    state.chartShown = true;
  }

  function refreshSide() {
    const chat = state.chat;
    Promise.all([refreshChats(), refreshChart(), chat ? loadThreads(chat).then(showThreads) : null]).catch(shown);
  }

  async function openChat(chat) {
    state.chat = chat;
    sessionStorage.setItem(CHAT_KEY, chat);
    notice("");
    const stored = await loadChat(chat);
    replayChat(stored);
    showThreads(stored.threads);
    await refreshChats();
  }

  function newChat() {
    state.chat = newChatId();
    sessionStorage.setItem(CHAT_KEY, state.chat);
    $("turns").replaceChildren();
    $("threads").replaceChildren();
    notice("");
    for (const button of $("chats").querySelectorAll("button")) button.setAttribute("aria-current", "false");
    $("message").focus();
  }

  function setBusy(busy) {
    state.busy = busy;
    $("send").disabled = busy;
  }

  function shown(error) {
    notice(error && error.message ? error.message : String(error));
  }

  async function send() {
    const message = $("message").value;
    const files = state.files.slice();
    if ((!message.trim() && !files.length) || state.busy) return;
    if (!state.chat) newChat();
    $("message").value = "";
    state.files = [];
    picked();
    notice("");
    const view = new TurnView(message, null, files.map((file) => ({ name: file.name, type: file.type,
      size: file.size, url: /^image\/(png|jpeg|gif|webp)$/.test(file.type) ? URL.createObjectURL(file) : null })));
    let body = { message };
    if (files.length) {  // multipart/form-data: the message, then each file as a part with its name
      body = new FormData();
      body.append("message", message);
      for (const file of files) body.append("files", file, file.name);
    }
    try {
      await streamTurn(chatPath(state.chat) + "/messages:stream", body, view, message);
    } catch (error) {
      if (!error.unsent) throw error;
      view.root.remove();  // refused before anything ran: the message and its files go back to the composer
      $("message").value = message;
      state.files = files;
      picked();
      const refusedFiles = files.length && (error.status === 413 || error.status === 415);
      throw new Error(refusedFiles ? "The server refused the attachments: " + error.message : error.message);
    }
  }

  async function resumePending() {
    const pending = JSON.parse(sessionStorage.getItem(PENDING_KEY) || "null");
    if (!pending || pending.chat !== state.chat) return;
    if (!pending.turn) {
      remember(null);
      await waitForStored(pending.chat, pending.message);
      return;
    }
    // Durable: the whole turn again, from its first event (the view was rebuilt), then live.
    const stored = await loadChat(pending.chat);
    const entry = Object.entries(stored.threads).find(([key]) => key.startsWith("user->"));
    const items = entry ? entry[1] : [];
    const last = items.map((item) => item.role === "user").lastIndexOf(true);
    replayChat({ waiting: new Set(), threads: Object.fromEntries(Object.entries(stored.threads).map(([key, its]) =>
      [key, key === (entry && entry[0]) && last >= 0 ? its.slice(0, last) : its])) });
    const view = new TurnView(pending.message || "");
    setBusy(true);
    try {
      await reconnect(view, { ...pending, last: null });
      remember(null);
    } finally {
      setBusy(false);
      refreshSide();
    }
  }

  async function start() {
    $("token").value = sessionStorage.getItem(TOKEN_KEY) || "";
    $("token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, $("token").value.trim());
      notice("");
      state.chartShown = false;
      refreshSide();
    });
    $("new-chat").addEventListener("click", newChat);
    $("attach").addEventListener("click", () => $("files").click());
    $("files").addEventListener("change", () => {
      state.files.push(...$("files").files);
      $("files").value = "";  // the same file may be picked again
      picked();
    });
    $("composer").addEventListener("submit", (event) => {
      event.preventDefault();
      send().catch(shown);
    });
    $("message").addEventListener("keydown", (event) => {
      if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        send().catch(shown);
      }
    });
    const chat = sessionStorage.getItem(CHAT_KEY);
    try {
      await refreshChats();
      await refreshChart();
      if (chat) await openChat(chat);
      document.body.dataset.ready = "true";
      if (chat) await resumePending();
    } catch (error) {
      shown(error);
    }
    document.body.dataset.ready = "true";
  }

  start();
})();
