// abo dashboard: polls the JSON API and draws inline SVG. No external code, no CDN.
"use strict";
const API = "/api/v1";
const POLL_MS = Number(new URLSearchParams(location.search).get("interval")) || 1000;
const NS = "http://www.w3.org/2000/svg";
let current = null;

async function getJSON(path) {
  const r = await fetch(API + path, { credentials: "same-origin", cache: "no-store" });
  if (r.status === 401) { location.href = "/login"; throw new Error("unauthorized"); }
  if (!r.ok) throw new Error((await r.json()).error.message);
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

function bestSoFar(trials, direction) {
  const done = trials.filter((t) => t.state === "done" && t.value !== null)
    .sort((a, b) => (a.finished_at - b.finished_at) || (a.id - b.id));
  if (!done.length) return [];
  const t0 = Math.min(...trials.map((t) => t.created_at));
  const better = direction === "minimize" ? Math.min : Math.max;
  let best = done[0].value;
  return done.map((t, i) => { best = better(best, t.value); return { n: i + 1, secs: t.finished_at - t0, value: t.value, best, id: t.id }; });
}

function scale(lo, hi, a, b) {
  if (!(hi > lo)) { hi = lo + 1; lo = lo - 1; }
  return (v) => a + (v - lo) / (hi - lo) * (b - a);
}

function stepPlot(target, curve, xkey, label) {
  const W = 420, H = 240, L = 55, R = 10, T = 10, B = 30;
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-points": curve.length });
  if (!curve.length) {
    svg.appendChild(el("svg:text", { x: W / 2, y: H / 2, "text-anchor": "middle" }, "no completed trials yet"));
    target.replaceChildren(svg); return;
  }
  const xs = curve.map((p) => p[xkey]), ys = curve.map((p) => p.value).concat(curve.map((p) => p.best));
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
    const c = el("svg:circle", { class: "obs", cx: x(p[xkey]), cy: y(p.value), r: 2.5, "data-trial-id": p.id });
    c.appendChild(el("svg:title", {}, `trial ${p.id}: ${fmt(p.value)}`));
    svg.appendChild(c);
  }
  let d = `M${x(curve[0][xkey])},${y(curve[0].best)}`;
  for (let i = 1; i < curve.length; i++) d += `H${x(curve[i][xkey])}V${y(curve[i].best)}`;
  svg.appendChild(el("svg:path", { class: "best", d }));
  target.replaceChildren(svg);
}

function parallelPlot(target, study, trials) {
  const names = Object.keys(study.space);
  const done = trials.filter((t) => t.state === "done" && t.value !== null);
  const W = Math.max(480, 110 * (names.length + 1)), H = 260, T = 20, B = 30, L = 40, R = 70;
  const svg = el("svg:svg", { width: W, height: H, viewBox: `0 0 ${W} ${H}`, "data-lines": done.length });
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
  const vals = done.map((t) => t.value);
  const vlo = Math.min(...vals), vhi = Math.max(...vals);
  axes.push({ name: "value", pos: (v) => vhi > vlo ? (v - vlo) / (vhi - vlo) : 0.5, ticks: done.length ? [[0, fmt(vlo)], [1, fmt(vhi)]] : [] });
  const ax = (i) => L + i * (W - L - R) / Math.max(1, axes.length - 1);
  const yy = (u) => H - B - u * (H - T - B);
  const sign = study.direction === "minimize" ? 1 : -1;
  const order = done.slice().sort((a, b) => sign * (b.value - a.value)); // best drawn last
  order.forEach((t, rank) => {
    const q = order.length > 1 ? rank / (order.length - 1) : 1;
    const pts = axes.map((a, i) => `${ax(i)},${yy(a.name === "value" ? a.pos(t.value) : a.pos(t.params[a.name]))}`);
    const line = el("svg:polyline", { class: "pc", points: pts.join(" "), stroke: `hsl(215, 60%, ${80 - 55 * q}%)`, "data-trial-id": t.id });
    line.appendChild(el("svg:title", {}, `trial ${t.id}: ${fmt(t.value)}`));
    svg.appendChild(line);
  });
  axes.forEach((a, i) => {
    svg.appendChild(el("svg:line", { class: "axis", x1: ax(i), x2: ax(i), y1: yy(0), y2: yy(1) }));
    svg.appendChild(el("svg:text", { x: ax(i), y: H - 8, "text-anchor": "middle" }, a.name));
    for (const [u, label] of a.ticks) svg.appendChild(el("svg:text", { x: ax(i) + 3, y: yy(u) + 3 }, label));
  });
  target.replaceChildren(svg);
}

function table(study, trials) {
  const names = Object.keys(study.space);
  const head = ["id", "state", "value", "duration (s)", "strategy / arm", ...names];
  const thead = document.querySelector("#trials-table thead");
  thead.replaceChildren(el("tr", {}, undefined));
  head.forEach((h) => thead.firstChild.appendChild(el("th", {}, h)));
  const bestId = study.best ? study.best.id : null;
  const rows = trials.slice().sort((a, b) => b.id - a.id).map((t) => {
    const tr = el("tr", { "data-trial-id": t.id, "data-state": t.state, class: t.id === bestId ? "best" : "" });
    const arm = [(t.proposal || {}).strategy, (t.proposal || {}).arm].filter((v) => v !== undefined && v !== null).join(" / ");
    const cells = [t.id, t.state, t.value, t.duration, arm, ...names.map((n) => t.params[n])];
    cells.forEach((c, i) => tr.appendChild(el("td", i === 1 ? { class: "state-" + t.state } : {}, fmt(c))));
    return tr;
  });
  document.querySelector("#trials-table tbody").replaceChildren(...rows);
}

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
  document.getElementById("study-summary").textContent =
    `${study.strategy}, ${study.direction}; ${st.done} done, ${st.running} running, ${st.failed} failed, ${st.lost} lost` +
    (study.best ? `; best ${fmt(study.best.value)} (trial ${study.best.id})` : "");
  const curve = bestSoFar(trials, study.direction);
  stepPlot(document.getElementById("conv-trials"), curve, "n", "completed trials");
  stepPlot(document.getElementById("conv-time"), curve, "secs", "elapsed seconds");
  parallelPlot(document.getElementById("parallel"), study, trials);
  table(study, trials);
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
