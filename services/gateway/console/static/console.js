// The operator console. It calls only the gateway's public JSON routes, with the operator's own
// bearer token, and decides nothing the services decide: an action is offered only when the
// server's own answer (an eligible candidate naming the action, or a refusal) says so.
//
// Action identity: the request_id / recovery_id is chosen (crypto.randomUUID) and saved in
// sessionStorage when the review opens, before anything is sent. Once a submission has been sent,
// the page only reads the saved action back: a lost answer never leads to a second submission.

//
// Modules: common.js (helpers, the JSON call, saved actions, the review pattern), run.js (facts and
// records), timeline.js (what ran, followed live from the journal),
// admission.js (Check current admission, v1 / v2 admissions), recoveries.js (a ticket's
// recoveries, rendered from the services' description of every recovery workflow they route).
// This one wires the two pages.

import { ACTION_PREFIX, TOKEN_KEY, inFlight, loadAction, token } from "./common.js";
import { loadFacts, loadRecords, page } from "./run.js";
import { checkAdmission } from "./admission.js";
import { startTimeline } from "./timeline.js";

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

// ---------------------------------------------------------------- start

async function runPage() {
  page.runId = decodeURIComponent(location.pathname.split("/")[3] || "");
  document.getElementById("run-id").textContent = page.runId;
  document.title = `Run ${page.runId} · Forge continuity console`;
  const check = document.getElementById("check-admission");
  check.addEventListener("click", checkAdmission);
  document.getElementById("refresh-records").addEventListener("click", loadRecords);
  document.addEventListener("forge:recorded", loadRecords); // after a receipt, show what was recorded
  document.addEventListener("forge:journal-moved", loadRecords); // the timeline saw a state change
  const start = async () => {
    // Nothing that needs the services (and no action) is shown before a token is entered.
    for (const section of document.querySelectorAll("[data-needs-token]")) section.hidden = false;
    if (!(await loadFacts())) return;
    await loadRecords();
    startTimeline();
    // An action sent earlier in this tab is read back at once; nothing else is offered before it.
    const pending = Object.keys(sessionStorage).filter((k) => k.startsWith(ACTION_PREFIX + encodeURIComponent(page.runId) + ":"));
    if (pending.some((k) => inFlight(loadAction(k)))) await checkAdmission();
  };
  wireToken(start);
  if (token()) await start();
}

// The landing page has its own module (landing.js); this one serves the run page.
runPage();
