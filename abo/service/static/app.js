// abo dashboard: polls the JSON API and draws inline SVG. No external code, no CDN.
"use strict";
const API = "/api/v1";
const POLL_MS = Number(new URLSearchParams(location.search).get("interval")) || 1000;
const NS = "http://www.w3.org/2000/svg";
let current = null;

async function getJSON(path) {
  const r = await fetch(API + path, { credentials: "same-origin", cache: "no-store" });
  if (r.status === 401) { location.href = "/login"; throw new Error("unauthorized"); }
  if (!r.ok) {
    const body = await r.json().catch(() => ({}));
    const e = new Error((body.error || {}).message || `HTTP ${r.status}`);
    e.status = r.status; e.field = (body.error || {}).field;
    throw e;
  }
  return r.json();
}

function el(tag, attrs = {}, text) {
  const e = tag.startsWith("svg:") ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

const fmt = (v) => v === null || v === undefined ? "" :
  typeof v === "number" ? (Number.isInteger(v) ? String(v) : v.toPrecision(5)) : String(v);

const constraintsOf = (study) => study.outcomes.filter((o) => o.kind === "constraint");

function feasible(t, constraints) {
  // abo's rule (abo.core.outcomes.feasible): every constraint's told value is finite and holds
  return constraints.every((c) => {
    const v = (t.values || {})[c.name];
    return typeof v === "number" && Number.isFinite(v) && (c.op === "<=" ? v <= c.bound : v >= c.bound);
  });
}

function atTarget(t, fidelity) {
  // abo's rule (abo.core.fidelity): with a fidelity, only trials at its target are results
  if (!fidelity) return true;
  const v = t.params[fidelity.parameter];
  return typeof v === "number" ? Math.abs(v - fidelity.target) <= 1e-12 * Math.max(1, Math.abs(v)) : v === fidelity.target;
}

const evalSeconds = (t) => {
  const s = (t.info || {}).eval_seconds;
  return typeof s === "number" ? s : (t.finished_at !== null ? t.finished_at - t.created_at : 0);
};

function bestSoFar(trials, direction, constraints, fidelity) {
  // done trials in completion order; the best runs over the feasible ones only (null before
  // one), and with a fidelity over those at its target; ``cost`` is the evaluation seconds
  // spent by every finished trial (stopped and failed ones too) when each one ended
  const finished = trials.filter((t) => ["done", "stopped", "failed"].includes(t.state) && t.finished_at !== null)
    .sort((a, b) => (a.finished_at - b.finished_at) || (a.id - b.id));
  const spentBy = new Map();
  let spent = 0;
  for (const t of finished) { spent += evalSeconds(t); spentBy.set(t.id, spent); }
  const done = trials.filter((t) => t.state === "done" && t.value !== null)
    .sort((a, b) => (a.finished_at - b.finished_at) || (a.id - b.id));
  const t0 = trials.length ? Math.min(...trials.map((t) => t.created_at)) : 0;
  const better = direction === "minimize" ? Math.min : Math.max;
  let best = null;
  const curve = done.map((t, i) => {
    const ok = feasible(t, constraints);
    const result = atTarget(t, fidelity);
    if (ok && result) best = best === null ? t.value : better(best, t.value);
    return { n: i + 1, secs: t.finished_at - t0, cost: spentBy.get(t.id) || 0, value: t.value, best,
      id: t.id, feasible: ok, result };
  });
  // failed trials have no value: marked on the time axis where they ended
  const failed = trials.filter((t) => t.state === "failed" && t.finished_at !== null)
    .map((t) => ({ secs: t.finished_at - t0, id: t.id, reason: t.reason }));
  return { curve, failed };
}

function scale(lo, hi, a, b) {
  if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }
  return (v) => a + (v - lo) / (hi - lo) * (b - a);
}

function stepPlot(target, { curve, failed }, xkey, label) {
  // feasible values are grey dots, infeasible ones red crosses; on the time axis, failed
  // trials are red ticks below the plot (they have no value)
  const W = 420, H = 240, L = 55, R = 10, T = 10, B = 30;
  const marks = xkey === "secs" ? failed : [];
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-points": curve.length,
    "data-lower": curve.filter((p) => p.result === false).length,
    "data-infeasible": curve.filter((p) => !p.feasible).length, "data-failed": marks.length });
  if (!curve.length && !marks.length) {
    svg.appendChild(el("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no completed trials yet"));
    target.replaceChildren(svg); return;
  }
  const xs = curve.map((p) => p[xkey]).concat(marks.map((m) => m.secs));
  const ys = curve.map((p) => p.value).concat(curve.filter((p) => p.best !== null).map((p) => p.best));
  if (!ys.length) ys.push(0);
  const x = scale(Math.min(0, ...xs), Math.max(...xs), L, W - R);
  const y = scale(Math.min(...ys), Math.max(...ys), H - B, T);
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  const [ylo, yhi] = [Math.min(...ys), Math.max(...ys)];
  for (const v of [ylo, (ylo + yhi) / 2, yhi]) {
    svg.appendChild(el("svg:line", { class: "grid", x1: L, x2: W - R, y1: y(v), y2: y(v) }));
    svg.appendChild(el("svg:text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
  }
  for (const v of [Math.min(0, ...xs), Math.max(...xs)])
    svg.appendChild(el("svg:text", { x: x(v), y: H - B + 14, "text-anchor": "middle" }, fmt(v)));
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, label));
  for (const p of curve) {
    const [cx, cy] = [x(p[xkey]), y(p.value)];
    const c = p.feasible ? el("svg:circle", { class: p.result === false ? "obs lower" : "obs", cx, cy, r: 2.5, "data-trial-id": p.id })
      : el("svg:path", { class: "obs infeasible", d: `M${cx - 3},${cy - 3}l6,6m0,-6l-6,6`, "data-trial-id": p.id });
    c.appendChild(el("svg:title", {}, `trial ${p.id}: ${fmt(p.value)}${p.feasible ? "" : " (infeasible)"}` +
      (p.result === false ? " (below the target fidelity)" : "")));
    svg.appendChild(c);
  }
  for (const m of marks) {
    const tick = el("svg:path", { class: "failed-mark", d: `M${x(m.secs)},${H - B + 2}v6`, "data-trial-id": m.id });
    tick.appendChild(el("svg:title", {}, `trial ${m.id} failed${m.reason ? ": " + m.reason : ""}`));
    svg.appendChild(tick);
  }
  const steps = curve.filter((p) => p.best !== null);
  if (steps.length) {
    let d = `M${x(steps[0][xkey])},${y(steps[0].best)}`;
    for (let i = 1; i < steps.length; i++) d += `H${x(steps[i][xkey])}V${y(steps[i].best)}`;
    if (curve.length) d += `H${x(curve[curve.length - 1][xkey])}`;
    svg.appendChild(el("svg:path", { class: "best", d }));
  }
  target.replaceChildren(svg);
}

