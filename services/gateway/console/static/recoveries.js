// A ticket and its recoveries, rendered from the services' own description of every recovery
// workflow they route (GET /api/v1/recovery-workflows, built from the recovery-workflow
// registry): each workflow's routes, when it applies, its acknowledgements and typed inputs. No
// workflow is written here; only the input kinds have renderers of their own.

import {
  API, acknowledgements, actionKey, badge, call, callerPermissions, code, describe, el, erLink, facts,
  handoffView, holdsView, inFlight, leaseBoundsRows, loadAction, newIdentity, note, permits, queuedReceipt, readBack,
  saveAction, seqLink, shortName, stateName, submitOnce, withheldNote,
} from "./common.js";
import { page, runPath, usageText } from "./run.js";
import { reconciliationView } from "./reconciliation.js";

// ---------------------------------------------------------------- a ticket and its recoveries

export async function ticketView(area, ticket) {
  // The ticket's newest execution request (a reconciliation retry follows the one it replaces).
  const current = page.requests.filter((r) => r.request_id === ticket.request_id).pop() || ticket.execution_request;
  const recoveries = el("div", {});
  const reconciliation = el("div", {});
  const requestCell = el("span", {}, erLink(current.execution_request_id));
  const stateCell = el("span", { "data-current-state": "" }, stateName(current.state));
  const leaseCell = el("span", {}, `${current.lease.seconds} s at generation ${current.lease.generation}`);
  // The card follows the records: after a recovery or a cancel it must not go on reading the
  // state it was opened with (the records reload after every receipt).
  const follow = () => {
    if (!stateCell.isConnected) return document.removeEventListener("forge:records-loaded", follow);
    const now = page.requests.filter((r) => r.request_id === ticket.request_id).pop();
    if (!now) return;
    requestCell.replaceChildren(erLink(now.execution_request_id));
    stateCell.textContent = stateName(now.state);
    leaseCell.textContent = `${now.lease.seconds} s at generation ${now.lease.generation}`;
  };
  document.addEventListener("forge:records-loaded", follow);
  area.append(el("div", { class: "card", "data-ticket": ticket.request_id },
    el("h3", {}, `Admission ${ticket.request_id}`),
    note("A ticket records admission only; worker claim and execution are separate, later records."),
    facts([
      ["Version", ticket.version],
      ["Operator", ticket.operator_identity],
      ["Policy revision", ticket.policy_revision],
      ["Attempt", ticket.execution_request.attempt_id],
      ["Execution request", requestCell],
      ["Current state", stateCell],
      ["Lease", leaseCell],
      ...leaseBoundsRows(ticket.lease_bounds),
      ["Settlement · claim", el("span", {}, seqLink(ticket.settlement_sequence), " · ", seqLink(ticket.claim_sequence))],
    ]),
    recoveries, reconciliation));
  await recoveryView(recoveries, ticket, current);
  await reconciliationView(reconciliation, ticket);
}

// ---------------------------------------------------------------- routes, from the description

// A workflow route's path: the description's request path and the route's own, with the values.
function routePath(flow, route, ticket, values = {}) {
  const known = { run_id: page.runId, request_id: ticket.request_id, ...values };
  return (flow.base + route.path).replace(/\{([A-Za-z_][A-Za-z0-9_]*)\}/g,
    (_, name) => encodeURIComponent(known[name] ?? ""));
}

// What an http rule sends as its body: the whole request ("*"), one of its fields, or nothing.
const bodyOf = (route, fields) => (route.body === "*" ? fields : route.body ? fields[route.body] : undefined);

// The permissions read names RPCs without the package.
const rpcOf = (route) => route.rpc.replace(/^\/[^/]*\.(?=[A-Za-z0-9]+\/)/, "");
const roleWords = (roles) => (roles || []).map((r) => shortName(r, "ROLE_")).join(" and ") || "the required";

