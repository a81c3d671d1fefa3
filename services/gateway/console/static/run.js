// The run page's state, its facts (held state, command ledger, policy, grantable lease window)
// and records (execution requests, commands, journal).

import {
  API, call, callerPermissions, describe, el, erLink, facts, note, refusalHandoffView, seqLink, setStatus, shortName,
  stateName,
} from "./common.js";

// ---------------------------------------------------------------- run page: facts and records

// grantableLease: the lease window a grant made now may carry, as the ledger computes it with its
// one lease-bound rule (the run answer's grantable_lease_seconds); the console keeps no copy.
export const page = { runId: "", run: null, grantableLease: null, policy: null, usage: null, requests: [], ledgerOffset: 0 };
export const runPath = () => `${API}/runs/${encodeURIComponent(page.runId)}`;
export const requestPath = (requestId) =>
  `${runPath()}/invalid-read-continuity/requests/${encodeURIComponent(requestId)}`;

export const usageText = () => (page.usage ? `${page.usage.used} of ${page.usage.limit} commands used` : "—");

export async function loadFacts() {
  const [run, policy, usage] = await Promise.all([
    call("GET", runPath()),
    call("GET", `${API}/invalid-read-continuity/policy`),
    call("GET", `${runPath()}/command-usage`),
  ]);
  const target = document.getElementById("run-facts");
  if (run.outcome !== "ok") {
    target.replaceChildren(el("div", { class: "card refused" }, `The run could not be read: ${describe(run)}`));
    return false;
  }
  page.run = run.json.run;
  page.grantableLease = Number(run.json.grantable_lease_seconds || 0); // int64: JSON string, 0 omitted
  page.policy = policy.outcome === "ok" ? policy.json.policy : null;
  page.usage = usage.outcome === "ok" ? usage.json.usage : null;
  target.replaceChildren(facts([
    ["Attempt", page.run.attempt_id],
    ["Task", page.run.task_id],
    ["Source", `${page.run.source_revision} · ${page.run.source_profile}`],
    ["Continuity state", el("span", { id: "continuity-state" }, "reading the journal…")],
    ["Command ledger", el("span", { id: "command-ledger" }, usageText())],
    ["Policy revision", page.policy ? `${page.policy.revision} (${page.policy.enabled ? "enabled" : "disabled"})` : "—"],
    ["Lease window the server would grant", `${page.grantableLease} s (policy window, provider timeout and deadline; the ledger bounds it again)`],
  ]));
  return true;
}

// The ledger's clock as this page reads it now. Leases and proofs end on the ledger's clock
// (ADR 0057), not on the browser's: the offset is the ledger's time of the newest listing of the
// requests less the browser's time when that listing was sent, so what is shown as left of a
// lease is never more than the ledger would say, whatever the browser's clock says.
export const ledgerNow = () => Date.now() + page.ledgerOffset;

export async function loadRecords() {
  const sent = Date.now();
  const [requests, usage, journal] = await Promise.all([
    call("GET", `${runPath()}/execution-requests`),
    call("GET", `${runPath()}/command-usage`),
    call("GET", `${runPath()}/journal?page_size=1000`),
  ]);
  page.requests = requests.outcome === "ok" ? requests.json.execution_requests : [];
  const ledgerTime = Date.parse(requests.outcome === "ok" ? requests.json.ledger_time || "" : "");
  if (!Number.isNaN(ledgerTime)) page.ledgerOffset = ledgerTime - sent;
  const canCancel = await cancelPermitted();
  const rows = page.requests.map((r) =>
    el("tr", { id: `er-${r.execution_request_id}` },
      el("td", {}, r.execution_request_id),
      el("td", {}, r.request_id),
      el("td", {}, stateName(r.state), r.admission_refusal ? ` · not scheduled (${r.admission_refusal})` : ""),
      el("td", {}, `${r.lease.generation} · ${r.lease.seconds} s`),
      el("td", { class: "wide-only" }, r.owner || "—"),
      el("td", {}, canCancel && OUTSTANDING.includes(r.state) ? cancelButton(r) : "")));
  document.getElementById("execution-requests").replaceChildren(
    requests.outcome !== "ok" ? note(`Not readable: ${describe(requests)}`)
      : rows.length === 0 ? note("No execution request yet.")
      : el("div", { class: "table-wrap" }, el("table", { class: "wide" },
        el("thead", {}, el("tr", {}, el("th", {}, "Execution request"), el("th", {}, "Request"),
          el("th", {}, "State"), el("th", {}, "Lease generation · window"), el("th", { class: "wide-only" }, "Owner"),
          el("th", {}, "Action"))),
        el("tbody", {}, rows))));
  if (usage.outcome === "ok") page.usage = usage.json.usage;
  document.getElementById("command-usage").textContent = usage.outcome === "ok" ? usageText() : `Not readable: ${describe(usage)}`;
  const ledger = document.getElementById("command-ledger");
  if (ledger) ledger.textContent = usageText();
  const entries = journal.outcome === "ok" ? journal.json.entries : [];
  const state = document.getElementById("continuity-state");
  if (state) state.replaceChildren(journal.outcome !== "ok" || requests.outcome !== "ok" ? "—" : continuityState(page.requests, entries));
  document.getElementById("journal").replaceChildren(
    journal.outcome !== "ok" ? note(`Not readable: ${describe(journal)}`)
      : el("div", { class: "table-wrap" }, el("table", {},
        el("thead", {}, el("tr", {}, el("th", {}, "Sequence"), el("th", {}, "Kind"), el("th", {}, "Actor"),
          el("th", { class: "wide-only" }, "Recorded"))),
        el("tbody", {}, entries.map((e) => el("tr", { id: `journal-${e.sequence}` },
          el("td", {}, e.sequence), el("td", {}, shortName(e.kind, "JOURNAL_ENTRY_KIND_")),
          el("td", {}, e.actor), el("td", { class: "wide-only" }, e.recorded_at || "—")))))));
  document.dispatchEvent(new Event("forge:records-loaded"));
}

