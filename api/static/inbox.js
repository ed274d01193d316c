// Troupe's approval inbox: lists every pause waiting for a human (the first page pushed by the server
// as server-sent events from GET /api/inbox/events, then only what changes; "Show more" asks for the
// next page by its cursor) and decides them with the ordinary routes (approve-tool-call,
// decline-tool-call, resume-stream), reading the run's server-sent events to show what happened next.
// Plain JavaScript, no build step, no dependencies. Everything shown comes from the server and is put
// in the page as text, never as HTML; invisible and direction-changing characters are shown as marks.
// Cards keep their place: the oldest pause first, a new one appended with a "new" mark.
"use strict";

(() => {
  const KEY_STORE = "troupe.inbox.apiKey";
  const query = new URLSearchParams(location.search);
  // How often the server looks for changes to push (seconds); a retry after a broken stream waits 2 s.
  const INTERVAL_S = Math.max(0.05, Number(query.get("interval")) || 1);
  const RETRY_MS = 2000;
  // Runs per page (the server's default, 100, unless the page's address says perPage=N).
  const PER_PAGE = Math.floor(Number(query.get("perPage"))) || 0;
  const SIZE = PER_PAGE > 0 ? `&perPage=${Math.min(PER_PAGE, 1000)}` : "";
  // The API sits next to the page, whatever prefix the app is mounted under.
  const BASE = location.pathname.replace(/\/inbox\/?$/, "") + "/api";

  const state = {
    key: sessionStorage.getItem(KEY_STORE) || "",
    cards: new Map(), // pause id -> card
    timer: 0,
    listening: null, // AbortController of the open event stream
    loaded: false, // the first listing is in: later arrivals are marked new
    paused: false, // waiting for a key
    nextCursor: null, // the page after the last one shown (null: every pending pause is shown)
    total: 0, // runs waiting, as the server counts them
  };

  const $ = (id) => document.getElementById(id);

  // ---- small helpers ------------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children.flat(Infinity)) {
      if (child === null || child === undefined || child === false) continue;
      node.append(...(child instanceof Node ? [child] : visible(String(child))));
    }
    return node;
  }

  // Characters that do not show, or that reorder what is shown (a right-to-left override can make
  // "exe.txt" read "txt.exe"; tag characters spell out text no screen draws): each is put in the page
  // as a visible mark naming its code point. The same set as troupe.core.vocabulary.hidden_chars:
  // controls (but tab and newline), format characters, surrogates, line and paragraph separators, and
  // the few others that draw nothing (variation selectors, Hangul fillers).
  const HIDDEN =
    /(?![\t\n])[\p{Cc}\p{Cf}\p{Cs}\p{Zl}\p{Zp}\u034F\u115F\u1160\u17B4\u17B5\u3164\uFFA0\uFE00-\uFE0F\u{E0100}-\u{E01EF}]/gu;

  function visible(text) {
    const parts = [];
    let at = 0;
    for (const found of text.matchAll(HIDDEN)) {
      if (found.index > at) parts.push(text.slice(at, found.index));
      const code = `U+${found[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
      const mark = document.createElement("span");
      mark.className = "invisible";
      mark.dataset.testid = "invisible";
      mark.title = `${code}: an invisible or direction-changing character`;
      mark.textContent = `\u27e6${code}\u27e7`;
      parts.push(mark);
      at = found.index + found[0].length;
    }
    if (at < text.length) parts.push(text.slice(at));
    return parts;
  }

  // JSON as the server wrote it: a number JavaScript cannot hold exactly (an account number of 17
  // digits, an amount past 2^53) is kept as its text, so that the person approves the digits the tool
  // will get, not the nearest double. (Browsers without JSON.rawJSON round, as before.)
  const exactly = (key, value, context) =>
    typeof value === "number" && context && typeof JSON.rawJSON === "function" && String(value) !== context.source
      ? JSON.rawJSON(context.source)
      : value;
  const readJson = (text) => JSON.parse(text, exactly);
  const jsonOf = async (response) => readJson(await response.text());

  const pretty = (value) => {
    if (value === undefined) return "";
    try {
      return JSON.stringify(value, null, 2);
    } catch {
      return String(value);
    }
  };

  // A call's arguments as a card shows them first: every key, each long text, list or object cut where
  // it is, with a mark saying how much was left out (a model may pad one value to push the one that
  // matters out of view), within a budget of values; "Show all arguments" shows them whole.
  const CUT = { chars: 300, items: 20, keys: 100, values: 400 };

  function argsPreview(args) {
    const parts = [];
    let budget = CUT.values;
    let cut = false;
    const more = (n, noun) => `\u2026 ${n.toLocaleString("en")} more ${noun}${n === 1 ? "" : "s"}`;
    const mark = (text) => {
      cut = true;
      parts.push(el("span", { class: "cut", "data-testid": "cut" }, text));
    };
    const text = (value) => {
      if (value.length <= CUT.chars) {
        parts.push(JSON.stringify(value));
        return;
      }
      parts.push(JSON.stringify(value.slice(0, CUT.chars)).slice(0, -1));
      mark(more(value.length - CUT.chars, "character"));
      parts.push('"');
    };
    const write = (value, indent) => {
      budget -= 1;
      if (typeof value === "string") return text(value);
      if (value === null || typeof value !== "object" || JSON.isRawJSON?.(value)) {
        parts.push(JSON.stringify(value));
        return;
      }
      const list = Array.isArray(value);
      const entries = list ? value.map((item) => [null, item]) : Object.entries(value);
      if (!entries.length) {
        parts.push(list ? "[]" : "{}");
        return;
      }
      const room = Math.max(1, Math.min(list ? CUT.items : CUT.keys, budget));
      const inner = `${indent}  `;
      parts.push(list ? "[" : "{");
      entries.slice(0, room).forEach(([key, item], i) => {
        parts.push(`\n${inner}`);
        if (key !== null) {
          text(key);
          parts.push(": ");
        }
        if (budget > 0) write(item, inner);
        else mark("\u2026");
        if (i < entries.length - 1) parts.push(",");
      });
      if (entries.length > room) {
        parts.push(`\n${inner}`);
        mark(more(entries.length - room, list ? "item" : "key"));
      }
      parts.push(`\n${indent}${list ? "]" : "}"}`);
    };
    write(args, "");
    return { nodes: parts.flatMap((part) => (part instanceof Node ? [part] : visible(part))), cut };
  }

  function argsSection(args) {
    const preview = argsPreview(args);
    const shown = el("pre", { "data-testid": "args" }, preview.nodes);
    if (!preview.cut) return [shown];
    shown.classList.add("preview");
    const whole = pretty(args);
    const all = `Show all arguments (${whole.length.toLocaleString("en")} characters)`;
    const button = el("button", { type: "button", class: "link", "data-testid": "show-all-args" }, all);
    button.addEventListener("click", () => {
      const cutNow = shown.classList.toggle("preview");
      shown.replaceChildren(...(cutNow ? argsPreview(args).nodes : visible(whole)));
      button.textContent = cutNow ? all : "Show them cut";
    });
    const note = "Long values are cut here so that every argument shows. ";
    return [el("p", { class: "cut-note", "data-testid": "args-cut" }, note, button), shown];
  }

  // A tool's result as it is: text as text, anything else as JSON.
  const shown = (value) => (typeof value === "string" ? value : pretty(value));

  // What a suspended tool asks, as a person reads it: the question itself (a payload that is text, or
  // its "question" field or the like), then any other fields as "Name: value" lines. Never raw JSON.
  const QUESTION_FIELDS = ["question", "message", "prompt", "text"];

  const words = (key) => {
    const spaced = String(key).replace(/[_-]+/g, " ").replace(/([a-z0-9])([A-Z])/g, "$1 $2").trim();
    return spaced.charAt(0).toUpperCase() + spaced.slice(1).toLowerCase();
  };

  function plainly(value) {
    if (value === null || value === undefined) return "—";
    if (typeof value !== "object") return String(value);
    if (Array.isArray(value)) return value.map(plainly).join(", ");
    return Object.entries(value)
      .map(([k, v]) => `${words(k)}: ${plainly(v)}`)
      .join("; ");
  }

  function asked(payload) {
    if (payload === null || payload === undefined || payload === "") return [];
    if (typeof payload !== "object") return [el("p", { class: "question", "data-testid": "question" }, String(payload))];
    const field = Array.isArray(payload) ? null : QUESTION_FIELDS.find((k) => typeof payload[k] === "string");
    const rest = Array.isArray(payload) ? [["", payload]] : Object.entries(payload).filter(([k]) => k !== field);
    return [
      field ? el("p", { class: "question", "data-testid": "question" }, payload[field]) : null,
      rest.length
        ? el("dl", { class: "asked" }, rest.map(([k, v]) => [el("dt", {}, k ? words(k) : "Items"), el("dd", {}, plainly(v))]))
        : null,
    ];
  }

  // How a run ended, in words (the stream's finish reason is for programs).
  const ENDED = {
    stop: "The run finished.",
    "max-steps": "The run stopped: it used all the steps it is allowed.",
    "max-duration": "The run stopped: it ran out of time.",
    cancelled: "The run was cancelled.",
    length: "The run stopped: the model's answer was too long.",
    "content-filter": "The run stopped: the model's provider held the answer back.",
  };

  const pad = (n) => String(n).padStart(2, "0");

  function stamp(date) {
    return (
      `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ` +
      `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`
    );
  }

  function span(ms) {
    const s = Math.max(0, Math.round(Math.abs(ms) / 1000));
    if (s < 60) return `${s} s`;
    if (s < 3600) return `${Math.floor(s / 60)} min`;
    if (s < 86400) return `${Math.floor(s / 3600)} h ${Math.floor((s % 3600) / 60)} min`;
    return `${Math.floor(s / 86400)} d ${Math.floor((s % 86400) / 3600)} h`;
  }

  const dateOf = (iso) => {
    if (!iso) return null;
    const date = new Date(iso);
    return Number.isNaN(date.getTime()) ? null : date;
  };

  class ApiError extends Error {
    constructor(status, code, message, details) {
      super(message);
      this.status = status;
      this.code = code;
      this.details = details || {};
    }
  }

  async function api(method, path, body, accept, signal) {
    const headers = { Accept: accept || "application/json" };
    if (state.key) headers.Authorization = `Bearer ${state.key}`;
    if (body !== undefined) headers["Content-Type"] = "application/json";
    let response;
    try {
      response = await fetch(BASE + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        cache: "no-store",
        credentials: "same-origin", // a host app's session cookie, when Troupe is mounted in one
        signal,
      });
    } catch (err) {
      throw new ApiError(0, "NETWORK", `the server cannot be reached (${err.message})`);
    }
    if (!response.ok) {
      let body = null;
      try {
        body = await response.json();
      } catch {
        // not one of ours: keep the status
      }
      // Mastra's shape: {error: "<message>", code, details}.
      const ours = body && typeof body.error === "string";
      throw new ApiError(
        response.status,
        (ours && body.code) || `HTTP_${response.status}`,
        (ours && body.error) || `HTTP ${response.status}`,
        ours ? body.details : undefined,
      );
    }
    return response;
  }

  // The chunks of a server-sent event stream: `data: {...}` frames, up to `data: [DONE]`.
  async function* chunksOf(response) {
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      const { value, done } = await reader.read();
      buffer += decoder.decode(value || new Uint8Array(), { stream: !done });
      let cut;
      while ((cut = buffer.search(/\r?\n\r?\n/)) >= 0) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut).replace(/^\r?\n\r?\n/, "");
        const data = block
          .split(/\r?\n/)
          .filter((line) => line.startsWith("data:"))
          .map((line) => line.slice(5).replace(/^ /, ""))
          .join("\n");
        if (!data) continue;
        if (data === "[DONE]") return;
        yield readJson(data);
      }
      if (done) return;
    }
  }

  // ---- the key --------------------------------------------------------------------------------------

  function useKey(key) {
    state.key = key;
    if (key) sessionStorage.setItem(KEY_STORE, key);
    else sessionStorage.removeItem(KEY_STORE);
  }

  function showLogin(reason) {
    state.paused = true;
    stopListening();
    clearCards();
    $("login-reason").textContent = reason;
    $("login").hidden = false;
    $("empty").hidden = true;
    $("count").textContent = "";
    $("who").textContent = "";
    $("change-key").hidden = true;
    setStatus("", "");
    $("api-key").value = "";
    $("api-key").focus();
  }

  function showWho() {
    $("who").textContent = state.key ? `Key …${state.key.slice(-4)}` : "Open mode (no key)";
    $("change-key").textContent = state.key ? "Change key" : "Use a key";
    $("change-key").hidden = false;
  }

  function onUnauthorized(err) {
    const had = Boolean(state.key);
    useKey("");
    showLogin(
      had
        ? "That key was not accepted. Check it, or ask whoever runs this server for one, and enter it again."
        : "This server needs an API key or a sign-in token to show what is waiting for you.",
    );
  }

  // ---- the listing, pushed by the server -------------------------------------------------------------

  function setStatus(kind, text) {
    const status = $("status");
    status.className = `status ${kind}`;
    status.textContent = text;
  }

  function stopListening() {
    clearTimeout(state.timer);
    if (state.listening) state.listening.abort();
    state.listening = null;
  }

  function showListing(data) {
    render(data);
    showWho();
    setStatus("live", `Live · updated ${stamp(new Date()).slice(11)}`);
  }

  function showChanges(data) {
    applyChanges(data);
    showWho();
    setStatus("live", `Live · updated ${stamp(new Date()).slice(11)}`);
  }

  // One stream at a time; the server sends the listing's first page now, then what changes.
  async function listen() {
    stopListening();
    if (state.paused) return;
    const mine = new AbortController();
    state.listening = mine;
    try {
      const response = await api("GET", `/inbox/events?interval=${INTERVAL_S}${SIZE}`, undefined, "text/event-stream", mine.signal);
      for await (const data of chunksOf(response)) {
        if (state.listening !== mine) return;
        if (data.error) setStatus("error", `Cannot load the inbox: ${data.error.message}. Retrying…`);
        else if (data.type === "changes") showChanges(data);
        else showListing(data);
      }
      if (state.listening !== mine) return;
      setStatus("error", "The server closed the inbox stream. Reconnecting…");
    } catch (err) {
      if (state.listening !== mine) return;
      if (err.status === 401) {
        onUnauthorized(err);
        return;
      }
      setStatus("error", `Cannot load the inbox: ${err.message}. Reconnecting…`);
    }
    state.listening = null;
    if (!state.paused) state.timer = setTimeout(listen, RETRY_MS);
  }

  // A listing now (after a decision), besides what the stream pushes.
  async function refresh() {
    if (state.paused) return;
    try {
      showListing(await jsonOf(await api("GET", SIZE ? `/inbox?${SIZE.slice(1)}` : "/inbox")));
    } catch (err) {
      if (err.status === 401) onUnauthorized(err);
    }
  }

  const pauseId = (run, call) =>
    [run.agentId, run.runId, call.toolCallId, call.fingerprint, call.pausedAt].join("\u0000");

  // Where a run sits in the listing: its pause time, then its id (the server's order).
  const placeOf = (run) => [Date.parse(run.suspendedAt) || 0, run.runId];
  const isAfter = (a, b) => a[0] > b[0] || (a[0] === b[0] && a[1] > b[1]);

  // The card of one paused call, made (to be appended) if there is none and `make` says so.
  function cardFor(run, call, make) {
    const id = pauseId(run, call);
    let card = state.cards.get(id);
    if (!card) {
      if (!make) return null;
      card = makeCard(id, run, call);
      card.fresh = true;
      state.cards.set(id, card);
    }
    refreshReach(card, run, call);
    if (card.status === "gone") setCardStatus(card, "pending");
    return card;
  }

  // Appended, oldest first: nothing already on the page moves under the person's pointer.
  function appendFresh(markThem) {
    for (const card of state.cards.values()) {
      if (!card.fresh) continue;
      card.fresh = false;
      if (markThem) markNew(card);
      $("pauses").append(card.el);
    }
  }

  // The listing's first page (when the stream starts, and after a decision).
  function render(data) {
    const listed = new Set();
    const runs = data.runs || [];
    for (const run of runs) {
      for (const call of run.toolCalls || []) listed.add(cardFor(run, call, true).id);
    }
    appendFresh(state.loaded);
    state.loaded = true;
    // The page reaches as far as its last run: a pending card before that which it does not list was
    // decided elsewhere (or expired); were it listed again (an older answer arriving late), it would
    // turn back to pending above. A card past it (from "Show more") goes: the next pages bring it.
    const end = data.nextCursor && runs.length ? placeOf(runs[runs.length - 1]) : null;
    for (const [id, card] of state.cards) {
      if (listed.has(id) || (card.status !== "pending" && card.status !== "gone")) continue;
      if (end && isAfter(placeOf(card.run), end)) {
        card.el.remove();
        state.cards.delete(id);
      } else if (card.status === "pending") markGone(card);
    }
    state.nextCursor = data.nextCursor || null;
    state.total = data.total || 0;
    showCounts();
  }

  // What the stream says changed: runs that entered or changed (with all they wait on), runs that left.
  function applyChanges(data) {
    for (const runId of data.unlisted || []) {
      for (const card of state.cards.values()) {
        if (card.run.runId === runId && card.status === "pending") markGone(card);
      }
    }
    for (const run of data.listed || []) {
      // A run past the pages shown is left to "Show more"; one on them gains its new calls.
      const shown = !state.nextCursor || [...state.cards.values()].some((c) => c.run.runId === run.runId);
      const waiting = new Set();
      for (const call of run.toolCalls || []) {
        const card = cardFor(run, call, shown);
        if (card) waiting.add(card.id);
      }
      for (const card of state.cards.values()) {
        // A call of the run that it no longer waits on was decided.
        if (card.run.runId === run.runId && !waiting.has(card.id) && card.status === "pending") {
          markGone(card);
        }
      }
    }
    appendFresh(true);
    state.total = data.total || 0;
    showCounts();
  }

  // The next page, after the last one shown.
  async function showMore() {
    if (!state.nextCursor || state.paused) return;
    const button = $("more");
    button.disabled = true;
    try {
      const response = await api("GET", `/inbox?cursor=${encodeURIComponent(state.nextCursor)}${SIZE}`);
      const data = await jsonOf(response);
      for (const run of data.runs || []) {
        for (const call of run.toolCalls || []) cardFor(run, call, true);
      }
      appendFresh(false);
      state.nextCursor = data.nextCursor || null;
      state.total = data.total || 0;
      showCounts();
    } catch (err) {
      if (err.status === 401) onUnauthorized(err);
      else setStatus("error", `Cannot load more: ${err.message}`);
    } finally {
      button.disabled = false;
    }
  }

  function showCounts() {
    for (const card of state.cards.values()) refreshTimes(card);
    const waiting = [...state.cards.values()].filter((card) => card.status === "pending").length;
    const more = Boolean(state.nextCursor);
    $("count").textContent = more
      ? `${state.total} runs waiting, ${waiting} calls shown`
      : waiting
        ? `${waiting} waiting`
        : "";
    const count = more ? state.total : waiting;
    document.title = count ? `(${count}) Approval inbox · Troupe` : "Approval inbox · Troupe";
    $("empty").hidden = waiting > 0 || more;
    // Below cards just decided it says what is left, not that nothing ever was.
    $("empty").textContent = state.cards.size > waiting ? "Nothing else is waiting for you." : "Nothing is waiting for you.";
    $("more").hidden = !more;
  }

  function clearCards() {
    state.cards.clear();
    state.loaded = false;
    state.nextCursor = null;
    state.total = 0;
    $("pauses").replaceChildren();
    $("more").hidden = true;
  }

  // A pause that arrived while the page was open carries a "new" mark until the person reaches it.
  function markNew(card) {
    const mark = el("span", { class: "badge new", "data-testid": "new", title: "Arrived while you were here" }, "new");
    card.el.classList.add("new");
    card.head.insertBefore(mark, card.head.firstChild);
    const seen = () => {
      mark.remove();
      card.el.classList.remove("new");
    };
    card.el.addEventListener("pointerenter", seen, { once: true });
    card.el.addEventListener("focusin", seen, { once: true });
  }

  // What the person needs to judge the call: the request that started the run, what the model said
  // before the call, and what the tool does (the agent path is in the card's head).
  function contextOf(call) {
    const c = call.context || {};
    const row = (label, id, text) => [el("dt", {}, label), el("dd", { "data-testid": id }, text || "—")];
    return el(
      "section",
      { class: "context", "data-testid": "context" },
      el("h3", {}, "Context"),
      el(
        "dl",
        {},
        row("Request", "context-request", c.request),
        row("The model said", "context-model-text", c.modelText),
        row("The tool", "context-tool", c.toolDescription),
        ...(call.toolOrigin ? row("Comes from", "context-origin", originText(call.toolOrigin)) : []),
      ),
    );
  }

  // Where a tool comes from, e.g. an MCP server, and what it says of itself (MCP's annotations).
  function originText(origin) {
    const hints = Object.entries(origin.annotations || {})
      .filter(([, value]) => typeof value === "boolean")
      .map(([name, value]) => `${name}: ${value}`);
    const server = origin.mcp_server ? `MCP server ${origin.mcp_server}` : "another source";
    return hints.length ? `${server} (${hints.join(", ")})` : server;
  }

  // ---- one pause ------------------------------------------------------------------------------------

  // Who someone is, as separation of duties compares them: subject at issuer.
  function personTitle(person) {
    return person && person.subject ? `${person.subject} at ${person.issuer}` : "";
  }

  function makeCard(id, run, call) {
    const kind = call.requiresApproval ? "approval" : "input";
    const path = call.agentPath && call.agentPath.length ? call.agentPath : [run.agentId];
    const card = { id, run, call, kind, status: "pending" };

    card.since = el("span", { class: "since", "data-testid": "since" });
    card.badge = el("span", { class: `badge ${kind}`, "data-testid": "badge" });
    card.expires = el("dd", { "data-testid": "expires" });
    card.sinceAt = el("dd", { "data-testid": "waiting-since" });
    card.approvals = el("dd", { "data-testid": "approvals" });
    card.deliveries = el("dd", { "data-testid": "deliveries" });
    card.error = el("p", { class: "error", "data-testid": "error", role: "alert", hidden: true });
    card.outcome = el("div", { class: "outcome", "data-testid": "outcome", hidden: true });
    card.gone = el(
      "p",
      { class: "gone-note", "data-testid": "gone", hidden: true },
      "No longer pending: decided elsewhere or expired.",
    );

    const head = el(
      "div",
      { class: "head" },
      el(
        "span",
        { class: "path", "data-testid": "agent-path", title: "Agent path, from the top agent" },
        path.map((name, i) => [i ? el("span", { class: "chev" }, "›") : null, el("span", {}, name)]),
      ),
      el("code", { class: "tool", "data-testid": "tool" }, call.toolName),
      card.badge,
      call.interrupted
        ? el(
            "span",
            {
              class: "badge warn",
              "data-testid": "interrupted",
              title: "The tool was interrupted by a crash while running; it has not finished",
            },
            "interrupted",
          )
        : null,
      el("span", { class: "spacer" }),
      card.since,
    );

    const meta = el(
      "dl",
      { class: "meta" },
      el("dt", {}, "Thread"),
      el("dd", { "data-testid": "thread" }, run.threadId || "—"),
      el("dt", {}, "Resource"),
      el("dd", { "data-testid": "resource" }, run.resourceId || "—"),
      el("dt", {}, "Started by"),
      el("dd", { "data-testid": "started-by", title: personTitle(run.starter) }, run.startedBy || "—"),
      el("dt", {}, "Waiting since"),
      card.sinceAt,
      el("dt", {}, "Expires"),
      card.expires,
      el("dt", {}, "Run"),
      el("dd", {}, el("code", { "data-testid": "run-id" }, run.runId)),
      el("dt", {}, "Tool call"),
      el("dd", {}, el("code", { "data-testid": "tool-call-id" }, call.toolCallId)),
      el("dt", {}, "Approvals"),
      card.approvals,
      el("dt", {}, "Notifications"),
      card.deliveries,
    );

    card.head = head;
    const details = el(
      "div",
      { class: "details" },
      contextOf(call),
      el(
        "section",
        { class: "args" },
        el("h3", {}, "Arguments"),
        argsSection(call.args),
      ),
      kind === "input" && asked(call.suspendPayload).length
        ? el(
            "section",
            { class: "asks" },
            el("h3", {}, "The tool asks"),
            el("div", { "data-testid": "asks" }, asked(call.suspendPayload)),
          )
        : null,
    );

    card.actions = el("div", { class: "actions" });
    if (kind === "approval") {
      card.actions.append(
        el(
          "button",
          { type: "button", class: "primary", "data-testid": "approve", onclick: () => decide(card, "approve") },
          "Approve",
        ),
      );
    } else {
      card.actions.append(answerForm(card, call.resumeSchema));
    }
    card.reason = el("input", {
      type: "text",
      class: "reason",
      "data-testid": "reason",
      placeholder: "Reason (optional)",
      title: "Why you decline: the model is told",
      "aria-label": "Reason for declining",
      maxlength: 100000,
    });
    card.actions.append(
      el(
        "div",
        { class: "decline" },
        card.reason,
        el(
          "button",
          { type: "button", class: "danger", "data-testid": "decline", onclick: () => decide(card, "decline") },
          "Decline",
        ),
      ),
      cancelControls(card),
    );

    card.el = el(
      "li",
      {
        class: `pause ${kind}`,
        "data-testid": "pause",
        "data-state": "pending",
        "data-kind": kind,
        "data-agent": run.agentId,
        "data-run-id": run.runId,
        "data-tool-call-id": call.toolCallId,
        "data-tool": call.toolName,
      },
      head,
      meta,
      details,
      card.actions,
      card.error,
      card.gone,
      card.outcome,
    );
    setCardStatus(card, "pending");
    refreshTimes(card);
    return card;
  }

  // Who has approved so far against the quorum, and where this pause's notifications stand; both change
  // between polls while the card stays.
  function refreshReach(card, run, call) {
    const approvals = call.approvedBy || (call.approvals || []).map((name) => ({ name }));
    const quorum = call.quorum || 1;
    if (quorum > 1 || approvals.length) {
      // Approvals with edits count apart from the call as proposed: say which args each approved.
      const asProposed = approvals.filter((a) => !a.editedArgs);
      const more = Math.max(0, quorum - asProposed.length);
      const who = approvals.map((a) => (a.editedArgs ? `${a.name} (edited: ${JSON.stringify(a.editedArgs)})` : a.name));
      // The names and edits are other people's text: a right-to-left override in an edit must not change
      // what the next approver reads.
      card.approvals.replaceChildren(
        ...visible(
          `${asProposed.length} of ${quorum}` +
            (who.length ? ` (${who.join(", ")})` : "") +
            (more ? `, ${more} more needed` : ""),
        ),
      );
      card.approvals.title = approvals.map(personTitle).join("\n");
    } else card.approvals.textContent = "—";
    const sent = (run.deliveries || []).filter((d) => d.toolCallId === call.toolCallId);
    card.deliveries.replaceChildren(
      ...(sent.length
        ? sent.map((d) =>
            el(
              "span",
              {
                class: `delivery ${d.status}`,
                "data-testid": "delivery",
                "data-status": d.status,
                title: d.lastError ? `last error: ${d.lastError}` : "",
              },
              `${d.target}: ${String(d.type || "").replace("tool-call.", "")} ${d.status}` +
                (d.attempts > 1 || d.status !== "delivered"
                  ? ` (${d.attempts} attempt${d.attempts === 1 ? "" : "s"})`
                  : ""),
            ),
          )
        : ["—"]),
    );
  }

  function refreshTimes(card) {
    if (card.status !== "pending" && card.status !== "gone") {
      card.since.textContent = "";
      return;
    }
    const now = Date.now();
    const since = dateOf(card.call.pausedAt);
    card.sinceAt.textContent = since ? stamp(since) : "—";
    card.since.textContent = since ? `waiting ${span(now - since.getTime())}` : "";
    const expires = dateOf(card.call.expiresAt);
    if (!expires) card.expires.textContent = "never";
    else if (expires.getTime() > now) card.expires.textContent = `${stamp(expires)} (in ${span(expires - now)})`;
    else card.expires.textContent = `${stamp(expires)} (expired)`;
  }

  const BADGES = {
    pending: (card) => [card.kind, card.kind === "approval" ? "needs approval" : "waits for an answer"],
    deciding: () => ["busy", "deciding…"],
    decided: (card) => (card.verdict === "declined" ? ["declined", "declined"] : ["done", card.verdict]),
    gone: () => ["gone", "no longer pending"],
    cancelled: () => ["declined", "cancelled"],
  };

  function setCardStatus(card, status) {
    card.status = status;
    card.el.dataset.state = status;
    const [look, label] = BADGES[status](card);
    card.badge.className = `badge ${look}`;
    card.badge.textContent = label;
    const locked = status !== "pending";
    for (const control of card.actions.querySelectorAll("button, input, select, textarea")) {
      control.disabled = locked;
    }
    card.actions.hidden = status === "decided" || status === "gone" || status === "cancelled";
    card.gone.hidden = status !== "gone";
    if (status === "decided") refreshTimes(card);
  }

  function showError(card, message) {
    card.error.textContent = message;
    card.error.hidden = !message;
  }

  // ---- cancelling the run ------------------------------------------------------------------------------

  // "Cancel run", then an inline confirmation (with an optional reason) before anything is sent.
  function cancelControls(card) {
    card.cancelReason = el("input", {
      type: "text",
      class: "reason",
      "data-testid": "cancel-reason",
      placeholder: "Why cancel (optional)",
      "aria-label": "Reason for cancelling the run",
      maxlength: 100000,
    });
    card.cancelConfirm = el(
      "div",
      { class: "cancel-confirm", "data-testid": "cancel-confirm", role: "group", hidden: true },
      el("p", {}, "Cancel the whole run? What it is doing stops, and every call of it that waits is withdrawn."),
      card.cancelReason,
      el(
        "button",
        { type: "button", class: "danger", "data-testid": "confirm-cancel", onclick: () => cancelRun(card) },
        "Yes, cancel the run",
      ),
      el(
        "button",
        { type: "button", "data-testid": "keep-run", onclick: () => (card.cancelConfirm.hidden = true) },
        "Keep it",
      ),
    );
    const ask = el(
      "button",
      { type: "button", class: "link", "data-testid": "cancel-run", onclick: () => (card.cancelConfirm.hidden = false) },
      "Cancel run",
    );
    return el("div", { class: "cancel-run" }, ask, card.cancelConfirm);
  }

  // Bound to the call as shown (its fingerprint): if someone decided it first, this is refused (409).
  async function cancelRun(card) {
    if (card.status !== "pending") return;
    const { run, call } = card;
    const body = { runId: run.runId, fingerprint: call.fingerprint, toolCallId: call.toolCallId };
    const reason = card.cancelReason.value.trim();
    if (reason) body.reason = reason;
    showError(card, "");
    setCardStatus(card, "deciding");
    let answer;
    try {
      // The page's own route: the audit records that the cancel came from the inbox.
      answer = await (await api("POST", `/inbox/agents/${encodeURIComponent(run.agentId)}/cancel-run`, body)).json();
    } catch (err) {
      refused(card, err);
      return;
    }
    // Every card of the run shows it: its other pauses were withdrawn with it.
    for (const other of state.cards.values()) {
      if (other.run.runId === run.runId) showCancelled(other, answer.cancelledBy, answer.reason);
    }
    refresh();
  }

  // The server refused what the card asked: it is pending again, and says why.
  function refused(card, err) {
    if (err.status === 401) {
      onUnauthorized(err);
      return;
    }
    setCardStatus(card, "pending");
    showError(card, err.message);
    if (err.status === 404 || err.status === 409) refresh(); // decided elsewhere, or it changed
  }

  function showCancelled(card, by, reason) {
    setCardStatus(card, "cancelled");
    const box = card.outcome;
    box.dataset.outcome = "cancelled";
    const who = by ? ` by ${by}` : "";
    box.replaceChildren(el("p", { class: "verdict", "data-testid": "verdict" }, `Run cancelled${who}: ${reason}`));
    box.hidden = false;
  }

  // A pause that left the listing: if its run was cancelled (here or elsewhere), the card says so.
  // A card whose pause left the listing: decided elsewhere, expired, or its run cancelled (then it says so).
  function markGone(card) {
    setCardStatus(card, "gone");
    whyGone(card);
  }

  async function whyGone(card) {
    const { run } = card;
    try {
      const path = `/agents/${encodeURIComponent(run.agentId)}/runs/${encodeURIComponent(run.runId)}`;
      const found = await (await api("GET", path)).json();
      if (found.status === "cancelled" && card.status === "gone") {
        const told = found.cancelled || {};
        showCancelled(card, told.cancelledBy, told.reason || "cancelled");
      }
    } catch {
      // it stays "no longer pending"
    }
  }

  // ---- deciding -------------------------------------------------------------------------------------

  async function decide(card, action, resumeData) {
    if (card.status !== "pending") return;
    const { run, call } = card;
    const body = { runId: run.runId, toolCallId: call.toolCallId, fingerprint: call.fingerprint };
    let route;
    let verdict;
    if (action === "approve") {
      route = "approve-tool-call";
      verdict = "Approved";
    } else if (action === "decline") {
      route = "decline-tool-call";
      const reason = card.reason.value.trim();
      if (reason) body.reason = reason;
      verdict = reason ? `Declined: ${reason}` : "Declined";
    } else {
      route = "resume-stream";
      body.resumeData = resumeData;
      verdict = "Answered";
    }
    showError(card, "");
    setCardStatus(card, "deciding");
    let response;
    try {
      response = await api(
        "POST",
        // The page's own decision routes: the audit records that the decision came from the inbox.
        `/inbox/agents/${encodeURIComponent(run.agentId)}/${route}`,
        body,
        "text/event-stream",
      );
    } catch (err) {
      refused(card, err);
      return;
    }
    // The decision is claimed: whatever the stream says now is the run carrying on.
    card.verdict = { approve: "approved", decline: "declined", answer: "answered" }[action];
    setCardStatus(card, "decided");
    const outcome = startOutcome(card, action, verdict, resumeData);
    try {
      for await (const chunk of chunksOf(response)) outcome.add(chunk);
    } catch (err) {
      outcome.add({ type: "error", payload: { error: { message: `the stream broke: ${err.message}` } } });
    }
    outcome.end();
    refresh(); // the next pause, if any, shows as its own entry (the stream would bring it too)
  }

  function startOutcome(card, action, verdict, resumeData) {
    const box = card.outcome;
    box.dataset.outcome = { approve: "approved", decline: "declined", answer: "answered" }[action];
    box.replaceChildren(el("p", { class: "verdict", "data-testid": "verdict" }, verdict));
    if (action === "answer") box.append(el("pre", { class: "answer-data" }, pretty(resumeData)));
    const progress = el("p", { class: "progress", "data-testid": "progress" }, "Running…");
    box.append(progress);
    box.hidden = false;
    let text = "";
    let textEl = null;
    let finish = null;
    let next = null;
    let error = null;
    const mine = (payload) => payload.toolCallId === card.call.toolCallId;
    return {
      add(chunk) {
        const p = chunk.payload || {};
        switch (chunk.type) {
          case "tool-result":
          case "tool-error":
          case "tool-output-denied":
            if (mine(p)) {
              const denied = chunk.type === "tool-output-denied";
              const label = denied ? "The model is told" : chunk.type === "tool-error" ? "Tool error" : "Tool result";
              const told = denied ? (p.approval || {}).reason : p.result;
              box.insertBefore(
                el("section", { class: "result" }, el("h3", {}, label), el("pre", { "data-testid": "result" }, shown(told))),
                progress,
              );
            }
            break;
          case "text-delta":
            text += p.text || "";
            if (!textEl) {
              textEl = el("p", { class: "final-text", "data-testid": "final-text" });
              box.insertBefore(el("section", { class: "answer" }, el("h3", {}, "The model answered"), textEl), progress);
            }
            textEl.replaceChildren(...visible(text));
            break;
          case "tool-call-approval":
          case "tool-call-suspended":
            next = chunk;
            finish = "suspended"; // a paused stream ends at its pause chunks (no finish chunk)
            break;
          case "finish":
            finish = p.finishReason || null;
            break;
          case "error":
            error = (p.error && p.error.message) || "the run failed";
            break;
          default:
            break;
        }
      },
      end() {
        box.dataset.finish = error ? "error" : finish || "";
        progress.classList.toggle("bad", Boolean(error));
        if (error) {
          progress.textContent = `The run failed: ${error}`;
        } else if (next) {
          const p = next.payload || {};
          const where = (p.agentPath || []).join(" › ");
          const what = next.type === "tool-call-approval" ? "needs approval" : "waits for an answer";
          progress.textContent = `Paused again: ${p.toolName}${where ? ` (${where})` : ""} ${what}; it is listed as a new entry.`;
        } else if (finish === "suspended") {
          progress.textContent = "The run still waits for another decision.";
        } else {
          progress.textContent = ENDED[finish] || "The run finished.";
        }
      },
    };
  }

  // ---- the answer form of a suspend() pause, from its resume schema ------------------------------------

  const primitive = (v) => v === null || ["string", "number", "boolean"].includes(typeof v);

  function resolve(schema, root) {
    let s = schema;
    for (let hops = 0; s && typeof s.$ref === "string" && s.$ref.startsWith("#/") && hops < 20; hops++) {
      let target = root;
      for (const part of s.$ref.slice(2).split("/")) {
        target = target && target[part.replace(/~1/g, "/").replace(/~0/g, "~")];
      }
      s = target ? { ...target, ...without(s, "$ref") } : null;
    }
    return s;
  }

  function without(obj, key) {
    const copy = { ...obj };
    delete copy[key];
    return copy;
  }

  // What input a property gets: string, integer, number, boolean, enum, or json for anything else.
  function describe(raw, root) {
    let s = resolve(raw, root) || {};
    let nullable = false;
    const alternatives = s.anyOf || s.oneOf;
    if (Array.isArray(alternatives)) {
      const real = alternatives.map((a) => resolve(a, root)).filter((a) => a && a.type !== "null");
      nullable = real.length < alternatives.length;
      if (real.length !== 1) return { kind: "json", schema: s, nullable };
      s = { ...real[0], title: s.title ?? real[0].title, description: s.description ?? real[0].description, default: s.default ?? real[0].default };
    }
    if (Array.isArray(s.enum) && s.enum.length && s.enum.every(primitive)) return { kind: "enum", options: s.enum, schema: s, nullable };
    if ("const" in s && primitive(s.const)) return { kind: "enum", options: [s.const], schema: s, nullable };
    let type = s.type;
    if (Array.isArray(type)) {
      const real = type.filter((t) => t !== "null");
      nullable = nullable || real.length < type.length;
      type = real.length === 1 ? real[0] : null;
    }
    if (["string", "integer", "number", "boolean"].includes(type)) return { kind: type, schema: s, nullable };
    return { kind: "json", schema: s, nullable };
  }

  function answerForm(card, schema) {
    const root = schema || {};
    const top = resolve(schema, root);
    const fields = [];
    if (top && top.properties && typeof top.properties === "object" && Object.keys(top.properties).length) {
      const required = new Set(Array.isArray(top.required) ? top.required : []);
      for (const [name, raw] of Object.entries(top.properties)) {
        fields.push(field(card, name, describe(raw, root), required.has(name)));
      }
    } else {
      // No object schema with properties: the whole answer as JSON.
      fields.push(field(card, null, { kind: "json", schema: top || {}, nullable: false }, true));
    }
    const form = el(
      "form",
      { class: "answer-form", "data-testid": "answer-form", novalidate: true },
      fields.map((f) => f.row),
      el("div", { class: "form-actions" }, el("button", { type: "submit", class: "primary", "data-testid": "send-answer" }, "Send answer")),
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      let ok = true;
      let data = {};
      for (const f of fields) {
        const read = f.read();
        f.error.textContent = read.error || "";
        f.error.hidden = !read.error;
        f.input.setAttribute("aria-invalid", read.error ? "true" : "false");
        if (read.error) ok = false;
        else if (f.name === null) data = read.value;
        else if (!read.omit) data[f.name] = read.value;
      }
      if (!ok) {
        showError(card, "Fix the marked fields first.");
        return;
      }
      decide(card, "answer", data);
    });
    return form;
  }

  function field(card, name, spec, required) {
    const s = spec.schema;
    const id = `f-${Math.random().toString(36).slice(2)}-${name === null ? "answer" : name}`;
    const label = name === null ? "Answer (JSON)" : s.title || name;
    let input;
    const hint = [];
    if (spec.kind === "boolean") {
      input = el("input", { type: "checkbox", id, checked: s.default === true });
    } else if (spec.kind === "enum") {
      input = el(
        "select",
        { id },
        s.default === undefined ? el("option", { value: "" }, required ? "Choose…" : "—") : null,
        spec.options.map((option, i) =>
          el("option", { value: String(i), selected: s.default === option }, option === null ? "null" : String(option)),
        ),
      );
    } else if (spec.kind === "integer" || spec.kind === "number") {
      input = el("input", {
        type: "number",
        id,
        step: spec.kind === "integer" ? "1" : "any",
        inputmode: spec.kind === "integer" ? "numeric" : "decimal",
        min: s.minimum ?? s.exclusiveMinimum,
        max: s.maximum ?? s.exclusiveMaximum,
        value: typeof s.default === "number" ? s.default : null,
      });
      hint.push(spec.kind === "integer" ? "whole number" : "number");
      if (s.minimum !== undefined) hint.push(`≥ ${s.minimum}`);
      if (s.exclusiveMinimum !== undefined) hint.push(`> ${s.exclusiveMinimum}`);
      if (s.maximum !== undefined) hint.push(`≤ ${s.maximum}`);
      if (s.exclusiveMaximum !== undefined) hint.push(`< ${s.exclusiveMaximum}`);
    } else if (spec.kind === "string") {
      input = el("input", {
        type: "text",
        id,
        maxlength: s.maxLength,
        value: typeof s.default === "string" ? s.default : null,
        spellcheck: "false",
      });
    } else {
      input = el("textarea", { id, rows: 4, spellcheck: "false", placeholder: "JSON" });
      if (s.default !== undefined) input.value = pretty(s.default);
      hint.push("JSON");
    }
    input.dataset.field = name === null ? "" : name;
    if (required) input.setAttribute("aria-required", "true");
    const error = el("span", { class: "field-error", "data-testid": "field-error", hidden: true });
    const labelEl = el(
      "label",
      { for: id },
      label,
      required ? el("span", { class: "required", title: "required", "aria-hidden": "true" }, "*") : null,
    );
    const row = el(
      "div",
      { class: `field ${spec.kind}` },
      spec.kind === "boolean" ? el("div", { class: "check" }, input, labelEl) : [labelEl, input],
      s.description || hint.length
        ? el("span", { class: "field-hint" }, [s.description, hint.join(", ")].filter(Boolean).join(" · "))
        : null,
      error,
    );
    const missing = () => (required ? { error: "Required." } : { omit: true });
    const read = () => {
      if (spec.kind === "boolean") return { value: input.checked };
      if (spec.kind === "enum") {
        if (input.value === "") return missing();
        return { value: spec.options[Number(input.value)] };
      }
      if (spec.kind === "integer" || spec.kind === "number") {
        if (input.validity && input.validity.badInput) return { error: `Enter a ${hint[0]}.` };
        const text = input.value.trim();
        if (text === "") return missing();
        const n = Number(text);
        if (!Number.isFinite(n) || (spec.kind === "integer" && !Number.isInteger(n))) return { error: `Enter a ${hint[0]}.` };
        return { value: n };
      }
      if (spec.kind === "string") return input.value === "" ? missing() : { value: input.value };
      const text = input.value.trim();
      if (text === "") return missing();
      try {
        return { value: JSON.parse(text) };
      } catch (err) {
        return { error: `Not valid JSON: ${err.message}` };
      }
    };
    return { name, input, row, error, read };
  }

  // ---- start ----------------------------------------------------------------------------------------

  function start() {
    $("login-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const key = $("api-key").value.trim();
      if (!key) return;
      useKey(key);
      $("login").hidden = true;
      state.paused = false;
      clearCards();
      setStatus("", "Loading…");
      listen();
    });
    $("more").addEventListener("click", showMore);
    $("change-key").addEventListener("click", () => {
      useKey("");
      showLogin("Enter the API key or sign-in token to use.");
    });
    // Relative times move on between listings too.
    setInterval(() => {
      for (const card of state.cards.values()) refreshTimes(card);
    }, 1000);
    setStatus("", "Loading…");
    listen();
  }

  start();
})();