const FAILED = "EXECUTION_REQUEST_STATE_FAILED";
// What applies to a request that has not failed (the recoveries are for failed requests only).
const NOT_FAILED = {
  EXECUTION_REQUEST_STATE_QUEUED: "No recovery applies: the request is queued for a worker. It can be cancelled under Records.",
  EXECUTION_REQUEST_STATE_CLAIMED: "No recovery applies while a worker holds the request. If its worker was lost, reconcile it below.",
  EXECUTION_REQUEST_STATE_COMPLETED: "No recovery applies: the request completed.",
  EXECUTION_REQUEST_STATE_RECONCILED: "No recovery applies: the request was reconciled and its stage queued again (below).",
  EXECUTION_REQUEST_STATE_UNRESOLVED: "No recovery or retry applies: the request is terminal unresolved by reconciliation. "
    + "What remains and the next actions permitted are in the reconciliation's handoff below.",
  EXECUTION_REQUEST_STATE_CANCELLED: "No recovery applies: the request was cancelled and cannot be resumed.",
  EXECUTION_REQUEST_STATE_EXPIRED: "The request expired before any worker claimed it; this console offers recoveries of failed requests only.",
};

async function recoveryView(area, ticket, current) {
  const listed = await call("GET", `${API}/recovery-workflows`);
  if (listed.outcome !== "ok") {
    area.replaceChildren(note(`The recovery workflows could not be read: ${describe(listed)}. Nothing is offered until they can.`));
    return;
  }
  // Only workflows with HTTP routes can be followed from a browser.
  const flows = (listed.json.workflows || [])
    .filter((w) => w.candidate?.path && w.submit?.path && w.read?.path)
    .map((w) => ({ ...w, base: listed.json.request_path, key: actionKey(page.runId, ticket.request_id, w.name) }));
  // An action sent earlier in this tab is read back first; nothing else is offered before it.
  for (const flow of flows) {
    const sent = loadAction(flow.key);
    if (inFlight(sent)) {
      await readBack(submitSpec(flow, ticket, sent), area);
      return;
    }
  }
  // Each workflow's saved recovery of this ticket, read back only where the journal shows one.
  const receipts = el("div", {});
  const saved = new Set();
  const witnessed = await witnessedWorkflows(ticket);
  for (const flow of flows) {
    if (witnessed && !witnessed.has(flow.name)) continue;
    const answer = await call("GET", routePath(flow, flow.read, ticket));
    if (answer.outcome === "ok") {
      saved.add(flow.name);
      const mine = loadAction(flow.key);
      receipts.append(recoveryReceipt(answer.json.outcome, mine && mine.id === answer.json.outcome.recovery_id ? mine : null));
    } else if (answer.status !== 404) {
      area.replaceChildren(receipts, note(`The saved recovery (${flow.title}) could not be read: ${describe(answer)}. Nothing is offered until it can.`));
      return;
    }
  }
  area.replaceChildren(receipts);
  if (current.state !== FAILED) {
    if (saved.size === 0) area.append(note(NOT_FAILED[current.state] || `No recovery applies: the request is ${stateName(current.state)}.`));
    return;
  }
  // The workflows that apply, from the description: how the request failed, and which saved
  // recoveries come first. The candidate of each still decides eligibility.
  const claimed = Number(current.lease.generation) > 0;
  const applicable = flows.filter((flow) => !saved.has(flow.name)
    && Boolean(flow.applies?.failed_after_claim) === claimed
    && (flow.applies?.follows || []).every((name) => saved.has(name)));
  if (applicable.length === 0) {
    area.append(note(`No recovery applies to a request that failed ${claimed ? "after a worker claim" : "before any worker claim"} here.`));
    return;
  }
  // Every recovery reads a candidate and submits under the caller's roles: ask them first.
  const permissions = await callerPermissions();
  for (const flow of applicable) {
    const section = el("div", { class: "recovery", "data-workflow": flow.name });
    area.append(section);
    await workflowView(section, flow, ticket, current, permissions);
  }
}

// The workflows whose recovery of this ticket the journal records, from one read of it after
// the ticket's settlement: every recovery writes a witness naming its workflow, request and
// recovery id. Probing each workflow's read-back instead answered "absent" as a 404 per workflow.
// null when the journal cannot be read: then every read-back is asked, as before.
async function witnessedWorkflows(ticket) {
  const names = new Set();
  let from = Math.max(Number(ticket.settlement_sequence) || 1, 1);
  for (let pages = 0; pages < 100; pages += 1) {
    const answer = await call("GET", `${runPath()}/journal?from_sequence=${from}&page_size=1000`);
    if (answer.outcome !== "ok") return null;
    for (const entry of answer.json.entries || []) {
      let payload = {};
      try { payload = JSON.parse(entry.payload_json || "{}"); } catch { continue; }
      if (payload.recovery_id && payload.workflow && payload.request_id === ticket.request_id) names.add(payload.workflow);
    }
    const next = Number(answer.json.next_sequence || 0);
    if (!next || next <= from) return names;
    from = next;
  }
  return null;
}

