// Sentinel's web page: reads and changes everything through the JSON API (docs/web.md).
// Data is only ever put into the page with textContent / text nodes, never as HTML.
"use strict";

(() => {
  const POLL_MS = 3000;
  const TOKEN_KEY = "sentinel.apiToken";
  const INBOX_LIMIT = 100;
  const CALLBACK_LIMIT = 20;
  const MAX_TEXT = 4000;
  const AUDIT_LIMIT = 50;
  const ROLES = ["viewer", "operator", "admin"];
  const MAY = {
    viewer: "read everything",
    operator: "read everything; ack, resolve, approve, deny, fire, give feedback and manage silences",
    admin: "do everything: also create, enable, disable and delete watchers",
  };
  const ACTIONS = {
    ack: { label: "Ack", done: "Acked", route: "inbox" },
    resolve: { label: "Resolve", done: "Resolved", route: "inbox" },
    approve: { label: "Approve", done: "Approved", route: "approvals" },
    deny: { label: "Deny", done: "Denied", route: "approvals" },
  };

  class Unauthorized extends Error {}

  class ApiFailure extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  const byId = (id) => document.getElementById(id);
  const state = {
    timer: null,
    busy: false,
    again: false,
    needsToken: false,
    seen: null,
    items: new Map(),
    watchers: new Map(),
    domIds: 0,
  };

  // --- small helpers -------------------------------------------------------------------------

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    for (const child of children) {
      if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  function domId(prefix) {
    state.domIds += 1;
    return `${prefix}-${state.domIds}`;
  }

  function duration(ms) {
    const seconds = Math.max(0, Math.round(ms / 1000));
    if (seconds < 60) return `${seconds}s`;
    const minutes = Math.floor(seconds / 60);
    if (minutes < 60) return `${minutes}m`;
    const hours = Math.floor(minutes / 60);
    if (hours < 24) return `${hours}h ${minutes % 60}m`;
    return `${Math.floor(hours / 24)}d ${hours % 24}h`;
  }

  function relative(iso) {
    if (!iso) return "—";
    const ms = Date.parse(iso) - Date.now();
    return ms >= 0 ? `in ${duration(ms)}` : `${duration(-ms)} ago`;
  }

  function timeEl(iso, text) {
    if (!iso) return el("span", { class: "muted" }, "—");
    return el("time", { datetime: iso, title: new Date(iso).toLocaleString() }, text || relative(iso));
  }

  function clip(text) {
    const value = String(text);
    if (value.length <= MAX_TEXT) return value;
    return `${value.slice(0, MAX_TEXT)}\n… (${value.length - MAX_TEXT} more characters)`;
  }

  function pretty(value) {
    return clip(typeof value === "string" ? value : JSON.stringify(value, null, 2));
  }

  function shellWord(word) {
    const text = String(word);
    return /^[A-Za-z0-9_\-.,:/=@%+]+$/.test(text) ? text : `'${text.replace(/'/g, "'\\''")}'`;
  }

  function commandText(argv) {
    return Array.isArray(argv) ? argv.map(shellWord).join(" ") : "";
  }

  function badge(kind, value) {
    return el("span", { class: `badge ${kind}-${String(value).replace(/[^a-z_]/g, "")}` }, String(value));
  }

  function announce(text) {
    const region = byId("announcer");
    region.textContent = "";
    window.setTimeout(() => {
      region.textContent = text;
    }, 50);
  }

  function showAlert(text) {
    const box = byId("alert");
    box.textContent = text;
    box.hidden = !text;
  }

  function setConnection(text, failing) {
    const line = byId("connection");
    line.textContent = text;
    line.classList.toggle("failing", Boolean(failing));
  }

  // --- token and API -------------------------------------------------------------------------

  function token() {
    try {
      return window.sessionStorage.getItem(TOKEN_KEY);
    } catch {
      return null;
    }
  }

  function storeToken(value) {
    try {
      if (value) window.sessionStorage.setItem(TOKEN_KEY, value);
      else window.sessionStorage.removeItem(TOKEN_KEY);
    } catch {
      // storage unavailable (private mode): the token then lasts until the page closes
    }
    byId("forget-token").hidden = !value;
  }

  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const bearer = token();
    if (bearer) headers.Authorization = `Bearer ${bearer}`;
    const init = { method, headers, cache: "no-store", credentials: "same-origin" };
    if (method !== "GET") {
      headers["Content-Type"] = "application/json";
      headers["X-Sentinel-Actor"] = "web";
      headers["X-Sentinel-Via"] = "web";
      init.body = JSON.stringify(body || {});
    }
    const response = await fetch(path, init);
    if (response.status === 401) throw new Unauthorized("the API token is missing or wrong");
    const text = await response.text();
    let data = null;
    try {
      data = text ? JSON.parse(text) : null;
    } catch {
      data = null;
    }
    if (!response.ok) {
      const error = (data && data.error) || {};
      throw new ApiFailure(response.status, error.code || "http_error", error.message || `HTTP ${response.status}`);
    }
    return data;
  }

  function askForToken(message) {
    state.needsToken = true;
    window.clearTimeout(state.timer);
    storeToken(null);
    byId("token-panel").hidden = false;
    const error = byId("token-error");
    error.textContent = message || "";
    error.hidden = !message;
    setConnection("Waiting for the API token", true);
    clearData();
    for (const id of ["inbox-summary", "watchers-summary", "silences-summary", "callbacks-summary"]) {
      byId(id).textContent = "Enter the API token to load this section.";
    }
    byId("token-input").focus();
  }

  function clearData() {
    for (const entry of state.items.values()) entry.node.remove();
    for (const row of state.watchers.values()) row.node.remove();
    state.items.clear();
    state.watchers.clear();
    state.seen = null;
    byId("callbacks-body").replaceChildren();
    byId("silences-body").replaceChildren();
    document.title = "Sentinel";
  }

  // --- inbox ----------------------------------------------------------------------------------

  function inboxPath() {
    const query = new URLSearchParams({ limit: String(INBOX_LIMIT) });
    const status = byId("filter-status").value;
    const kind = byId("filter-kind").value;
    if (status) query.set("status", status);
    if (kind) query.set("kind", kind);
    return `/api/v1/inbox?${query}`;
  }

  // What the token's role may do (SPEC §21): the server refuses the rest (403); the page hides it.
  function may(needed) {
    return ROLES.indexOf(state.role || "viewer") >= ROLES.indexOf(needed);
  }

  function renderWhoami(me) {
    const changed = state.role !== me.role;
    state.role = me.role;
    byId("whoami").textContent = `${me.name} (${me.role}): may ${MAY[me.role] || "read"}`;
    byId("silence-form").hidden = !may("operator");
    return changed;
  }

  function renderAudit(page) {
    const rows = page.items.map((e) =>
      el(
        "tr",
        {},
        cell("When", timeEl(e.at)),
        cell("Who", e.actor, e.claimedActor ? el("span", { class: "muted block" }, `said ${e.claimedActor}`) : ""),
        cell("Via", e.via),
        cell("What", e.action),
        cell("Target", el("code", {}, e.target)),
        cell("Note", e.note || ""),
      ),
    );
    byId("audit-body").replaceChildren(...rows);
    byId("audit-summary").textContent = rows.length ? `The last ${rows.length} changes.` : "No changes recorded yet.";
  }

  function possibleActions(item) {
    if (!may("operator")) return [];
    if (item.kind === "approval") return item.status === "open" ? ["approve", "deny"] : [];
    if (item.status === "open") return ["ack", "resolve"];
    return item.status === "acked" ? ["resolve"] : [];
  }

  function facts(item) {
    const pairs = [
      ["Kind", badge("kind", item.kind)],
      ["Status", badge("status", item.status)],
      ["Severity", badge("severity", item.severity)],
      ["Watcher", item.watcherId || "—"],
      ["Age", timeEl(item.createdAt, duration(Date.now() - Date.parse(item.createdAt)))],
    ];
    if (item.actor && item.status !== "open") pairs.push(["By", item.actor]);
    if (item.escalation && item.status === "open") pairs.push(["Escalation", escalationText(item.escalation)]);
    const list = el("dl", { class: "facts" });
    for (const [name, value] of pairs) list.append(el("div", {}, el("dt", {}, name), el("dd", {}, value)));
    return list;
  }

  // Where an open item's escalation chain is (SPEC §15): the last step sent and when the next goes out.
  function escalationText(chain) {
    const reached = chain.step === null ? "no step sent yet" : `step ${chain.step} sent`;
    const wait = chain.nextAt ? Math.max(0, Date.parse(chain.nextAt) - Date.now()) : null;
    const next = wait === null ? "" : ` · step ${chain.nextStep} in ${duration(wait)}`;
    return `${chain.policy || "policy"}: ${reached}${next}`;
  }

  function createEntry(item) {
    const entry = { item: null, open: false, detailKey: "" };
    entry.titleId = domId("item-title");
    entry.detailId = domId("item-detail");
    const noteId = domId("item-note");
    entry.title = el("h3", { id: entry.titleId, class: "reason", tabindex: "-1" });
    entry.facts = el("div");
    entry.command = el("p", { class: "command" });
    entry.note = el("input", { id: noteId, type: "text", maxlength: "2000", autocomplete: "off" });
    entry.buttons = el("div", { class: "buttons" });
    entry.actions = el(
      "div",
      { class: "actions" },
      el("div", { class: "field" }, el("label", { for: noteId }, "Note (optional)"), entry.note),
      entry.buttons,
    );
    entry.toggle = el("button", { type: "button", class: "secondary toggle", "aria-expanded": "false", "aria-controls": entry.detailId }, "Show details");
    entry.detail = el("div", { id: entry.detailId, class: "detail", hidden: true });
    entry.node = el("li", { class: "item", "aria-labelledby": entry.titleId }, entry.title, entry.facts, entry.command, entry.actions, entry.toggle, entry.detail);
    entry.toggle.addEventListener("click", () => toggleDetail(entry));
    updateEntry(entry, item);
    return entry;
  }

  function updateEntry(entry, item) {
    const previous = entry.item;
    entry.item = item;
    entry.node.dataset.status = item.status;
    entry.node.dataset.severity = item.severity;
    entry.title.textContent = item.reason;
    entry.facts.replaceChildren(facts(item));
    const argv = item.kind === "approval" ? item.detail && item.detail.argv : null;
    entry.command.hidden = !argv;
    entry.command.replaceChildren(...(argv ? ["Command: ", el("code", {}, commandText(argv))] : []));
    const actions = possibleActions(item);
    const same = previous && previous.status === item.status && previous.kind === item.kind;
    if (!same) {
      const hadFocus = entry.actions.contains(document.activeElement);
      entry.buttons.replaceChildren(
        ...actions.map((action) => {
          const button = el("button", { type: "button", "data-action": action, "aria-describedby": entry.titleId }, ACTIONS[action].label);
          button.addEventListener("click", () => act(entry, action));
          return button;
        }),
      );
      if (item.watcherId && actions.length) {
        const silence = el("button", { type: "button", class: "secondary", "data-action": "silence", "aria-describedby": entry.titleId }, "Silence watcher");
        silence.addEventListener("click", () => prepareSilence(item.watcherId, item.reason));
        entry.buttons.append(silence);
      }
      entry.actions.hidden = actions.length === 0;
      if (hadFocus && !entry.node.contains(document.activeElement)) {
        (entry.buttons.querySelector("button") || entry.title).focus();
      }
    }
    if (entry.open && previous && previous.updatedAt !== item.updatedAt) loadDetail(entry);
  }

  async function act(entry, action) {
    const item = entry.item;
    const route = ACTIONS[action].route;
    const note = entry.note.value.trim();
    const buttons = [...entry.buttons.querySelectorAll("button")];
    buttons.forEach((button) => {
      button.disabled = true;
    });
    try {
      const body = await api("POST", `/api/v1/${route}/${encodeURIComponent(item.id)}/${action}`, note ? { note } : {});
      entry.note.value = "";
      showAlert("");
      updateEntry(entry, body.item);
      announce(`${ACTIONS[action].done}: ${body.item.reason}`);
    } catch (error) {
      if (error instanceof Unauthorized) askForToken("The token was refused; enter it again.");
      else showAlert(`Could not ${action} “${item.reason}”: ${error.message}`);
    } finally {
      buttons.forEach((button) => {
        button.disabled = false;
      });
      refreshSoon();
    }
  }

  function toggleDetail(entry) {
    entry.open = !entry.open;
    entry.toggle.setAttribute("aria-expanded", String(entry.open));
    entry.toggle.textContent = entry.open ? "Hide details" : "Show details";
    entry.detail.hidden = !entry.open;
    if (entry.open) {
      entry.detail.replaceChildren(el("p", { class: "muted" }, "Loading…"));
      entry.detailKey = "";
      loadDetail(entry);
    }
  }

  async function loadDetail(entry) {
    const item = entry.item;
    try {
      const shown = await api("GET", `/api/v1/inbox/${encodeURIComponent(item.id)}`);
      let callback = null;
      if (item.callbackId) {
        try {
          callback = await api("GET", `/api/v1/callbacks/${encodeURIComponent(item.callbackId)}`);
        } catch (error) {
          if (!(error instanceof ApiFailure && error.status === 404)) throw error;
        }
      }
      const key = JSON.stringify([shown, callback]);
      if (key === entry.detailKey || !entry.open) return;
      entry.detailKey = key;
      entry.detail.replaceChildren(...detailParts(shown.item, shown.history, callback));
    } catch (error) {
      if (error instanceof Unauthorized) askForToken("The token was refused; enter it again.");
      else entry.detail.replaceChildren(el("p", { class: "error" }, `Could not load the details: ${error.message}`));
    }
  }

  function part(title, ...content) {
    return el("section", { class: "part" }, el("h4", {}, title), ...content);
  }

  function detailParts(item, history, callback) {
    const parts = [];
    const reasonTitle = item.kind === "approval" ? "Why approval is needed" : item.kind === "escalation" ? "Escalation reason" : "Reason";
    parts.push(part(reasonTitle, el("p", { class: "prose" }, item.reason), item.note ? el("p", {}, `Note: ${item.note}`) : null));
    const detail = item.detail || {};
    if (item.kind === "approval" && Array.isArray(detail.argv)) {
      const list = el("ol", { class: "argv" }, ...detail.argv.map((arg) => el("li", {}, el("code", {}, String(arg)))));
      parts.push(part("Exact command (argv, run without a shell)", el("p", {}, el("code", {}, commandText(detail.argv))), list, detail.timeoutMs ? el("p", { class: "muted" }, `Timeout: ${detail.timeoutMs / 1000}s`) : null));
    }
    if (item.kind === "delivery_failure" && detail.delivery) {
      parts.push(part("Undelivered message", el("pre", {}, pretty(detail.delivery.message)), detail.error ? el("p", { class: "error" }, `Error: ${detail.error}`) : null));
    }
    const events = el("ol", { class: "history" });
    for (const step of history || []) {
      const text = `${step.from || "created"} → ${step.to} by ${step.actor}${step.note ? ` — ${step.note}` : ""}`;
      events.append(el("li", {}, timeEl(step.at, new Date(step.at).toLocaleString()), " ", text));
    }
    parts.push(part("History", events));
    if (callback) {
      const contract = callback.callback;
      parts.push(part("Callback envelope", el("p", { class: "muted" }, `Callback ${contract.callbackId} · contract ${contract.state}`), el("pre", {}, pretty(callback.envelope))));
      parts.push(part("Session transcript", transcript(callback.transcript || [])));
    } else if (detail.envelope) {
      parts.push(part("Callback envelope", el("pre", {}, pretty(detail.envelope))));
    } else {
      parts.push(part("Callback", el("p", { class: "muted" }, "No callback is recorded for this item.")));
    }
    return parts;
  }

  function transcript(entries, full) {
    if (entries.length === 0) return el("p", { class: "muted" }, "No transcript yet.");
    const list = el("ol", { class: "transcript" });
    for (const { seq, at, entry } of entries) {
      const message = entry.message || {};
      let label = entry.kind || "entry";
      let body = entry;
      if (entry.kind === "message") {
        label = message.role === "tool" ? `tool result (${message.name || "?"})` : message.role || "message";
        body = message.content || "";
        if (Array.isArray(message.toolCalls) && message.toolCalls.length) {
          const calls = message.toolCalls.map((call) => `${call.name}(${typeof call.arguments === "string" ? call.arguments : JSON.stringify(call.arguments)})`);
          body = [body, ...calls].filter(Boolean).join("\n");
        }
      } else if (entry.kind === "model") {
        body = `${entry.entry || entry.model} (${entry.via || "default"})`;
      }
      const text = full ? (typeof body === "string" ? body : JSON.stringify(body, null, 2)) : pretty(body);
      list.append(el("li", {}, el("p", { class: "entry-head" }, `#${seq} ${label} · `, timeEl(at)), el("pre", { class: full ? "full" : null }, text)));
    }
    return list;
  }

  function renderInbox(page) {
    const severity = byId("filter-severity").value;
    const items = page.items.filter((item) => !severity || item.severity === severity);
    const list = byId("inbox-list");
    const keep = new Set();
    items.forEach((item, index) => {
      keep.add(item.id);
      let entry = state.items.get(item.id);
      if (entry) updateEntry(entry, item);
      else {
        entry = createEntry(item);
        state.items.set(item.id, entry);
      }
      if (list.children[index] !== entry.node) list.insertBefore(entry.node, list.children[index] || null);
    });
    for (const [id, entry] of state.items) {
      if (!keep.has(id)) {
        entry.node.remove();
        state.items.delete(id);
      }
    }
    const open = items.filter((item) => item.status === "open").length;
    const more = page.nextCursor ? ` (newest ${INBOX_LIMIT} shown; use the CLI for older ones)` : "";
    byId("inbox-summary").textContent = items.length
      ? `${items.length} item${items.length === 1 ? "" : "s"}, ${open} open${more}.`
      : "Nothing matches these filters.";
    document.title = open ? `(${open}) Sentinel` : "Sentinel";
    if (state.seen !== null) {
      const fresh = items.filter((item) => !state.seen.has(item.id));
      if (fresh.length === 1) announce(`New inbox item: ${fresh[0].reason}`);
      else if (fresh.length > 1) announce(`${fresh.length} new inbox items`);
    }
    state.seen = new Set(items.map((item) => item.id));
  }

  // --- watchers and callbacks ---------------------------------------------------------------

  function cell(label, ...content) {
    return el("td", { "data-label": label }, el("span", { class: "cell" }, ...content));
  }

  function renderWatchers(page) {
    const body = byId("watchers-body");
    const keep = new Set();
    page.items.forEach((watcher, index) => {
      keep.add(watcher.id);
      let row = state.watchers.get(watcher.id);
      if (!row) {
        row = { button: el("button", { type: "button", class: "secondary" }), node: el("tr") };
        row.silence = el("button", { type: "button", class: "secondary", "data-action": "silence" }, "Silence");
        row.actionCell = cell("Actions", row.button, " ", row.silence);
        row.button.addEventListener("click", () => toggleWatcher(row));
        row.silence.addEventListener("click", () => prepareSilence(row.watcher.id));
        state.watchers.set(watcher.id, row);
      }
      row.watcher = watcher;
      const status = watcher.status || {};
      const statusCell = cell("Status", badge("state", status.state || "unknown"), status.firing ? " firing" : "", el("span", { class: "muted" }, ` · ${status.fires || 0} fires`));
      const name = cell("Watcher", el("strong", {}, watcher.id), el("span", { class: "muted block" }, watcher.strategy));
      const next = cell("Next check", timeEl(status.nextCheckAt));
      const failures = status.consecutiveFailures ? ` (${status.consecutiveFailures} in a row)` : "";
      const error = cell("Last error", status.lastError ? el("span", { class: "error" }, `${status.lastError}${failures}`) : el("span", { class: "muted" }, "—"));
      row.button.hidden = !may("admin");
      row.silence.hidden = !may("operator");
      row.button.textContent = watcher.enabled ? "Disable" : "Enable";
      row.button.setAttribute("aria-label", `${watcher.enabled ? "Disable" : "Enable"} watcher ${watcher.id}`);
      row.silence.setAttribute("aria-label", `Silence watcher ${watcher.id}`);
      if (status.silencedBy) statusCell.firstChild.append(el("span", { class: "muted block" }, `silenced by ${status.silencedBy}`));
      row.node.replaceChildren(name, statusCell, next, error, row.actionCell);
      if (body.children[index] !== row.node) body.insertBefore(row.node, body.children[index] || null);
    });
    for (const [id, row] of state.watchers) {
      if (!keep.has(id)) {
        row.node.remove();
        state.watchers.delete(id);
      }
    }
    const failing = page.items.filter((w) => w.status && w.status.state === "failing").length;
    byId("watchers-summary").textContent = page.items.length
      ? `${page.items.length} watcher${page.items.length === 1 ? "" : "s"}, ${failing} failing.`
      : "No watchers are configured.";
  }

  async function toggleWatcher(row) {
    const watcher = row.watcher;
    row.button.disabled = true;
    try {
      await api("PATCH", `/api/v1/watchers/${encodeURIComponent(watcher.id)}`, { enabled: !watcher.enabled });
      showAlert("");
      announce(`Watcher ${watcher.id} ${watcher.enabled ? "disabled" : "enabled"}`);
    } catch (error) {
      if (error instanceof Unauthorized) askForToken("The token was refused; enter it again.");
      else showAlert(`Could not change watcher ${watcher.id}: ${error.message}`);
    } finally {
      row.button.disabled = false;
      refreshSoon();
    }
  }

  function renderCallbacks(page) {
    const rows = page.items.map((contract) =>
      el(
        "tr",
        {},
        cell("Contract", badge("contract", contract.state)),
        cell("Watcher", contract.watcherId),
        cell("Trigger", `${contract.trigger.kind} · ${contract.trigger.priority}`),
        cell("Created", timeEl(contract.createdAt)),
        cell("Deadline", contract.settledAt ? el("span", {}, "settled ", timeEl(contract.settledAt)) : timeEl(contract.deadline)),
        cell("Callback id", openButton(contract.callbackId)),
      ),
    );
    byId("callbacks-body").replaceChildren(...rows);
    byId("callbacks-summary").textContent = rows.length ? `The ${rows.length} newest callbacks.` : "No callbacks yet.";
  }

  function openButton(callbackId) {
    const button = el("button", { type: "button", class: "link", "aria-label": `Open callback ${callbackId}` }, el("code", {}, callbackId));
    button.addEventListener("click", () => openCallback(callbackId));
    return button;
  }

  // --- one callback, explained (what `sentinel callbacks show` prints) ------------------------

  async function openCallback(callbackId) {
    state.callbackId = callbackId;
    const view = byId("callback-view");
    view.hidden = false;
    byId("callback-heading").textContent = `Callback ${callbackId}`;
    byId("callback-headline").textContent = "Loading…";
    byId("callback-parts").replaceChildren();
    try {
      renderCallback(await api("GET", `/api/v1/callbacks/${encodeURIComponent(callbackId)}`));
    } catch (error) {
      byId("callback-headline").textContent = `Could not load it: ${error.message}`;
    }
    byId("callback-heading").focus();
  }

  function conditionLine(c) {
    const actual = c.missing ? "missing" : JSON.stringify(c.actual);
    const value = c.value === undefined || c.value === null ? "" : ` ${JSON.stringify(c.value)}`;
    return `${c.result ? "✓" : "✗"} ${c.path} ${c.op}${value} — actual ${actual}`;
  }

  function usageText(u) {
    return `${u.inputTokens} in + ${u.outputTokens} out tokens, $${Number(u.costUsd).toFixed(4)}`;
  }

  function renderCallback(body) {
    const c = body.callback;
    const env = body.envelope || {};
    const settled = c.settledAt ? `, settled ${new Date(c.settledAt).toLocaleString()}` : "";
    byId("callback-headline").textContent = `${c.watcherId} · ${c.trigger.kind} · contract ${c.state}${settled}`;
    const parts = [];
    const facts = el("dl", { class: "facts-list" });
    const traceId = c.traceId || (env.trace && env.trace.traceId);
    for (const [name, value] of [["Watcher", c.watcherId], ["State", c.state], ["Created", c.createdAt], ["Deadline", c.deadline], ["Targets", (c.targets || []).join(", ")], ["Silenced by", c.silencedBy], ["Group", c.groupId], ["Group of", c.group ? `${c.group.fires} fires: ${(c.group.members || []).slice(0, 20).join(", ")}${c.group.fires > 20 ? ", …" : ""}` : null], ["Trace id", traceId]]) {
      if (value) facts.append(el("dt", {}, name), el("dd", {}, String(value)));
    }
    parts.push(part("Contract", facts));
    if (Array.isArray(body.conditions)) {
      parts.push(part("Conditions (values at the fire)", el("ul", { class: "conditions" }, ...body.conditions.map((x) => el("li", {}, el("code", {}, conditionLine(x)))))));
    }
    parts.push(part("Payload", el("pre", { class: "full" }, JSON.stringify(env.payload === undefined ? null : env.payload, null, 2))));
    parts.push(part("Transcript (model turns, tool calls, policy decisions)", transcript(body.transcript || [], true)));
    parts.push(part("Usage", el("p", {}, usageText(body.usage))));
    const deliveries = el("ul", { class: "deliveries" });
    for (const d of body.deliveries) {
      const error = d.lastError ? ` — ${d.lastError}` : "";
      deliveries.append(el("li", {}, `${d.target} ${d.kind}: ${d.state} (${d.attempts} attempt${d.attempts === 1 ? "" : "s"})${error}`));
    }
    parts.push(part("Deliveries (page, follow-ups)", body.deliveries.length ? deliveries : el("p", { class: "muted" }, "Nothing delivered.")));
    parts.push(part("Feedback", feedbackPart(c.callbackId, body.feedback)));
    parts.push(part("Envelope", el("pre", { class: "full" }, JSON.stringify(body.envelope, null, 2))));
    byId("callback-parts").replaceChildren(...parts);
  }

  function feedbackPart(callbackId, feedback) {
    const counts = (feedback && feedback.counts) || { useful: 0, notUseful: 0 };
    const line = el("p", { class: "feedback-counts" }, `${counts.useful} 👍 · ${counts.notUseful} 👎`);
    const note = el("input", { type: "text", id: "feedback-note", maxlength: "2000", "aria-label": "Feedback note (optional)", placeholder: "note (optional)" });
    const buttons = [true, false].map((useful) => {
      const button = el("button", { type: "button", class: "secondary", "aria-label": useful ? "Useful" : "Not useful" }, useful ? "👍 Useful" : "👎 Not useful");
      button.addEventListener("click", async () => {
        button.disabled = true;
        try {
          const now = await api("POST", `/api/v1/callbacks/${encodeURIComponent(callbackId)}/feedback`, { useful, note: note.value.trim() || null });
          line.textContent = `${now.counts.useful} 👍 · ${now.counts.notUseful} 👎`;
          announce("Feedback recorded");
        } catch (error) {
          showAlert(`Could not record feedback: ${error.message}`);
        } finally {
          button.disabled = false;
        }
      });
      return button;
    });
    const people = el("ul", {}, ...((feedback && feedback.items) || []).map((f) => el("li", {}, `${f.useful ? "👍" : "👎"} ${f.person}${f.note ? ` — ${f.note}` : ""}`)));
    if (!may("operator")) return el("div", {}, line, people);
    return el("div", {}, line, people, note, el("div", { class: "actions" }, ...buttons));
  }

  // --- report (SPEC §22) -----------------------------------------------------------------------

  function seconds(p) {
    return p.p50 === null ? "—" : `${p.p50} / ${p.p90} s`;
  }

  async function loadReport() {
    const since = byId("report-since").value;
    byId("report-summary").textContent = "Loading…";
    try {
      const [report, charts] = await Promise.all([
        api("GET", `/api/v1/report?since=${encodeURIComponent(since)}`),
        api("GET", `/api/v1/report/charts?since=${encodeURIComponent(since)}`),
      ]);
      renderReport(report, charts.charts);
    } catch (error) {
      byId("report-summary").textContent = `Could not load the report: ${error.message}`;
    }
  }

  function renderReport(report, charts) {
    const t = report.total;
    byId("report-summary").textContent = `From ${new Date(report.since).toLocaleString()} to ${new Date(report.until).toLocaleString()}.`;
    const figures = [
      ["fires", "Fires", t.fires],
      ["pages", "Pages", t.pages],
      ["pagesByAgent", "by the agent", t.pagesByAgent],
      ["fallbacks", "Fallbacks", t.fallbacks],
      ["deduped", "Deduped", t.deduped],
      ["silenced", "Silenced", t.silenced],
      ["grouped", "Grouped", t.grouped],
      ["followUps", "Follow-ups", t.followUps],
      ["escalationSteps", "Escalation steps", t.escalationSteps],
      ["timeToPage", "Time to page p50/p90", seconds(t.timeToPageS)],
      ["timeToAck", "Time to ack p50/p90", seconds(t.timeToAckS)],
      ["timeToResolve", "Time to resolve p50/p90", seconds(t.timeToResolveS)],
      ["tokens", "Tokens", `${t.usage.inputTokens} in + ${t.usage.outputTokens} out`],
      ["cost", "Cost", `$${Number(t.usage.costUsd).toFixed(4)}`],
      ["useful", "Useful (👍)", t.feedback.useful],
      ["notUseful", "Not useful (👎)", t.feedback.notUseful],
    ];
    byId("report-figures").replaceChildren(...figures.map(([key, name, value]) => el("div", {}, el("dt", {}, name), el("dd", { "data-figure": key }, String(value)))));
    const parser = new DOMParser();
    byId("report-charts").replaceChildren(
      ...charts.map((chart) => {
        const svg = parser.parseFromString(chart.svg, "image/svg+xml").documentElement;
        return el("figure", { "data-chart": chart.id }, document.importNode(svg, true));
      }),
    );
    byId("report-noisiest").replaceChildren(...report.noisiest.map((n) => el("li", {}, `${n.watcherId} (${n.fires})`)));
    const flapping = report.flapping.map((f) => el("li", {}, `${f.watcherId}: ${f.cycles} cycles on ${f.day}`));
    byId("report-flapping").replaceChildren(...(flapping.length ? flapping : [el("li", { class: "muted" }, "none")]));
  }

  // --- silences ------------------------------------------------------------------------------

  function prepareSilence(watcherId, reason) {
    byId("silence-watcher").value = watcherId;
    const comment = byId("silence-comment");
    if (!comment.value && reason) comment.value = `working on: ${reason}`.slice(0, 2000);
    comment.focus();
  }

  function matcherText(silence) {
    const parts = silence.matchers.map((m) => `${m.path} ${m.op}${m.value === undefined || m.value === null ? "" : ` ${JSON.stringify(m.value)}`}`);
    return parts.join(silence.match === "any" ? " or " : " and ");
  }

  function renderSilences(active, pending) {
    const rows = [...active.items, ...pending.items].map((silence) => {
      const expire = el("button", { type: "button", class: "secondary", "data-action": "expire", "aria-label": `Expire silence ${silence.id}` }, "Expire");
      expire.addEventListener("click", () => expireSilence(silence, expire));
      expire.hidden = !may("operator");
      return el(
        "tr",
        { "data-silence": silence.id },
        cell("State", badge("silence", silence.state)),
        cell("Mutes", el("code", {}, matcherText(silence))),
        cell("Until", timeEl(silence.endsAt)),
        cell("Why", silence.comment, el("span", { class: "muted block" }, `by ${silence.createdBy}`)),
        cell("Actions", expire),
      );
    });
    byId("silences-body").replaceChildren(...rows);
    byId("silences-summary").textContent = rows.length
      ? `${active.items.length} active, ${pending.items.length} pending.`
      : "Nothing is silenced.";
  }

  async function createSilence(event) {
    event.preventDefault();
    const watcher = byId("silence-watcher").value.trim();
    const comment = byId("silence-comment").value.trim();
    if (!watcher || !comment) return;
    const button = byId("silence-submit");
    button.disabled = true;
    try {
      const body = {
        matchers: [{ path: "watcherId", op: "eq", value: watcher }],
        durationMs: Number(byId("silence-duration").value),
        comment,
      };
      const answer = await api("POST", "/api/v1/silences", body);
      byId("silence-comment").value = "";
      showAlert("");
      announce(`Watcher ${watcher} silenced until ${new Date(answer.silence.endsAt).toLocaleString()}`);
    } catch (error) {
      if (error instanceof Unauthorized) askForToken("The token was refused; enter it again.");
      else showAlert(`Could not silence ${watcher}: ${error.message}`);
    } finally {
      button.disabled = false;
      refreshSoon();
    }
  }

  async function expireSilence(silence, button) {
    button.disabled = true;
    try {
      await api("DELETE", `/api/v1/silences/${encodeURIComponent(silence.id)}`);
      showAlert("");
      announce(`Silence of ${matcherText(silence)} expired`);
    } catch (error) {
      if (error instanceof Unauthorized) askForToken("The token was refused; enter it again.");
      else showAlert(`Could not expire the silence: ${error.message}`);
    } finally {
      refreshSoon();
    }
  }

  // --- polling ------------------------------------------------------------------------------

  function schedule() {
    window.clearTimeout(state.timer);
    if (document.hidden || state.needsToken) return;
    state.timer = window.setTimeout(refresh, POLL_MS);
  }

  function refreshSoon() {
    if (state.busy) state.again = true;
    else refresh();
  }

  async function refresh() {
    if (state.needsToken) return;
    if (state.busy) {
      state.again = true;
      return;
    }
    state.busy = true;
    try {
      const [me, audit, inbox, watchers, callbacks, active, pending] = await Promise.all([
        api("GET", "/api/v1/whoami"),
        api("GET", `/api/v1/audit?limit=${AUDIT_LIMIT}`),
        api("GET", inboxPath()),
        api("GET", "/api/v1/watchers?limit=1000"),
        api("GET", `/api/v1/callbacks?limit=${CALLBACK_LIMIT}`),
        api("GET", "/api/v1/silences?state=active&limit=100"),
        api("GET", "/api/v1/silences?state=pending&limit=100"),
      ]);
      if (renderWhoami(me)) {
        // the role decides which buttons exist: entries made for another role are made again
        for (const entry of state.items.values()) entry.item = null;
      }
      renderAudit(audit);
      renderInbox(inbox);
      renderWatchers(watchers);
      renderSilences(active, pending);
      renderCallbacks(callbacks);
      if (!state.reportLoaded) {
        state.reportLoaded = true;
        loadReport();
      }
      setConnection(`Updated ${new Date().toLocaleTimeString()}`, false);
    } catch (error) {
      if (error instanceof Unauthorized) askForToken(token() ? "The token was refused; enter it again." : "");
      else if (error instanceof ApiFailure) setConnection(`The service answered ${error.status}: ${error.message}`, true);
      else setConnection("Cannot reach the service; retrying every 3 seconds", true);
    } finally {
      state.busy = false;
      if (state.again) {
        state.again = false;
        window.setTimeout(refresh, 0);
      } else schedule();
    }
  }

  function start() {
    byId("token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const input = byId("token-input");
      const value = input.value.trim();
      if (!value) return;
      storeToken(value);
      input.value = "";
      state.needsToken = false;
      byId("token-panel").hidden = true;
      byId("inbox-heading").focus();
      refresh();
    });
    byId("forget-token").addEventListener("click", () => askForToken(""));
    byId("silence-form").addEventListener("submit", createSilence);
    byId("report-form").addEventListener("submit", (event) => {
      event.preventDefault();
      loadReport();
    });
    byId("callback-close").addEventListener("click", () => {
      byId("callback-view").hidden = true;
    });
    const filters = byId("inbox-filters");
    filters.addEventListener("submit", (event) => event.preventDefault());
    filters.addEventListener("change", () => {
      state.seen = null;
      refreshSoon();
    });
    document.addEventListener("visibilitychange", () => {
      if (document.hidden) window.clearTimeout(state.timer);
      else refreshSoon();
    });
    byId("forget-token").hidden = !token();
    if (document.body.dataset.tokenRequired === "true" && !token()) askForToken("");
    else refresh();
  }

  start();
})();
