// Shared by every page: DOM helpers, the one JSON call, saved actions, and the review pattern
// (holds, acknowledgements, submit once, read back, the admission-only receipt).
export const TOKEN_KEY = "forge.console.token";
export const ACTION_PREFIX = "forge.console.action:";
const TIMEOUT_MS = 20000;
export const API = "/api/v1";

// ---------------------------------------------------------------- small helpers

export function el(tag, attrs = {}, ...children) {
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

export const facts = (pairs) =>
  el("dl", { class: "facts" }, pairs.filter(Boolean).flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
export const code = (text) => el("code", { class: "digest" }, text || "—");
export const badge = (text, kind) => el("span", { class: `badge ${kind}` }, text);
export const note = (text) => el("p", { class: "note" }, text);
export const shortName = (value, prefix) => String(value || "").replace(prefix, "").toLowerCase().replaceAll("_", " ");
export const stateName = (s) => shortName(s, "EXECUTION_REQUEST_STATE_");
export const seqLink = (seq) => (seq && seq !== "0" ? el("a", { href: `#journal-${seq}` }, `#${seq}`) : "—");
export const erLink = (id) => el("a", { href: `#er-${id}` }, id);

// Tell the page that something was recorded (it refreshes its records).
const recorded = () => document.dispatchEvent(new Event("forge:recorded"));

export function setStatus(text) {
  document.getElementById("status").textContent = text;
}

export const token = () => sessionStorage.getItem(TOKEN_KEY) || "";

function reasonOf(body) {
  const info = (body && body.details || []).find((d) => String(d["@type"]).endsWith("google.rpc.ErrorInfo"));
  return info ? info.reason : "";
}

// One JSON call. outcome: "ok"; "refused" (a definite answer from the services, nothing written);
// "uncertain" (no answer, a timeout, or a 5xx other than 501: the call may or may not have acted).
export async function call(method, path, body) {
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

export const describe = (answer) =>
  answer.outcome === "refused" ? `${answer.reason || `HTTP ${answer.status}`}: ${answer.message}` : answer.detail;

// Saved actions, one per run and workflow (and request for recoveries).
export const actionKey = (...parts) => ACTION_PREFIX + parts.map(encodeURIComponent).join(":");
export function loadAction(key) {
  try { return JSON.parse(sessionStorage.getItem(key) || "null"); } catch { return null; }
}
export const saveAction = (key, action) => sessionStorage.setItem(key, JSON.stringify(action));
export const inFlight = (action) => action && (action.state === "sent" || action.state === "uncertain");
export const newIdentity = () => `console-${crypto.randomUUID()}`;

// ---------------------------------------------------------------- candidates and holds

export function holdsView(holds) {
  if (!holds || holds.length === 0) return note("No holds.");
  return el("div", {}, holds.map((h) => el("div", { class: "hold" },
    el("strong", {}, shortName(h.reason, "HOLD_REASON_")), " — requirement: ",
    shortName(h.requirement, "HOLD_REQUIREMENT_"), el("br"), h.detail,
    h.subject ? el("span", {}, " (", code(h.subject), ")") : null)));
}

export function handoffView(handoff) {
  if (!handoff) return null;
  const list = (items, render) => (items && items.length ? el("ul", { class: "plain" }, items.map((i) => el("li", {}, render(i)))) : note("None."));
  const used = handoff.consumed_resources || {};
  // A candidate's handoff binds no request yet; a refused action's names the one it was bound to.
  const bound = handoff.bound_requests && handoff.bound_requests.length ? [el("h4", {}, "Bound requests"),
    list(handoff.bound_requests, (b) => [b.request_id, b.execution_request_id ? " · " : "",
      b.execution_request_id ? erLink(b.execution_request_id) : null,
      ` · ${b.state}${b.claimed ? " · claimed by a worker" : ""}`])] : [];
  return el("details", { open: true }, el("summary", {}, "Handoff payload"), ...bound,
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

// What the caller's roles permit, from GET /caller/permissions: the server derives it from the role
// table its authorization enforces, so no action is offered that it would refuse on role. Asked
// again at each check (a revoked role shows at once); an answer that is not "ok" permits nothing.
// may("AdmissionService/RequestInvalidReadContinuity", ...) is true when every RPC named is permitted.
export async function callerPermissions() {
  const answer = await call("GET", `${API}/caller/permissions`);
  const permitted = new Set(answer.outcome === "ok"
    ? (answer.json.permissions || []).filter((p) => p.permitted).map((p) => p.method.replace(/^\/forge\.continuity\.v1\./, ""))
    : []);
  return { answer, may: (...rpcs) => rpcs.length > 0 && rpcs.every((rpc) => permitted.has(rpc)) };
}

// A note for an action withheld on role: `needs` when the permissions were read, else why not.
export const withheldNote = (permissions, needs) => note(permissions.answer.outcome === "ok"
  ? needs : `The caller's permissions could not be read (${describe(permissions.answer)}), so no action is offered.`);

export const permits = (candidate, action) =>
  Boolean(candidate.eligible) && (candidate.handoff?.permitted_next_actions || []).some((a) => a.action === action);

// Four (or three) acknowledgements as separate labelled checkboxes; the submit button stays
// disabled until every one is ticked.
export function acknowledgements(prefix, items, button) {
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
export async function submitOnce(spec, area) {
  spec.action.state = "sent";
  saveAction(spec.key, spec.action);
  area.replaceChildren(note(`Submitting action ${spec.action.id}…`));
  const answer = await call(spec.method || "POST", spec.path, spec.body);
  if (answer.outcome === "ok") {
    spec.action.state = "done";
    saveAction(spec.key, spec.action);
    area.replaceChildren(spec.receipt(answer.json, spec.action));
    recorded();
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
    refusalHandoffView(answer),
    note("Check current admission again to review the current candidate.")));
}

// A refusal by the state (the admissibility check's, and a refused claim, write, cancel or commit:
// ADR 0046) carries its handoff payload as a google.rpc.Status detail (the HTTP error body's
// details): show it as a candidate's is shown. Malformed input and unknown names carry none.
export function refusalHandoffView(answer) {
  const handoff = (answer.json && answer.json.details || [])
    .find((d) => String(d["@type"]).endsWith("/forge.continuity.v1.HandoffPayload"));
  return handoff ? el("div", { "data-refusal-handoff": "" }, handoffView(handoff)) : null;
}

export async function readBack(spec, area, preface) {
  area.replaceChildren(note(preface || `Reading back saved action ${spec.action.id}…`));
  const answer = await call("GET", spec.readPath);
  if (answer.outcome === "ok") {
    spec.action.state = spec.matches(answer.json, spec.action) ? "done" : "superseded";
    saveAction(spec.key, spec.action);
    area.replaceChildren(spec.receipt(answer.json, spec.action));
    recorded();
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

// Why a granted lease is as long as it is: the bound the ledger's one lease rule found smallest,
// then every bound it applied (LeaseBounds, stored with the ticket or outcome). Absent on answers
// saved before the bounds were kept: then no row is shown.
const BOUND_WORDS = {
  LEASE_BOUND_REQUESTED: "as requested",
  LEASE_BOUND_POLICY_WINDOW: "bounded by the policy window",
  LEASE_BOUND_PROVIDER_TIMEOUT: "bounded by the run's provider timeout",
  LEASE_BOUND_ACTIVE_DEADLINE: "bounded by the run's remaining deadline",
  LEASE_BOUND_MAXIMUM_WINDOW: "bounded by the 7200 s maximum",
};

export function leaseBoundsRows(bounds) {
  if (!bounds) return [];
  const deadline = Number(bounds.deadline_remaining_seconds);
  return [["Lease bounds", el("span", { "data-lease-bounds": bounds.limited_by },
    `${bounds.granted_seconds} s, ${BOUND_WORDS[bounds.limited_by] || bounds.limited_by} `,
    `(requested ${bounds.requested_seconds} s, policy window ${bounds.policy_window_seconds} s, `,
    `provider timeout ${bounds.provider_timeout_seconds} s, deadline `,
    deadline < 0 ? "none" : `${deadline} s left`, `, maximum ${bounds.maximum_seconds} s)`)]];
}

export function queuedReceipt(title, request, extra, ledgerLinks) {
  // A receipt read back later shows the request as it is now: the title says when that is no
  // longer "queued" (a recovered request that failed again reads "… · now failed").
  const now = request.state && request.state !== "EXECUTION_REQUEST_STATE_QUEUED" ? ` · now ${stateName(request.state)}` : "";
  return el("div", { class: "card receipt", "data-receipt": "queued" },
    el("h4", {}, title, now, " ", badge("admission only", "warn")),
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
