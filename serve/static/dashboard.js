// kaiwo-ray dashboard: a small hash-routed page over the admin API, with live updates over SSE and
// charts from the vendored Chart.js. Every number shown comes from /api/v1 (the app's watch cache).
"use strict";

const PHASE_COLORS = {
  RUNNING: "#16a34a", READY: "#16a34a", COMPLETE: "#4ade80", PENDING: "#f59e0b", DOWNLOADING: "#fbbf24",
  STARTING: "#fcd34d", ERROR: "#dc2626", FAILED: "#ef4444", TERMINATING: "#818cf8", TERMINATED: "#6366f1", "": "#94a3b8",
};
const state = { charts: {}, page: null, token: localStorage.getItem("kaiwoToken") || "", refresh: null, timer: null };

function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}

function ago(stamp) {
  if (!stamp) return "";
  const seconds = Math.max(0, (Date.now() - Date.parse(stamp)) / 1000);
  if (seconds < 90) return `${Math.round(seconds)}s ago`;
  if (seconds < 5400) return `${Math.round(seconds / 60)}m ago`;
  if (seconds < 129600) return `${Math.round(seconds / 3600)}h ago`;
  return `${Math.round(seconds / 86400)}d ago`;
}

function phaseBadge(phase) {
  return `<span class="phase ${esc(phase)}">${esc(phase || "NEW")}</span>`;
}

async function api(path, options = {}) {
  const headers = Object.assign({}, options.headers || {});
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const response = await fetch(path, Object.assign({}, options, { headers }));
  if (response.status === 401) {
    document.getElementById("auth").hidden = false;
    throw new Error("a token is needed");
  }
  if (!response.ok) {
    let message = `${response.status}`;
    try { message = (await response.json()).message || message; } catch (err) { /* not JSON */ }
    throw new Error(message);
  }
  return options.text ? response.text() : response.json();
}

// The GPU boxes' four states, one colour each; the legend is drawn from the same table.
const GPU_STATES = {
  free: { color: "#e5e7eb", label: "free" },
  busy: { color: "#16a34a", label: "allocated, busy" },
  idle: { color: "#f59e0b", label: "allocated, idle (< 5 %)" },
  unknown: { color: "#64748b", label: "allocated, utilization unknown" },
};
const IDLE_PERCENT = 5;

function gpuLegend() {
  return `<div class="legend">${Object.entries(GPU_STATES).map(([state, s]) =>
    `<span data-state="${state}"><i style="background:${s.color}"></i>${esc(s.label)}</span>`).join("")}</div>`;
}

// Each GPU of a node as one of GPU_STATES. With telemetry, a sample says whether a pod holds the GPU and
// how busy it is; without, the first `gpus_used` boxes are the allocated ones (utilization unknown).
function gpuCells(node) {
  const samples = new Map((node.gpus || []).map((g) => [g.index, g]));
  const cells = [];
  for (let i = 0; i < node.gpus_allocatable; i++) {
    const sample = samples.get(i);
    let state;
    if (sample) {
      if (!sample.pod) state = "free";
      else if (sample.utilization == null) state = "unknown";
      else state = sample.utilization < IDLE_PERCENT ? "idle" : "busy";
    } else state = i < node.gpus_used ? "unknown" : "free";
    cells.push({ index: i, state, utilization: sample ? sample.utilization : null });
  }
  return cells;
}

function chart(id, config) {
  const canvas = document.getElementById(id);
  if (!canvas) return;
  if (typeof Chart === "undefined") {
    // The chart library is vendored at build time (`make vendor`); say so instead of a blank panel.
    canvas.parentElement.innerHTML = `<div class="empty nochart">Charts are unavailable: the chart library ` +
      `(serve/static/vendor/chart.umd.min.js) is not installed; run <code>make vendor</code>. The numbers are in the tables and the API.</div>`;
    return;
  }
  const existing = state.charts[id];
  if (existing && existing.canvas === canvas) {
    existing.data = config.data;
    existing.update("none");
    return;
  }
  if (existing) existing.destroy();
  config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false }, config.options || {});
  state.charts[id] = new Chart(canvas, config);
}

function resetCharts() {
  for (const c of Object.values(state.charts)) c.destroy();
  state.charts = {};
}

// --- overview ---------------------------------------------------------------------------------

