// The operator console. It calls only the gateway's public JSON routes, with the operator's own
// bearer token, and decides nothing the services decide: an action is offered only when the
// server's own answer (an eligible candidate naming the action, or a refusal) says so.
//
// Action identity: the request_id / recovery_id is chosen (crypto.randomUUID) and saved in
// sessionStorage when the review opens, before anything is sent. Once a submission has been sent,
// the page only reads the saved action back: a lost answer never leads to a second submission.

const TOKEN_KEY = "forge.console.token";
const ACTION_PREFIX = "forge.console.action:";
const TIMEOUT_MS = 20000;
const MAX_WINDOW_SECONDS = 7200; // the services' cap on any lease window (policy window <= 7200)
const API = "/api/v1";

// ---------------------------------------------------------------- small helpers

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === false || value === null || value === undefined) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const facts = (pairs) =>
  el("dl", { class: "facts" }, pairs.filter(Boolean).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
const code = (text) => el("code", { class: "digest" }, text || "—");
const badge = (text, kind) => el("span", { class: `badge ${kind}` }, text);
const note = (text) => el("p", { class: "note" }, text);
const shortName = (value, prefix) => String(value || "").replace(prefix, "").toLowerCase().replaceAll("_", " ");
const stateName = (s) => shortName(s, "EXECUTION_REQUEST_STATE_");
const seqLink = (seq) => (seq && seq !== "0" ? el("a", { href: `#journal-${seq}` }, `#${seq}`) : "—");
const erLink = (id) => el("a", { href: `#er-${id}` }, id);

function setStatus(text) {
  document.getElementById("status").textContent = text;
}

const token = () => sessionStorage.getItem(TOKEN_KEY) || "";

function reasonOf(body) {
  const info = (body && body.details || []).find((d) => String(d["@type"]).endsWith("google.rpc.ErrorInfo"));
  return info ? info.reason : "";
}

// One JSON call. outcome: "ok"; "refused" (a definite answer from the services, nothing written);
// "uncertain" (no answer, a timeout, or a 5xx other than 501: the call may or may not have acted).
async function call(method, path, body) {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), TIMEOUT_MS);
  const headers = { authorization: `Bearer ${token()}` };
  if (body !== undefined) headers["content-type"] = "application/json";
  let response;
  try {
    response = await fetch(path, {
      method, headers, cache: "no-store", credentials: "omit", signal: controller.signal,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch (error) {
    const detail = error && error.name === "AbortError" ? "no answer in time" : "the connection failed";
    return { outcome: "uncertain", status: 0, detail };
  } finally {
    clearTimeout(timer);
  }
  let json = null;
  try { json = await response.json(); } catch { json = null; }
  if (response.ok && json) return { outcome: "ok", status: response.status, json };
  if (!json || (response.status >= 500 && response.status !== 501)) {
    return { outcome: "uncertain", status: response.status, detail: `HTTP ${response.status}` };
  }
  return { outcome: "refused", status: response.status, json, reason: reasonOf(json), message: json.message || "" };
}

const describe = (answer) =>
  answer.outcome === "refused" ? `${answer.reason || `HTTP ${answer.status}`}: ${answer.message}` : answer.detail;

// Saved actions, one per run and workflow (and request for recoveries).
const actionKey = (...parts) => ACTION_PREFIX + parts.map(encodeURIComponent).join(":");
function loadAction(key) {
  try { return JSON.parse(sessionStorage.getItem(key) || "null"); } catch { return null; }
}
const saveAction = (key, action) => sessionStorage.setItem(key, JSON.stringify(action));
const inFlight = (action) => action && (action.state === "sent" || action.state === "uncertain");
const newIdentity = () => `console-${crypto.randomUUID()}`;

// ---------------------------------------------------------------- token

function wireToken(onReady) {
  const forget = document.getElementById("forget-token");
  forget.hidden = !token();
  forget.addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    location.reload();
  });
  const form = document.getElementById("token-form");
  if (!form) return;
  form.hidden = Boolean(token());
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(TOKEN_KEY, document.getElementById("token").value.trim());
    form.reset();
    form.hidden = true;
    forget.hidden = false;
    onReady();
  });
}

// ---------------------------------------------------------------- index page

function indexPage() {
  wireToken(() => {});
  const tokenField = document.getElementById("token-field");
  tokenField.hidden = Boolean(token());
  document.getElementById("open-run").addEventListener("submit", (event) => {
    event.preventDefault();
    const entered = document.getElementById("token").value.trim();
    if (entered) sessionStorage.setItem(TOKEN_KEY, entered);
    const runId = document.getElementById("run-id").value.trim();
    location.assign(`/console/runs/${encodeURIComponent(runId)}`);
  });
}

