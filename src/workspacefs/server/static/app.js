// The workspacefs file browser: plain DOM, no framework, no network beyond this service.
// Every name and every byte of content reaches the page through textContent or a form value,
// never through innerHTML, so nothing a file or a model wrote can become markup or script. Nor can it
// hide or reorder what a person reads: invisible and bidirectional characters are shown (`visible`).
"use strict";

// Signing in: a link `#signin=CODE` (workspacefs serve / workspacefs open) or `#token=TOKEN` is posted to
// /v1/signin, which answers with an HttpOnly cookie; the secret leaves the address bar at once. Every request
// then carries the cookie, plus the X-Workspacefs header a page of another site cannot send.

(() => {
  const MAX_LINES_SHOWN = 20000;
  const SIGNIN_PREFIX = "wsfs_signin_";
  const BROWSER_HEADER = { "X-Workspacefs": "1" };
  const GENERATED_ID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
  const $ = (id) => document.getElementById(id);
  let journal = null; // the history panel and live updates (history.js), attached in bind()

  const state = {
    agent: "",
    session: "",
    sessions: [], // the agent's sessions, most recently changed first
    cwd: "/",
    file: null, // {path, name, etag, readonly, encoding, text, size}
    editing: false,
  };

  // --- HTTP ---------------------------------------------------------------------------------------

  class ApiError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function encodePath(path) {
    return path.split("/").filter(Boolean).map(encodeURIComponent).join("/");
  }

  function sessionUrl(suffix) {
    const agent = encodeURIComponent(state.agent);
    const session = encodeURIComponent(state.session);
    return `/v1/agents/${agent}/sessions/${session}${suffix}`;
  }

  function fsUrl(path) {
    const encoded = encodePath(path);
    return sessionUrl(encoded ? `/fs/${encoded}` : "/fs");
  }

  // `json` sends a (small) JSON body; `bytes` sends content raw, which the service streams whatever its size.
  async function api(method, url, { json, bytes, headers = {}, raw = false } = {}) {
    const init = { method, headers: { ...BROWSER_HEADER, ...headers } };
    if (json !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(json);
    } else if (bytes !== undefined) {
      init.headers["Content-Type"] = "application/octet-stream";
      init.body = bytes;
    }
    if (raw) init.headers.Accept = "application/octet-stream";
    const response = await fetch(url, init);
    if (!response.ok) {
      let code = "http_error";
      let message = `${response.status} ${response.statusText}`;
      try {
        const body = await response.json();
        if (body && body.error) ({ code, message } = body.error);
      } catch (_) { /* not JSON */ }
      // not signed in at all: the dialog says how; expired or revoked: it says that too
      if (response.status === 401 && url !== SIGNIN_URL) openSignIn(code === "unauthorized" ? "" : message);
      throw new ApiError(response.status, code, message);
    }
    if (raw) return { blob: await response.blob(), response };
    if (response.status === 204) return { body: null, response };
    return { body: await response.json(), response };
  }

  // --- small DOM helpers --------------------------------------------------------------------------

  // Characters that show as nothing or change the order of the text around them: bidirectional controls (a
  // line "deploy: true \u202E# off" shows its end reversed), zero-width and other blank ones (a name
  // "ci\u200B.yml" reads as "ci.yml"), Unicode tags (text a model can read and a person cannot), the C1 controls,
  // and the line and paragraph separators (a name "a\u2028b.txt" shows on two lines, as two names). Every name,
  // path and line the page shows gets each as a marked ‹U+200B› (a box, so a name that spells the marker out
  // differs), so what a person reads, and approves, is what is stored; links and the editor keep the real text.
  const HIDDEN = "\u0080-\u009F\u00AD\u034F\u061C\u115F\u1160\u17B4\u17B5\u180B-\u180F\u200B\u200E\u200F" +
    "\u2028-\u202E\u2060-\u206F\u3164\uFEFF\uFFA0\uFFF9-\uFFFB\u{1BCA0}-\u{1BCA3}\u{1D173}-\u{1D17A}" +
    "\u{E0000}-\u{E007F}";
  // The zero-width non-joiner and joiner (U+200C, U+200D) too, except where they change what shows (as IDNA's
  // CONTEXTJ rule, RFC 5892, and emoji): a non-joiner after an Arabic-script letter that joins the next one (Persian
  // writes it in everyday words: می‌خواهم), either after an Indic virama (a conjunct's form), and a joiner between two
  // pictographs (a family, a rainbow flag is one picture). Between Latin letters, after an alef, they show nothing.
  const RIGHT_JOINING = "\\u0622-\\u0625\\u0627\\u0629\\u062F-\\u0632\\u0648\\u0671-\\u0673\\u0675-\\u0677" +
    "\\u0688-\\u0699\\u06C0\\u06C3-\\u06CB\\u06CD\\u06CF\\u06D2\\u06D3\\u06D5\\u06EE\\u06EF";
  const VIRAMA = "\\u094D\\u09CD\\u0A4D\\u0ACD\\u0B4D\\u0BCD\\u0C4D\\u0CCD\\u0D4D\\u0DCA";
  const SHOWN_JOINER = `(?<=(?![${RIGHT_JOINING}\\u0621])(?=\\p{L})\\p{Script=Arabic}\\p{M}*)\\u200C` +
    "(?=(?!\\u0621)(?=\\p{L})\\p{Script=Arabic})" +
    `|(?<=[${VIRAMA}])[\\u200C\\u200D](?=\\p{L})` +
    "|(?<=\\p{Extended_Pictographic}[\\u{FE0F}\\u{1F3FB}-\\u{1F3FF}]?)\\u200D(?=\\p{Extended_Pictographic})";
  const JOINER = `(?!${SHOWN_JOINER})[\\u200C\\u200D]`;
  const HIDDEN_CHARACTER = new RegExp(`[${HIDDEN}]|${JOINER}`, "gu");
  const HIDDEN_SPLIT = new RegExp(`([${HIDDEN}]|${JOINER})`, "u");

  function marker(c) { return `‹U+${c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0")}›`; }

  // `text` for an attribute or a native dialog, which show no markup: the markers only.
  function visible(text) { return String(text).replace(HIDDEN_CHARACTER, marker); }

  // Put `text` in `node` as its text, a hidden character as a marked box.
  function setText(node, text) {
    const parts = String(text).split(HIDDEN_SPLIT); // the characters at odd places
    if (parts.length === 1) {
      node.textContent = parts[0];
      return;
    }
    // gathered in a fragment, not spread into one call: a file's 100,000 markers are more arguments than a call
    // takes (RangeError, and the page kept showing the previous file under the new one's name)
    const fragment = document.createDocumentFragment();
    parts.forEach((part, i) => {
      if (i % 2) fragment.append(el("span", { text: marker(part), cls: "hidden-char", attrs: { "data-testid": "hidden-char" } }));
      else if (part) fragment.append(part);
    });
    node.replaceChildren(fragment);
  }

  // Attributes a person reads (a tooltip) or hears (a screen reader's name for a button): markers, as the text.
  const SHOWN_ATTRIBUTES = new Set(["title", "aria-label"]);

  function el(tag, { text, cls, attrs = {}, on = {} } = {}, children = []) {
    const node = document.createElement(tag);
    if (text !== undefined) setText(node, text);
    if (cls) node.className = cls;
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, SHOWN_ATTRIBUTES.has(name) ? visible(value) : value);
    for (const [name, handler] of Object.entries(on)) node.addEventListener(name, handler);
    for (const child of children) node.append(child);
    return node;
  }

  function show(node, visible) { node.hidden = !visible; }

  let statusTimer = 0;
  function status(message, kind = "info") {
    const box = $("status");
    setText(box, message);
    box.className = kind;
    show(box, true);
    clearTimeout(statusTimer);
    if (kind !== "error") statusTimer = setTimeout(() => show(box, false), 4000);
  }

  function fail(error) {
    if (error instanceof ApiError && error.status === 401) return; // the sign-in dialog is the message
    status(error instanceof ApiError ? error.message : String(error), "error");
  }

  function size(bytes) {
    if (bytes === null || bytes === undefined) return "";
    const units = ["B", "KiB", "MiB", "GiB"];
    let value = bytes;
    let unit = 0;
    while (value >= 1024 && unit < units.length - 1) { value /= 1024; unit += 1; }
    return unit ? `${value.toFixed(1)} ${units[unit]}` : `${value} B`;
  }

  function when(stamp) { return stamp ? new Date(stamp).toLocaleString() : ""; }

  function shortWhen(stamp) {
    return stamp ? new Date(stamp).toLocaleString([], { dateStyle: "short", timeStyle: "short" }) : "";
  }

  function plural(count, noun) { return `${count} ${noun}${count === 1 ? "" : "s"}`; }

  function join(dir, name) { return dir === "/" ? `/${name}` : `${dir}/${name}`; }

  function parentOf(path) {
    const cut = path.lastIndexOf("/");
    return cut <= 0 ? "/" : path.slice(0, cut);
  }

  // --- location: #agent/session/path, one history entry per folder or file opened ----------------
  // Back and Forward fire popstate (and hashchange), which render the entry without pushing another.

  let shownHash = ""; // the address the page shows: events that arrive for it are echoes, not navigation

  function hashFor(path) {
    const parts = [state.agent, state.session].map(encodeURIComponent);
    return `#${parts.join("/")}/${encodePath(path)}`;
  }

  function saveLocation({ push = false } = {}) {
    const hash = hashFor(state.file ? state.file.path : state.cwd);
    if (hash !== location.hash) {
      if (push && shownHash) history.pushState(null, "", hash);
      else history.replaceState(null, "", hash);
    }
    shownHash = location.hash;
  }

  function readLocation() {
    const [agent = "", session = "", ...rest] = location.hash.slice(1).split("/");
    return {
      agent: decodeURIComponent(agent),
      session: decodeURIComponent(session),
      path: "/" + rest.map(decodeURIComponent).join("/"),
    };
  }

  // --- agents and sessions ------------------------------------------------------------------------

  function fillSelect(select, values, chosen) {
    select.replaceChildren(...values.map((value) => el("option", { text: value, attrs: { value } })));
    if (values.includes(chosen)) select.value = chosen;
  }

  async function loadAgents(wanted) {
    const { body } = await api("GET", "/v1/agents");
    const agents = body.data.length ? body.data : ["default"];
    state.agent = agents.includes(wanted) ? wanted : agents[0];
    fillSelect($("agent"), agents, state.agent);
  }

  // A session's name: its id when a person or program chose it, else when it started (a UUID says nothing).
  function sessionName(session) {
    return GENERATED_ID.test(session.id) ? `Started ${shortWhen(session.created_at)}` : session.id;
  }

  function sessionLabel(session) {
    const count = session.file_count;
    return count === null || count === undefined ? sessionName(session) : `${sessionName(session)} · ${plural(count, "file")}`;
  }

  function changed(session) { return Date.parse(session.changed_at || session.updated_at) || 0; }

  function currentSession() { return state.sessions.find((s) => s.id === state.session); }

  async function loadSessions(wanted) {
    const { body } = await api("GET", `/v1/agents/${encodeURIComponent(state.agent)}/sessions`);
    // most recently changed first: that is the one to open, and the likeliest to be picked next
    state.sessions = body.data.slice().sort((a, b) => changed(b) - changed(a) || b.created_at.localeCompare(a.created_at));
    const ids = state.sessions.map((s) => s.id);
    state.session = ids.includes(wanted) ? wanted : ids[0] || "";
    const select = $("session");
    select.replaceChildren(...state.sessions.map((s) => el("option", {
      text: sessionLabel(s), attrs: { value: s.id, title: s.id },
    })));
    select.value = state.session;
    select.title = visible(state.session);
    $("delete-session").disabled = !state.session;
  }

  async function newSession() {
    const { body } = await api("POST", `/v1/agents/${encodeURIComponent(state.agent)}/sessions`, { json: {} });
    await loadSessions(body.id);
    await openSession("/", { push: true });
    status(`Created session ${sessionName(body)}`);
  }

  async function deleteSession() {
    const session = currentSession();
    if (!session) return;
    if (!(await confirmAction(`Delete session ${sessionName(session)} with all its files and snapshots?`))) return;
    await api("DELETE", sessionUrl(""));
    status(`Deleted session ${sessionName(session)}`);
    await loadSessions("");
    await openSession("/");
  }

  async function openSession(path, { push = false } = {}) {
    closeFile();
    state.cwd = "/";
    const ready = Boolean(state.session);
    for (const id of ["new-file", "new-folder", "refresh"]) $(id).disabled = !ready;
    $("snapshot-form").querySelector("button").disabled = !ready;
    if (!ready) {
      journal.stop();
      $("entries").replaceChildren();
      $("crumbs").replaceChildren(el("span", { text: "No session yet: create one." }));
      $("snapshot-list").replaceChildren();
      return;
    }
    await Promise.all([openPath(path, { push }), loadSnapshots()]);
    await journal.sessionOpened();
  }

  // --- directory listing --------------------------------------------------------------------------

  function renderCrumbs() {
    const nav = $("crumbs");
    const parts = state.cwd.split("/").filter(Boolean);
    const session = currentSession();
    const root = el("a", {
      text: session ? sessionName(session) : "/",
      cls: "root",
      attrs: { href: hashFor("/"), "data-path": "/", title: state.session },
    });
    const items = [root];
    let path = "";
    for (const part of parts) {
      path += `/${part}`;
      items.push(el("span", { text: "/", cls: "sep" }));
      items.push(el("a", { text: part, attrs: { href: hashFor(path), "data-path": path } }));
    }
    nav.replaceChildren(...items);
  }

  function renderEntries(entries) {
    // folders first, each group in the server's (bytewise) name order; Array.sort is stable
    const ordered = entries.slice().sort((a, b) => Number(b.is_directory) - Number(a.is_directory));
    const rows = ordered.map((entry) => {
      const shown = entry.is_directory ? `${entry.name}/` : entry.name;
      const name = el("a", {
        text: shown,
        cls: entry.is_directory ? "dir" : "file",
        // a real address: a middle click opens it in a new tab, which the sign-in cookie also reaches
        attrs: { href: hashFor(entry.path), "data-path": entry.path, "data-testid": "entry", title: shown },
      });
      const badge = entry.is_readonly ? [el("span", { text: "read-only", cls: "badge" })] : [];
      const remove = el("button", {
        text: "Delete",
        cls: "danger small",
        attrs: { type: "button", "data-testid": "delete-entry", "aria-label": `Delete ${entry.name}` },
        on: { click: (event) => { event.stopPropagation(); removePath(entry.path, entry.is_directory).catch(fail); } },
      });
      return el("tr", {}, [
        el("td", {}, [el("div", { cls: "name" }, [name, ...badge])]),
        el("td", { text: entry.is_directory ? "" : size(entry.size_bytes), cls: "num" }),
        el("td", { text: shortWhen(entry.updated_at), cls: "when", attrs: { title: when(entry.updated_at) } }),
        el("td", { cls: "act" }, [remove]),
      ]);
    });
    $("entries").replaceChildren(...rows);
    show($("empty"), entries.length === 0);
  }

  // `current()` says whether the answer is still wanted: a later navigation (quick Back clicks) wins.
  async function listDirectory(path, current = () => true) {
    const { body } = await api("GET", fsUrl(path));
    if (!current()) return;
    state.cwd = path;
    renderCrumbs();
    renderEntries(body.data);
  }

  let navigations = 0;

  // Edits not saved yet: leaving the file (a click, Back, another session, closing the tab) asks first.
  function unsavedEdits() {
    return Boolean(state.editing && state.file && $("editor").value !== state.file.text);
  }

  function mayLeave() {
    if (!unsavedEdits()) return true;
    if (!window.confirm(visible(`Discard your unsaved changes to ${state.file.path}?`))) return false;
    state.editing = false;
    return true;
  }

  // Open a path: a directory lists, a file opens in the viewer (and its folder lists beside it).
  // `push` makes it a new history entry (a person navigated); otherwise the current entry is kept.
  async function openPath(path, { push = true } = {}) {
    if (!mayLeave()) return;
    const mine = ++navigations;
    const current = () => mine === navigations;
    const { body, response } = await api("GET", fsUrl(path));
    if (!current()) return;
    if ("data" in body) {
      closeFile();
      state.cwd = path;
      renderCrumbs();
      renderEntries(body.data);
    } else {
      await listDirectory(parentOf(path), current);
      if (!current()) return;
      showFile(body, response.headers.get("ETag"));
    }
    saveLocation({ push });
  }

  // A change made elsewhere (history.js hears it): show it where the page is, unless a navigation started
  // meanwhile (that one wins) or the file is being edited (its save's If-Match shows the conflict).
  async function refreshListing() {
    const mine = navigations;
    await listDirectory(state.cwd, () => mine === navigations);
  }

  async function refreshOpenFile() {
    const file = state.file;
    if (!file || state.editing) return;
    const mine = navigations;
    const { body, response } = await api("GET", fsUrl(file.path));
    if (mine !== navigations || state.file !== file || state.editing || "data" in body) return;
    showFile(body, response.headers.get("ETag"));
  }

  // --- viewer and editor --------------------------------------------------------------------------

  function closeFile() {
    state.file = null;
    state.editing = false;
    show($("file"), false);
    show($("no-file"), true);
    if (journal) journal.fileChanged(null);
  }

  function showFile(file, etag) {
    const text = file.encoding === "text" ? file.content : null;
    state.file = {
      path: file.path, name: file.name, etag, readonly: file.is_readonly,
      encoding: file.encoding, text, size: file.size_bytes,
    };
    state.editing = false;
    setText($("file-name"), file.path);
    $("file-meta").textContent = `${size(file.size_bytes)} · modified ${when(file.updated_at)}`;
    show($("file-badge"), file.is_readonly);
    $("toggle-readonly").textContent = file.is_readonly ? "Make writable" : "Make read-only";
    const canEdit = text !== null && !file.is_readonly;
    $("edit").disabled = !canEdit;
    $("edit").title = file.is_readonly ? "Read-only files cannot be edited" : (text === null ? "Binary file" : "");
    show($("conflict"), false);
    show($("editor"), false);
    show($("save"), false);
    show($("cancel"), false);
    show($("edit"), true);
    if (text === null) {
      show($("code"), false);
      show($("truncated"), false);
      $("binary").textContent = `Binary file (${size(file.size_bytes)}). Use Download to get it.`;
      show($("binary"), true);
    } else {
      show($("binary"), false);
      renderText(text);
    }
    show($("no-file"), false);
    show($("file"), true);
    if (journal) journal.fileChanged(file.path);
  }

  function renderText(text) {
    let lines = text.split("\n");
    if (lines.length > 1 && lines[lines.length - 1] === "") lines.pop();
    const total = lines.length;
    if (total > MAX_LINES_SHOWN) lines = lines.slice(0, MAX_LINES_SHOWN);
    const numbers = [];
    for (let i = 1; i <= lines.length; i += 1) numbers.push(String(i));
    $("gutter").textContent = numbers.join("\n");
    setText($("text"), lines.join("\n"));
    $("truncated").textContent = `Showing the first ${MAX_LINES_SHOWN} of ${total} lines; download the file for the rest.`;
    show($("truncated"), total > MAX_LINES_SHOWN);
    show($("code"), true);
  }

  function startEditing() {
    if (!state.file || state.file.text === null || state.file.readonly) return;
    state.editing = true;
    $("editor").value = state.file.text;
    show($("code"), false);
    show($("editor"), true);
    show($("save"), true);
    show($("cancel"), true);
    show($("edit"), false);
    $("editor").focus();
  }

  async function save({ force = false } = {}) {
    const file = state.file;
    const headers = force ? {} : { "If-Match": file.etag };
    const text = $("editor").value;
    try {
      // raw bytes, not JSON: JSON bodies are capped at a few MiB, a raw upload streams at any size
      const { body, response } = await api("PUT", fsUrl(file.path), {
        bytes: new TextEncoder().encode(text), headers,
      });
      showFile({ ...body, content: text, encoding: "text" }, response.headers.get("ETag"));
      status(`Saved ${file.path}`);
      await listDirectory(state.cwd);
    } catch (error) {
      if (error instanceof ApiError && error.status === 412) {
        show($("conflict"), true);
        status("Not saved: the file changed meanwhile", "error");
        return;
      }
      throw error;
    }
  }

  async function reloadFile() {  // Cancel and the conflict's Reload: discarding the edits is what was asked
    state.editing = false;
    if (state.file) await openPath(state.file.path, { push: false });
  }

  async function download() {
    const file = state.file;
    const { blob } = await api("GET", fsUrl(file.path), { raw: true });
    const url = URL.createObjectURL(blob);
    const link = el("a", { attrs: { href: url, download: file.name } });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  }

  async function toggleReadOnly() {
    const file = state.file;
    const { body, response } = await api("PUT", fsUrl(file.path), { json: { is_readonly: !file.readonly } });
    showFile(body, response.headers.get("ETag"));
    await listDirectory(state.cwd);
  }

  // --- create and delete --------------------------------------------------------------------------

  // Show a modal dialog; resolve with what `accept` returns when OK is pressed (it may return
  // undefined to keep the dialog open), or with `cancelled` on Cancel or Escape.
  function modal(dialog, okButton, cancelButton, accept, cancelled) {
    return new Promise((resolve) => {
      const done = (value) => {
        dialog.close();
        okButton.removeEventListener("click", ok);
        cancelButton.removeEventListener("click", cancel);
        dialog.removeEventListener("cancel", cancel);
        resolve(value);
      };
      const ok = (event) => {
        event.preventDefault();
        const value = accept();
        if (value !== undefined) done(value);
      };
      const cancel = () => done(cancelled);
      okButton.addEventListener("click", ok);
      cancelButton.addEventListener("click", cancel);
      dialog.addEventListener("cancel", cancel);
      dialog.showModal();
    });
  }

  function askName(title) {
    $("name-title").textContent = title;
    $("name-input").value = "";
    show($("name-error"), false);
    const accept = () => {
      const name = $("name-input").value.trim();
      if (!name || name.includes("/") || name === "." || name === "..") {
        $("name-error").textContent = "Enter a name without '/'.";
        show($("name-error"), true);
        return undefined;
      }
      return name;
    };
    const answer = modal($("name-dialog"), $("name-ok"), $("name-cancel"), accept, null);
    $("name-input").focus();
    return answer;
  }

  function confirmAction(message) {
    setText($("confirm-text"), message);
    return modal($("confirm-dialog"), $("confirm-ok"), $("confirm-cancel"), () => true, false);
  }

  async function create(directory) {
    const name = await askName(directory ? "New folder" : "New file");
    if (name === null) return;
    const path = join(state.cwd, name);
    const json = directory ? { is_directory: true } : { content: "", encoding: "text" };
    const { body, response } = await api("POST", fsUrl(path), { json });
    await listDirectory(state.cwd);
    if (directory) {
      status(`Created folder ${path}`);
    } else {
      showFile(body, response.headers.get("ETag"));
      saveLocation({ push: true });
      status(`Created ${path}`);
    }
  }

  async function removePath(path, directory) {
    const what = directory ? `the folder ${path} and everything in it` : path;
    if (!(await confirmAction(`Delete ${what}?`))) return;
    await api("DELETE", fsUrl(path) + (directory ? "?recursive=true" : ""));
    if (state.file && (state.file.path === path || state.file.path.startsWith(`${path}/`))) closeFile();
    await listDirectory(state.cwd);
    saveLocation();
    status(`Deleted ${path}`);
  }

  // --- snapshots ----------------------------------------------------------------------------------

  async function loadSnapshots() {
    const { body } = await api("GET", sessionUrl("/snapshots"));
    const items = body.data.slice().reverse().map((snap) => {
      const label = snap.tag ? `${snap.tag}` : snap.id.slice(0, 8);
      const restore = el("button", {
        text: "Restore", cls: "small", attrs: { type: "button", "data-testid": "restore-snapshot" },
        on: { click: () => restoreSnapshot(snap).catch(fail) },
      });
      const diff = el("button", {
        text: "Diff", cls: "small", attrs: { type: "button", "data-testid": "diff-snapshot" },
        on: { click: () => showDiff(snap).catch(fail) },
      });
      return el("li", { attrs: { "data-testid": "snapshot" } }, [
        el("span", { text: label, cls: "tag" }),
        el("span", { text: `${plural(snap.file_count, "file")} · ${when(snap.created_at)}`, cls: "muted" }),
        diff, restore,
      ]);
    });
    $("snapshot-list").replaceChildren(...items);
  }

  async function createSnapshot(event) {
    event.preventDefault();
    const tag = $("snapshot-tag").value.trim();
    await api("POST", sessionUrl("/snapshots"), { json: tag ? { tag } : {} });
    $("snapshot-tag").value = "";
    await loadSnapshots();
    status(tag ? `Snapshot ${tag} taken` : "Snapshot taken");
  }

  async function restoreSnapshot(snap) {
    const label = snap.tag || snap.id;
    if (!(await confirmAction(`Restore snapshot ${label}? Changes made since it will be undone.`))) return;
    await api("POST", sessionUrl(`/snapshots/${encodeURIComponent(snap.id)}/restore`));
    status(`Restored ${label}`);
    show($("diff"), false);
    const keep = state.file ? state.file.path : state.cwd;
    try {
      await openPath(keep, { push: false });
    } catch (_) {
      await openPath("/", { push: false });
    }
  }

  async function showDiff(snap) {
    const { body } = await api("GET", sessionUrl(`/snapshots/${encodeURIComponent(snap.id)}/diff`));
    setText($("diff-title"), `Since ${snap.tag || snap.id.slice(0, 8)}`);
    const rows = [
      ...body.added.map((p) => ["added", p]),
      ...body.modified.map((p) => ["modified", p]),
      ...body.deleted.map((p) => ["deleted", p]),
    ].map(([kind, path]) => el("li", { cls: kind, attrs: { "data-testid": "diff-entry" } }, [
      el("span", { text: kind, cls: "kind" }), el("span", { text: path }),
    ]));
    if (!rows.length) rows.push(el("li", { text: "No changes.", cls: "muted" }));
    $("diff-list").replaceChildren(...rows);
    show($("diff"), true);
  }

  // --- sign-in ------------------------------------------------------------------------------------

  const SIGNIN_URL = "/v1/signin";

  // What a pasted text or an address fragment holds: a sign-in link or code, a #token= link, or a token.
  function parseSecret(text) {
    const value = text.trim();
    const fragment = value.includes("#") ? value.slice(value.indexOf("#") + 1) : "";
    const params = new URLSearchParams(fragment);
    if (params.get("signin")) return { code: params.get("signin") };
    if (params.get("token")) return { token: params.get("token") };
    if (!value || value.includes("#")) return null;
    return value.startsWith(SIGNIN_PREFIX) ? { code: value } : { token: value };
  }

  function secretInLocation() {
    return /^#(signin|token)=/.test(location.hash) ? parseSecret(location.hash) : null;
  }

  // Trade a code or token for the sign-in cookie. The secret leaves the address bar (and this history
  // entry) before anything else happens, whether or not it works.
  async function signIn(secret, { fromLocation = false } = {}) {
    if (fromLocation) {
      history.replaceState(null, "", location.pathname + location.search + shownHash);
      shownHash = location.hash;
    }
    try {
      await api("POST", SIGNIN_URL, { json: secret });
    } catch (error) {
      openSignIn(error instanceof ApiError ? error.message : String(error));
      return false;
    }
    closeSignIn();
    status("Signed in");
    return true;
  }

  async function signOut() {
    await api("DELETE", SIGNIN_URL);
    stopApprovals();
    journal.stop();
    showSignedIn(false);
    $("entries").replaceChildren();
    $("snapshot-list").replaceChildren();
    closeFile();
    openSignIn("Signed out.");
  }

  // Show "Sign out" while the browser's cookie signs it in; "Sign in…" otherwise (never with auth off).
  function showSignedIn(browser, authOff = false) {
    show($("sign-out"), browser);
    show($("sign-in"), !browser && !authOff);
  }

  async function refreshSignedIn() {
    const { body } = await api("GET", SIGNIN_URL);
    showSignedIn(body.browser, !body.browser); // this page never sends a token: without the cookie, auth is off
  }

  function openSignIn(message = "") {
    const dialog = $("token-dialog");
    setText($("token-error"), message);
    show($("token-error"), Boolean(message));
    showSignedIn(false);
    if (dialog.open) return;
    $("token-input").value = "";
    dialog.showModal();
  }

  function closeSignIn() {
    const dialog = $("token-dialog");
    if (dialog.open) dialog.close();
  }

  function bindSignInDialog() {
    $("token-ok").addEventListener("click", guard(async (event) => {
      event.preventDefault();
      const secret = parseSecret($("token-input").value);
      if (!secret) {
        openSignIn("Paste a sign-in link (workspacefs open) or a token.");
        return;
      }
      if (await signIn(secret)) await restart();
    }));
    $("token-cancel").addEventListener("click", closeSignIn);
  }

  // --- approvals ----------------------------------------------------------------------------------
  // A request an `ask` rule of the path policy covers waits in the service until an admin decides. An
  // admin's browser polls for such requests (its own saves included) and asks the person at the screen.

  const APPROVAL_POLL_MS = 1500;
  let approvalsAllowed = false;
  let approvalShown = "";
  let pollRound = 0; // a new sign-in starts a new round of polling; an older round stops at its next turn

  async function pendingApprovals() {
    const response = await fetch("/v1/approvals", { headers: BROWSER_HEADER });
    if (response.status === 401 || response.status === 403) {
      approvalsAllowed = false; // not an admin's sign-in: someone else decides
      return [];
    }
    if (!response.ok) return [];
    return (await response.json()).data;
  }

  async function decideApproval(approval, approve) {
    try {
      await api("POST", `/v1/approvals/${encodeURIComponent(approval.id)}`, { json: { approve } });
      status(`${approve ? "Approved" : "Denied"}: ${approval.operation} ${approval.target}`);
    } catch (error) {
      fail(error);
    }
  }

  async function showApproval(approval) {
    approvalShown = approval.id;
    const more = approval.paths.length > 1 ? ` (${approval.paths.length} paths)` : "";
    setText($("approval-text"),
      `Agent ${approval.agent_id}, session ${approval.session_id}, wants to ${approval.operation} ${approval.target}${more}.`);
    setText($("approval-reason"),
      `${approval.reason || "Protected path"} (rule ${approval.pattern})${approval.detail ? `: ${approval.detail}` : ""}`);
    const approve = await modal($("approval-dialog"), $("approval-approve"), $("approval-deny"), () => true, false);
    await decideApproval(approval, approve);
    approvalShown = "";
  }

  async function pollApprovals(round) {
    if (!approvalsAllowed || round !== pollRound) return;
    try {
      if (!approvalShown) {
        const waiting = await pendingApprovals();
        if (waiting.length) showApproval(waiting[0]).catch(fail);
      }
    } catch (_) { /* the next poll tries again */ }
    setTimeout(() => pollApprovals(round), APPROVAL_POLL_MS);
  }

  function startApprovals() {
    approvalsAllowed = true;
    pollRound += 1;
    pollApprovals(pollRound);
  }

  function stopApprovals() {
    approvalsAllowed = false;
    pollRound += 1;
  }

  // --- wiring -------------------------------------------------------------------------------------

  function guard(handler) {
    return (event) => { Promise.resolve(handler(event)).catch(fail); };
  }

  function followLink(event) {
    const link = event.target.closest("a[data-path]");
    if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) return null;
    event.preventDefault();
    return link.dataset.path;
  }

  function bind() {
    journal = window.wsfsHistory({
      $, api, el, show, state, status, fail, when, setText, sessionUrl, ApiError, refreshListing, refreshOpenFile,
      closeFile,
    });
    journal.bind();
    $("agent").addEventListener("change", guard(async () => {
      if (!mayLeave()) { $("agent").value = state.agent; return; }
      state.agent = $("agent").value;
      await loadSessions("");
      await openSession("/", { push: true });
    }));
    $("session").addEventListener("change", guard(async () => {
      if (!mayLeave()) { $("session").value = state.session; return; }
      state.session = $("session").value;
      $("session").title = visible(state.session);
      show($("diff"), false);
      await openSession("/", { push: true });
    }));
    $("new-session").addEventListener("click", guard(newSession));
    $("delete-session").addEventListener("click", guard(deleteSession));
    $("sign-in").addEventListener("click", () => openSignIn());
    $("sign-out").addEventListener("click", guard(signOut));
    for (const id of ["crumbs", "entries"]) {
      $(id).addEventListener("click", guard(async (event) => {
        const path = followLink(event);
        if (path !== null) await openPath(path);
      }));
    }
    $("new-file").addEventListener("click", guard(() => create(false)));
    $("new-folder").addEventListener("click", guard(() => create(true)));
    $("refresh").addEventListener("click", guard(() => openPath(state.file ? state.file.path : state.cwd, { push: false })));
    $("edit").addEventListener("click", startEditing);
    $("cancel").addEventListener("click", guard(reloadFile));
    $("save").addEventListener("click", guard(() => save()));
    $("conflict-reload").addEventListener("click", guard(reloadFile));
    $("conflict-overwrite").addEventListener("click", guard(() => save({ force: true })));
    $("download").addEventListener("click", guard(download));
    $("toggle-readonly").addEventListener("click", guard(toggleReadOnly));
    $("delete-file").addEventListener("click", guard(() => removePath(state.file.path, false)));
    $("snapshot-form").addEventListener("submit", guard(createSnapshot));
    bindSignInDialog();
    // Back, Forward, an edited address, or a sign-in link pasted into this tab
    window.addEventListener("popstate", guard(followLocation));
    window.addEventListener("hashchange", guard(followLocation));
    window.addEventListener("beforeunload", (event) => { if (unsavedEdits()) event.preventDefault(); });
  }

  // Render what the address names now, without adding a history entry (it is already there).
  async function followLocation() {
    if (location.hash === shownHash) return; // our own pushState, or the second event of one navigation
    const secret = secretInLocation();
    if (secret) {
      if (await signIn(secret, { fromLocation: true })) await restart();
      return;
    }
    if (!mayLeave()) {  // stay with the edits: the address goes back to the file being edited
      history.pushState(null, "", shownHash);
      return;
    }
    shownHash = location.hash;
    const wanted = readLocation();
    try {
      if (wanted.agent === state.agent && wanted.session === state.session) {
        await openPath(wanted.path, { push: false });
        return;
      }
      await loadAgents(wanted.agent);
      await loadSessions(wanted.session);
      show($("diff"), false);
      await openSession(state.session === wanted.session ? wanted.path : "/");
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      fail(error); // gone since: say so, and show the session's top
      await openSession("/");
    }
  }

  async function start() {
    const wanted = readLocation();
    await loadAgents(wanted.agent);
    await loadSessions(wanted.session);
    const path = state.session === wanted.session ? wanted.path : "/";
    try {
      await openSession(path);
    } catch (error) {
      if (!(error instanceof ApiError) || error.status !== 404) throw error;
      await openSession("/");
    }
  }

  // After signing in: everything again, as the new sign-in sees it. The page is ready (data-ready, which
  // the browser tests wait for) only once its header says who is signed in, too.
  async function restart() {
    await start();
    await refreshSignedIn();
    startApprovals();
    document.body.dataset.ready = "true";
  }

  async function boot() {
    bind();
    const secret = secretInLocation();
    if (secret && !(await signIn(secret, { fromLocation: true }))) return;
    await restart();
  }

  boot().catch(fail);
})();
