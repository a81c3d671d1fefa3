// What ran after admission: the run's journal followed live (GET .../journal:stream?follow=true,
// newline-delimited JSON, the gateway's route for LedgerService.StreamJournal) and shown as a
// timeline of claims, model requests, tool calls, commands, completions or stops and
// reconciliation, with the command ledger "n of m" and the current lease counting down.
// It reads only; the services decide every state it shows.

import { badge, code, el, erLink, note, seqLink, shortName, stateName, token } from "./common.js";
import { ledgerNow, page, runPath } from "./run.js";

const K = "JOURNAL_ENTRY_KIND_";
// Entries that start the execution record: an admission or a recovery (each settles the hold and
// queues an execution request).
const ADMISSION_KINDS = ["MIGRATION_SETTLEMENT", "REFUSAL_SETTLEMENT", "RECOVERY_WITNESS",
  "READONLY_OBSERVATION_RECOVERY", "OWNERSHIP_CLAIM"].map((k) => K + k);
// Entries after which the execution requests, the command ledger and the lease are read again.
const STATE_KINDS = ["WORKER_CLAIMED", "REQUEST_EVENT", "REQUEST_FAILED", "COMMAND_EXECUTED",
  "OWNERSHIP_CLAIM", "RECONCILIATION_SETTLEMENT", "RECONCILIATION_VERIFICATION", "RUN_HELD"].map((k) => K + k);
const RETRY_MS = 3000;
// Entries asked for per stream message: a long history arrives in a few hundred messages, not one
// message an entry (StreamJournalRequest.max_entries_per_message).
const BATCH = 200;

// `last`: the highest sequence shown (the stream delivers in journal order, so anything at or
// below it was shown already); `count`: how many entries were read.
const timeline = { last: 0, count: 0, commands: 0, admittedAt: 0, stream: null, timer: null, refresh: null };

// ---------------------------------------------------------------- one entry, in words

const payloadOf = (entry) => {
  try { return JSON.parse(entry.payload_json || "{}"); } catch { return {}; }
};

// [category, title, details...] for an entry; category is the timeline's group (a CSS class).
function describeEntry(entry, payload, commandNumber) {
  const kind = String(entry.kind).replace(K, "");
  const exr = payload.execution_request_id ? erLink(payload.execution_request_id) : null;
  const limit = page.run ? page.run.command_limit : "?";
  switch (kind) {
    case "MIGRATION_SETTLEMENT":
      return ["admission", "Admission settled", [`request ${payload.request_id}`]];
    case "REFUSAL_SETTLEMENT":
      return ["admission", "Provider refusal settled", [`recovery ${payload.recovery_id}`]];
    case "RECOVERY_WITNESS":
      return ["admission", "Recovery recorded", [`${shortName(payload.workflow, "RECOVERY_WORKFLOW_")} · ${payload.recovery_id}`]];
    case "READONLY_OBSERVATION_RECOVERY":
      return ["admission", "Read-only observation recovery recorded", [`recovery ${payload.recovery_id}`]];
    case "OWNERSHIP_CLAIM":
      return ["admission", "Ownership claim granted", [exr, ` · lease ${payload.lease_seconds} s`]];
    case "REQUEST_EVENT":
      if (payload.event === "completed") return ["completion", "Execution request completed", [exr]];
      if (payload.event === "cancelled" || payload.event === "expired") return ["stop", `Execution request ${payload.event}`, [exr]];
      if (payload.event === "queued_by_reconciliation") {
        return ["reconciliation", "Stage queued again by reconciliation", [exr, ` replaces ${payload.replaces_execution_request_id}`]];
      }
      return ["admission", `Execution request ${shortName(payload.event, "")}`, [exr]];
    case "WORKER_CLAIMED":
      return ["claim", "Worker claimed the request", [exr, ` · ${entry.actor} · lease generation ${payload.lease_generation}`]];
    case "CHECKPOINT_STORED":
      return ["model", "Checkpoint stored", [code(payload.checkpoint_digest)]];
    case "MODEL_REQUEST_SENT":
      return ["model", "Model request sent", [`${payload.request_id || ""}`]];
    case "RESPONSE_CONSUMED":
      return ["model", "Model response consumed", [code(payload.response_digest)]];
    case "TOOL_CALL_GRANTED":
      return ["tool", "Tool call granted", [`${payload.tool_name || ""} · ${payload.call_id || ""}`]];
    case "TOOL_INTENT":
      return ["tool", "Tool about to run", [`${payload.call_id || ""}`]];
    case "TOOL_OUTCOME":
      return ["tool", `Tool ${payload.status || "outcome"}`, [`${payload.call_id || ""}`]];
    case "COMMAND_EXECUTED":
      return ["command", "Command ran", [`${payload.command_id} · command ${commandNumber} of ${limit}`]];
    case "REQUEST_FAILED":
      return ["stop", "Execution request failed", [exr, ` · ${payload.reason || ""}`,
        payload.stop_reasons ? ` (${payload.stop_reasons.join(", ")})` : ""]];
    case "RUN_HELD":
      return ["stop", "Run held", [`${payload.reason || ""}`]];
    case "ADMISSION_REFUSAL":
      return ["stop", "Claim refused while entering the policy epoch", [`${payload.reason || ""}`]];
    case "STARTUP_RECOVERY_ANNOTATION":
      return ["stop", "Startup recovery annotation", [`${payload.annotation || ""}`]];
    case "RECONCILIATION_VERIFICATION":
      return ["reconciliation", "Verifier proof recorded", [exr, ` · reconciliation ${payload.reconciliation_id}`]];
    case "RECONCILIATION_SETTLEMENT":
      return ["reconciliation", `Reconciliation decided: ${shortName(payload.decision, "RECONCILIATION_DECISION_")}`,
        [exr, ` · generation ${payload.fenced_lease_generation} fenced · ${payload.reconciliation_id}`]];
    default:
      return ["other", shortName(entry.kind, K), []];
  }
}