const objectivesOf = (study) => study.outcomes.filter((o) => o.kind === "objective");

function measured(trials, objectives) {
  // done trials with every objective's value, in completion order
  return trials.filter((t) => t.state === "done" && objectives.every((o) => typeof (t.values || {})[o.name] === "number"))
    .sort((a, b) => (a.finished_at - b.finished_at) || (a.id - b.id));
}

function paretoPanel(a, b, done, front, staircase, constraints) {
  const W = 420, H = 300, L = 60, R = 10, T = 10, B = 34;
  const onFront = done.filter((t) => front.has(t.id));
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-points": done.length,
    "data-front": onFront.length, "data-x": a.name, "data-y": b.name });
  if (!done.length) {
    svg.appendChild(el("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no completed trials yet"));
    return svg;
  }
  const xs = done.map((t) => t.values[a.name]), ys = done.map((t) => t.values[b.name]);
  const x = scale(Math.min(...xs), Math.max(...xs), L, W - R), y = scale(Math.min(...ys), Math.max(...ys), H - B, T);
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [Math.min(...ys), Math.max(...ys)])
    svg.appendChild(el("svg:text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
  for (const v of [Math.min(...xs), Math.max(...xs)])
    svg.appendChild(el("svg:text", { x: x(v), y: H - B + 14, "text-anchor": "middle" }, fmt(v)));
  const label = (o) => `${o.name} (${o.direction === "minimize" ? "min" : "max"})`;
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, label(a)));
  svg.appendChild(el("svg:text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(T + H - B) / 2})` }, label(b)));
  if (staircase && onFront.length) {
    // the front's attainment line: better in the first objective first, each corner taking
    // the next point's first objective and the current point's second
    const better = a.direction === "minimize" ? 1 : -1;
    const pts = onFront.slice().sort((p, q) => better * (p.values[a.name] - q.values[a.name]));
    let d = `M${x(pts[0].values[a.name])},${y(pts[0].values[b.name])}`;
    for (const p of pts.slice(1)) d += `H${x(p.values[a.name])}V${y(p.values[b.name])}`;
    svg.appendChild(el("svg:path", { class: "front-line", d }));
  }
  const n = done.length;
  done.forEach((t, i) => { // front points drawn last, on top
    if (front.has(t.id)) return;
    svg.appendChild(paretoDot(t, i, n, a, b, x, y, false, feasible(t, constraints)));
  });
  done.forEach((t, i) => { if (front.has(t.id)) svg.appendChild(paretoDot(t, i, n, a, b, x, y, true, true)); });
  return svg;
}

function paretoDot(t, i, n, a, b, x, y, onFront, ok) {
  // coloured by completion order; an infeasible trial is a hollow red ring (never on the front)
  const q = n > 1 ? i / (n - 1) : 1;
  const c = el("svg:circle", { class: onFront ? "obs-mo front" : ok ? "obs-mo" : "obs-mo infeasible",
    cx: x(t.values[a.name]), cy: y(t.values[b.name]), r: onFront ? 4.5 : 3,
    fill: ok ? `hsl(${215 - 185 * q}, 70%, 50%)` : "none", "data-trial-id": t.id, "data-order": i + 1 });
  const vals = Object.entries(t.values).map(([k, v]) => `${k} ${fmt(v)}`).join(", ");
  const note = onFront ? "; on the front" : ok ? "" : "; infeasible";
  c.appendChild(el("svg:title", {}, `trial ${t.id} (${i + 1}. done): ${vals}${note}`));
  return c;
}

function paretoPlot(target, objectives, constraints, trials, front) {
  const done = measured(trials, objectives);
  const panels = [];
  for (let i = 0; i < objectives.length; i++)
    for (let j = i + 1; j < objectives.length; j++)
      panels.push(paretoPanel(objectives[i], objectives[j], done, front, objectives.length === 2, constraints));
  target.dataset.points = done.length;
  target.dataset.front = done.filter((t) => front.has(t.id)).length;
  target.dataset.infeasible = done.filter((t) => !feasible(t, constraints)).length;
  target.replaceChildren(...panels);
}

const INACTIVE_AT = -0.1; // where a trial crosses the axis of a parameter inactive in it

function parallelPlot(target, study, trials, front) {
  const names = Object.keys(study.space);
  const done = front === null ? trials.filter((t) => t.state === "done" && t.value !== null)
    : measured(trials, objectivesOf(study));
  const W = Math.max(480, 110 * (names.length + (front === null ? 1 : objectivesOf(study).length))), H = 260, T = 20, B = 30, L = 40, R = 70;
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-lines": done.length,
    "data-failed": trials.filter((t) => t.state === "failed").length });
  const axes = names.map((n) => {
    const p = study.space[n];
    if (p.type === "categorical") {
      const k = p.choices.length;
      return { name: n, pos: (v) => (p.choices.findIndex((c) => c === v) + 0.5) / k, ticks: p.choices.map((c, i) => [(i + 0.5) / k, String(c)]) };
    }
    const f = p.log ? Math.log : (v) => v;
    const lo = f(p.type === "int" ? p.low - 0.5 : p.low), hi = f(p.type === "int" ? p.high + 0.5 : p.high);
    return { name: n, pos: (v) => (f(v) - lo) / (hi - lo), ticks: [[0, fmt(p.low)], [1, fmt(p.high)]] };
  });
  // a conditional parameter's axis has a slot below it for the trials it is inactive in
  axes.forEach((a) => { if (study.space[a.name].when) a.ticks.push([INACTIVE_AT, "inactive"]); });
  const at = (a, t) => t.params[a.name] === undefined ? INACTIVE_AT : a.pos(t.params[a.name]);
  const valueAxis = (name, get) => {
    const vals = done.map(get), vlo = Math.min(...vals), vhi = Math.max(...vals);
    return { name, get, pos: (v) => vhi > vlo ? (v - vlo) / (vhi - vlo) : 0.5, ticks: done.length ? [[0, fmt(vlo)], [1, fmt(vhi)]] : [] };
  };
  const multi = front !== null;
  const params = axes.length;
  if (multi) for (const o of objectivesOf(study)) axes.push(valueAxis(o.name, (t) => t.values[o.name]));
  else axes.push(valueAxis("value", (t) => t.value));
  const ax = (i) => L + i * (W - L - R) / Math.max(1, axes.length - 1);
  const constraints = constraintsOf(study);
  const yy = (u) => H - B - u * (H - T - B);
  const sign = study.direction === "minimize" ? 1 : -1;
  // best drawn last: by value for one objective, the Pareto front last for several
  const order = multi ? done.filter((t) => !front.has(t.id)).concat(done.filter((t) => front.has(t.id)))
    : done.slice().sort((a, b) => sign * (b.value - a.value));
  order.forEach((t, rank) => {
    const q = multi ? (front.has(t.id) ? 1 : 0) : order.length > 1 ? rank / (order.length - 1) : 1;
    const pts = axes.map((a, i) => `${ax(i)},${yy(i >= params ? a.pos(a.get(t)) : at(a, t))}`);
    const ok = feasible(t, constraints);
    const line = el("svg:polyline", { class: ok ? "pc" : "pc infeasible", points: pts.join(" "),
      stroke: ok ? `hsl(215, 60%, ${80 - 55 * q}%)` : "hsl(0, 60%, 70%)", "data-trial-id": t.id });
    const said = multi ? Object.entries(t.values).map(([k, v]) => `${k} ${fmt(v)}`).join(", ") : fmt(t.value);
    line.appendChild(el("svg:title", {}, `trial ${t.id}: ${said}${ok ? "" : " (infeasible)"}`));
    svg.appendChild(line);
  });
  // failed trials have parameters and no value: dashed red lines across the parameter axes
  for (const t of trials.filter((t) => t.state === "failed")) {
    const pts = axes.slice(0, params).map((a, i) => `${ax(i)},${yy(at(a, t))}`);
    const line = el("svg:polyline", { class: "pc-failed", points: pts.join(" "), "data-trial-id": t.id });
    line.appendChild(el("svg:title", {}, `trial ${t.id} failed${t.reason ? ": " + t.reason : ""}`));
    svg.appendChild(line);
  }
  axes.forEach((a, i) => {
    svg.appendChild(el("svg:line", { class: "axis", x1: ax(i), x2: ax(i), y1: yy(0), y2: yy(1) }));
    svg.appendChild(el("svg:text", { x: ax(i), y: H - 8, "text-anchor": "middle" }, a.name));
    for (const [u, label] of a.ticks) svg.appendChild(el("svg:text", { x: ax(i) + 3, y: yy(u) + 3 }, label));
  });
  target.replaceChildren(svg);
}