// ---------------------------------------------------------------- run page: facts and records

const page = { runId: "", run: null, policy: null, usage: null, requests: [] };
const runPath = () => `${API}/runs/${encodeURIComponent(page.runId)}`;
const requestPath = (requestId) =>
  `${runPath()}/invalid-read-continuity/requests/${encodeURIComponent(requestId)}`;

// The lease window the server would grant now: min(policy window <= 7200, the run's frozen
// provider timeout, the remaining active deadline). Shown for review; the ledger bounds it again.
function grantableWindow() {
  if (!page.run || !page.policy) return null;
  const bounds = [Math.min(Number(page.policy.window_seconds), MAX_WINDOW_SECONDS), Number(page.run.provider_timeout_seconds)];
  if (page.run.active_deadline) bounds.push(Math.floor((Date.parse(page.run.active_deadline) - Date.now()) / 1000));
  return Math.max(0, Math.min(...bounds));
}

const usageText = () => (page.usage ? `${page.usage.used} of ${page.usage.limit} commands used` : "—");

async function loadFacts() {
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
  page.policy = policy.outcome === "ok" ? policy.json.policy : null;
  page.usage = usage.outcome === "ok" ? usage.json.usage : null;
  const window = grantableWindow();
  target.replaceChildren(facts([
    ["Attempt", page.run.attempt_id],
    ["Task", page.run.task_id],
    ["Source", `${page.run.source_revision} · ${page.run.source_profile}`],
    ["Held state", el("span", { id: "held-state" }, "reading the journal…")],
    ["Command ledger", el("span", { id: "command-ledger" }, usageText())],
    ["Policy revision", page.policy ? `${page.policy.revision} (${page.policy.enabled ? "enabled" : "disabled"})` : "—"],
    ["Lease window the server would grant", window === null ? "—" : `${window} s (policy window, provider timeout and deadline; the ledger bounds it again)`],
  ]));
  return true;
}

async function loadRecords() {
  const [requests, usage, journal] = await Promise.all([
    call("GET", `${runPath()}/execution-requests`),
    call("GET", `${runPath()}/command-usage`),
    call("GET", `${runPath()}/journal?page_size=1000`),
  ]);
  page.requests = requests.outcome === "ok" ? requests.json.execution_requests : [];
  const rows = page.requests.map((r) =>
    el("tr", { id: `er-${r.execution_request_id}` },
      el("td", {}, r.execution_request_id),
      el("td", {}, r.request_id),
      el("td", {}, stateName(r.state)),
      el("td", {}, `${r.lease.generation} · ${r.lease.seconds} s`),
      el("td", { class: "wide-only" }, r.owner || "—")));
  document.getElementById("execution-requests").replaceChildren(
    requests.outcome !== "ok" ? note(`Not readable: ${describe(requests)}`)
      : rows.length === 0 ? note("No execution request yet.")
      : el("div", { class: "table-wrap" }, el("table", { class: "wide" },
        el("thead", {}, el("tr", {}, el("th", {}, "Execution request"), el("th", {}, "Request"),
          el("th", {}, "State"), el("th", {}, "Lease generation · window"), el("th", { class: "wide-only" }, "Owner"))),
        el("tbody", {}, rows))));
  if (usage.outcome === "ok") page.usage = usage.json.usage;
  document.getElementById("command-usage").textContent = usage.outcome === "ok" ? usageText() : `Not readable: ${describe(usage)}`;
  const ledger = document.getElementById("command-ledger");
  if (ledger) ledger.textContent = usageText();
  const entries = journal.outcome === "ok" ? journal.json.entries : [];
  const held = entries.filter((e) => e.kind === "JOURNAL_ENTRY_KIND_RUN_HELD").pop();
  const heldState = document.getElementById("held-state");
  if (heldState) {
    heldState.replaceChildren(journal.outcome !== "ok" ? "—"
      : held ? el("span", {}, "held at journal ", seqLink(held.sequence)) : "not held");
  }
  document.getElementById("journal").replaceChildren(
    journal.outcome !== "ok" ? note(`Not readable: ${describe(journal)}`)
      : el("div", { class: "table-wrap" }, el("table", {},
        el("thead", {}, el("tr", {}, el("th", {}, "Sequence"), el("th", {}, "Kind"), el("th", {}, "Actor"),
          el("th", { class: "wide-only" }, "Recorded"))),
        el("tbody", {}, entries.map((e) => el("tr", { id: `journal-${e.sequence}` },
          el("td", {}, e.sequence), el("td", {}, shortName(e.kind, "JOURNAL_ENTRY_KIND_")),
          el("td", {}, e.actor), el("td", { class: "wide-only" }, e.recorded_at || "—")))))));
}

