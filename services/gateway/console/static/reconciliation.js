// Reconciliation of a claimed request whose owner was lost (ReconciliationService through the
// gateway's routes, ADR 0010): inspect one read-only snapshot, ask the deployment's verifier,
// then one reviewed decision, RETRY_STAGE or MARK_UNRESOLVED, with the handoff after it.
//
// The reconciliation_id is chosen when the inspection opens (inspections and verifications are
// bound to it) and kept in sessionStorage with the digest, state and generation the review saw;
// the decision is sent once and, after an uncertain answer, only read back.

import {
  API, actionKey, badge, call, callerPermissions, code, describe, el, erLink, facts, handoffView, holdsView,
  inFlight, leaseBoundsRows, loadAction, newIdentity, note, readBack, saveAction, seqLink, shortName, stateName,
  submitOnce,
} from "./common.js";
import { ledgerNow, page } from "./run.js";

const CLAIMED = "EXECUTION_REQUEST_STATE_CLAIMED";
const DECIDED = ["EXECUTION_REQUEST_STATE_RECONCILED", "EXECUTION_REQUEST_STATE_UNRESOLVED"];
const DECIDING_ROLE = "ROLE_FACTORY_ADMINISTRATOR"; // the ledger's role for Verify and Reconcile
const DECISIONS = {
  retry_stage: {
    value: "RECONCILIATION_DECISION_RETRY_STAGE", review: "Review retry stage", submit: "Retry stage",
    effect: "Fences the lease generation below for ever, releases the old claim and queues the same stage under a new "
      + "execution request of the same attempt. Nothing is refunded: commands and tokens stay charged.",
  },
  mark_unresolved: {
    value: "RECONCILIATION_DECISION_MARK_UNRESOLVED", review: "Review mark unresolved", submit: "Mark unresolved",
    effect: "Fences the lease generation below for ever, releases the claim and makes the request terminal unresolved "
      + "with the handoff payload. Nothing is retried.",
  },
};

const base = (exr) => `${API}/runs/${encodeURIComponent(page.runId)}/execution-requests/${encodeURIComponent(exr)}`;
const keyOf = (ticket, exr) => actionKey(page.runId, ticket.request_id, "reconciliation", exr);

// ---------------------------------------------------------------- the ticket's execution requests

export async function reconciliationView(area, ticket) {
  const chain = page.requests.filter((r) => r.request_id === ticket.request_id);
  for (const request of chain) {
    const key = keyOf(ticket, request.execution_request_id);
    const saved = loadAction(key);
    if (inFlight(saved)) {
      const box = el("div", { class: "reconciliation", "data-reconciliation": request.execution_request_id });
      area.append(box);
      await readBack(decisionSpec(request, saved, key), box);
    } else if (DECIDED.includes(request.state)) {
      area.append(await savedDecision(request, saved));
    } else if (request.state === CLAIMED) {
      area.append(claimedView(ticket, request, key));
    }
  }
}

async function savedDecision(request, saved) {
  const answer = await call("GET", `${base(request.execution_request_id)}/reconciliation`);
  if (answer.outcome !== "ok") return note(`The saved reconciliation of ${request.execution_request_id} could not be read: ${describe(answer)}`);
  return receipt(answer.json.reconciliation, saved);
}

function claimedView(ticket, request, key) {
  const box = el("div", { class: "card reconciliation", "data-reconciliation": request.execution_request_id });
  const open = el("button", { type: "button", class: "secondary" }, "Inspect for reconciliation");
  const body = el("div", {});
  open.addEventListener("click", () => { open.remove(); inspect(body, ticket, request, key); });
  box.append(el("h4", {}, "Reconciliation of ", erLink(request.execution_request_id)),
    note("A claimed request is never requeued automatically. If its worker was lost (it vanished, or its lease ran out "
      + "mid-execution), inspect it: the inspection is read-only and writes nothing."),
    el("div", { class: "actions" }, open), body);
  return box;
}

// ---------------------------------------------------------------- inspect