const CURVE_COLOURS = { done: "#1f77b4", stopped: "#9467bd", running: "#7f7f7f", failed: "#d62728", lost: "#ff7f0e" };

function curvesPlot(target, reports, trials) {
  // one line per reporting trial (value against step), coloured by its state; a stopped
  // trial's curve ends in a cross where the study stopped it
  const W = 860, H = 260, L = 55, R = 10, T = 10, B = 30;
  const byTrial = new Map();
  for (const r of reports) {
    if (!byTrial.has(r.trial_id)) byTrial.set(r.trial_id, []);
    byTrial.get(r.trial_id).push(r);
  }
  const state = new Map(trials.map((t) => [t.id, t.state]));
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-curves": byTrial.size,
    "data-stopped": [...byTrial.keys()].filter((id) => state.get(id) === "stopped").length });
  const xs = reports.map((r) => r.step), ys = reports.map((r) => r.value);
  const x = scale(Math.min(0, ...xs), Math.max(...xs), L, W - R);
  const y = scale(Math.min(...ys), Math.max(...ys), H - B, T);
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [Math.min(...ys), Math.max(...ys)])
    svg.appendChild(el("svg:text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
  for (const v of [Math.min(0, ...xs), Math.max(...xs)])
    svg.appendChild(el("svg:text", { x: x(v), y: H - B + 14, "text-anchor": "middle" }, fmt(v)));
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "step"));
  for (const [id, curve] of byTrial) {
    const st = state.get(id) || "running";
    const colour = CURVE_COLOURS[st] || CURVE_COLOURS.running;
    const line = el("svg:polyline", { class: `curve curve-${st}`, "data-trial-id": id, stroke: colour,
      points: curve.map((r) => `${x(r.step)},${y(r.value)}`).join(" ") });
    line.appendChild(el("svg:title", {}, `trial ${id} (${st}): ${fmt(curve[curve.length - 1].value)} at step ${fmt(curve[curve.length - 1].step)}`));
    svg.appendChild(line);
    if (st === "stopped") {
      const [cx, cy] = [x(curve[curve.length - 1].step), y(curve[curve.length - 1].value)];
      svg.appendChild(el("svg:path", { class: "stop-mark", stroke: colour, "data-trial-id": id,
        d: `M${cx - 3},${cy - 3}l6,6m0,-6l-6,6` }));
    }
  }
  target.replaceChildren(svg);
}

