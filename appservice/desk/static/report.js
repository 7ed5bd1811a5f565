// The desk's staff page: the outcome figures of the inboxes a staff key reaches, from the staff API
// (GET /api/v1/accounts/{account}/reports/outcomes). The key stays in this tab's sessionStorage only.
(() => {
  "use strict";
  const account = document.body.dataset.account;
  const form = document.getElementById("ask");
  const keyField = document.getElementById("key");
  const since = document.getElementById("since");
  const error = document.getElementById("error");
  const out = document.getElementById("figures");
  keyField.value = sessionStorage.getItem("summon-staff-key") || "";

  const share = (part, whole) => whole ? `${part} (${Math.round(100 * part / whole)}%)` : `${part}`;
  const secs = (s) => s < 120 ? `${Math.round(s)} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${(s / 3600).toFixed(1)} h`;
  const spread = (x) => x ? `${secs(x.p50_seconds)} / ${secs(x.p90_seconds)}` : "–";
  const COLUMNS = ["", "Conversations", "Bot alone", "Handed to people", "Confirmed", "Assumed", "By people",
                   "Reopened", "Durable", "First answer p50 / p90", "To a person p50 / p90", "Rating"];

  function cells(label, f) {
    const n = f.conversations;
    const by = f.handed_by;
    return [label, `${n}`, share(f.bot_alone, n),
            `${share(f.handed, n)} — contact ${by.contact}, bot ${by.bot}, said ${by.said}, failure ${by.failure}, staff ${by.staff}`,
            share(f.resolved.confirmed, n), share(f.resolved.assumed, n), share(f.resolved.by_people, n),
            share(f.reopened, n), `${f.durable.durable} of ${f.durable.judged}`,
            spread(f.time_to_first_answer), spread(f.time_to_a_person),
            f.rating.mean === null ? "–" : `${f.rating.mean} of ${f.rating.count}`];
  }

  function row(table, values, kind) {
    const tr = table.insertRow();
    if (kind) tr.className = kind;
    for (const value of values) tr.insertCell().textContent = value;
  }

  function show(report) {
    out.replaceChildren();
    const table = document.createElement("table");
    table.id = "outcomes";
    const head = table.createTHead().insertRow();
    for (const name of COLUMNS) {
      const th = document.createElement("th");
      th.textContent = name;
      head.appendChild(th);
    }
    for (const inbox of report.inboxes) {
      row(table, cells(inbox.inbox, inbox), "inbox");
      for (const bot of report.bots.filter((b) => b.inbox === inbox.inbox)) row(table, cells(bot.bot, bot), "bot");
    }
    out.appendChild(table);
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    error.hidden = true;
    sessionStorage.setItem("summon-staff-key", keyField.value);
    const url = `/api/v1/accounts/${encodeURIComponent(account)}/reports/outcomes?since=${encodeURIComponent(since.value)}`;
    const response = await fetch(url, { headers: { api_access_token: keyField.value } });
    const body = await response.json().catch(() => ({}));
    if (!response.ok) {
      error.textContent = body.error || body.message || `The desk said ${response.status}.`;
      error.hidden = false;
      out.replaceChildren();
      return;
    }
    show(body);
  });
})();