// ---------------------------------------------------------------- candidates and holds

function holdsView(holds) {
  if (!holds || holds.length === 0) return note("No holds.");
  return el("div", {}, holds.map((h) => el("div", { class: "hold" },
    el("strong", {}, shortName(h.reason, "HOLD_REASON_")), " — requirement: ",
    shortName(h.requirement, "HOLD_REQUIREMENT_"), el("br"), h.detail,
    h.subject ? el("span", {}, " (", code(h.subject), ")") : null)));
}

function handoffView(handoff) {
  if (!handoff) return null;
  const list = (items, render) => (items && items.length ? el("ul", { class: "plain" }, items.map((i) => el("li", {}, render(i)))) : note("None."));
  const used = handoff.consumed_resources || {};
  return el("details", { open: true }, el("summary", {}, "Handoff payload"),
    el("h4", {}, "Known effects"), list(handoff.known_effects, (e) => [e.description, " ", seqLink(e.journal_sequence)]),
    el("h4", {}, "Unresolved alternatives"), list(handoff.unresolved_alternatives, (a) => `${a.subject}: ${a.alternatives.join(", ")}`),
    el("h4", {}, "Remaining obligations"), list(handoff.remaining_obligations, (o) => `${o.description}${o.blocked_by ? ` (blocked by ${o.blocked_by})` : ""}`),
    el("h4", {}, "Permitted next actions"), list(handoff.permitted_next_actions, (a) => [code(a.action), " ", a.description]),
    el("h4", {}, "Consumed resources"),
    facts([
      ["Model responses consumed", used.model_responses_consumed],
      ["Tool calls", used.tool_calls],
      ["Commands", `${used.commands_used} of ${used.command_limit}`],
      ["Deadline remaining", Number(used.deadline_remaining_seconds) < 0 ? "no active deadline" : `${used.deadline_remaining_seconds} s`],
    ]));
}

const permits = (candidate, action) =>
  Boolean(candidate.eligible) && (candidate.handoff?.permitted_next_actions || []).some((a) => a.action === action);

// Four (or three) acknowledgements as separate labelled checkboxes; the submit button stays
// disabled until every one is ticked.
function acknowledgements(prefix, items, button) {
  const boxes = items.map(([field, text]) => {
    const id = `${prefix}-${field}`;
    return el("div", { class: "ack" }, el("input", { type: "checkbox", id, name: field }), el("label", { for: id }, text));
  });
  const fieldset = el("fieldset", {}, el("legend", {}, "Acknowledgements (all required)"), boxes);
  const inputs = () => [...fieldset.querySelectorAll("input[type=checkbox]")];
  fieldset.addEventListener("change", () => { button.disabled = !inputs().every((i) => i.checked); });
  button.disabled = true;
  return { fieldset, values: () => Object.fromEntries(inputs().map((i) => [i.name, i.checked])) };
}

// ---------------------------------------------------------------- submit and read back

// Send once. The action is saved as "sent" before the request leaves; any uncertain answer (and
// a conflict, which means something is already saved) is followed by a read-back, never a resend.
async function submitOnce(spec, area) {
  spec.action.state = "sent";
  saveAction(spec.key, spec.action);
  area.replaceChildren(note(`Submitting action ${spec.action.id}…`));
  const answer = await call("POST", spec.path, spec.body);
  if (answer.outcome === "ok") {
    spec.action.state = "done";
    saveAction(spec.key, spec.action);
    area.replaceChildren(spec.receipt(answer.json, spec.action));
    loadRecords();
    return;
  }
  if (answer.outcome === "uncertain" || answer.status === 409) {
    spec.action.state = "uncertain";
    saveAction(spec.key, spec.action);
    await readBack(spec, area, `The answer was lost (${describe(answer)}). Reading the saved action back…`);
    return;
  }
  spec.action.state = "refused";
  saveAction(spec.key, spec.action);
  area.replaceChildren(el("div", { class: "card refused", role: "alert" },
    el("h4", {}, "Refused; nothing was recorded"), el("p", {}, describe(answer)),
    note("Check current admission again to review the current candidate.")));
}