function timelinePlot(target, trials) {
  // one lane per worker (the loop's host:pid, and /thread for a pool's threads) with a bar
  // per finished trial coloured by its state, then one lane per running trial (its worker is
  // known when it ends) from its creation to now: gaps are idle workers
  const W = 860, L = 150, R = 10, T = 6, B = 24, LANE = 16;
  const now = Date.now() / 1000;
  const lanes = new Map();
  const bars = [];
  for (const t of trials) {
    if (t.state === "running") continue;
    const start = (t.info || {}).started ?? t.created_at, end = (t.info || {}).finished ?? t.finished_at;
    if (typeof start !== "number" || typeof end !== "number") continue;
    const worker = String((t.info || {}).worker ?? "told by hand");
    if (!lanes.has(worker)) lanes.set(worker, lanes.size);
    bars.push({ t, start, end, worker });
  }
  const names = [...lanes.keys()].sort();
  names.forEach((n, i) => lanes.set(n, i));
  const running = trials.filter((t) => t.state === "running").sort((a, b) => a.id - b.id);
  running.forEach((t, i) => bars.push({ t, start: t.created_at, end: now, worker: `running ${i + 1}`, open: true }));
  const rows = names.length + running.length;
  const H = T + B + LANE * Math.max(1, rows);
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-lanes": names.length,
    "data-running": running.length, "data-bars": bars.length });
  if (!bars.length) {
    svg.appendChild(el("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no trials yet"));
    target.replaceChildren(svg); return;
  }
  const t0 = Math.min(...bars.map((b) => b.start)), t1 = Math.max(...bars.map((b) => b.end));
  const x = scale(t0, t1, L, W - R);
  const laneOf = (b) => b.open ? names.length + running.indexOf(b.t) : lanes.get(b.worker);
  [...names, ...running.map((_, i) => `running ${i + 1}`)].forEach((n, i) =>
    svg.appendChild(el("svg:text", { x: L - 4, y: T + LANE * i + LANE * 0.7, "text-anchor": "end" }, n.length > 26 ? "…" + n.slice(-25) : n)));
  for (const b of bars) {
    const y = T + LANE * laneOf(b) + 2;
    const rect = el("svg:rect", { class: `bar bar-${b.t.state}`, x: x(b.start), y, height: LANE - 4,
      width: Math.max(1, x(b.end) - x(b.start)), fill: CURVE_COLOURS[b.t.state] || "#999",
      "data-trial-id": b.t.id, "data-state": b.t.state, "data-worker": b.worker });
    rect.appendChild(el("svg:title", {}, `trial ${b.t.id} ${b.t.state}${b.open ? " (running)" : ` on ${b.worker}`}`));
    svg.appendChild(rect);
  }
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 6, "text-anchor": "middle" },
    `seconds (${fmt(t1 - t0)} from the first trial's start)`));
  target.replaceChildren(svg);
}