// ---------------------------------------------------------------- the run's continuity state

const K = "JOURNAL_ENTRY_KIND_";
const SETTLING = ["MIGRATION_SETTLEMENT", "REFUSAL_SETTLEMENT", "RECOVERY_WITNESS", "READONLY_OBSERVATION_RECOVERY",
  "OWNERSHIP_CLAIM"].map((k) => K + k);
const STATE_WORDS = {
  EXECUTION_REQUEST_STATE_QUEUED: "admitted: queued for a worker",
  EXECUTION_REQUEST_STATE_CLAIMED: "admitted: claimed by a worker",
  EXECUTION_REQUEST_STATE_COMPLETED: "completed",
  EXECUTION_REQUEST_STATE_FAILED: "failed (Check current admission shows the recoveries that apply)",
  EXECUTION_REQUEST_STATE_RECONCILED: "reconciled: the stage was queued again",
  EXECUTION_REQUEST_STATE_UNRESOLVED: "terminal unresolved by reconciliation: nothing is retried",
  EXECUTION_REQUEST_STATE_CANCELLED: "cancelled",
  EXECUTION_REQUEST_STATE_EXPIRED: "expired before any worker claimed it",
};

// What the run is now, from its newest execution request and its journal: "held" only while the
// newest hold is not followed by an admission or recovery that settled it.
export function continuityState(requests, entries) {
  const last = (kinds) => entries.filter((e) => kinds.includes(e.kind)).pop();
  const held = last([K + "RUN_HELD"]);
  const settled = last(SETTLING);
  const heldNow = held && (!settled || Number(held.sequence) > Number(settled.sequence));
  const current = requests[requests.length - 1];
  if (!current) {
    return heldNow ? el("span", { "data-state": "held" }, "held at journal ", seqLink(held.sequence), "; not admitted")
      : el("span", { "data-state": "not-held" }, "not held; no execution request");
  }
  return el("span", { "data-state": stateName(current.state) },
    STATE_WORDS[current.state] || stateName(current.state), " (", erLink(current.execution_request_id), ")",
    heldNow ? el("span", {}, "; held again at journal ", seqLink(held.sequence)) : "",
    held && !heldNow ? el("span", {}, "; was held at journal ", seqLink(held.sequence), " before ", seqLink(settled.sequence)) : "");
}

// --------------------------------------------------------------- cancelling an execution request

const OUTSTANDING = ["EXECUTION_REQUEST_STATE_QUEUED", "EXECUTION_REQUEST_STATE_CLAIMED"];
const CANCELLING_ROLES = ["ROLE_EXECUTION_OPERATOR", "ROLE_FACTORY_ADMINISTRATOR"];

// Cancel is offered to the roles the ledger's role table allows on CancelExecutionRequest, as the
// server reports the caller's roles; the ledger still requires the admitting operator (or an
// administrator) and refuses anyone else with CANCEL_NOT_PERMITTED.
async function cancelPermitted() {
  const permissions = await callerPermissions();
  const roles = permissions.answer.outcome === "ok" ? permissions.answer.json.roles || [] : [];
  return roles.some((role) => CANCELLING_ROLES.includes(role));
}

function cancelButton(request) {
  const button = el("button", { type: "button", class: "cancel-request" }, "Cancel request");
  button.addEventListener("click", async () => {
    if (!window.confirm(`Cancel ${request.execution_request_id}? It cannot be resumed.`)) return;
    button.disabled = true;
    const answer = await call("POST",
      `${API}/execution-requests/${encodeURIComponent(request.execution_request_id)}:cancel`,
      { reason: "cancelled from the operator console" });
    // Cancelling is idempotent: after an uncertain answer the records are read back, not resent.
    setStatus(answer.outcome === "ok" ? `Cancelled ${request.execution_request_id}.`
      : `Cancel ${answer.outcome}: ${describe(answer)}`);
    // A refusal carries the handoff of the request (what is bound, known and permitted next).
    document.getElementById("request-refusal").replaceChildren(answer.outcome !== "refused" ? ""
      : el("div", { class: "card refused", role: "alert" },
        el("h4", {}, `Cancel of ${request.execution_request_id} refused; nothing was recorded`),
        el("p", {}, describe(answer)), refusalHandoffView(answer)));
    await loadRecords();
  });
  return button;
}