async function readBack(spec, area, preface) {
  area.replaceChildren(note(preface || `Reading back saved action ${spec.action.id}…`));
  const answer = await call("GET", spec.readPath);
  if (answer.outcome === "ok") {
    spec.action.state = spec.matches(answer.json, spec.action) ? "done" : "superseded";
    saveAction(spec.key, spec.action);
    area.replaceChildren(spec.receipt(answer.json, spec.action));
    loadRecords();
    return;
  }
  const again = el("button", { type: "button", class: "secondary" }, "Read back saved action");
  again.addEventListener("click", () => readBack(spec, area));
  area.replaceChildren(el("div", { class: "card uncertain", role: "alert" },
    el("h4", {}, "Outcome not yet known"),
    el("p", {}, `Action ${spec.action.id} was sent, and its outcome cannot be read back yet (${describe(answer)}). `,
      "An unavailable response or a missing read-back does not authorize another submission; the console will not submit again."),
    el("div", { class: "actions" }, again)));
}

function queuedReceipt(title, request, extra, ledgerLinks) {
  return el("div", { class: "card receipt", "data-receipt": "queued" },
    el("h4", {}, title, " ", badge("admission only", "warn")),
    el("p", {}, "This receipt confirms admission only. A worker must still claim the ticket and pass the current ",
      "execution checks before any model request, tool or command runs; a queued continuation is not ",
      "acceptance of the requested product work."),
    facts([
      ["Request", request.request_id],
      ["Execution request", erLink(request.execution_request_id)],
      ["Attempt", request.attempt_id],
      ["State", stateName(request.state)],
      ["Lease", `${request.lease.seconds} s at generation ${request.lease.generation}, until ${request.lease.expires_at || "—"}`],
      ...extra,
    ]),
    el("p", {}, "Later records: ",
      el("a", { href: `#er-${request.execution_request_id}` }, "worker records"), " · ",
      el("a", { href: "#command-records" }, "command records"), " · ",
      el("a", { href: ledgerLinks ? `#journal-${ledgerLinks}` : "#journal-records" }, "journal records")));
}

// ---------------------------------------------------------------- the plan: admission

async function checkAdmission() {
  const area = document.getElementById("admission");
  area.replaceChildren(note("Reading the existing tickets…"));
  setStatus("");
  await loadRecords();
  const admissionKey = actionKey(page.runId, "admission");
  const saved = loadAction(admissionKey);
  const ids = [...new Set(page.requests.map((r) => r.request_id).filter(Boolean))];
  if (saved && !ids.includes(saved.requestId)) ids.push(saved.requestId);
  const tickets = [];
  for (const id of ids) {
    const answer = await call("GET", requestPath(id));
    if (answer.outcome === "ok") tickets.push(answer.json.ticket);
    else if (answer.status !== 404) {
      area.replaceChildren(el("div", { class: "card uncertain", role: "alert" }, `The ticket ${id} could not be read: ${describe(answer)}. Nothing is offered until it can.`));
      return;
    }
  }
  area.replaceChildren();
  if (inFlight(saved) && !tickets.some((t) => t.request_id === saved.requestId)) {
    const box = el("div", {});
    area.append(box);
    await readBack(admissionSpec(saved, admissionKey), box);
    return;
  }
  if (tickets.length === 0) {
    area.append(note("No admission ticket exists for this run."));
    await continuityCandidate(area);
    return;
  }
  for (const ticket of tickets) await ticketView(area, ticket);
}

function admissionSpec(action, key) {
  const path = action.version === 2
    ? `${runPath()}/invalid-read-continuity/requests-v2/${encodeURIComponent(action.requestId)}`
    : requestPath(action.requestId);
  return {
    key, action, path, readPath: requestPath(action.requestId),
    body: { digests: action.digests, version: action.version, valid_for_seconds: action.validForSeconds, ...action.acks },
    matches: (json) => json.ticket.request_id === action.requestId,
    receipt: (json) => queuedReceipt("Continuation queued", json.ticket.execution_request,
      [["Admission", `version ${json.ticket.version} by ${json.ticket.operator_identity}, policy revision ${json.ticket.policy_revision}`],
        ["Action ID", action.id]], json.ticket.claim_sequence),
  };
}

