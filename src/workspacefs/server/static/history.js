// The file browser's history panel and live updates (loaded before app.js, which attaches it).
//
// Live: one EventSource per open session on …/events (the sign-in cookie goes with it; it reconnects by
// itself with Last-Event-ID, and the service replays what it missed). A change refreshes the listing, and
// the open file unless it is being edited (then the save's If-Match catches the conflict, as before).
// History: the journal's entries for the open file (or the whole session): who, when, what; Undo; pick two
// entries and the file's versions after each are compared line by line (a small LCS diff, below).
// Everything reaches the page through textContent, never as markup, with hidden characters shown (`setText`).
"use strict";

window.wsfsHistory = (ctx) => {
  const { $, api, el, show, state, status, fail, when, setText, sessionUrl, ApiError } = ctx;
  const MAX_DIFF_CELLS = 4_000_000; // LCS table size; beyond it the versions are shown as replaced whole
  let source = null;
  let refreshTimer = 0;
  let picked = []; // entry ids, oldest pick first
  let entries = [];
  let shownFile = null;

  // --- live updates -------------------------------------------------------------------------------

  function watch() {
    if (source) source.close();
    source = null;
    if (!state.session) return;
    source = new EventSource(sessionUrl("/events"));
    source.addEventListener("change", (message) => {
      let change;
      try { change = JSON.parse(message.data); } catch (_) { return; }
      changed(change);
    });
  }

  const pending = { listing: false, file: false, gone: false };

  function changed(change) {
    const paths = [change.path, change.from_path].filter(Boolean);
    const file = state.file ? state.file.path : null;
    if (file && paths.some((p) => p === file || file.startsWith(`${p}/`))) {
      pending.file = true;
      pending.gone = change.kind === "deleted" || (change.kind === "moved" && change.from_path === file);
    }
    pending.listing = true;
    clearTimeout(refreshTimer);
    refreshTimer = setTimeout(() => apply().catch(fail), 150); // a burst of changes: one refresh
  }

  async function apply() {
    const { listing, file, gone } = pending;
    pending.listing = pending.file = pending.gone = false;
    if (file && gone && state.file && !state.editing) {
      ctx.closeFile();
      status("The open file was deleted or moved");
    } else if (file) {
      await ctx.refreshOpenFile();
    }
    if (listing || gone) await ctx.refreshListing();
    if (file && state.editing) status("This file changed meanwhile; saving will show the conflict", "error");
    await load();
  }

  // --- the panel ----------------------------------------------------------------------------------

  function scopePath() {
    return $("history-file-only").checked && state.file ? state.file.path : null;
  }

  async function load() {
    if (!state.session) {
      $("history-list").replaceChildren();
      return;
    }
    const path = scopePath();
    const query = new URLSearchParams({ limit: "50" });
    if (path) query.set("path", path);
    let body;
    try {
      ({ body } = await api("GET", sessionUrl(`/history?${query}`)));
    } catch (error) {
      if (error instanceof ApiError && error.status === 501) {
        $("history-list").replaceChildren(el("li", { text: "This session keeps no history.", cls: "muted" }));
        return;
      }
      throw error;
    }
    entries = body.data;
    picked = picked.filter((id) => entries.some((e) => e.entry_id === id));
    render(path);
  }

  function describe(entry) {
    const kinds = { created: "A", modified: "M", deleted: "D", moved: "R" };
    const paths = entry.changes.slice(0, 3).map((c) => `${kinds[c.kind]} ${c.path}`);
    if (entry.changes.length > 3) paths.push(`+${entry.changes.length - 3} more`);
    const undoes = entry.undoes ? ` (undid #${entry.undoes})` : "";
    return `${entry.operation}${undoes}: ${paths.join(", ")}`;
  }

  function render(path) {
    const items = entries.map((entry) => {
      const pick = el("input", {
        attrs: { type: "checkbox", "data-testid": "history-pick", "aria-label": `Compare entry ${entry.entry_id}` },
        on: { change: (event) => togglePick(entry.entry_id, event.target.checked) },
      });
      pick.checked = picked.includes(entry.entry_id);
      pick.disabled = !path; // versions of one file are compared
      const undo = el("button", {
        text: "Undo", cls: "small", attrs: { type: "button", "data-testid": "history-undo" },
        on: { click: () => undoEntry(entry).catch(fail) },
      });
      return el("li", { attrs: { "data-testid": "history-entry", "data-entry": String(entry.entry_id) } }, [
        pick,
        el("span", { text: `#${entry.entry_id}`, cls: "tag" }),
        el("span", { text: entry.actor.name || "unnamed caller", cls: "who", attrs: { title: entry.actor.label } }),
        el("span", { text: when(entry.time), cls: "muted" }),
        el("span", { text: describe(entry), cls: "what" }),
        undo,
      ]);
    });
    if (!items.length) items.push(el("li", { text: "No changes recorded yet.", cls: "muted" }));
    $("history-list").replaceChildren(...items);
  }

  function togglePick(id, on) {
    picked = picked.filter((each) => each !== id);
    if (on) picked.push(id);
    if (picked.length > 2) picked = picked.slice(-2);
    render(scopePath());
    if (picked.length === 2) compare().catch(fail);
    else show($("version-diff"), false);
  }

  async function undoEntry(entry) {
    try {
      const { body } = await api("POST", sessionUrl("/undo"), { json: { entry_id: entry.entry_id } });
      status(`Undid #${entry.entry_id} (new entry #${body.data.map((e) => e.entry_id).join(", #")})`);
    } catch (error) {
      if (error instanceof ApiError && error.status === 409) {
        status(`Not undone: ${error.message}`, "error");
        return;
      }
      throw error;
    }
  }

  // --- comparing two versions -----------------------------------------------------------------------

  async function version(entryId, path) {
    const query = new URLSearchParams({ path, side: "after" });
    try {
      const { blob } = await api("GET", sessionUrl(`/history/${entryId}/content?${query}`), { raw: true });
      return await blob.text();
    } catch (error) {
      if (error instanceof ApiError && error.status === 404) return ""; // no file after it (deleted)
      throw error;
    }
  }

  async function compare() {
    const path = scopePath();
    if (!path || picked.length !== 2) return;
    const [older, newer] = picked.slice().sort((a, b) => a - b);
    const [before, after] = await Promise.all([version(older, path), version(newer, path)]);
    setText($("version-diff-title"), `${path}: after #${older} → after #${newer}`);
    const lines = diffLines(before, after).map(([kind, text]) => el("div", {
      text: `${kind === "add" ? "+" : kind === "del" ? "-" : " "} ${text}`,
      cls: `line ${kind}`,
      attrs: { "data-testid": "version-diff-line", "data-kind": kind },
    }));
    if (!lines.length) lines.push(el("div", { text: "The two versions are the same.", cls: "muted" }));
    $("version-diff-lines").replaceChildren(...lines);
    show($("version-diff"), true);
  }

  function split(text) {
    const lines = text.split("\n");
    if (lines.length && lines[lines.length - 1] === "") lines.pop();
    return lines;
  }

  // [kind, line] with kind "same", "del" or "add": a longest common subsequence of the lines, the rest
  // removed then added (the order a unified diff shows).
  function diffLines(beforeText, afterText) {
    const a = split(beforeText);
    const b = split(afterText);
    if (a.length * b.length > MAX_DIFF_CELLS) {
      return [...a.map((line) => ["del", line]), ...b.map((line) => ["add", line])];
    }
    const width = b.length + 1;
    const table = new Uint32Array((a.length + 1) * width);
    for (let i = a.length - 1; i >= 0; i -= 1) {
      for (let j = b.length - 1; j >= 0; j -= 1) {
        table[i * width + j] = a[i] === b[j]
          ? table[(i + 1) * width + j + 1] + 1
          : Math.max(table[(i + 1) * width + j], table[i * width + j + 1]);
      }
    }
    const out = [];
    let i = 0;
    let j = 0;
    while (i < a.length && j < b.length) {
      if (a[i] === b[j]) { out.push(["same", a[i]]); i += 1; j += 1; }
      else if (table[(i + 1) * width + j] >= table[i * width + j + 1]) { out.push(["del", a[i]]); i += 1; }
      else { out.push(["add", b[j]]); j += 1; }
    }
    while (i < a.length) { out.push(["del", a[i]]); i += 1; }
    while (j < b.length) { out.push(["add", b[j]]); j += 1; }
    return out;
  }

  function bind() {
    $("history-file-only").addEventListener("change", () => { picked = []; show($("version-diff"), false); load().catch(fail); });
    $("history-refresh").addEventListener("click", () => load().catch(fail));
    $("version-diff-close").addEventListener("click", () => show($("version-diff"), false));
  }

  return {
    bind,
    // a session was opened (or the page signed in again): watch it, show its history
    sessionOpened() { picked = []; shownFile = null; show($("version-diff"), false); watch(); return load(); },
    // a file was opened or closed: the panel follows it (the same file shown again keeps the picks)
    fileChanged(path) {
      if (path === shownFile) return;
      shownFile = path;
      picked = [];
      show($("version-diff"), false);
      load().catch(fail);
    },
    stop() { if (source) source.close(); source = null; },
    diffLines,
  };
};
