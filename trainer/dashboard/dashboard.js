// The live training page: polls data.json for the records it has not
// seen, and redraws the curves. What it drew is written back into the DOM
// (data-points, data-last on each canvas), so a headless browser can check
// the drawing itself, not the page's source.
"use strict";
const state = { records: [], next: 0, done: false };

// JSON has no NaN or infinity: data.json writes them as these strings
// (trainer/recordjson.go), and revive turns them back into numbers, in
// every field but the few that hold text.
const NONFINITE = new Map([["NaN", NaN], ["Infinity", Infinity], ["-Infinity", -Infinity]]);
const TEXT_FIELDS = new Set(["kind", "name", "backend"]);
function revive(key, v) {
  return typeof v === "string" && !TEXT_FIELDS.has(key) && NONFINITE.has(v) ? NONFINITE.get(v) : v;
}

// nonFinite is the records whose training loss is NaN or infinite, which
// no curve can draw.
function nonFinite() {
  return state.records.filter((r) => (r.kind === "train" || r.kind === "epoch") &&
    typeof r.loss === "number" && !Number.isFinite(r.loss));
}

function series(kind, pick) {
  const pts = [];
  for (const r of state.records) {
    if (r.kind !== kind) continue;
    const y = pick(r);
    if (y !== undefined && Number.isFinite(y)) pts.push([r.step, y]);
  }
  return pts;
}

function draw(canvas, lines) {
  const ctx = canvas.getContext("2d");
  const W = canvas.width, H = canvas.height, L = 64, R = 30, T = 10, B = 30;
  ctx.clearRect(0, 0, W, H);
  const all = lines.flatMap((l) => l.pts);
  if (all.length === 0) return;
  let x0 = Math.min(...all.map((p) => p[0])), x1 = Math.max(...all.map((p) => p[0]));
  let y0 = Math.min(...all.map((p) => p[1])), y1 = Math.max(...all.map((p) => p[1]));
  if (x1 === x0) x1 = x0 + 1;
  if (y1 === y0) { y0 -= 0.5; y1 += 0.5; }
  const sx = (x) => L + (x - x0) / (x1 - x0) * (W - L - R);
  const sy = (y) => H - B - (y - y0) / (y1 - y0) * (H - T - B);
  ctx.strokeStyle = "#999"; ctx.lineWidth = 1;
  ctx.beginPath(); ctx.moveTo(L, T); ctx.lineTo(L, H - B); ctx.lineTo(W - R, H - B); ctx.stroke();
  ctx.fillStyle = "#444"; ctx.font = "11px sans-serif";
  for (let i = 0; i <= 4; i++) {
    const y = y0 + (y1 - y0) * i / 4;
    ctx.fillText(Number(y.toPrecision(3)).toString().slice(0, 9), 2, sy(y) + 4);
    const x = x0 + (x1 - x0) * i / 4;
    ctx.fillText(String(Math.round(x)), sx(x) - 10, H - B + 15);
  }
  ctx.fillText("step", W - R - 30, H - 4);
  for (const l of lines) {
    if (l.pts.length === 0) continue;
    ctx.strokeStyle = l.color; ctx.fillStyle = l.color; ctx.lineWidth = 1.5;
    ctx.beginPath();
    l.pts.forEach((p, i) => (i ? ctx.lineTo(sx(p[0]), sy(p[1])) : ctx.moveTo(sx(p[0]), sy(p[1]))));
    ctx.stroke();
    if (l.pts.length <= 200) { // dots while they can be told apart
      for (const p of l.pts) { ctx.beginPath(); ctx.arc(sx(p[0]), sy(p[1]), 2, 0, 2 * Math.PI); ctx.fill(); }
    }
  }
}