function recoveryReceipt(outcome, action) {
  const mine = !action || outcome.recovery_id === action.id;
  return queuedReceipt(mine ? "Continuation queued" : "Continuation queued by another recovery action",
    outcome.execution_request,
    [["Recovery", `${shortName(outcome.workflow, "RECOVERY_WORKFLOW_")} by ${outcome.actor}`],
      ["Recovery ID", code(outcome.recovery_id)],
      ["Witness · event", el("span", {}, seqLink(outcome.witness_sequence), " · ", seqLink(outcome.event_sequence))],
      ...leaseBoundsRows(outcome.lease_bounds)],
    outcome.event_sequence);
}

const withheld = (permissions, flow) => withheldNote(permissions,
  `${flow.title}: this recovery needs current ${roleWords(flow.roles)} authority; this token has none, so no action is offered.`);

async function workflowView(area, flow, ticket, current, permissions) {
  const body = el("div", {});
  area.replaceChildren(el("h4", {}, flow.title), note(flow.applies?.situation || ""), body);
  if (flow.policy_switch && !(page.policy && page.policy[flow.policy_switch])) {
    body.replaceChildren(note(`The policy does not enable this recovery (${flow.policy_switch}), so no action is offered.`));
    return;
  }
  if (!permissions.may(rpcOf(flow.candidate))) {
    body.replaceChildren(withheld(permissions, flow));
    return;
  }
  const inputs = flow.inputs || [];
  if (inputs.length === 0) {
    await candidateView(body, flow, ticket, current, {});
    return;
  }
  const unknown = inputs.filter((i) => !INPUT_KINDS[i.kind]);
  if (unknown.length) {
    body.replaceChildren(note(`This console cannot supply ${unknown.map((i) => i.field).join(", ")}; use the CLI. No action is offered here.`));
    return;
  }
  documentForm(body, `document-${ticket.request_id}-${flow.name}`, flow, ticket,
    (values, shown) => candidateView(shown, flow, ticket, current, values));
}

// Read the workflow's candidate (with the inputs its candidate route carries), show it, and offer
// the review only on the server's word: a candidate whose handoff permits the workflow's action,
// and roles that permit the submission, read again now.
async function candidateView(area, flow, ticket, current, values) {
  area.replaceChildren(note("Reading the recovery candidate…"));
  const fields = Object.fromEntries((flow.inputs || []).filter((i) => i.candidate).map((i) => [i.field, values[i.field]]));
  const answer = await call(flow.candidate.http_method, routePath(flow, flow.candidate, ticket), bodyOf(flow.candidate, fields));
  if (answer.outcome !== "ok") {
    area.replaceChildren(answer.status === 403
      ? note(`${flow.title}: this recovery needs current ${roleWords(flow.roles)} authority; no action is offered.`)
      : note(`The recovery candidate could not be read: ${describe(answer)}`));
    return;
  }
  const candidate = answer.json.candidate;
  const review = el("div", {});
  area.replaceChildren(el("h4", {}, "Recovery candidate"), candidateFacts(candidate),
    facts((flow.inputs || []).flatMap((i) => INPUT_KINDS[i.kind].facts(values[i.field]))),
    el("h4", {}, "Holds"), holdsView(candidate.holds), handoffView(candidate.handoff), review);
  if (!permits(candidate, flow.action)) return;
  const again = await callerPermissions(); // the candidate may be read long after the page was
  if (!again.may(rpcOf(flow.submit))) {
    review.append(withheld(again, flow));
    return;
  }
  const open = el("button", { type: "button" }, flow.review || "Review recovery");
  open.addEventListener("click", () => { open.remove(); reviewCard(review, flow, candidate, ticket, current, values); });
  review.append(el("div", { class: "actions" }, open));
}