async function inspect(area, ticket, request, key, preface) {
  const previous = loadAction(key);
  const action = previous && previous.state === "reviewing" ? previous
    : { id: newIdentity(), state: "reviewing", exr: request.execution_request_id };
  saveAction(key, action);
  area.replaceChildren(note(`Inspecting for reconciliation ${action.id}…`));
  const answer = await call("GET", `${base(action.exr)}/reconciliation-inspections/${encodeURIComponent(action.id)}`);
  if (answer.outcome !== "ok") {
    area.replaceChildren(note(`The request could not be inspected: ${describe(answer)}`));
    return;
  }
  const snapshot = answer.json.snapshot;
  const current = snapshot.execution_request;
  // What the review saw: the decision must carry it unchanged.
  Object.assign(action, {
    digest: snapshot.reconciliation_digest, expectedState: current.state,
    expectedGeneration: current.lease.generation, cessationProven: cessationProven(snapshot),
  });
  saveAction(key, action);
  const actions = el("div", {});
  area.replaceChildren(preface || "", snapshotView(snapshot), actions);
  if (current.state !== CLAIMED) return;
  const permissions = await callerPermissions();
  const roles = permissions.answer.outcome === "ok" ? permissions.answer.json.roles || [] : [];
  if (!roles.includes(DECIDING_ROLE)) {
    actions.append(note(permissions.answer.outcome === "ok"
      ? "Verifying and deciding need factory administrator authority; this token has none, so no action is offered."
      : `The caller's permissions could not be read (${describe(permissions.answer)}), so no action is offered.`));
    return;
  }
  const permitted = new Set((snapshot.handoff?.permitted_next_actions || []).map((a) => a.action));
  const evidenceId = `evidence-${action.exr}`;
  const evidence = el("input", { type: "text", id: evidenceId, maxlength: "1024", autocomplete: "off", spellcheck: "false" });
  evidence.value = action.evidence || "";
  const result = el("div", {});
  const buttons = el("div", { class: "actions" });
  const again = (preface) => inspect(area, ticket, request, key, preface);
  if (permitted.has("verify_reconciliation")) {
    const verify = el("button", { type: "button", class: "secondary" }, "Ask the verifier");
    verify.addEventListener("click", () => askVerifier(result, action, key, evidence.value.trim(), again));
    buttons.append(verify);
  }
  for (const [name, decision] of Object.entries(DECISIONS)) {
    if (!permitted.has(name)) continue;
    const open = el("button", { type: "button" }, decision.review);
    open.addEventListener("click", () => {
      const reference = evidence.value.trim();
      if (!reference) {
        result.replaceChildren(el("p", { class: "note", role: "alert" }, "Enter the evidence reference the decision relies on."));
        return;
      }
      buttons.remove();
      evidence.disabled = true;
      reviewCard(result, request, action, key, name, reference);
    });
    buttons.append(open);
  }
  if (!buttons.children.length) {
    actions.append(note("The admissibility check permits no reconciliation action now (see the holds and handoff above)."));
    return;
  }
  actions.append(el("div", { class: "field" },
    el("label", { for: evidenceId }, "Evidence reference (where the verifier and reviewers find the evidence; at most 1024 characters)"),
    evidence), buttons, result);
}

function snapshotView(snapshot) {
  const current = snapshot.execution_request;
  // A long list is summarised as its count and range; the handoff below lists every effect.
  const refs = (items) => {
    if (!items || items.length === 0) return "none";
    if (items.length > 4) {
      return el("span", {}, `${items.length} entries, `, seqLink(items[0].journal_sequence), " to ",
        seqLink(items[items.length - 1].journal_sequence));
    }
    return el("span", {}, items.flatMap((r, i) => [i ? ", " : "", seqLink(r.journal_sequence), ` ${shortName(r.kind, "JOURNAL_ENTRY_KIND_")}`]));
  };
  const deadline = Number(snapshot.time?.deadline_remaining_seconds);
  return el("div", { class: "snapshot" },
    el("h4", {}, "Inspection (read-only)"),
    facts([
      ["Reconciliation ID", code(snapshot.reconciliation_id)],
      ["Execution request", el("span", {}, erLink(current.execution_request_id), ` ${stateName(current.state)}`)],
      ["Lease", `generation ${current.lease.generation} · ${current.lease.seconds} s · until ${current.lease.expires_at || "—"}`],
      ["Owner", current.owner || "—"],
      ["Claims", (snapshot.claims || []).length ? el("span", {}, snapshot.claims.flatMap((c, i) =>
        [i ? ", " : "", `generation ${c.lease_generation} by ${c.worker} at `, seqLink(c.journal_sequence)])) : "none"],
      ["Worker writes", refs(snapshot.deliveries)],
      ["Other entries after the claim", refs(snapshot.later_entries)],
      ["Command ledger", `${snapshot.commands?.used} of ${snapshot.commands?.limit} commands used; `
        + `${(snapshot.commands?.charged_under_request || []).length} charged under this request`],
      ["Time", `${snapshot.time?.reserved_lease_seconds || 0} s of lease reserved; deadline ${deadline < 0 ? "none" : `${deadline} s left`}`],
      ["Reconciliation digest", code(snapshot.reconciliation_digest)],
    ]),
    el("h4", {}, "Verifications"), verificationsView(snapshot.verifications),
    el("h4", {}, "Holds on a retry"), holdsView(snapshot.holds), handoffView(snapshot.handoff));
}