// ---------------------------------------------------------------- rendering

function item(entry) {
  const payload = payloadOf(entry);
  if (entry.kind === K + "COMMAND_EXECUTED") timeline.commands += 1;
  const [category, title, details] = describeEntry(entry, payload, timeline.commands);
  return el("li", { class: `event ${category}`, "data-kind": shortName(entry.kind, K).replaceAll(" ", "_"), "data-sequence": entry.sequence },
    el("span", { class: "event-seq" }, seqLink(entry.sequence)),
    el("span", { class: "event-body" }, el("strong", {}, title), details.length ? " " : "", ...details,
      el("span", { class: "event-meta" }, `${entry.actor} · ${entry.recorded_at || ""}`)));
}

function add(entry) {
  const sequence = Number(entry.sequence);
  if (sequence <= timeline.last) return;
  timeline.last = sequence;
  timeline.count += 1;
  const list = document.getElementById("timeline");
  if (!timeline.admittedAt && ADMISSION_KINDS.includes(entry.kind)) {
    timeline.admittedAt = sequence;
    list.replaceChildren();
  }
  if (!timeline.admittedAt) {
    // Before admission: only counted (the records below list every entry).
    if (entry.kind === K + "COMMAND_EXECUTED") timeline.commands += 1;
    document.getElementById("timeline-before").textContent =
      `${timeline.count} journal entries before admission (listed under Records).`;
    return;
  }
  document.getElementById("timeline-before").textContent =
    `${timeline.admittedAt - 1} journal entries before admission (listed under Records).`;
  list.append(item(entry));
  if (STATE_KINDS.includes(entry.kind)) scheduleRefresh();
}

// The records (execution requests, command usage, journal table) are read again shortly after
// entries that change them, once per burst.
function scheduleRefresh() {
  clearTimeout(timeline.refresh);
  timeline.refresh = setTimeout(() => document.dispatchEvent(new Event("forge:journal-moved")), 300);
}

// The lease of the newest execution request, counting down to its expiry.
const LIVE = ["EXECUTION_REQUEST_STATE_QUEUED", "EXECUTION_REQUEST_STATE_CLAIMED"];

function clock(seconds) {
  const s = Math.max(0, Math.floor(seconds));
  const h = Math.floor(s / 3600);
  const m = Math.floor((s % 3600) / 60);
  const pad = (n) => String(n).padStart(2, "0");
  return h ? `${h}:${pad(m)}:${pad(s % 60)}` : `${m}:${pad(s % 60)}`;
}