function gpuResources(queues) {
  const found = new Set();
  for (const q of queues) for (const f of q.flavors) for (const r of f.resources) {
    if (r.resource.endsWith("/gpu") && r.nominal > 0) found.add(r.resource);
  }
  return [...found].sort();
}

async function overviewPage(main, first) {
  // A user who may not list nodes or queues sees their workloads; those panels say what is missing.
  // The overview says what this user may see: nodes are asked for only with the right to list them,
  // so a namespaced user's page makes no request that is refused (a 403 is a console error).
  const overview = await api("/api/v1/overview");
  const nodes = overview.nodes ? await api("/api/v1/nodes").catch(() => null) : null;
  if (first) {
    main.innerHTML = `
      <h1>Overview</h1>
      <div class="cards" id="cards"></div>
      <div class="grid">
        <div class="panel"><h2>Workloads by phase</h2><div class="chart"><canvas id="phases"></canvas></div></div>
        <div class="panel"><h2>Queue usage vs quota (GPUs per flavor)</h2><div class="chart"><canvas id="quota"></canvas></div></div>
      </div>
      <div class="panel"><h2>GPUs per node</h2><div id="heat" class="heat"></div>
        ${gpuLegend()}<div class="muted">utilization % shown in a box when telemetry reports it</div></div>
      <div class="panel"><h2>Pending, in admission order</h2><div id="pending"></div></div>`;
  }
  const phases = overview.phases;
  const count = (names) => names.reduce((n, p) => n + (phases[p] || 0), 0);
  document.getElementById("cards").innerHTML = [
    ["Workloads", overview.workloads], ["Running", count(["RUNNING", "READY"])],
    ["Pending", count(["PENDING", "DOWNLOADING", "STARTING"])], ["Failed / error", count(["FAILED", "ERROR"])],
    ...(overview.nodes ? [["GPUs in use", `${overview.nodes.gpus_used} / ${overview.nodes.gpus}`],
      ["Free GPUs", overview.nodes.gpus_idle], ["Free GPU nodes", `${overview.nodes.idle_gpu_nodes} / ${overview.nodes.gpu_nodes}`]] : []),
  ].map(([label, value]) => `<div class="card"><div class="value">${esc(value)}</div><div class="label">${esc(label)}</div></div>`).join("");

  const labels = Object.keys(phases).sort();
  chart("phases", {
    type: "doughnut",
    data: { labels: labels.map((p) => p || "NEW"), datasets: [{ data: labels.map((p) => phases[p]), backgroundColor: labels.map((p) => PHASE_COLORS[p] || "#94a3b8") }] },
    options: { plugins: { legend: { position: "right" } } },
  });

  const bars = [];
  for (const q of overview.queues) for (const f of q.flavors) for (const r of f.resources) {
    if (gpuResources(overview.queues).includes(r.resource) && r.nominal > 0) bars.push({ label: `${q.name}/${f.flavor}`, r });
  }
  chart("quota", {
    type: "bar",
    data: {
      labels: bars.map((b) => b.label.length > 38 ? b.label.slice(0, 36) + "…" : b.label),
      datasets: [
        { label: "used", data: bars.map((b) => b.r.used), backgroundColor: "#4f46e5" },
        { label: "free", data: bars.map((b) => b.r.free), backgroundColor: "#cbd5e1" },
      ],
    },
    options: { indexAxis: "y", scales: { x: { stacked: true, beginAtZero: true, title: { display: true, text: "GPUs" } }, y: { stacked: true } } },
  });

  if (!nodes) {
    document.getElementById("heat").innerHTML = `<div class="empty">You may not list nodes.</div>`;
  } else document.getElementById("heat").innerHTML = nodes.items.filter((n) => n.gpus_allocatable > 0).map((n) => {
    const cells = gpuCells(n).map((c) => {
      const shown = c.utilization == null || c.state === "free" ? (c.state === "unknown" ? "?" : "") : Math.round(c.utilization);
      const what = c.state === "free" ? "free" : `${GPU_STATES[c.state].label}${c.utilization == null ? "" : `, ${Math.round(c.utilization)}%`}`;
      return `<div class="cell" data-state="${c.state}" title="GPU ${c.index}: ${esc(what)}" style="background:${GPU_STATES[c.state].color}">${shown}</div>`;
    });
    return `<div class="row"><div class="name" title="${esc(n.name)}">${esc(n.name)}</div>${cells.join("")}<span class="muted">${esc(n.gpu_model || "")}</span></div>`;
  }).join("") || `<div class="empty">No GPU nodes.</div>`;

  const pending = overview.queues.flatMap((q) => q.pending.map((p) => Object.assign({ queue: q.name }, p)));
  document.getElementById("pending").innerHTML = pending.length ? pendingTable(pending.slice(0, 20))
    : `<div class="empty">${overview.queues.length ? "Nothing is waiting." : "No queues you may see."}</div>`;
}