// A recorded, unexpired proof for this review's digest: only then does the ledger release the
// claim without the administrator's acknowledgement that cessation is unproven (ADR 0045). A
// proof expires on the ledger's clock, not the browser's.
function cessationProven(snapshot) {
  return (snapshot.verifications || []).some((v) => v.reconciliation_digest === snapshot.reconciliation_digest
    && v.cessation_verified && Date.parse(v.expires_at) > ledgerNow());
}

function verificationsView(items) {
  if (!items || items.length === 0) return note("No verification recorded for this reconciliation.");
  return el("ul", { class: "plain" }, items.map((v) => el("li", { class: "verification" },
    `${v.verifier}: cessation ${v.cessation_verified ? "verified" : "not verified"}, exposure `,
    `${v.exposure_within_reservation ? "within the reservation" : "not bounded"}, effect ${shortName(v.effect, "VERIFIED_EFFECT_")}; `,
    "recorded at ", seqLink(v.journal_sequence), `, valid until ${v.expires_at || "—"}. `, v.detail || "")));
}

// ---------------------------------------------------------------- verify

// The verifier's proof is recorded as a journal entry; an answer that is lost is not asked again:
// the inspection read afterwards lists every proof recorded for this reconciliation.
async function askVerifier(result, action, key, reference, again) {
  if (!reference) {
    result.replaceChildren(el("p", { class: "note", role: "alert" }, "Enter the evidence reference the verifier should examine."));
    return;
  }
  action.evidence = reference;
  saveAction(key, action);
  result.replaceChildren(note("Asking the deployment's verifier…"));
  const answer = await call("POST",
    `${base(action.exr)}/reconciliations/${encodeURIComponent(action.id)}/verifications`,
    { reconciliation_digest: action.digest, evidence_reference: reference });
  if (answer.outcome === "ok") {
    const proof = answer.json.verification;
    await again(el("div", { class: "card receipt", role: "status", "data-receipt": "verification" },
      el("h4", {}, "Verification recorded"), el("p", {}, `${proof.verifier}: ${proof.detail || ""} (`,
        seqLink(proof.journal_sequence), `, valid until ${proof.expires_at || "—"})`)));
    return;
  }
  const card = answer.outcome === "refused"
    ? el("div", { class: "card refused", role: "alert" }, el("h4", {}, "Not verified; nothing was recorded"), el("p", {}, describe(answer)))
    : el("div", { class: "card uncertain", role: "alert" }, el("h4", {}, "The verifier's answer was lost"),
      el("p", {}, `${describe(answer)}. The inspection below lists every proof recorded; the console does not ask again.`));
  await again(card); // the inspection, read again, shows what is recorded now
}

// ---------------------------------------------------------------- decide