function table(study, trials, front) {
  const names = Object.keys(study.space);
  const objectives = front === null ? [] : objectivesOf(study).map((o) => o.name);
  const constraints = constraintsOf(study);
  const limits = constraints.map((c) => `${c.name} ${c.op} ${fmt(c.bound)}`);
  const head = ["id", "state", ...(front === null ? ["value"] : objectives), ...limits,
    ...(constraints.length ? ["feasible"] : []), "duration (s)", "strategy / arm", ...names];
  const thead = document.querySelector("#trials-table thead");
  thead.replaceChildren(el("tr", {}, undefined));
  head.forEach((h) => thead.firstChild.appendChild(el("th", {}, h)));
  const bestId = study.best ? study.best.id : null;
  const isBest = (t) => front === null ? t.id === bestId : front.has(t.id);
  const rows = trials.slice().sort((a, b) => b.id - a.id).map((t) => {
    const ok = t.state === "done" ? feasible(t, constraints) : null;
    const tr = el("tr", { "data-trial-id": t.id, "data-state": t.state,
      class: isBest(t) ? "best" : ok === false ? "infeasible" : "" });
    const arm = [(t.proposal || {}).strategy, (t.proposal || {}).arm].filter((v) => v !== undefined && v !== null).join(" / ");
    const told = front === null ? [t.value] : objectives.map((o) => (t.values || {})[o]);
    const held = constraints.map((c) => (t.values || {})[c.name]);
    const verdict = constraints.length ? [ok === null ? "" : ok ? "yes" : "no"] : [];
    const cells = [t.id, t.state, ...told, ...held, ...verdict, t.duration, arm, ...names.map((n) => t.params[n])];
    cells.forEach((c, i) => tr.appendChild(el("td", i === 1 ? { class: "state-" + t.state } : {}, fmt(c))));
    return tr;
  });
  document.querySelector("#trials-table tbody").replaceChildren(...rows);
}

// -- analysis panels (GET /studies/{name}/analysis): redrawn when the done count changes ------
const analysis = { study: null, name: null, created: null, key: null, busy: false, objective: null,
  x: null, y: null, picked: false, ticket: 0 };

async function analysisJSON(study, query) {
  // an analysis, or { error } when the server cannot compute it (too few trials, a bad
  // parameter): the panel then says why instead of drawing
  const q = new URLSearchParams(query);
  if (objectivesOf(study).length > 1) q.set("objective", analysis.objective);
  try {
    return await getJSON(`/studies/${encodeURIComponent(study.name)}/analysis?${q}`);
  } catch (e) {
    if (e.status === undefined) throw e; // the network: tried again at the next poll
    return { error: e.message };
  }
}

function note(target, text) {
  target.replaceChildren(el("p", { class: "note" }, text));
}

const orderColour = (i, n) => `hsl(${215 - 185 * (n > 1 ? i / (n - 1) : 1)}, 70%, 50%)`;

function importancePlot(target, rows) {
  // per parameter: the total Sobol index (light bar), the first-order one (dark, thinner),
  // eta² of the data (orange tick) and the lengthscale written beside
  const W = 420, L = 90, R = 80, T = 6, ROW = 24, B = 24, H = T + B + ROW * rows.length;
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-bars": rows.length });
  const x = scale(0, 1, L, W - R);
  for (const v of [0, 0.5, 1]) {
    svg.appendChild(el("svg:line", { class: "grid", x1: x(v), x2: x(v), y1: T, y2: H - B }));
    svg.appendChild(el("svg:text", { x: x(v), y: H - B + 14, "text-anchor": "middle" }, String(v)));
  }
  rows.forEach((r, i) => {
    const y0 = T + ROW * i;
    svg.appendChild(el("svg:text", { x: L - 4, y: y0 + ROW / 2 + 3, "text-anchor": "end" }, r.name));
    const total = el("svg:rect", { class: "imp-total", x: L, y: y0 + 3, height: ROW - 6,
      width: Math.max(0, x(r.total) - L), "data-name": r.name, "data-value": r.total });
    total.appendChild(el("svg:title", {}, `${r.name}: total Sobol ${fmt(r.total)}`));
    const first = el("svg:rect", { class: "imp-sobol", x: L, y: y0 + ROW / 2 - 4, height: 8,
      width: Math.max(0, x(r.sobol) - L), "data-name": r.name, "data-value": r.sobol });
    first.appendChild(el("svg:title", {}, `${r.name}: first-order Sobol ${fmt(r.sobol)}`));
    const tick = el("svg:line", { class: "imp-eta2", x1: x(r.eta2), x2: x(r.eta2), y1: y0 + 2, y2: y0 + ROW - 2,
      "data-name": r.name, "data-value": r.eta2 });
    tick.appendChild(el("svg:title", {}, `${r.name}: eta² of the data ${fmt(r.eta2)}`));
    svg.append(total, first, tick);
    svg.appendChild(el("svg:text", { x: W - R + 6, y: y0 + ROW / 2 + 3, class: "imp-ls" }, `ℓ ${r.lengthscale.toPrecision(3)}`));
  });
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 2, "text-anchor": "middle" }, "share of the variance"));
  target.replaceChildren(svg);
}

function slicePanel(s, objective) {
  const W = 270, H = 190, L = 56, R = 8, T = 8, B = 34;
  const n = s.points.length;
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-name": s.name, "data-points": n });
  if (!n) {  // a conditional parameter inactive in every analysed trial
    svg.appendChild(el("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, `${s.name}: inactive in every trial`));
    return svg;
  }
  const ys = s.points.map((p) => p.value);
  const x = scale(0, 1, L, W - R), y = scale(Math.min(...ys), Math.max(...ys), H - B, T);
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [Math.min(...ys), Math.max(...ys)])
    svg.appendChild(el("svg:text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, Number(v.toPrecision(3)).toString()));
  for (const [u, label] of s.ticks)
    svg.appendChild(el("svg:text", { x: x(u), y: H - B + 13, "text-anchor": "middle" }, label));
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, s.name));
  s.points.forEach((p, i) => {
    const [cx, cy] = [x(p.u), y(p.value)];
    const mark = p.feasible ? el("svg:circle", { class: "slice-obs", cx, cy, r: 3, fill: orderColour(i, n), "data-trial-id": p.trial_id })
      : el("svg:path", { class: "slice-obs infeasible", d: `M${cx - 3},${cy - 3}l6,6m0,-6l-6,6`, "data-trial-id": p.trial_id });
    mark.appendChild(el("svg:title", {}, `trial ${p.trial_id}: ${s.name} ${fmt(p.x)}, ${objective} ${fmt(p.value)}` +
      (p.feasible ? "" : " (infeasible)")));
    svg.appendChild(mark);
  });
  return svg;
}

const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];