function pendingTable(rows) {
  return `<table><thead><tr><th>#</th><th>Queue</th><th>Workload</th><th>Priority</th><th>Waiting</th><th>Why</th></tr></thead><tbody>` +
    rows.map((p) => `<tr><td>${p.position}</td><td>${esc(p.queue || "")}</td><td>${esc(p.namespace)}/${esc(p.kaiwo_workload || p.name)}</td>` +
      `<td>${p.priority}</td><td>${esc(ago(p.created))}</td><td class="muted">${esc(p.message)}</td></tr>`).join("") + `</tbody></table>`;
}

// --- workloads --------------------------------------------------------------------------------

const filters = { namespace: "", user: "", queue: "", phase: "", kind: "", labelSelector: "" };
let cursor = { tokens: [null], index: 0 };

async function workloadsPage(main, first) {
  if (first) {
    main.innerHTML = `
      <h1>Workloads</h1>
      <div class="filters">
        <input id="f-namespace" placeholder="namespace"><input id="f-user" placeholder="user">
        <input id="f-queue" placeholder="queue">
        <select id="f-phase"><option value="">any phase</option>${Object.keys(PHASE_COLORS).filter(Boolean).map((p) => `<option>${p}</option>`).join("")}</select>
        <select id="f-kind"><option value="">any kind</option><option>KaiwoJob</option><option>KaiwoService</option></select>
        <input id="f-labelSelector" placeholder="label selector (team=a,tier)" size="28">
      </div>
      <div class="panel"><div id="list"></div>
        <div class="pager"><button id="prev">‹ Previous</button><button id="next">Next ›</button><span id="count" class="muted"></span></div></div>`;
    for (const key of Object.keys(filters)) {
      const input = document.getElementById(`f-${key}`);
      input.value = filters[key];
      input.addEventListener("change", () => { filters[key] = input.value.trim(); cursor = { tokens: [null], index: 0 }; render(false); });
    }
    document.getElementById("prev").addEventListener("click", () => { cursor.index = Math.max(0, cursor.index - 1); render(false); });
    document.getElementById("next").addEventListener("click", () => { cursor.index += 1; render(false); });
  }
  const params = new URLSearchParams({ limit: "50" });
  for (const [key, value] of Object.entries(filters)) if (value) params.set(key, value);
  const token = cursor.tokens[cursor.index];
  if (token) params.set("continue", token);
  const list = await api(`/api/v1/workloads?${params}`);
  cursor.tokens[cursor.index + 1] = list.continue || null;
  document.getElementById("prev").disabled = cursor.index === 0;
  document.getElementById("next").disabled = !list.continue;
  document.getElementById("count").textContent = `${list.total} workload${list.total === 1 ? "" : "s"}`;
  const el = document.getElementById("list");
  if (!list.items.length) { el.innerHTML = `<div class="empty">No workloads match.</div>`; return; }
  el.innerHTML = `<table><thead><tr><th>Name</th><th>Kind</th><th>Phase</th><th>User</th><th>Queue</th><th>GPUs</th><th>Age</th><th>Message</th></tr></thead><tbody>` +
    list.items.map((w) => `<tr class="link" data-href="#/workloads/${encodeURIComponent(w.namespace)}/${w.kind === "KaiwoService" ? "kaiwoservices" : "kaiwojobs"}/${encodeURIComponent(w.name)}">` +
      `<td><b>${esc(w.name)}</b><div class="muted">${esc(w.namespace)}</div></td><td>${esc(w.kind)}</td><td>${phaseBadge(w.phase)}</td>` +
      `<td>${esc(w.user)}</td><td>${esc(w.queue)}</td><td>${w.gpus}</td><td>${esc(ago(w.created))}</td><td class="muted">${esc(w.message)}</td></tr>`).join("") +
    `</tbody></table>`;
  for (const row of el.querySelectorAll("tr.link")) row.addEventListener("click", () => { location.hash = row.dataset.href; });
}