const candidateFacts = (candidate) => facts([
  ["Eligible", candidate.eligible ? badge("eligible", "ok") : badge("held", "bad")],
  ["Policy revision", candidate.policy_revision],
  ["Candidate digest", code(candidate.candidate_digest)],
]);

function reviewCard(area, flow, candidate, ticket, current, values) {
  const previous = loadAction(flow.key);
  const reuse = previous && previous.state === "reviewing" && previous.digest === candidate.candidate_digest;
  const action = reuse ? previous : {
    id: newIdentity(), state: "reviewing", digest: candidate.candidate_digest,
    inputs: Object.fromEntries((flow.inputs || []).map((i) => [i.field, values[i.field]])),
    validForSeconds: Math.max(1, page.grantableLease || 1),
  };
  saveAction(flow.key, action);
  const submit = el("button", { type: "button", id: `requeue-${ticket.request_id}-${flow.name}` }, "Requeue existing task");
  const acks = acknowledgements(`${ticket.request_id}-${flow.name}`,
    (flow.acknowledgements || []).map((a) => [a.field, a.text || a.field]), submit);
  const result = el("div", {});
  // The review as a file (the one review-document shape): what was reviewed and accepted so far,
  // for the CLI ('refusal submit --review') or another operator's console.
  const download = el("button", { type: "button", class: "secondary" }, "Download review document");
  download.addEventListener("click", () => saveReviewDocument(flow, ticket, action, acks.values()));
  submit.addEventListener("click", () => {
    action.acks = acks.values();
    submit.remove();
    acks.fieldset.disabled = true;
    submitOnce(submitSpec(flow, ticket, action), result);
  });
  area.replaceChildren(el("div", { class: "card recovery-review", id: `review-${ticket.request_id}-${flow.name}`, "data-workflow": flow.name },
    el("h3", {}, flow.review || flow.title),
    note(flow.review_note || "Reviewing queues nothing."),
    facts([
      ["Existing request", ticket.request_id],
      ["Execution request", erLink(current.execution_request_id)],
      ["Attempt", current.attempt_id],
      ["Permitted ownership window", `up to ${action.validForSeconds} s, from the current server checks`],
      ["Commands already used", `${usageText()}; they stay charged and no allowance is added`],
      ["Action ID", code(action.id)],
      ["Candidate digest", code(action.digest)],
    ]),
    acks.fieldset, el("div", { class: "actions" }, submit, ...(flow.inputs?.length ? [download] : [])), result));
}

function submitSpec(flow, ticket, action) {
  const fields = {
    candidate_digest: action.digest, valid_for_seconds: action.validForSeconds, ...(action.inputs || {}), ...action.acks,
  };
  return {
    key: flow.key, action,
    method: flow.submit.http_method,
    path: routePath(flow, flow.submit, ticket, { recovery_id: action.id }),
    readPath: routePath(flow, flow.read, ticket),
    body: bodyOf(flow.submit, fields),
    matches: (json) => json.outcome.recovery_id === action.id,
    receipt: (json) => recoveryReceipt(json.outcome, action),
  };
}

// ---------------------------------------------------------------- typed inputs, by kind

const isObject = (value) => Boolean(value) && typeof value === "object" && !Array.isArray(value);

// One renderer per input kind: how a value is checked before it is sent (the services validate
// it again) and which of its facts the review shows. A kind not listed is not offered here.
const INPUT_KINDS = {
  RECOVERY_INPUT_KIND_REVIEWED_PROVIDER_REJECTION: {
    check: (value) => (isObject(value) ? "" : "an object (the reviewed provider rejection)"),
    facts: (value) => [["Reviewed provider epoch", value.provider_epoch]],
  },
  RECOVERY_INPUT_KIND_CORRECTIVE_PROVIDER_CONFIGURATION: {
    check: (value) => (isObject(value) ? "" : "an object (the corrective provider configuration)"),
    facts: (value) => [
      ["Corrective provider epoch", value.provider_epoch],
      ["Corrective configuration", code(value.configuration_digest)],
    ],
  },
};

// ---------------------------------------------------------------- the review document

