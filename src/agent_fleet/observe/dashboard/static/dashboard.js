// Agent Fleet dashboard: one EventSource for the overview (and the selected run), one for the
// selected session's event log. Everything is drawn with textContent (event data is never HTML).
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const state = { run: null, session: null, fleet: null, sessionStream: null, lastSeq: 0, series: [] };
  const MAX_POINTS = 600;

  const fmt = {
    int: (n) => (n == null ? "–" : Math.round(n).toLocaleString("en-US")),
    pct: (x) => (x == null ? "–" : (100 * x).toFixed(1) + "%"),
    usd: (x) => (x == null ? "–" : "$" + Number(x).toFixed(x < 1 ? 4 : 2)),
    secs: (x) => (x == null ? "–" : x < 1 ? (1000 * x).toFixed(0) + " ms" : x.toFixed(2) + " s"),
    num: (x) => (x == null ? "–" : Number(x).toFixed(1)),
    time: (t) => new Date(t * 1000).toLocaleTimeString(),
  };

  function cell(tr, text, cls) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    tr.appendChild(td);
    return td;
  }

  function fill(tbody, rows, build) {
    const frag = document.createDocumentFragment();
    for (const row of rows) frag.appendChild(build(row));
    tbody.replaceChildren(frag);
  }

  // -- charts (uPlot) -------------------------------------------------------------------------------
  function chart(el, series) {
    const opts = {
      width: Math.max(300, el.clientWidth || 480), height: 220,
      scales: { x: { time: true } },
      series: [{}].concat(series.map((s) => ({ label: s[0], stroke: s[1], width: 2, scale: s[2] || "y" }))),
      axes: [{}, { scale: "y" }].concat(series.some((s) => s[2]) ? [{ scale: series.find((s) => s[2])[2], side: 1, grid: { show: false } }] : []),
    };
    return new uPlot(opts, [[]].concat(series.map(() => [])), el);
  }
  const charts = {
    tokens: chart($("chart-tokens"), [["tokens/s", "#2f6fde"], ["active agents", "#1e8e3e", "n"]]),
    limit: chart($("chart-limit"), [["concurrency limit", "#c0392b"], ["in the gateway", "#7b61ff"]]),
  };
  window.addEventListener("resize", () => {
    for (const c of Object.values(charts)) c.setSize({ width: Math.max(300, c.root.parentElement.clientWidth - 16), height: 220 });
  });

  function addPoints(points) {
    for (const p of points) {
      const prev = state.series[state.series.length - 1];
      if (prev && p.t <= prev.t) continue;
      const rate = prev ? Math.max(0, (p.tokens - prev.tokens) / (p.t - prev.t)) : 0;
      state.series.push({ ...p, rate });
    }
    if (state.series.length > MAX_POINTS) state.series.splice(0, state.series.length - MAX_POINTS);
    const s = state.series, t = s.map((p) => p.t);
    charts.tokens.setData([t, s.map((p) => p.rate), s.map((p) => p.active)]);
    charts.limit.setData([t, s.map((p) => p.limit), s.map((p) => p.in_flight)]);
  }

  // checks of the runs' changes: "passed / all", then the others by outcome and the admission wait
  function drawChecks(c, value, detail) {
    if (!c) { value.textContent = "–"; detail.textContent = "no check recorded"; return; }
    const n = c.outcomes, all = Object.values(n).reduce((a, b) => a + b, 0);
    value.textContent = fmt.int(n.passed || 0) + " / " + fmt.int(all);
    detail.textContent = fmt.int(n.failed || 0) + " failed · " + fmt.int(n.timeout || 0) + " timeout · " +
      fmt.int(n.skipped || 0) + " skipped · wait p95 " + fmt.secs(c.wait_p95_s);
  }

  // -- overview ---------------------------------------------------------------------------------------
  function drawOverview(o) {
    state.fleet = o;
    $("active-agents").textContent = fmt.int(o.active_agents);
    $("tokens-per-s").textContent = fmt.num(o.tokens_per_s);
    $("tokens-total").textContent = fmt.int(o.tokens_total) + " tokens";
    $("error-rate").textContent = fmt.pct(o.error_rate);
    $("errors").textContent = fmt.int(o.errors) + " errors / " + fmt.int(o.calls) + " calls";
    $("dedup-rate").textContent = fmt.pct(o.dedup_rate);
    $("cost").textContent = fmt.usd(o.cost_usd);
    $("forecast").textContent = o.forecast_usd ? "forecast " + fmt.usd(o.forecast_usd.low) + " – " + fmt.usd(o.forecast_usd.high) : "no forecast";
    $("limit").textContent = fmt.int(o.concurrency_limit);
    $("in-flight").textContent = fmt.int(o.in_flight) + " calls in the gateway";
    $("preemptions").textContent = fmt.int(o.preemptions);
    $("near-budget").textContent = fmt.int(o.near_budget.sessions.length);
    $("near-threshold").textContent = "at or above " + fmt.pct(o.near_budget.threshold);
    drawChecks(o.checks, $("checks"), $("checks-detail"));
    if (o.time) $("updated").textContent = "updated " + fmt.time(o.time);
    addPoints(o.series);
    fill($("queues").tBodies[0], o.queues, (q) => {
      const tr = document.createElement("tr");
      tr.dataset.queue = q.name;
      cell(tr, q.name); cell(tr, fmt.int(q.admitted)); cell(tr, fmt.int(q.pending_active));
      cell(tr, fmt.int(q.pending_inadmissible)); cell(tr, fmt.int(q.admitted_total));
      cell(tr, fmt.secs(q.wait_p95_s)); cell(tr, fmt.int(q.preempted_total));
      return tr;
    });
    fill($("runs").tBodies[0], o.runs, (r) => {
      const tr = document.createElement("tr");
      tr.className = "pick" + (r.run_id === state.run ? " selected" : "");
      tr.dataset.run = r.run_id;
      const total = Object.values(r.sessions).reduce((a, b) => a + b, 0);
      cell(tr, r.run_id); cell(tr, r.state, "state-" + r.state); cell(tr, r.team); cell(tr, r.queue);
      cell(tr, fmt.int(total)); cell(tr, fmt.int(r.active)); cell(tr, fmt.int(r.tokens));
      cell(tr, fmt.usd(r.cost_usd) + (r.forecast_usd ? " / " + fmt.usd(r.forecast_usd.high) : ""));
      cell(tr, fmt.pct(r.dedup_rate));
      const ch = r.changes || {};
      cell(tr, ch.sessions ? fmt.int(ch.sessions) + " (" + (ch.merged == null ? "–" : fmt.int(ch.merged)) + " merged)" : "–");
      cell(tr, r.task, "task");
      tr.addEventListener("click", () => select(r.run_id, null));
      return tr;
    });
  }

  // -- run → sessions ---------------------------------------------------------------------------------
  function drawRun(r) {
    if (r.run_id !== state.run) return;
    $("run-panel").hidden = false;
    $("run-title").textContent = r.run_id;
    const states = Object.entries(r.sessions).map(([k, v]) => v + " " + k).join(", ");
    const checks = r.checks ? " · checks " + Object.entries(r.checks.outcomes).filter(([, v]) => v)
      .map(([k, v]) => v + " " + k).join(", ") + " (wait p95 " + fmt.secs(r.checks.wait_p95_s) + ")" : "";
    $("run-facts").textContent = r.state + " · team " + r.team + " · queue " + r.queue + " · " + states +
      " · " + fmt.int(r.tokens) + " tokens · " + fmt.usd(r.cost_usd) + checks + " · " + r.task;
    fill($("sessions").tBodies[0], r.session_rows, (s) => {
      const tr = document.createElement("tr");
      tr.className = "pick" + (s.session_id === state.session ? " selected" : "");
      tr.dataset.session = s.session_id;
      cell(tr, s.session_id); cell(tr, s.state, "state-" + s.state); cell(tr, s.model);
      cell(tr, fmt.int(s.turns)); cell(tr, fmt.int(s.tool_calls)); cell(tr, fmt.int(s.tokens));
      cell(tr, fmt.usd(s.cost_usd));
      const near = state.fleet && s.budget_used_ratio >= state.fleet.near_budget.threshold;
      cell(tr, fmt.pct(s.budget_used_ratio), near ? "hot" : "");
      cell(tr, fmt.int(s.errors)); cell(tr, fmt.int(s.results));
      cell(tr, s.check || "", s.check ? "check-" + s.check : ""); cell(tr, s.last_event);
      tr.addEventListener("click", () => select(state.run, s.session_id));
      return tr;
    });
  }

  // -- the run's review queue (exceptions to look at; a decision is a review_decision event) --------
  let reviewTimer = null;
  async function loadReview() {
    const run = state.run;
    if (!run) return;
    const resp = await fetch("api/runs/" + encodeURIComponent(run) + "/review");
    if (!resp.ok || run !== state.run) { $("review").hidden = true; return; }
    const q = await resp.json();
    $("review").hidden = false;
    $("review-counts").textContent = Object.entries(q.counts || {})
      .filter(([, v]) => typeof v === "number").map(([k, v]) => v + " " + k).join(", ");
    fill($("review-items").tBodies[0], q.items, (item) => {
      const tr = document.createElement("tr");
      tr.dataset.item = item.id;
      cell(tr, item.kind);
      const subject = cell(tr, item.subject);
      if (item.session_id) {
        subject.className = "link";
        subject.addEventListener("click", () => select(run, item.session_id));
      }
      cell(tr, item.reason, "task");
      cell(tr, item.status + (item.note ? " (" + item.note + ")" : ""), "review-" + item.status);
      const td = cell(tr, "");
      if (item.status === "open") {
        for (const decision of ["approve", "reject"]) {
          const b = document.createElement("button");
          b.textContent = decision;
          b.dataset.decision = decision;
          b.addEventListener("click", () => decide(item.id, decision));
          td.appendChild(b);
        }
      }
      return tr;
    });
  }
  async function decide(item, decision) {
    const note = $("review-note").value.trim() || null;
    const resp = await fetch("api/review", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-Fleet-Dashboard": "1" },
      body: JSON.stringify({ item, decision, note }),
    });
    $("review-error").textContent = resp.ok ? "" : (await resp.json()).error.message;
    $("review-note").value = "";
    await loadReview();
  }
  function followReview() {
    if (reviewTimer) clearInterval(reviewTimer);
    reviewTimer = null;
    $("review").hidden = true;
    if (!state.run) return;
    loadReview();
    reviewTimer = setInterval(loadReview, 5000);
  }

  // -- session → event log ----------------------------------------------------------------------------
  function openSession(sid) {
    if (state.sessionStream) state.sessionStream.close();
    state.sessionStream = null;
    $("events").replaceChildren();
    $("session-panel").hidden = !sid;
    if (!sid) return;
    $("session-title").textContent = sid;
    state.lastSeq = 0;
    const es = new EventSource("api/sessions/" + encodeURIComponent(sid) + "/stream?after=0");
    es.addEventListener("events", (msg) => {
      const frag = document.createDocumentFragment();
      for (const ev of JSON.parse(msg.data)) {
        if (ev.seq <= state.lastSeq) continue;
        state.lastSeq = ev.seq;
        const li = document.createElement("li");
        li.value = ev.seq;
        li.dataset.type = ev.type;
        const type = document.createElement("span"); type.className = "type"; type.textContent = ev.type;
        const when = document.createElement("span"); when.textContent = fmt.time(ev.time) + " ";
        const data = document.createElement("div"); data.className = "data"; data.textContent = JSON.stringify(ev.data);
        li.append(type, when, data);
        frag.appendChild(li);
      }
      $("events").appendChild(frag);
    });
    state.sessionStream = es;
  }

  // -- selection (kept in the URL's hash) and the live stream ----------------------------------------
  let stream = null;
  function connect() {
    if (stream) stream.close();
    stream = new EventSource("api/stream" + (state.run ? "?run=" + encodeURIComponent(state.run) : ""));
    stream.addEventListener("open", () => { $("conn").textContent = "live"; $("conn").className = "conn on"; });
    stream.addEventListener("error", () => { $("conn").textContent = "reconnecting"; $("conn").className = "conn off"; });
    stream.addEventListener("overview", (msg) => drawOverview(JSON.parse(msg.data)));
    stream.addEventListener("run", (msg) => drawRun(JSON.parse(msg.data)));
  }

  function select(run, session) {
    const params = new URLSearchParams();
    if (run) params.set("run", run);
    if (session) params.set("session", session);
    location.hash = params.toString();
  }

  function fromHash() {
    const params = new URLSearchParams(location.hash.slice(1));
    const run = params.get("run"), session = params.get("session");
    if (run !== state.run) {
      state.run = run;
      $("run-panel").hidden = !run;
      $("sessions").tBodies[0].replaceChildren();
      connect();
      followReview();
    }
    if (session !== state.session) {
      state.session = session;
      openSession(session);
    }
  }

  $("run-close").addEventListener("click", (e) => { e.preventDefault(); select(null, null); });
  $("session-close").addEventListener("click", (e) => { e.preventDefault(); select(state.run, null); });
  window.addEventListener("hashchange", fromHash);
  state.run = undefined;
  fromHash();
})();
