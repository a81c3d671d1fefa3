// A ticket and its recoveries: never-claimed (Review failed admission) and rejected-boundary.

import {
  acknowledgements, actionKey, badge, call, callerPermissions, code, describe, el, erLink, facts,
  handoffView, holdsView, inFlight, leaseBoundsRows, loadAction, newIdentity, note, permits, queuedReceipt, readBack,
  saveAction, seqLink, shortName, stateName, submitOnce, withheldNote,
} from "./common.js";
import { page, requestPath, usageText } from "./run.js";

// ---------------------------------------------------------------- a ticket and its recoveries

export async function ticketView(area, ticket) {
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
      ...leaseBoundsRows(ticket.lease_bounds),
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
      ["Witness · event", el("span", {}, seqLink(outcome.witness_sequence), " · ", seqLink(outcome.event_sequence))],
      ...leaseBoundsRows(outcome.lease_bounds)],
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
  // Both recoveries read a candidate and submit as a factory administrator: ask the roles first.
  const permissions = await callerPermissions();
  if (Number(current.lease.generation) > 0) {
    // Claimed, then failed: only the provider-refusal (rejected-boundary) recovery can apply.
    if (!permissions.may("CandidateService/GetRejectedBoundaryCandidate", "AdmissionService/RequestRejectedBoundaryRecovery")) {
      area.replaceChildren(withheldNote(permissions, "The provider-refusal recovery needs current factory administrator authority; no action is offered."));
      return;
    }
    rejectedBoundaryView(area, ticket, current);
    return;
  }
  if (!permissions.may("CandidateService/GetInvalidReadRecoveryCandidate")) {
    area.replaceChildren(withheldNote(permissions, "Reviewing a failed admission needs current factory administrator authority; this token has none, so no action is offered."));
    return;
  }
  const answer = await call("GET", `${base}/recovery-candidate`);
  if (answer.outcome !== "ok") {
    area.replaceChildren(note(`The recovery candidate could not be read: ${describe(answer)}`));
    return;
  }
  const candidate = answer.json.candidate;
  const review = el("div", {});
  area.replaceChildren(el("h4", {}, "Recovery candidate"), candidateFacts(candidate),
    el("h4", {}, "Holds"), holdsView(candidate.holds), handoffView(candidate.handoff), review);
  if (!permits(candidate, "request_invalid_read_recovery")) return;
  if (!permissions.may("AdmissionService/RequestInvalidReadRecovery")) {
    review.append(withheldNote(permissions, "Requeueing needs factory administrator authority; this token has none, so no action is offered."));
    return;
  }
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
    validForSeconds: Math.max(1, page.grantableLease || 1),
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
    const again = await callerPermissions();  // the review may be read long after the page was
    if (!again.may("AdmissionService/RequestRejectedBoundaryRecovery")) {
      reviewArea.append(withheldNote(again, "The provider-refusal recovery needs current factory administrator authority; no action is offered."));
      return;
    }
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
    validForSeconds: Math.max(1, page.grantableLease || 1),
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