const ACKS_V1 = [
  ["acknowledge_no_new_grant", "No new grant is created: the continuation uses the original grants."],
  ["acknowledge_original_consumption", "The original consumption stays charged."],
  ["acknowledge_renewed_same_attempt_lease", "Only a finite ownership lease for the same attempt is renewed."],
];
const ACKS_V2 = [...ACKS_V1,
  ["acknowledge_unavailable_source_observations", "Source observations whose results were not retained stay unavailable to the next turn."]];

async function continuityCandidate(area) {
  const version1 = el("input", { type: "radio", id: "version-1", name: "version", value: "1", checked: true });
  const version2 = el("input", { type: "radio", id: "version-2", name: "version", value: "2" });
  const body = el("div", {});
  const chooser = el("fieldset", {}, el("legend", {}, "Continuity version"),
    el("div", { class: "ack" }, version1, el("label", { for: "version-1" }, "Version 1: a rejected evidence read")),
    el("div", { class: "ack" }, version2, el("label", { for: "version-2" }, "Version 2: beside list_files calls whose results were not retained")));
  const show = () => continuityVersion(body, version2.checked ? 2 : 1);
  chooser.addEventListener("change", show);
  area.append(el("div", { class: "card" }, el("h3", {}, "Continuity candidate"), chooser, body));
  await show();
}

async function continuityVersion(body, version) {
  body.replaceChildren(note(`Reading the version ${version} candidate…`));
  const answer = await call("GET", `${runPath()}/invalid-read-continuity/candidate?version=${version}`);
  if (answer.outcome !== "ok") {
    body.replaceChildren(note(answer.status === 403
      ? "This token has no execution operator or administrator authority: no candidate and no action."
      : `The candidate could not be read: ${describe(answer)}`));
    return;
  }
  const candidate = answer.json.candidate;
  const proof = candidate.proof || {};
  body.replaceChildren(
    facts([
      ["Eligible", candidate.eligible ? badge("eligible", "ok") : badge("held", "bad")],
      ["Attempt", candidate.attempt_id],
      ["Policy revision", candidate.policy_revision],
      ["Qualified profile", `${candidate.qualification?.source_profile || "—"} (${candidate.qualification?.qualified ? "qualified" : "not qualified"})`],
      ["Rejected call", `${proof.call_id || "—"}: ${proof.validator_error || "—"}`],
      ["Candidate digest", code(candidate.digests?.candidate_digest)],
    ]),
    el("h4", {}, "Holds"), holdsView(candidate.holds), handoffView(candidate.handoff));
  if (!permits(candidate, "request_invalid_read_continuity")) return;
  // The candidate route also serves administrators; admission takes execution operators only.
  // Ask the admission route itself: an empty body is refused before anything is written, with
  // 403 for a caller without the role.
  const probe = await call("POST", `${runPath()}/invalid-read-continuity/${version === 2 ? "requests-v2" : "requests"}/console-authority-check`, {});
  if (probe.status === 403 || probe.status === 401) {
    body.append(note("Admission needs execution operator authority; this token has none, so no action is offered."));
    return;
  }
  const review = el("div", {});
  const open = el("button", { type: "button" }, `Review admission (version ${version})`);
  open.addEventListener("click", () => { open.remove(); admissionReview(review, candidate, version); });
  body.append(el("div", { class: "actions" }, open), review);
}

function admissionReview(area, candidate, version) {
  const key = actionKey(page.runId, "admission");
  const previous = loadAction(key);
  const digest = candidate.digests.candidate_digest;
  const reuse = previous && previous.state === "reviewing" && previous.digest === digest && previous.version === version;
  const action = reuse ? previous : {
    id: newIdentity(), state: "reviewing", version, digest, digests: candidate.digests,
    validForSeconds: Math.max(1, grantableWindow() || 1),
  };
  action.requestId = action.id;
  saveAction(key, action);
  const submit = el("button", { type: "button", id: "submit-admission" }, "Queue continuation");
  const acks = acknowledgements("admission", version === 2 ? ACKS_V2 : ACKS_V1, submit);
  const result = el("div", {});
  submit.addEventListener("click", () => {
    action.acks = acks.values();
    submit.remove();
    acks.fieldset.disabled = true;
    submitOnce(admissionSpec(action, key), result);
  });
  area.replaceChildren(el("div", { class: "card" },
    el("h3", {}, `Review admission (version ${version})`),
    note("Reviewing queues nothing. The digests below are carried by the console; you never enter them."),
    facts([
      ["Request ID", code(action.requestId)],
      ["Attempt", candidate.attempt_id],
      ["Window requested", `${action.validForSeconds} s (the ledger bounds it again)`],
      ["Commands", `${usageText()}; no allowance is added`],
      ["Digests", el("span", {}, code(action.digests.candidate_digest), el("br"), code(action.digests.run_digest),
        el("br"), code(action.digests.journal_digest), el("br"), code(action.digests.policy_digest))],
    ]),
    acks.fieldset, el("div", { class: "actions" }, submit), result));
}