// mark writes what a curve drew into the canvas's attributes:
// data-<prefix>points, data-<prefix>last (the last point's value) and
// data-<prefix>last-step.
function mark(canvas, pts, prefix) {
  canvas.setAttribute("data-" + prefix + "points", String(pts.length));
  if (pts.length) {
    const last = pts[pts.length - 1];
    canvas.setAttribute("data-" + prefix + "last", String(last[1]));
    canvas.setAttribute("data-" + prefix + "last-step", String(last[0]));
  }
}

function render(info) {
  const loss = series("train", (r) => r.loss);
  const evalLoss = series("eval", (r) => (r.eval ? r.eval.loss : undefined));
  const tput = series("train", (r) => r.samples_per_s);
  const lc = document.getElementById("loss"), tc = document.getElementById("throughput");
  draw(lc, [{ pts: loss, color: "#1f77b4" }, { pts: evalLoss, color: "#d62728" }]);
  draw(tc, [{ pts: tput, color: "#2ca02c" }]);
  mark(lc, loss, "");
  mark(lc, evalLoss, "eval-");
  mark(tc, tput, "");
  const bad = nonFinite();
  lc.setAttribute("data-nonfinite", String(bad.length));
  const alert = document.getElementById("alert");
  if (bad.length) {
    const b = bad[0];
    lc.setAttribute("data-nonfinite-step", String(b.step));
    alert.textContent = "loss is " + String(b.loss) + " at step " + b.step + " (epoch " + b.epoch + ")" +
      (b.kind === "train" ? ", in the mean over the steps since the previous record" : "") +
      "; the curve leaves out " + bad.length + " non-finite record" + (bad.length > 1 ? "s" : "");
  } else {
    alert.textContent = "";
  }

  const epochs = state.records.filter((r) => r.kind === "epoch");
  const lastEpoch = epochs[epochs.length - 1];
  const body = document.querySelector("#ranks tbody");
  body.textContent = "";
  if (lastEpoch && lastEpoch.ranks) {
    for (const rc of lastEpoch.ranks) {
      const tr = document.createElement("tr");
      for (const v of [rc.rank, rc.hidden_pct.toFixed(1), rc.wait_ms.toFixed(3), rc.comm_ms.toFixed(3)]) {
        const td = document.createElement("td");
        td.textContent = String(v);
        tr.appendChild(td);
      }
      body.appendChild(tr);
    }
  }
  const evals = state.records.filter((r) => r.kind === "eval");
  const le = evals[evals.length - 1];
  document.getElementById("evals").textContent = le
    ? "last evaluation (epoch " + le.epoch + "): " + Object.entries(le.eval).map(([k, v]) => k + "=" + v.toFixed(4)).join(" ")
    : "";
  const last = state.records[state.records.length - 1];
  document.getElementById("title").textContent = "goddp training: " + (info.name || "job");
  document.getElementById("info").textContent =
    "world " + info.world + ", backend " + info.backend + ", " + state.records.length + " records" +
    (last ? ", epoch " + last.epoch + ", step " + last.step : "") + (state.done ? " — finished" : " — running");
  document.body.setAttribute("data-records", String(state.records.length));
}

async function poll() {
  let res, text;
  try {
    res = await fetch("data.json?since=" + state.next, { cache: "no-store" });
    text = await res.text();
  } catch (e) {
    document.getElementById("info").textContent = "lost the training process: " + e;
    return;
  }
  if (!res.ok) {
    // The process is there but cannot answer (data.json's 500 names the
    // record it could not encode): say so, and ask again later.
    document.getElementById("info").textContent = "the training process answered " + res.status + ": " + text;
    setTimeout(poll, 5000);
    return;
  }
  try {
    const d = JSON.parse(text, revive);
    state.records.push(...d.records);
    state.next = d.next;
    state.done = d.done;
    render(d.info);
  } catch (e) {
    document.getElementById("info").textContent = "data.json could not be read: " + e;
    setTimeout(poll, 5000);
    return;
  }
  if (!state.done) setTimeout(poll, 1000);
}
poll();
