// Check current admission, and the v1 / v2 admission review when no ticket exists.

import {
  acknowledgements, actionKey, badge, call, callerPermissions, code, describe, el, facts, handoffView,
  holdsView, inFlight, leaseBoundsRows, loadAction, newIdentity, note, permits, queuedReceipt, readBack, saveAction,
  setStatus, submitOnce, withheldNote,
} from "./common.js";
import { loadRecords, page, requestPath, runPath, usageText } from "./run.js";
import { ticketView } from "./recoveries.js";

// ---------------------------------------------------------------- the plan: admission

export async function checkAdmission() {
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
        ["Action ID", action.id], ...leaseBoundsRows(json.ticket.lease_bounds)], json.ticket.claim_sequence),
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
  // The operator may pick the other version while this one is still being read: only the
  // newest choice may fill the card, or a late answer would show the version not chosen.
  const turn = (body.turn = (body.turn || 0) + 1);
  const stale = () => body.turn !== turn;
  body.replaceChildren(note(`Reading the version ${version} candidate…`));
  const permissions = await callerPermissions();
  if (stale()) return;
  if (!permissions.may("CandidateService/GetInvalidReadContinuityCandidate")) {
    body.replaceChildren(withheldNote(permissions,
      "This token has no execution operator or administrator authority: no candidate and no action."));
    return;
  }
  const answer = await call("GET", `${runPath()}/invalid-read-continuity/candidate?version=${version}`);
  if (stale()) return;
  if (answer.outcome !== "ok") {
    body.replaceChildren(note(`The candidate could not be read: ${describe(answer)}`));
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
  if (!permissions.may(`AdmissionService/${version === 2 ? "RequestInvalidReadContinuityV2" : "RequestInvalidReadContinuity"}`)) {
    body.append(withheldNote(permissions, "Admission needs execution operator authority; this token has none, so no action is offered."));
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
    validForSeconds: Math.max(1, page.grantableLease || 1),
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
      ["Candidate digest", code(action.digests.candidate_digest)],
      ["Run digest", code(action.digests.run_digest)],
      ["Journal digest", code(action.digests.journal_digest)],
      ["Policy digest", code(action.digests.policy_digest)],
    ]),
    acks.fieldset, el("div", { class: "actions" }, submit), result));
}