// ---------------------------------------------------------------- a ticket and its recoveries

async function ticketView(area, ticket) {
  const current = page.requests.find((r) => r.request_id === ticket.request_id) || ticket.execution_request;
  const recoveries = el("div", {});
  area.append(el("div", { class: "card", "data-ticket": ticket.request_id },
    el("h3", {}, `Admission ${ticket.request_id}`),
    note("A ticket records admission only; worker claim and execution are separate, later records."),
    facts([
      ["Version", ticket.version],
      ["Operator", ticket.operator_identity],
      ["Policy revision", ticket.policy_revision],
      ["Attempt", ticket.execution_request.attempt_id],
      ["Execution request", erLink(current.execution_request_id)],
      ["Current state", stateName(current.state)],
      ["Lease", `${current.lease.seconds} s at generation ${current.lease.generation}`],
      ["Settlement · claim", el("span", {}, seqLink(ticket.settlement_sequence), " · ", seqLink(ticket.claim_sequence))],
    ]),
    recoveries));
  await recoveryView(recoveries, ticket, current);
}

const RECOVERY_ACKS = [
  ["acknowledge_never_claimed", "No worker ever claimed this ticket."],
  ["acknowledge_same_request_and_attempt", "The original request and attempt remain the same."],
  ["acknowledge_budgets_charged", "The original consumption and budgets stay charged."],
  ["acknowledge_same_attempt_lease", "Only the same-attempt ownership lease is renewed."],
];

function recoverySpec(action, key, ticket) {
  const base = requestPath(ticket.request_id);
  return {
    key, action,
    path: `${base}/recoveries/${encodeURIComponent(action.id)}`,
    readPath: `${base}/recovery`,
    body: { candidate_digest: action.digest, valid_for_seconds: action.validForSeconds, ...action.acks },
    matches: (json) => json.outcome.recovery_id === action.id,
    receipt: (json) => recoveryReceipt(json.outcome, action),
  };
}

function recoveryReceipt(outcome, action) {
  const mine = !action || outcome.recovery_id === action.id;
  return queuedReceipt(mine ? "Continuation queued" : "Continuation queued by another recovery action",
    outcome.execution_request,
    [["Recovery", `${shortName(outcome.workflow, "RECOVERY_WORKFLOW_")} by ${outcome.actor}`],
      ["Recovery ID", code(outcome.recovery_id)],
      ["Witness · event", el("span", {}, seqLink(outcome.witness_sequence), " · ", seqLink(outcome.event_sequence))]],
    outcome.event_sequence);
}

async function recoveryView(area, ticket, current) {
  const key = actionKey(page.runId, ticket.request_id, "never_claimed");
  const saved = loadAction(key);
  if (inFlight(saved)) {
    await readBack(recoverySpec(saved, key, ticket), area);
    return;
  }
  const refusalKey = actionKey(page.runId, ticket.request_id, "rejected_boundary");
  const refusal = loadAction(refusalKey);
  if (inFlight(refusal)) {
    await readBack(refusalSpec(refusal, refusalKey, ticket), area);
    return;
  }
  const base = requestPath(ticket.request_id);
  for (const path of [`${base}/recovery`, `${base}/rejected-boundary-recovery`]) {
    const answer = await call("GET", path);
    if (answer.outcome === "ok") {
      const mine = [saved, refusal].find((a) => a && a.id === answer.json.outcome.recovery_id);
      area.replaceChildren(recoveryReceipt(answer.json.outcome, mine || null));
      return;
    }
    if (answer.status !== 404) {
      area.replaceChildren(note(`The saved recovery could not be read: ${describe(answer)}. Nothing is offered until it can.`));
      return;
    }
  }
  if (current.state !== "EXECUTION_REQUEST_STATE_FAILED") {
    area.replaceChildren(note("No recovery applies: the request has not failed."));
    return;
  }
  const answer = await call("GET", `${base}/recovery-candidate`);
  if (answer.outcome !== "ok") {
    area.replaceChildren(note(answer.status === 403
      ? "Reviewing a failed admission needs current factory administrator authority; this token has none, so no action is offered."
      : `The recovery candidate could not be read: ${describe(answer)}`));
    return;
  }
  if (Number(current.lease.generation) > 0) {
    // Claimed, then failed: only the provider-refusal (rejected-boundary) recovery can apply.
    rejectedBoundaryView(area, ticket, current);
    return;
  }
  const candidate = answer.json.candidate;
  const review = el("div", {});
  area.replaceChildren(el("h4", {}, "Recovery candidate"), candidateFacts(candidate),
    el("h4", {}, "Holds"), holdsView(candidate.holds), handoffView(candidate.handoff), review);
  if (!permits(candidate, "request_invalid_read_recovery")) return;
  const open = el("button", { type: "button" }, "Review failed admission");
  open.addEventListener("click", () => { open.remove(); neverClaimedReview(review, candidate, ticket, current, key); });
  review.append(el("div", { class: "actions" }, open));
}