function leaseText() {
  const current = page.requests[page.requests.length - 1];
  if (!current) return "no execution request yet";
  if (!LIVE.includes(current.state)) return `no live lease: ${current.execution_request_id} is ${stateName(current.state)}`;
  const expires = Date.parse(current.lease.expires_at || "");
  if (Number.isNaN(expires)) return `${current.lease.seconds} s at generation ${current.lease.generation}`;
  const left = (expires - ledgerNow()) / 1000;  // on the ledger's clock, not the browser's
  const what = current.state === "EXECUTION_REQUEST_STATE_QUEUED" ? "to be claimed" : `held by ${current.owner || "the worker"}`;
  return left > 0
    ? `${clock(left)} left of ${current.lease.seconds} s (${what}, generation ${current.lease.generation}, until ${current.lease.expires_at})`
    : `expired at ${current.lease.expires_at} (generation ${current.lease.generation}); the ledger decides what that means`;
}

export function showLease() {
  const lease = document.getElementById("timeline-lease");
  if (lease) lease.textContent = leaseText();
  const current = page.requests[page.requests.length - 1];
  const state = document.getElementById("timeline-state");
  if (state) state.replaceChildren(current ? el("span", {}, erLink(current.execution_request_id), " ", stateName(current.state)) : "no execution request yet");
  const commands = document.getElementById("timeline-commands");
  if (commands) commands.textContent = page.usage ? `${page.usage.used} of ${page.usage.limit} commands used` : "—";
}

// ---------------------------------------------------------------- following the stream

function setLive(text, kind) {
  document.getElementById("timeline-live").replaceChildren(badge(text, kind));
}

async function follow() {
  const from = timeline.last + 1;
  const controller = new AbortController();
  timeline.stream = controller;
  let response;
  try {
    response = await fetch(`${runPath()}/journal:stream?follow=true&from_sequence=${from}&max_entries_per_message=${BATCH}`, {
      headers: { authorization: `Bearer ${token()}` }, cache: "no-store", credentials: "omit", signal: controller.signal,
    });
  } catch {
    if (controller.signal.aborted) return undefined;
    return again("the connection failed");
  }
  if (!response.ok) {
    let reason = `HTTP ${response.status}`;
    try { const body = await response.json(); reason = `${reason}: ${body.message || ""}`; } catch { /* no body */ }
    // Too many followers (429) or a server trouble: try again later; any other refusal stops.
    if (response.status >= 500 || response.status === 429) return again(reason);
    setLive("not following", "bad");
    document.getElementById("timeline-before").replaceChildren(note(`The journal stream is not readable (${reason}).`));
    return undefined;
  }
  setLive("live", "ok");
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += value;
      let end;
      while ((end = buffer.indexOf("\n")) >= 0) {
        const line = buffer.slice(0, end).trim();
        buffer = buffer.slice(end + 1);
        if (!line) continue;
        const message = JSON.parse(line);
        if (message.error) return again(message.error.message || "the stream ended with an error");
        // A batch in `entries`; one entry in `entry` from a ledger older than batches.
        for (const entry of message.entries || (message.entry ? [message.entry] : [])) add(entry);
      }
    }
  } catch {
    if (controller.signal.aborted) return undefined; // stopped on purpose (the tab was hidden)
    return again("the stream was interrupted");
  }
  return again("the stream ended");
}

// Reconnect from the next sequence after a pause; entries already shown are not shown twice.
function again(why) {
  setLive(`reconnecting (${why})`, "warn");
  clearTimeout(timeline.timer);
  timeline.timer = setTimeout(follow, RETRY_MS);
}

// A hidden tab lets its follower go (the ledger serves a bounded number of them) and follows
// again, from the next sequence, when it is shown.
function onVisibility() {
  if (document.visibilityState === "hidden") {
    clearTimeout(timeline.timer);
    timeline.stream?.abort();
    setLive("paused while the tab is hidden", "warn");
  } else {
    follow();
  }
}

export function startTimeline() {
  if (timeline.stream) return;
  document.getElementById("timeline").replaceChildren(el("li", { class: "note" }, "Nothing has run after admission yet."));
  document.addEventListener("forge:records-loaded", showLease);
  document.addEventListener("visibilitychange", onVisibility);
  setInterval(showLease, 1000);
  showLease();
  follow();
}