function ramp(q) {
  // viridis, dark (0) to yellow (1)
  const t = Math.min(1, Math.max(0, q)) * (VIRIDIS.length - 1), i = Math.min(VIRIDIS.length - 2, Math.floor(t));
  const c = VIRIDIS[i].map((a, k) => Math.round(a + (VIRIDIS[i + 1][k] - a) * (t - i)));
  return `rgb(${c.join(",")})`;
}

function contourPlot(target, c, direction) {
  // the posterior mean as a grid of cells in the unit square of the two parameters (so a log
  // or integer axis is drawn as the model sees it), a colour bar, and the trials as dots
  const W = 560, H = 420, L = 60, R = 90, T = 10, B = 36;
  const n = c.u.length, h = n > 1 ? 1 / (n - 1) : 1;
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-x": c.x_name, "data-y": c.y_name,
    "data-points": c.points.length, "data-cells": n * c.z.length });
  const zs = c.z.flat(), zlo = Math.min(...zs), zhi = Math.max(...zs);
  const colour = (v) => ramp(zhi > zlo ? (v - zlo) / (zhi - zlo) : 0.5);
  const x = scale(0, 1, L, W - R), y = scale(0, 1, H - B, T);
  const lo = (u) => Math.max(0, u - h / 2), hi = (u) => Math.min(1, u + h / 2);
  c.z.forEach((row, j) => row.forEach((v, i) => {
    svg.appendChild(el("svg:rect", { class: "cell", x: x(lo(c.u[i])), y: y(hi(c.u[j])), fill: colour(v),
      width: x(hi(c.u[i])) - x(lo(c.u[i])) + 0.5, height: y(lo(c.u[j])) - y(hi(c.u[j])) + 0.5 }));
  }));
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const [u, label] of c.x_ticks)
    svg.appendChild(el("svg:text", { x: x(u), y: H - B + 13, "text-anchor": "middle" }, label));
  for (const [u, label] of c.y_ticks)
    svg.appendChild(el("svg:text", { x: L - 4, y: y(u) + 3, "text-anchor": "end" }, label));
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, c.x_name));
  svg.appendChild(el("svg:text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(T + H - B) / 2})` }, c.y_name));
  for (const p of c.points) {
    const dot = el("svg:circle", { class: "contour-obs", cx: x(p.u), cy: y(p.v), r: 3 });
    dot.appendChild(el("svg:title", {}, `${c.x_name} ${fmt(p.x)}, ${c.y_name} ${fmt(p.y)}: ${fmt(p.value)}`));
    svg.appendChild(dot);
  }
  const bx = W - R + 16, steps = 24, bh = (H - B - T) / steps; // the colour bar, low at the bottom
  for (let k = 0; k < steps; k++)
    svg.appendChild(el("svg:rect", { class: "cell", x: bx, y: H - B - (k + 1) * bh, width: 12, height: bh + 0.5,
      fill: ramp((k + 0.5) / steps) }));
  svg.appendChild(el("svg:text", { x: bx + 16, y: H - B }, fmt(zlo)));
  svg.appendChild(el("svg:text", { x: bx + 16, y: T + 8 }, fmt(zhi)));
  svg.appendChild(el("svg:text", { x: bx + 16, y: (T + H - B) / 2 }, direction === "minimize" ? "(min)" : "(max)"));
  const held = Object.entries(c.fixed).map(([k, v]) => `${k} ${fmt(v)}`).join(", ");
  svg.appendChild(el("svg:title", {}, held ? `others at the best trial: ${held}` : "posterior mean"));
  target.replaceChildren(svg);
}

function cvPlot(target, preds) {
  // leave-one-out predictions against the observed values, ±2 std bars, the diagonal y = x
  const W = 420, H = 300, L = 60, R = 10, T = 22, B = 34;
  const inside = preds.filter((p) => Math.abs(p.observed - p.predicted) <= 2 * p.std).length;
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-points": preds.length,
    "data-within": inside });
  const xs = preds.map((p) => p.observed);
  const ys = preds.flatMap((p) => [p.predicted - 2 * p.std, p.predicted + 2 * p.std]).concat(xs);
  const [lo, hi] = [Math.min(...xs), Math.max(...xs)];
  const x = scale(lo, hi, L, W - R), y = scale(Math.min(...ys), Math.max(...ys), H - B, T);
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: H - B, x2: W - R, y2: H - B }));
  svg.appendChild(el("svg:line", { class: "axis", x1: L, y1: T, x2: L, y2: H - B }));
  for (const v of [Math.min(...ys), Math.max(...ys)])
    svg.appendChild(el("svg:text", { x: L - 4, y: y(v) + 3, "text-anchor": "end" }, fmt(v)));
  for (const v of [lo, hi]) svg.appendChild(el("svg:text", { x: x(v), y: H - B + 13, "text-anchor": "middle" }, fmt(v)));
  svg.appendChild(el("svg:text", { x: (L + W - R) / 2, y: H - 4, "text-anchor": "middle" }, "observed"));
  svg.appendChild(el("svg:text", { x: 12, y: (T + H - B) / 2, "text-anchor": "middle",
    transform: `rotate(-90 12 ${(T + H - B) / 2})` }, "predicted (leave one out)"));
  svg.appendChild(el("svg:line", { class: "diagonal", x1: x(lo), y1: y(lo), x2: x(hi), y2: y(hi) }));
  for (const p of preds) {
    const bar = el("svg:line", { class: "cv-bar", x1: x(p.observed), x2: x(p.observed),
      y1: y(p.predicted - 2 * p.std), y2: y(p.predicted + 2 * p.std), "data-trial-id": p.trial_id });
    const dot = el("svg:circle", { class: "cv-point", cx: x(p.observed), cy: y(p.predicted), r: 3, "data-trial-id": p.trial_id });
    dot.appendChild(el("svg:title", {}, `trial ${p.trial_id}: observed ${fmt(p.observed)}, predicted ${fmt(p.predicted)} ± ${fmt(2 * p.std)}`));
    svg.append(bar, dot);
  }
  svg.appendChild(el("svg:text", { x: L + 4, y: 12 }, `${inside} of ${preds.length} within 2 std`));
  target.replaceChildren(svg);
}