// The admin API's forecast for a pending KaiwoJob (docs/simulate.md, "Estimated start times").
function estimateLine(e) {
  if (!e) return "";
  const at = (t) => new Date(t).toISOString().slice(0, 16).replace("T", " ") + "Z";
  if (!e.start) return `<div class="reason" id="estimated-start"><b>Estimated start:</b> not within the forecast's week</div>`;
  const span = e.earliest && e.latest && e.earliest !== e.latest ? `, ${esc(at(e.earliest))} to ${esc(at(e.latest))} with short to long run times` : "";
  return `<div class="reason" id="estimated-start"><b>Estimated start:</b> ${esc(at(e.start))}${span}` +
    ` <span class="muted">(forecast ${esc(ago(e.computed))})</span></div>`;
}

async function workloadPage(main, first, [namespace, plural, name]) {
  const base = `/api/v1/namespaces/${encodeURIComponent(namespace)}/${plural}/${encodeURIComponent(name)}`;
  if (first) {
    main.innerHTML = `
      <h1><a href="#/workloads">Workloads</a> / ${esc(namespace)} / ${esc(name)}</h1>
      <div class="cards" id="facts"></div>
      <div class="panel"><h2>Why is it (not) running?</h2><div id="explain"></div></div>
      <div class="grid">
        <div class="panel"><h2>Phase and event timeline</h2><div class="chart" style="height:140px"><canvas id="timeline-chart"></canvas></div><ul class="timeline" id="timeline"></ul></div>
        <div class="panel"><h2>Children and pods</h2><div id="children"></div></div>
      </div>
      <div class="panel"><h2>GPU utilization</h2><div id="gpu-util-empty" class="empty"></div>
        <div class="chart" id="gpu-util-box" style="height:200px" hidden><canvas id="gpu-util"></canvas></div></div>
      <div class="panel"><h2>Log tail <span class="muted" id="log-pod"></span></h2><pre class="log" id="log">…</pre></div>`;
  }
  const [detail, explanation, events] = await Promise.all([api(base), api(`${base}/explain`), api(`${base}/events`)]);
  const s = detail.summary;
  document.getElementById("facts").innerHTML = [["Phase", phaseBadge(s.phase)], ["Kind", esc(s.kind)], ["User", esc(s.user)],
    ["Queue", esc(s.queue)], ["GPUs", esc(s.gpus)], ["Created", esc(ago(s.created))]]
    .map(([label, value]) => `<div class="card"><div class="value" style="font-size:18px">${value}</div><div class="label">${label}</div></div>`).join("");
  document.getElementById("explain").innerHTML =
    `<div class="explain ${explanation.running ? "ok" : ""}">${esc(explanation.summary)}</div>` +
    estimateLine(explanation.estimated_start) +
    explanation.reasons.map((r) => `<div class="reason"><code>${esc(r.code)}</code> ${esc(r.message)}` +
      (r.source ? ` <span class="muted">(${esc(r.source.kind)} ${esc(r.source.name)})</span>` : "") +
      (r.quota.filter((g) => g.nominal > 0).length ? `<table style="margin-top:6px"><thead><tr><th>Flavor</th><th>Resource</th><th>Asked</th><th>Free</th><th>Quota</th></tr></thead><tbody>` +
        r.quota.filter((g) => g.nominal > 0).map((g) => `<tr><td>${esc(g.flavor)}</td><td>${esc(g.resource)}</td><td>${esc(g.requested_text)}</td><td>${esc(g.free_text)}</td><td>${esc(g.nominal_text)}</td></tr>`).join("") + `</tbody></table>` : "") +
      `</div>`).join("");

  const items = events.items;
  document.getElementById("timeline").innerHTML = items.length ? items.slice().reverse().map((e) =>
    `<li class="${esc(e.type)}"><span class="muted">${esc((e.last_seen || "").replace("T", " ").replace("Z", ""))}</span>` +
    `<span class="why">${esc(e.reason)}</span><span>${esc(e.object.kind)} ${esc(e.object.name)}: ${esc(e.message)}</span></li>`).join("")
    : `<li class="empty">No events.</li>`;
  const kinds = [...new Set(items.map((e) => e.object.kind))];
  const times = items.filter((e) => e.last_seen).map((e) => Date.parse(e.last_seen));
  const lo = times.length ? Math.min(...times) - 1000 : Date.now() - 60000;
  const hi = times.length ? Math.max(...times) + 1000 : Date.now();
  chart("timeline-chart", {
    type: "scatter",
    data: { datasets: kinds.map((kind, i) => ({
      label: kind, pointRadius: 5,
      backgroundColor: ["#4f46e5", "#16a34a", "#f59e0b", "#dc2626", "#0ea5e9", "#a855f7"][i % 6],
      data: items.filter((e) => e.object.kind === kind && e.last_seen).map((e) => ({ x: Date.parse(e.last_seen), y: i, reason: e.reason })),
    })) },
    options: {
      scales: { x: { type: "linear", min: lo, max: hi, ticks: { maxTicksLimit: 6, callback: (v) => new Date(v).toLocaleTimeString() } },
                y: { ticks: { stepSize: 1, autoSkip: false, callback: (v) => kinds[v] || "" }, min: -0.5, max: Math.max(0.5, kinds.length - 0.5) } },
      plugins: { legend: { display: false }, tooltip: { callbacks: { label: (ctx) => `${kinds[ctx.parsed.y]}: ${ctx.raw.reason}` } } },
    },
  });

  document.getElementById("children").innerHTML = `<table><thead><tr><th>Kind</th><th>Name</th><th>State</th></tr></thead><tbody>` +
    [...detail.children, ...detail.pods].map((c) => `<tr><td>${esc(c.kind)}</td><td>${esc(c.name)}</td><td>${esc(c.phase)}</td></tr>`).join("") +
    `</tbody></table>`;

  await gpuUtilization(detail, base);
  const log = document.getElementById("log");
  if (detail.pods.length) {
    try {
      const headers = {};
      if (state.token) headers.Authorization = `Bearer ${state.token}`;
      const response = await fetch(`${base}/logs?tail=200`, { headers });
      log.textContent = response.ok ? await response.text() : `(${(await response.json()).message})`;
      document.getElementById("log-pod").textContent = response.headers.get("X-Kaiwo-Pod") || "";
    } catch (err) { log.textContent = `(${err.message})`; }
  } else {
    log.textContent = "(no pods yet)";
  }
}