const candidateFacts = (candidate) => facts([
  ["Eligible", candidate.eligible ? badge("eligible", "ok") : badge("held", "bad")],
  ["Policy revision", candidate.policy_revision],
  ["Candidate digest", code(candidate.candidate_digest)],
]);

function neverClaimedReview(area, candidate, ticket, current, key) {
  const previous = loadAction(key);
  const reuse = previous && previous.state === "reviewing" && previous.digest === candidate.candidate_digest;
  const action = reuse ? previous : {
    id: newIdentity(), state: "reviewing", digest: candidate.candidate_digest,
    validForSeconds: Math.max(1, grantableWindow() || 1),
  };
  saveAction(key, action);
  const submit = el("button", { type: "button", id: "requeue" }, "Requeue existing task");
  const acks = acknowledgements("recovery", RECOVERY_ACKS, submit);
  const result = el("div", {});
  submit.addEventListener("click", () => {
    action.acks = acks.values();
    submit.remove();
    acks.fieldset.disabled = true;
    submitOnce(recoverySpec(action, key, ticket), result);
  });
  area.replaceChildren(el("div", { class: "card", id: "recovery-review" },
    el("h3", {}, "Review failed admission"),
    note("Reviewing queues nothing. Requeue existing task records one operator action against this ticket: no replacement task, provider attempt, grant, replay or reset allowance."),
    facts([
      ["Existing request", ticket.request_id],
      ["Execution request", erLink(current.execution_request_id)],
      ["Attempt", current.attempt_id],
      ["Permitted ownership window", `up to ${action.validForSeconds} s, from the current server checks`],
      ["Commands already used", `${usageText()}; they stay charged and no allowance is added`],
      ["Action ID", code(action.id)],
      ["Candidate digest", code(action.digest)],
    ]),
    acks.fieldset, el("div", { class: "actions" }, submit), result));
}

// ---------------------------------------------------------------- rejected-boundary recovery

const REFUSAL_ACKS = [
  ["acknowledge_reviewed_provider_epoch", "The provider refused this request at the reviewed provider epoch, before admitting it."],
  ["acknowledge_no_response_or_tool_replay", "No model response and no tool callback is replayed."],
  ["acknowledge_same_request_and_budgets", "The same request, attempt and budgets continue; original usage stays charged."],
  ["acknowledge_finite_ownership_lease", "Only a finite ownership lease for the same attempt is granted."],
];