const numericOf = (study) => Object.keys(study.space).filter((n) => study.space[n].type !== "categorical");

function analysisSetup(study) {
  // a new study: its objectives and numeric parameters in the selects, defaults again
  const objectives = objectivesOf(study);
  Object.assign(analysis, { name: study.name, created: study.created_at, key: null, objective: objectives[0].name,
    x: null, y: null, picked: false });
  document.getElementById("analysis-objective-row").hidden = objectives.length < 2;
  document.getElementById("analysis-objective").replaceChildren(...objectives.map((o) => el("option", { value: o.name }, o.name)));
  const numeric = numericOf(study);
  for (const id of ["contour-x", "contour-y"]) {
    document.getElementById(id).replaceChildren(...numeric.map((n) => el("option", { value: n }, n)));
    document.getElementById(id).hidden = numeric.length < 2;
  }
  for (const id of ["importance", "cv", "slices", "contour"]) note(document.getElementById(id), "computing…");
}

function contourDefaults(study, ranked) {
  // the two most important numeric parameters, until the user picks others
  if (analysis.picked) return;
  const numeric = numericOf(study);
  const order = (ranked || []).map((r) => r.name).filter((n) => numeric.includes(n));
  const pair = order.concat(numeric.filter((n) => !order.includes(n))).slice(0, 2);
  [analysis.x, analysis.y] = pair.length === 2 ? pair : [null, null];
  if (analysis.x) {
    document.getElementById("contour-x").value = analysis.x;
    document.getElementById("contour-y").value = analysis.y;
  }
}

async function drawContour(study) {
  const target = document.getElementById("contour");
  if (!analysis.x || !analysis.y) { note(target, "a contour needs two numeric parameters"); return; }
  const ticket = ++analysis.ticket; // a later choice of parameters wins over an earlier answer
  const c = await analysisJSON(study, { kind: "contour", x: analysis.x, y: analysis.y });
  if (ticket !== analysis.ticket || current !== study.name) return;
  if (c.error) note(target, c.error); else contourPlot(target, c.contour, c.direction);
}

async function refreshAnalysis(study) {
  // fetched again only when the done count (or the objective) changed, one round at a time:
  // each answer is a GP fit on the server (cached there by the same count)
  if (study.name !== analysis.name || study.created_at !== analysis.created) analysisSetup(study);
  analysis.study = study;
  const key = `${study.name}|${study.created_at}|${study.states.done}|${analysis.objective}`;
  if (analysis.busy || key === analysis.key) return;
  analysis.busy = true;
  const status = document.getElementById("analysis-status");
  status.textContent = "computing…";
  try {
    const stale = () => current !== study.name || analysis.name !== study.name;
    const imp = await analysisJSON(study, { kind: "importance" });
    if (stale()) return;
    if (imp.error) note(document.getElementById("importance"), imp.error);
    else importancePlot(document.getElementById("importance"), imp.importance);
    const sl = await analysisJSON(study, { kind: "slice" });
    if (stale()) return;
    const slices = document.getElementById("slices");
    if (sl.error) note(slices, sl.error);
    else slices.replaceChildren(...sl.slices.map((s) => slicePanel(s, sl.objective)));
    contourDefaults(study, imp.importance);
    await drawContour(study);
    if (stale()) return;
    const cv = await analysisJSON(study, { kind: "cv" });
    if (stale()) return;
    if (cv.error) note(document.getElementById("cv"), cv.error); else cvPlot(document.getElementById("cv"), cv.cv);
    analysis.key = key;
    status.textContent = sl.error ? "" : `(${sl.n_analysed} trials analysed, ${sl.objective})`;
  } finally {
    analysis.busy = false;
  }
}