async function gpuUtilization(detail, base) {
  // Per-GPU telemetry of this workload's pods: whoever may see the workload may see its GPUs.
  let samples = [];
  try {
    samples = (await api(`${base}/gpus`)).items.filter((g) => g.utilization != null);
  } catch (err) { samples = []; }
  const empty = document.getElementById("gpu-util-empty");
  const box = document.getElementById("gpu-util-box");
  box.hidden = samples.length === 0;
  empty.textContent = samples.length ? "" : (detail.summary.gpus
    ? "No GPU telemetry for this workload yet: utilization shows here when a telemetry collector is configured."
    : "This workload uses no GPUs.");
  if (samples.length) {
    chart("gpu-util", {
      type: "bar",
      data: { labels: samples.map((g) => `${g.node} #${g.index}`), datasets: [{ label: "utilization %", data: samples.map((g) => g.utilization), backgroundColor: "#4f46e5" }] },
      options: { scales: { y: { min: 0, max: 100 } }, plugins: { legend: { display: false } } },
    });
  }
}

// --- queues and nodes -------------------------------------------------------------------------

async function queuesPage(main) {
  const queues = (await api("/api/v1/queues")).items;
  main.innerHTML = `<h1>Queues</h1>` + (queues.map((q) => `
    <div class="panel"><h2>${esc(q.name)} ${q.active ? "" : `<span class="phase ERROR">${esc(q.active_message || "inactive")}</span>`}
      <span class="muted">· ${q.admitted} admitted · ${q.pending.length} pending${q.cohort ? ` · cohort ${esc(q.cohort)}` : ""}</span></h2>
      <table><thead><tr><th>Flavor</th><th>Resource</th><th>Used</th><th>Quota</th><th style="width:30%">Usage</th></tr></thead><tbody>` +
    q.flavors.flatMap((f) => f.resources.filter((r) => r.nominal > 0).map((r) => `<tr><td>${esc(f.flavor)}</td><td>${esc(r.resource)}</td>` +
      `<td>${esc(r.used_text)}</td><td>${esc(r.nominal_text)}</td><td><div class="bar"><span style="width:${Math.min(100, 100 * r.used / r.nominal)}%"></span></div></td></tr>`)).join("") +
    `</tbody></table>
      <h2 style="margin-top:14px">Local queues</h2><div class="muted">${q.local_queues.map((l) => `${esc(l.namespace)}/${esc(l.name)} (${l.pending} pending, ${l.admitted} admitted)`).join(" · ") || "none"}</div>
      <h2 style="margin-top:14px">Pending, in admission order</h2>${q.pending.length ? pendingTable(q.pending) : `<div class="empty">Nothing is waiting.</div>`}
    </div>`).join("") || `<div class="empty">No ClusterQueues.</div>`);
}