// The administrator's review document, forge.continuity.review/1 (docs/formats.md): the CLI
// reads and writes the same shape (shared/contract/review_document.py). Each typed input
// sits under "inputs" by the submission's field name; the document names its workflow, run and
// request, and once reviewed the candidate digest and the acknowledgements accepted.
const REVIEW_FORMAT = "forge.continuity.review/1";
const REVIEW_KEYS = ["format", "workflow", "run_id", "request_id", "inputs", "candidate_digest", "acknowledgements"];

// What is wrong with a review document for this workflow and request ("" when nothing is).
function reviewProblem(held, flow, ticket) {
  if (!isObject(held)) return `a review document is a JSON object (${REVIEW_FORMAT})`;
  if (held.format === undefined) {
    return `this is an unversioned review document: this console reads ${REVIEW_FORMAT} only. Put the reviewed messages under "inputs" by field name and add "format", "workflow", "run_id" and "request_id" (docs/formats.md)`;
  }
  if (held.format !== REVIEW_FORMAT) return `review document format ${JSON.stringify(held.format)}: this console reads ${REVIEW_FORMAT}`;
  const unknown = Object.keys(held).filter((key) => !REVIEW_KEYS.includes(key));
  if (unknown.length) return `unknown field ${unknown.join(", ")}`;
  if (held.workflow !== flow.name || held.run_id !== page.runId || held.request_id !== ticket.request_id) {
    return `it reviews ${held.workflow} of run ${held.run_id} request ${held.request_id}, not ${flow.name} of run ${page.runId} request ${ticket.request_id}`;
  }
  if (!isObject(held.inputs)) return "inputs must be an object";
  const fields = (flow.inputs || []).map((i) => i.field);
  const extra = Object.keys(held.inputs).filter((key) => !fields.includes(key));
  if (extra.length) return `inputs: ${flow.name} takes ${fields.join(", ")}, not ${extra.join(", ")}`;
  return (flow.inputs || [])
    .map((i) => [i.field, INPUT_KINDS[i.kind].check(held.inputs[i.field])])
    .filter(([, problem]) => problem)
    .map(([field, problem]) => `inputs.${field} must be ${problem}`).join("; ");
}

// The document of this review as a downloaded file, with the acknowledgements ticked so far.
function saveReviewDocument(flow, ticket, action, ticked) {
  const accepted = Object.fromEntries((flow.acknowledgements || [])
    .filter((a) => ticked[a.field]).map((a) => [a.field, true]));
  const review = {
    format: REVIEW_FORMAT, workflow: flow.name, run_id: page.runId, request_id: ticket.request_id,
    inputs: action.inputs, candidate_digest: action.digest,
    ...(Object.keys(accepted).length ? { acknowledgements: accepted } : {}),
  };
  const url = URL.createObjectURL(new Blob([`${JSON.stringify(review, null, 2)}\n`], { type: "application/json" }));
  const link = el("a", { href: url, download: `review-${page.runId}-${ticket.request_id}-${flow.name}.json` });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 0);
}

// The review document, chosen with a file control (never typed); its inputs are sent as written.
function documentForm(area, id, flow, ticket, then) {
  const inputs = flow.inputs || [];
  const control = el("input", { type: "file", id, accept: "application/json,.json" });
  const shown = el("div", {});
  control.addEventListener("change", async () => {
    shown.replaceChildren(note("Reading the review document…"));
    let held;
    try {
      held = JSON.parse(await control.files[0].text());
    } catch {
      shown.replaceChildren(el("p", { class: "note", role: "alert" }, `The review document is not JSON (${REVIEW_FORMAT}).`));
      return;
    }
    const problem = reviewProblem(held, flow, ticket);
    if (problem) {
      shown.replaceChildren(el("p", { class: "note", role: "alert" }, `The review document was not read: ${problem}.`));
      return;
    }
    await then(Object.fromEntries(inputs.map((i) => [i.field, held.inputs[i.field]])), shown);
  });
  area.replaceChildren(
    note(`The administrator's review document (${REVIEW_FORMAT}: ${inputs.map((i) => `inputs.${i.field}, a ${i.message_type.split(".").pop()}`).join("; ")}; the CLI's --review file) is sent as written; the console shows the candidate the server computes from it.`),
    el("div", { class: "field" }, el("label", { for: control.id }, "Review document (JSON file)"), control), shown);
}