document.getElementById("contour-x").addEventListener("change", (e) => {
  if (e.target.value === analysis.y) { analysis.y = analysis.x; document.getElementById("contour-y").value = analysis.y; }
  analysis.x = e.target.value; analysis.picked = true;
  if (current === analysis.name) drawContour(analysis.study).catch(() => {});
});
document.getElementById("contour-y").addEventListener("change", (e) => {
  if (e.target.value === analysis.x) { analysis.x = analysis.y; document.getElementById("contour-x").value = analysis.x; }
  analysis.y = e.target.value; analysis.picked = true;
  if (current === analysis.name) drawContour(analysis.study).catch(() => {});
});
document.getElementById("analysis-objective").addEventListener("change", (e) => {
  analysis.objective = e.target.value; analysis.key = null; analysis.picked = false; // drawn at the next poll
});

async function allTrials(name) {
  let out = [], offset = 0;
  while (offset !== null) {
    const page = await getJSON(`/studies/${encodeURIComponent(name)}/trials?offset=${offset}&limit=10000`);
    out = out.concat(page.trials); offset = page.next_offset;
  }
  return out;
}

async function refresh() {
  const { studies } = await getJSON("/studies");
  const list = document.getElementById("study-list");
  list.replaceChildren(...studies.map((s) => {
    const li = el("li"), a = el("a", { href: "#" + encodeURIComponent(s.name), class: s.name === current ? "active" : "" }, s.name);
    a.appendChild(el("small", {}, ` ${s.n_trials} trials`));
    li.appendChild(a); return li;
  }));
  const study = studies.find((s) => s.name === current);
  document.getElementById("study").hidden = !study;
  document.getElementById("empty").hidden = !!study;
  if (!study) return;
  const trials = await allTrials(study.name);
  document.getElementById("study-title").textContent = study.name;
  const st = study.states;
  const counts = `${st.done} done, ${st.running} running, ` +
    (st.stopped ? `${st.stopped} stopped, ` : "") + `${st.failed} failed, ${st.lost} lost`;
  const objectives = objectivesOf(study);
  const constraints = constraintsOf(study);
  const multi = objectives.length > 1;
  const feasibleSaid = constraints.length ? `; ${study.n_feasible || 0} feasible (${constraints.map((c) => `${c.name} ${c.op} ${fmt(c.bound)}`).join(", ")})` : "";
  refreshAnalysis(study).catch((e) => { document.getElementById("analysis-status").textContent = "error: " + e.message; });
  document.getElementById("convergence").hidden = multi;
  document.getElementById("curves-figure").hidden = true;
  document.getElementById("pareto-figure").hidden = !multi;
  document.getElementById("parallel-caption").textContent = multi
    ? "Parameters and objectives (parallel coordinates; the dark lines are the Pareto front; infeasible red, failed dashed red)"
    : "Parameters against value (parallel coordinates; darker lines are better; infeasible red, failed dashed red)";
  if (!multi) {
    document.getElementById("study-summary").textContent = `${study.strategy}, ${study.direction}; ${counts}` +
      feasibleSaid + (study.best ? `; best ${fmt(study.best.value)} (trial ${study.best.id})`
        : constraints.length && st.done ? "; no feasible trial yet" : "");
    // Everything is fetched before anything is drawn, so the panels of one refresh agree.
    const { reports } = await getJSON(`/studies/${encodeURIComponent(study.name)}/reports`);
    const fidelity = (study.spec || {}).fidelity || null;
    const curve = bestSoFar(trials, study.direction, constraints, fidelity);
    stepPlot(document.getElementById("conv-trials"), curve, "n", "completed trials");
    stepPlot(document.getElementById("conv-time"), curve, "secs", "elapsed seconds");
    document.getElementById("conv-cost-figure").hidden = !fidelity;
    if (fidelity) stepPlot(document.getElementById("conv-cost"), curve, "cost", "evaluation seconds spent");
    parallelPlot(document.getElementById("parallel"), study, trials, null);
    document.getElementById("curves-figure").hidden = !reports.length;
    if (reports.length) curvesPlot(document.getElementById("curves"), reports, trials);
    timelinePlot(document.getElementById("timeline"), trials);
    table(study, trials, null);
    return;
  }
  const path = `/studies/${encodeURIComponent(study.name)}`;
  const front = new Set((await getJSON(`${path}/best_trials`)).trials.map((t) => t.id));
  let volume = "";
  if (front.size) {
    const r = await fetch(API + path + "/hypervolume", { method: "POST", credentials: "same-origin", cache: "no-store",
      headers: { "Content-Type": "application/json" }, body: "{}" });
    if (r.ok) volume = `, hypervolume ${fmt((await r.json()).hypervolume)}`;
  }
  const said = objectives.map((o) => `${o.name} (${o.direction})`).join(", ");
  document.getElementById("study-summary").textContent =
    `${study.strategy}, ${said}; ${counts}${feasibleSaid}; Pareto front of ${front.size}${volume}`;
  paretoPlot(document.getElementById("pareto"), objectives, constraints, trials, front);
  parallelPlot(document.getElementById("parallel"), study, trials, front);
  timelinePlot(document.getElementById("timeline"), trials);
  table(study, trials, front);
}

async function loop() {
  current = decodeURIComponent(location.hash.slice(1)) || null;
  try {
    await refresh();
    document.getElementById("status").textContent = "updated " + new Date().toLocaleTimeString();
  } catch (e) {
    document.getElementById("status").textContent = "error: " + e.message;
  }
  setTimeout(loop, POLL_MS);
}
window.addEventListener("hashchange", () => { current = decodeURIComponent(location.hash.slice(1)) || null; refresh(); });
loop();