async function nodesPage(main) {
  const nodes = await api("/api/v1/nodes");
  const t = nodes.totals;
  main.innerHTML = `<h1>Nodes</h1><div class="cards">` +
    [["Nodes", t.nodes], ["GPU nodes", t.gpu_nodes], ["GPUs", t.gpus], ["Allocated", t.gpus_used], ["Free", t.gpus_idle]]
      .map(([l, v]) => `<div class="card"><div class="value">${v}</div><div class="label">${l}</div></div>`).join("") + `</div>
    <div class="panel"><div class="chart"><canvas id="node-gpus"></canvas></div></div>
    <div class="panel"><table><thead><tr><th>Node</th><th>Ready</th><th>GPU</th><th>GPUs used</th><th>CPU requested</th><th>Memory requested</th><th>Held by</th></tr></thead><tbody>` +
    nodes.items.map((n) => `<tr><td><b>${esc(n.name)}</b>${n.taints.length ? `<div class="muted">${n.taints.map(esc).join(", ")}</div>` : ""}</td>` +
      `<td>${n.ready ? "yes" : "<b>no</b>"}${n.unschedulable ? " (cordoned)" : ""}</td><td>${esc(n.gpu_model || "—")}</td>` +
      `<td>${n.gpus_allocatable ? `${n.gpus_used} / ${n.gpus_allocatable}<div class="bar"><span style="width:${100 * n.gpus_used / n.gpus_allocatable}%"></span></div>` : "—"}</td>` +
      `<td>${n.cpu_requested.toFixed(1)} / ${n.cpu_allocatable.toFixed(0)}</td><td>${esc(n.memory_requested_text)} / ${esc(n.memory_allocatable_text)}</td>` +
      `<td>${n.pods.map((p) => esc(`${p.namespace}/${p.workload || p.name} (${p.gpus})`)).join("<br>") || "—"}</td></tr>`).join("") + `</tbody></table></div>`;
  const gpuNodes = nodes.items.filter((n) => n.gpus_allocatable > 0);
  chart("node-gpus", {
    type: "bar",
    data: { labels: gpuNodes.map((n) => n.name), datasets: [
      { label: "allocated", data: gpuNodes.map((n) => n.gpus_used), backgroundColor: "#4f46e5" },
      { label: "free", data: gpuNodes.map((n) => n.gpus_idle), backgroundColor: GPU_STATES.free.color }] },
    options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: "GPUs" } } } },
  });
}

// --- GPU usage (the ledger, docs/accounting.md) -------------------------------------------------

const USAGE_COLORS = ["#4f46e5", "#16a34a", "#f59e0b", "#dc2626", "#0891b2", "#9333ea", "#65a30d", "#db2777", "#64748b", "#ea580c"];

function hours(value) {
  return value >= 10 ? value.toFixed(1) : value.toFixed(2);
}