function rejectedBoundaryView(area, ticket, current) {
  if (!page.policy || !page.policy.allow_pre_admission_recovery) {
    area.replaceChildren(note("The request failed after a worker claim; the policy does not enable the provider-refusal recovery, so no action is offered."));
    return;
  }
  const key = actionKey(page.runId, ticket.request_id, "rejected_boundary");
  const input = el("input", { type: "file", id: `review-${ticket.request_id}`, accept: "application/json,.json" });
  const body = el("div", {});
  input.addEventListener("change", async () => {
    body.replaceChildren(note("Reading the review document…"));
    let review;
    try {
      review = JSON.parse(await input.files[0].text());
    } catch {
      body.replaceChildren(note("The review document is not JSON."));
      return;
    }
    if (!review || typeof review.reviewed_rejection !== "object" || typeof review.corrective_provider !== "object") {
      body.replaceChildren(note("The review document must hold reviewed_rejection and corrective_provider."));
      return;
    }
    const answer = await call("POST", `${requestPath(ticket.request_id)}/rejected-boundary-candidate`, review.reviewed_rejection);
    if (answer.outcome !== "ok") {
      body.replaceChildren(note(answer.status === 403
        ? "The provider-refusal recovery needs current factory administrator authority; no action is offered."
        : `The candidate could not be computed: ${describe(answer)}`));
      return;
    }
    const candidate = answer.json.candidate;
    const reviewArea = el("div", {});
    body.replaceChildren(candidateFacts(candidate),
      facts([
        ["Reviewed provider epoch", review.reviewed_rejection.provider_epoch],
        ["Corrective provider epoch", review.corrective_provider.provider_epoch],
        ["Corrective configuration", code(review.corrective_provider.configuration_digest)],
      ]),
      el("h4", {}, "Holds"), holdsView(candidate.holds), handoffView(candidate.handoff), reviewArea);
    if (!permits(candidate, "request_rejected_boundary_recovery")) return;
    const open = el("button", { type: "button" }, "Review provider rejection");
    open.addEventListener("click", () => { open.remove(); refusalReview(reviewArea, candidate, review, ticket, current, key); });
    reviewArea.append(el("div", { class: "actions" }, open));
  });
  area.replaceChildren(el("h4", {}, "Provider refusal before admission"),
    note("The administrator's review document (JSON with reviewed_rejection and corrective_provider) carries the reviewed provider request and the corrective configuration; the console sends it as written and shows the candidate the server computes from it."),
    el("div", { class: "field" }, el("label", { for: input.id }, "Review document (JSON file)"), input), body);
}

function refusalSpec(action, key, ticket) {
  const base = requestPath(ticket.request_id);
  return {
    key, action,
    path: `${base}/rejected-boundary-recoveries/${encodeURIComponent(action.id)}`,
    readPath: `${base}/rejected-boundary-recovery`,
    body: {
      candidate_digest: action.digest, reviewed_rejection: action.review.reviewed_rejection,
      corrective_provider: action.review.corrective_provider, valid_for_seconds: action.validForSeconds, ...action.acks,
    },
    matches: (json) => json.outcome.recovery_id === action.id,
    receipt: (json) => recoveryReceipt(json.outcome, action),
  };
}

function refusalReview(area, candidate, review, ticket, current, key) {
  const previous = loadAction(key);
  const reuse = previous && previous.state === "reviewing" && previous.digest === candidate.candidate_digest;
  const action = reuse ? previous : {
    id: newIdentity(), state: "reviewing", digest: candidate.candidate_digest, review,
    validForSeconds: Math.max(1, grantableWindow() || 1),
  };
  saveAction(key, action);
  const submit = el("button", { type: "button", id: "requeue-refused" }, "Requeue existing task");
  const acks = acknowledgements("refusal", REFUSAL_ACKS, submit);
  const result = el("div", {});
  submit.addEventListener("click", () => {
    action.acks = acks.values();
    submit.remove();
    acks.fieldset.disabled = true;
    submitOnce(refusalSpec(action, key, ticket), result);
  });
  area.replaceChildren(el("div", { class: "card", id: "refusal-review" },
    el("h3", {}, "Review provider rejection"),
    note("Reviewing queues nothing. The reviewed rejection is recorded as an administrator-reviewed assertion, never as a provider receipt."),
    facts([
      ["Existing request", ticket.request_id],
      ["Execution request", erLink(current.execution_request_id)],
      ["Attempt", current.attempt_id],
      ["Permitted ownership window", `up to ${action.validForSeconds} s, from the current server checks`],
      ["Commands already used", `${usageText()}; they stay charged and no allowance is added`],
      ["Action ID", code(action.id)],
    ]),
    acks.fieldset, el("div", { class: "actions" }, submit), result));
}

// ---------------------------------------------------------------- start

async function runPage() {
  page.runId = decodeURIComponent(location.pathname.split("/")[3] || "");
  document.getElementById("run-id").textContent = page.runId;
  document.title = `Run ${page.runId} · Forge continuity console`;
  const check = document.getElementById("check-admission");
  check.addEventListener("click", checkAdmission);
  document.getElementById("refresh-records").addEventListener("click", loadRecords);
  const start = async () => {
    if (!(await loadFacts())) return;
    await loadRecords();
    // An action sent earlier in this tab is read back at once; nothing else is offered before it.
    const pending = Object.keys(sessionStorage).filter((k) => k.startsWith(ACTION_PREFIX + encodeURIComponent(page.runId) + ":"));
    if (pending.some((k) => inFlight(loadAction(k)))) await checkAdmission();
  };
  wireToken(start);
  if (token()) await start();
}

if (document.body.dataset.page === "run") runPage();
else indexPage();
