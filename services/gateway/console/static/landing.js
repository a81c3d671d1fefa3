// The landing page: find runs by continuity state or id (GET /api/v1/runs, a page at a time) and
// open one. The filter is the listing's own AIP-160 subset; the page token is the server's,
// passed back unchanged. Nothing is decided here: the table shows what the ledger answered.

import { API, TOKEN_KEY, call, describe, el, setStatus, shortName, token } from "./common.js";

const list = { tokens: [""], index: 0 };

function wireToken(onReady) {
  const forget = document.getElementById("forget-token");
  const form = document.getElementById("token-form");
  const show = () => {
    forget.hidden = !token();
    form.hidden = Boolean(token());
  };
  show();
  forget.addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const entered = document.getElementById("token").value.trim();
    if (!entered) return;
    sessionStorage.setItem(TOKEN_KEY, entered);
    form.reset();
    show();
    onReady();
  });
}

function filterText() {
  const parts = [];
  const state = document.getElementById("state-filter").value;
  if (state) parts.push(`state = ${state}`);
  const id = document.getElementById("id-search").value.trim();
  if (id) parts.push(`run_id = "${id}*"`);
  return parts.join(" AND ");
}

const stateBadge = (value) => {
  const name = shortName(value, "RUN_CONTINUITY_STATE_");
  const kind = { held: "warn", unresolved: "bad", failed: "bad", expired: "bad", completed: "ok", running: "ok" }[name] || "";
  return el("span", { class: `badge ${kind}`.trim() }, name || "unknown");
};

function runsTable(rows) {
  if (!rows.length) return el("p", { class: "note" }, "No runs match.");
  return el("table", { class: "runs" },
    el("thead", {}, el("tr", {},
      el("th", { scope: "col" }, "Run"), el("th", { scope: "col" }, "Continuity state"),
      el("th", { scope: "col" }, "Updated"), el("th", { scope: "col" }, "Execution request"))),
    el("tbody", {}, rows.map((row) => el("tr", {},
      el("td", { "data-label": "Run" },
        el("a", { href: `/console/runs/${encodeURIComponent(row.run.run_id)}` }, row.run.run_id)),
      el("td", { "data-label": "State" }, stateBadge(row.continuity_state)),
      el("td", { "data-label": "Updated" }, row.updated_at || "—"),
      el("td", { "data-label": "Request" }, el("code", {}, row.current_execution_request_id || "—"))))));
}

async function loadPage() {
  const target = document.getElementById("runs-list");
  const query = new URLSearchParams({ page_size: "25" });
  const filter = filterText();
  if (filter) query.set("filter", filter);
  const pageToken = list.tokens[list.index];
  if (pageToken) query.set("page_token", pageToken);
  setStatus("Loading runs…");
  const answer = await call("GET", `${API}/runs?${query}`);
  if (answer.outcome !== "ok") {
    setStatus(`Runs could not be listed: ${describe(answer)}`);
    return;
  }
  setStatus("");
  target.replaceChildren(runsTable(answer.json.runs || []));
  const next = answer.json.next_page_token || "";
  list.tokens = list.tokens.slice(0, list.index + 1);
  if (next) list.tokens.push(next);
  document.getElementById("next-page").hidden = !next;
  document.getElementById("first-page").hidden = list.index === 0;
}

function landingPage() {
  const start = () => { list.tokens = [""]; list.index = 0; loadPage(); };
  wireToken(start);
  document.getElementById("open-run").addEventListener("submit", (event) => {
    event.preventDefault();
    const entered = document.getElementById("token").value.trim();
    if (entered) sessionStorage.setItem(TOKEN_KEY, entered);
    const runId = document.getElementById("run-id").value.trim();
    location.assign(`/console/runs/${encodeURIComponent(runId)}`);
  });
  document.getElementById("run-filters").addEventListener("submit", (event) => {
    event.preventDefault();
    if (token()) start();
    else setStatus("Enter your bearer token first.");
  });
  document.getElementById("next-page").addEventListener("click", () => { list.index += 1; loadPage(); });
  document.getElementById("first-page").addEventListener("click", start);
  if (token()) start();
  else document.getElementById("runs-list").replaceChildren(el("p", { class: "note" }, "Enter your bearer token above to list the runs."));
}

landingPage();