function usageTable(id, label, items) {
  if (!items.length) return `<div class="empty">No GPU time recorded in this window.</div>`;
  return `<table id="${id}"><thead><tr><th>${esc(label)}</th><th>Allocated</th><th>Used</th><th>Idle</th><th>Unknown</th>` +
    `<th>Reclaimed</th><th>Used %</th><th>Workloads</th><th>Declared users</th></tr></thead><tbody>` +
    items.map((r) => {
      const reclaimed = Object.values(r.reclaimed_gpu_hours).reduce((a, b) => a + b, 0);
      const share = r.allocated_gpu_hours ? `${Math.round(100 * r.used_gpu_hours / r.allocated_gpu_hours)}%` : "—";
      return `<tr data-key="${esc(r.key)}"><td><b>${esc(r.key)}</b></td><td>${hours(r.allocated_gpu_hours)}</td><td>${hours(r.used_gpu_hours)}</td>` +
        `<td>${hours(r.idle_gpu_hours)}</td><td>${hours(r.unknown_gpu_hours)}</td><td>${hours(reclaimed)}</td><td>${share}</td>` +
        `<td>${r.workloads}</td><td class="muted">${esc(r.declared_users.join(", ") || "—")}</td></tr>`;
    }).join("") + `</tbody></table>`;
}

function usageSeries(id, report) {
  // Allocated GPU-hours per hour, stacked by group: who held the GPUs when.
  const starts = [...new Set(report.series.map((p) => p.start))].sort((a, b) => a - b);
  const keys = report.items.map((r) => r.key);
  const at = new Map(report.series.map((p) => [`${p.start}|${p.key}`, p]));
  chart(id, {
    type: "bar",
    data: {
      labels: starts.map((t) => new Date(t * 1000).toISOString().slice(5, 16).replace("T", " ")),
      datasets: keys.map((key, n) => ({ label: key, backgroundColor: USAGE_COLORS[n % USAGE_COLORS.length],
        data: starts.map((t) => (at.get(`${t}|${key}`) || { allocated_gpu_hours: 0 }).allocated_gpu_hours) })),
    },
    options: { scales: { x: { stacked: true }, y: { stacked: true, beginAtZero: true, title: { display: true, text: "GPU-hours allocated" } } } },
  });
}

function usageSplit(id, report) {
  // Per group: allocated split into used, idle (held below the threshold), unknown and the rest (busy, not used).
  const items = report.items;
  chart(id, {
    type: "bar",
    data: {
      labels: items.map((r) => r.key),
      datasets: [
        { label: "used", data: items.map((r) => r.used_gpu_hours), backgroundColor: GPU_STATES.busy.color },
        { label: "idle", data: items.map((r) => r.idle_gpu_hours), backgroundColor: GPU_STATES.idle.color },
        { label: "unknown", data: items.map((r) => r.unknown_gpu_hours), backgroundColor: GPU_STATES.unknown.color },
        { label: "allocated, not used", backgroundColor: GPU_STATES.free.color,
          data: items.map((r) => Math.max(0, r.allocated_gpu_hours - r.used_gpu_hours - r.idle_gpu_hours - r.unknown_gpu_hours)) },
      ],
    },
    options: { indexAxis: "y", scales: { x: { stacked: true, beginAtZero: true, title: { display: true, text: "GPU-hours" } }, y: { stacked: true } } },
  });
}