function reviewCard(area, request, action, key, name, reference) {
  const decision = DECISIONS[name];
  action.decision = decision.value;
  action.evidence = reference;
  saveAction(key, action);
  const submit = el("button", { type: "button", id: `decide-${action.exr}` }, decision.submit);
  const result = el("div", {});
  // Marking unresolved releases the claim: without a recorded proof of cessation the
  // administrator must say, and the decision records, that the owner may still run.
  action.acknowledged = false;
  let acknowledgement = "";
  if (name === "mark_unresolved" && !action.cessationProven) {
    const box = el("input", { type: "checkbox", id: `acknowledge-${action.exr}` });
    submit.disabled = true;
    box.addEventListener("change", () => { action.acknowledged = box.checked; submit.disabled = !box.checked; });
    acknowledgement = el("div", { class: "field" }, box, el("label", { for: `acknowledge-${action.exr}` },
      " No verification proves that the prior owner stopped; I release its claim anyway and the decision records "
      + "the cessation as unproven"));
  }
  submit.addEventListener("click", () => {
    submit.remove();
    saveAction(key, action);
    submitOnce(decisionSpec(request, action, key), result);
  });
  area.replaceChildren(el("div", { class: "card reconciliation-review", "data-decision": name },
    el("h3", {}, decision.review),
    note(`Reviewing records nothing. ${decision.effect}`),
    facts([
      ["Reconciliation ID", code(action.id)],
      ["Execution request", erLink(action.exr)],
      ["Expected state", stateName(action.expectedState)],
      ["Expected lease generation", action.expectedGeneration],
      ["Evidence reference", action.evidence],
      ["Reconciliation digest", code(action.digest)],
    ]),
    acknowledgement, el("div", { class: "actions" }, submit), result));
}

function decisionSpec(request, action, key) {
  return {
    key, action,
    path: `${base(action.exr)}/reconciliations/${encodeURIComponent(action.id)}`,
    readPath: `${base(action.exr)}/reconciliation`,
    body: {
      expected_state: action.expectedState, expected_lease_generation: action.expectedGeneration,
      evidence_reference: action.evidence, decision: action.decision, reconciliation_digest: action.digest,
      ...(action.acknowledged ? { cessation_unproven_acknowledged: true } : {}),
    },
    matches: (json) => json.reconciliation.reconciliation_id === action.id,
    receipt: (json) => receipt(json.reconciliation, action),
  };
}

function receipt(decided, action) {
  const mine = !action || !action.id || decided.reconciliation_id === action.id;
  const retry = decided.retry_request;
  const unresolved = decided.decision === "RECONCILIATION_DECISION_MARK_UNRESOLVED";
  return el("div", { class: "card receipt reconciliation", "data-receipt": "reconciliation", "data-reconciliation": decided.reconciled_request?.execution_request_id },
    el("h4", {}, unresolved ? "Marked unresolved" : "Stage queued again by reconciliation",
      mine ? "" : " (by another reconciliation action)", " ", badge(unresolved ? "terminal" : "admission only", "warn")),
    note(unresolved
      ? "The request is terminal unresolved: nothing is retried and its lease generations are fenced for ever."
      // The read-back answers the retry's state now: say "queued" only while it is.
      : retry?.state && retry.state !== "EXECUTION_REQUEST_STATE_QUEUED"
        ? `The retry was queued and is now ${stateName(retry.state)} (see the worker records below).`
        : "The retry is queued: a worker must still claim it and pass the execution checks before anything runs."),
    facts([
      ["Reconciliation ID", code(decided.reconciliation_id)],
      ["Decision", shortName(decided.decision, "RECONCILIATION_DECISION_")],
      ["Decided by", decided.actor],
      ["Reconciled request", el("span", {}, erLink(decided.reconciled_request.execution_request_id), ` ${stateName(decided.reconciled_request.state)}`)],
      ["Fenced lease generation", decided.fenced_lease_generation],
      ["Verification · settlement", el("span", {}, seqLink(decided.verification_sequence), " · ", seqLink(decided.settlement_sequence))],
      decided.cessation_unproven_acknowledged ? ["Cessation", "unproven: the administrator released the claim without a proof"] : null,
      retry && retry.execution_request_id ? ["Retry request", el("span", {}, erLink(retry.execution_request_id),
        ` ${stateName(retry.state)} · ${retry.lease.seconds} s at generation ${retry.lease.generation}`)] : null,
      ["Evidence reference", decided.evidence_reference],
      ["Reconciliation digest", code(decided.reconciliation_digest)],
      ...leaseBoundsRows(decided.lease_bounds),
    ]),
    el("h4", {}, "Handoff after the decision"), handoffView(decided.handoff));
}