async function usagePage(main, first) {
  if (!first && document.getElementById("usage-cards")) return;  // the ledger moves every checkpoint, not every event
  const since = state.usageSince || "7d";
  const [byUser, byQueue] = await Promise.all([
    api(`/api/v1/usage?groupBy=user&since=${since}&series=true`), api(`/api/v1/usage?groupBy=queue&since=${since}&series=true`)]);
  const total = (field) => byUser.items.reduce((n, r) => n + r[field], 0);
  const reclaimed = byUser.items.reduce((n, r) => n + Object.values(r.reclaimed_gpu_hours).reduce((a, b) => a + b, 0), 0);
  main.innerHTML = `<h1>GPU usage <select id="since">${["24h", "7d", "30d"].map((w) =>
      `<option ${w === since ? "selected" : ""}>${w}</option>`).join("")}</select>
      <a class="muted" style="font-size:13px" href="/api/v1/usage?groupBy=user&since=${since}&format=csv">CSV</a></h1>
    <div class="cards" id="usage-cards">${[["Allocated", total("allocated_gpu_hours")], ["Used", total("used_gpu_hours")],
      ["Idle", total("idle_gpu_hours")], ["Unknown", total("unknown_gpu_hours")], ["Reclaimed", reclaimed]].map(([label, value]) =>
      `<div class="card"><div class="value">${hours(value)}</div><div class="label">${label} GPU-hours</div></div>`).join("")}</div>
    <div class="grid">
      <div class="panel"><h2>Per user: used, idle, unknown</h2><div class="chart"><canvas id="usage-user-split"></canvas></div></div>
      <div class="panel"><h2>Per user over time (allocated)</h2><div class="chart"><canvas id="usage-user-time"></canvas></div></div>
      <div class="panel"><h2>Per queue: used, idle, unknown</h2><div class="chart"><canvas id="usage-queue-split"></canvas></div></div>
      <div class="panel"><h2>Per queue over time (allocated)</h2><div class="chart"><canvas id="usage-queue-time"></canvas></div></div>
    </div>
    <div class="panel"><h2>Top idle holders</h2>${byUser.top_idle.length ? `<table id="usage-idle"><thead><tr><th>Workload</th><th>User</th>` +
      `<th>Queue</th><th>Idle GPU-hours</th><th>Allocated GPU-hours</th><th>Idle preemption</th></tr></thead><tbody>` +
      byUser.top_idle.map((h) => `<tr><td>${esc(h.namespace)}/${esc(h.kind)}/${esc(h.name)}</td><td>${esc(h.user || "(unattributed)")}` +
        `${h.declared_user && h.declared_user !== h.user ? ` <span class="muted">(declared ${esc(h.declared_user)})</span>` : ""}</td>` +
        `<td>${esc(h.queue || "—")}</td><td>${hours(h.idle_gpu_hours)}</td><td>${hours(h.allocated_gpu_hours)}</td>` +
        `<td>${h.preemption_enabled ? "enabled" : "<b>off</b>"}</td></tr>`).join("") + `</tbody></table>`
      : `<div class="empty">Nothing held idle GPUs in this window.</div>`}</div>
    <div class="panel"><h2>Per user</h2>${usageTable("usage-users", "User", byUser.items)}</div>
    <div class="panel"><h2>Per queue</h2>${usageTable("usage-queues", "Queue", byQueue.items)}</div>`;
  resetCharts();
  usageSplit("usage-user-split", byUser);
  usageSeries("usage-user-time", byUser);
  usageSplit("usage-queue-split", byQueue);
  usageSeries("usage-queue-time", byQueue);
  document.getElementById("since").addEventListener("change", (event) => { state.usageSince = event.target.value; render(true); });
}

// --- routing and live updates -----------------------------------------------------------------

const PAGES = { "": overviewPage, workloads: workloadsPage, queues: queuesPage, nodes: nodesPage, usage: usagePage };

function route() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter(Boolean).map(decodeURIComponent);
  if (parts[0] === "workloads" && parts.length === 4) return { key: location.hash, render: (m, f) => workloadPage(m, f, parts.slice(1)), nav: "workloads" };
  const page = PAGES[parts[0] || ""] || overviewPage;
  return { key: parts[0] || "", render: page, nav: parts[0] || "overview" };
}

async function render(first) {
  const main = document.getElementById("main");
  const current = route();
  if (first) resetCharts();
  for (const a of document.querySelectorAll("header nav a")) a.classList.toggle("active", a.dataset.page === current.nav);
  try {
    await current.render(main, first);
    if (!document.body.dataset.ready) document.body.dataset.readyMs = String(Math.round(performance.now()));
    document.body.dataset.ready = "1";
  } catch (err) {
    if (first) main.innerHTML = `<div class="panel"><b>Could not load this page:</b> ${esc(err.message)}</div>`;
  }
}

function scheduleRefresh() {
  if (state.timer) return;
  state.timer = setTimeout(() => { state.timer = null; render(false); }, 300);
}

function connect() {
  const live = document.getElementById("live");
  const url = "/api/v1/stream" + (state.token ? `?access_token=${encodeURIComponent(state.token)}` : "");
  const source = new EventSource(url);
  source.addEventListener("overview", () => { live.textContent = "live"; live.classList.add("on"); scheduleRefresh(); });
  source.onerror = () => { live.textContent = "reconnecting…"; live.classList.remove("on"); };
}

window.addEventListener("hashchange", () => render(true));
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("save-token").addEventListener("click", () => {
    state.token = document.getElementById("token").value.trim();
    localStorage.setItem("kaiwoToken", state.token);
    document.getElementById("auth").hidden = true;
    render(true);
    connect();
  });
  render(true);
  connect();
});
