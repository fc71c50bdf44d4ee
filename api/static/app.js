"use strict";
// The planner page: a form over POST /v1/plan, the resolved model, a ranked table (or why nothing fits),
// and details of the selected plan. No framework and no network beyond this service.

const $ = (sel) => document.querySelector(sel);
const MEMORY_KEYS = ["parameters", "gradients", "optimizer_states", "activations", "other"];
const MEMORY_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#bab0ac"];
const TIME_KEYS = ["compute", "recompute", "bubble", "tp_comm", "pp_comm", "dp_comm", "cp_comm", "ep_comm", "offload", "optimizer"];
// Where an error's `loc` should be shown: its last named part -> the field's element id
// (seq_length depends on the model form: see fieldFor).
const FIELD_FOR = {
  preset: "model-preset", hf_config: "hf-config", profile: "profile", overrides: "profile",
  num_gpus: "num_gpus", cluster: "num_gpus", global_batch_size: "global_batch_size", precision: "precision",
  train_tokens: "train_tokens", objective: "objective", top_k: "top_k", framework: "framework",
  framework_version: "framework_version",
  tp: "pin-tp", pp: "pin-pp", recompute: "recompute",
  num_layers: "shape", hidden_size: "shape", num_attention_heads: "shape", num_query_groups: "shape",
  head_dim: "shape", ffn_hidden_size: "shape", vocab_size: "shape", gated_mlp: "shape", moe: "shape",
};
const SHAPE_TEXT = [
  ["num_layers", "layers"], ["hidden_size", "hidden"], ["num_attention_heads", "heads"],
  ["num_query_groups", "query groups"], ["head_dim", "head dim"], ["ffn_hidden_size", "FFN"], ["vocab_size", "vocab"], ["seq_length", "seq length"],
];
let lastResponse = null;
let requestSeq = 0; // answers to a superseded submit are dropped

async function getJson(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return r.json();
}

function modelKind() { return document.querySelector('input[name="model-kind"]:checked').value; }

function showKind(kind) {
  for (const div of document.querySelectorAll(".model-kind")) div.hidden = div.dataset.kind !== kind;
  $("#seq-row").hidden = kind === "shape"; // the shape form has its own sequence length
}

async function init() {
  const [models, profiles] = await Promise.all([getJson("/v1/models"), getJson("/v1/hardware-profiles")]);
  const preset = $("#model-preset");
  for (const m of models) preset.add(new Option(`${m.id} (${m.model.num_layers} layers, h=${m.model.hidden_size})`, m.id));
  preset.value = "gpt3-175b";
  const profile = $("#profile");
  for (const p of profiles) profile.add(new Option(`${p.id}: ${p.gpu.name}, ${p.gpu.memory_gib} GiB`, p.id));
  profile.value = "dgx-a100-80gb";
  for (const radio of document.querySelectorAll('input[name="model-kind"]')) {
    radio.addEventListener("change", () => showKind(radio.value));
  }
  showKind(modelKind());
  $("#plan-form").addEventListener("submit", (e) => { e.preventDefault(); submitPlan(); });
  const calib = $("#calib-profile");
  for (const p of profiles) calib.add(new Option(p.id, p.id));
  const site = profiles.find((p) => p.id.includes("@"));
  calib.value = site ? site.id : profile.value;
  $("#calib-button").addEventListener("click", () => showCalibration(calib.value));
  calib.addEventListener("change", () => showCalibration(calib.value));
  showCalibration(calib.value);
}

function numberOrNull(id) {
  const v = $("#" + id).value.trim();
  return v === "" ? null : Number(v);
}

// "300B", "1.5T", "3e11", "300,000,000" -> a number of tokens; empty -> null.
function tokensOrNull(id) {
  const raw = $("#" + id).value.trim().replace(/[,_\s]/g, "");
  if (raw === "") return null;
  const m = /^(\d+(?:\.\d*)?(?:e[+-]?\d+)?)([kmbt]?)$/i.exec(raw);
  if (!m) throw { field: id, message: "a number of tokens, e.g. 300B, 1.5T or 3e11" };
  const scale = { "": 1, k: 1e3, m: 1e6, b: 1e9, t: 1e12 }[m[2].toLowerCase()];
  return Number(m[1]) * scale;
}

function modelInput(kind) {
  const seq = numberOrNull("model-seq-length");
  const withSeq = (m) => (seq === null ? m : { ...m, seq_length: seq });
  if (kind === "preset") return withSeq({ preset: $("#model-preset").value });
  if (kind === "hf") {
    try { return withSeq({ hf_config: JSON.parse($("#hf-config").value || "{}") }); }
    catch (err) { throw { field: "hf-config", message: "not valid JSON: " + err.message }; }
  }
  const shape = {};
  for (const id of ["num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "head_dim",
                    "ffn_hidden_size", "vocab_size", "seq_length"]) shape[id] = numberOrNull(id);
  shape.gated_mlp = $("#gated_mlp").checked;
  return shape;
}

function planRequest(kind) {
  const constraints = {};
  const tp = numberOrNull("pin-tp"), pp = numberOrNull("pin-pp");
  if (tp !== null) constraints.tp = tp;
  if (pp !== null) constraints.pp = pp;
  const recompute = [...document.querySelectorAll('input[name="recompute"]:checked')].map((x) => x.value);
  if (recompute.length < 3) constraints.recompute = recompute;
  const training = { global_batch_size: numberOrNull("global_batch_size"), precision: $("#precision").value };
  const tokens = tokensOrNull("train_tokens");
  if (tokens !== null) training.train_tokens = tokens;
  const topK = numberOrNull("top_k");
  const request = {
    model: modelInput(kind),
    cluster: { profile: $("#profile").value, num_gpus: numberOrNull("num_gpus") },
    training,
    constraints: Object.keys(constraints).length ? constraints : null,
    objective: $("#objective").value,
    framework: $("#framework").value,
  };
  const release = $("#framework_version").value.trim();
  if (release) request.framework_version = release;
  if (topK !== null) request.top_k = topK;
  return request;
}

function clearErrors() {
  for (const el of document.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of document.querySelectorAll(".invalid")) el.classList.remove("invalid");
}

// Nothing of an earlier answer may stay on screen under a new request.
function clearResults() {
  lastResponse = null;
  for (const id of ["#model-info", "#results", "#details", "#nothing-fits", "#idle"]) $(id).hidden = true;
  for (const id of ["#plans thead tr", "#plans tbody", "#summary", "#idle", "#diagnosis", "#least-memory", "#relax",
                    "#model-shape", "#model-params", "#model-sources dl", "#timeline", "#memory", "#breakdown",
                    "#launch", "#plan-facts"]) $(id).replaceChildren();
}

function showError(field, message) {
  let slot = document.querySelector(`.field-error[data-for="${field}"]`);
  if (!slot || slot.offsetParent === null) slot = document.querySelector('.field-error[data-for="form"]'); // hidden form part
  slot.textContent = slot.textContent ? `${slot.textContent}; ${message}` : message;
  const input = document.getElementById(field);
  if (input) input.classList.add("invalid");
}

// The model's own fields belong to whichever model form was sent.
const MODEL_FIELD = { preset: "model-preset", hf: "hf-config", shape: "shape" };

function fieldFor(loc, kind) {
  for (const p of [...loc].reverse()) {
    if (p === "seq_length") return kind === "shape" ? "shape" : "model-seq-length";
    if (p === "model" || FIELD_FOR[p] === "shape") return MODEL_FIELD[kind];
    if (typeof p === "string" && FIELD_FOR[p]) return FIELD_FOR[p];
  }
  return "form";
}

function showProblem(problem, kind) {
  const listed = problem.errors && problem.errors.length ? problem.errors : [{ loc: [], msg: problem.detail || problem.title }];
  // The API tells the model forms apart by their keys, so every error is about the form that was sent.
  for (const e of listed) {
    const path = e.loc.filter((p) => p !== "body").join(".");
    showError(fieldFor(e.loc, kind), path ? `${path}: ${e.msg}` : e.msg);
  }
}

async function submitPlan() {
  const seq = ++requestSeq;
  clearErrors();
  clearResults();
  const kind = modelKind();
  let request;
  try { request = planRequest(kind); } catch (err) {
    if (!err.field) throw err;
    showError(err.field, err.message);
    $("#status").textContent = "not sent: see the marked field";
    return;
  }
  $("#status").textContent = "planning...";
  $("#plan-form").setAttribute("aria-busy", "true");
  let response, body;
  try {
    response = await fetch("/v1/plan", {
      method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request),
    });
    body = await response.json().catch(() => null);
  } catch (err) {
    body = { detail: `the service did not answer (${err.message})` };
  }
  if (seq !== requestSeq) return;
  $("#plan-form").removeAttribute("aria-busy");
  if (!response || !response.ok || !body || !body.plans) {
    $("#status").textContent = response ? `refused (${response.status})` : "no answer";
    showProblem(body || { detail: `HTTP ${response.status} without a readable body` }, kind);
    return;
  }
  $("#status").textContent = (body.cached ? "done (from the service's cache)" : "done")
    + ` for ${body.search.framework} (${body.search.framework_version})`;
  lastResponse = body;
  renderModel(body.model, request.model);
  renderPlans(body);
}

function layoutText(x) {
  let s = `tp${x.tp} pp${x.pp} dp${x.dp}`;
  if (x.cp > 1) s += ` cp${x.cp}`;
  if (x.ep > 1) s += ` ep${x.ep}`;
  if (x.etp !== undefined && x.etp !== x.tp) s += ` etp${x.etp}`;
  if (x.vp > 1) s += ` vp${x.vp}`;
  // selective recompute shows the modules it reruns, names sorted, as the CLI's table does
  const modules = x.recompute === "selective" && x.recompute_modules ? `[${[...x.recompute_modules].sort().join(",")}]` : "";
  s += ` b${x.micro_batch_size} ${x.recompute}${modules}${x.sequence_parallel ? " sp" : ""} zero${x.zero_stage}`;
  return s;
}

function fmt(n, digits = 2) { return Number(n).toLocaleString("en-US", { maximumFractionDigits: digits }); }
// A time to 3 significant figures, as the CLI table shows it (the JSON keeps every digit).
function sig3(n) {
  const x = Number(n);
  if (!Number.isFinite(x) || x === 0) return String(x);
  if (Math.abs(x) >= 100) return Number(x.toPrecision(3)).toLocaleString("en-US");
  return x.toPrecision(3);
}

// 70553706496 -> "70.6 B"
function human(n) {
  for (const [v, unit] of [[1e12, "T"], [1e9, "B"], [1e6, "M"], [1e3, "K"]]) {
    if (Math.abs(n) >= v) return `${fmt(n / v, 1)} ${unit}`;
  }
  return fmt(n, 0);
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  node.append(...children);
  return node;
}

function renderModel(model, asked) {
  if (!model) return;
  const s = model.shape;
  let name = s.name;
  if (!name && asked.hf_config) {
    const arch = (asked.hf_config.architectures || [])[0] || asked.hf_config.model_type || "model";
    name = `Hugging Face config (${arch})`;
  }
  $("#model-name").textContent = name || "Model (explicit shape)";
  const parts = SHAPE_TEXT.map(([k, label]) => `${fmt(s[k], 0)} ${label}`);
  if (s.moe) parts.push(`MoE: ${s.moe.num_experts} experts, top-${s.moe.top_k}`);
  $("#model-shape").textContent = parts.join(" · ");
  const params = [el("b", {}, `${human(model.total_params)}`), " parameters in total, ",
    el("b", {}, `${human(model.active_params)}`), " active per token"];
  if (model.active_params === model.total_params) params.push(" (dense: all of them)");
  $("#model-params").replaceChildren(...params);
  // One entry per distinct source, listing the fields it gave: a preset's citation appears once.
  const bySource = new Map();
  for (const [field, source] of Object.entries(model.sources || {})) {
    if (!bySource.has(source)) bySource.set(source, []);
    bySource.get(source).push(field);
  }
  const dl = $("#model-sources dl");
  dl.replaceChildren();
  for (const [source, fields] of bySource) dl.append(el("dt", {}, source), el("dd", {}, fields.join(", ")));
  $("#model-sources summary").textContent = `Where each value comes from (${bySource.size} source${bySource.size === 1 ? "" : "s"})`;
  $("#model-info").hidden = false;
}

function columns(withRun) {
  const cols = ["#", "GPUs", "layout", "step time", "tokens/s", "MFU", "memory / GPU"];
  return withRun ? cols.concat(["days to train", "GPU-hours"]) : cols;
}

function planRow(p, label, withRun, cls, rank = label) {
  const e = p.estimate, mem = e.memory;
  const tr = document.createElement("tr");
  if (cls) tr.className = cls;
  tr.dataset.rank = rank;
  const cells = [label, p.num_gpus, layoutText(p.layout), `${sig3(e.step_time_s)} s`, fmt(e.tokens_per_s, 0),
    `${fmt(100 * e.mfu, 1)}%`, `${fmt(mem.peak_gib, 1)} / ${fmt(mem.usable_gib, 1)} GiB`];
  if (withRun) cells.push(e.days_to_train == null ? "" : e.days_to_train.toFixed(1), e.gpu_hours == null ? "" : human(e.gpu_hours));
  for (const c of cells) tr.appendChild(el("td", {}, String(c)));
  tr.addEventListener("click", () => selectPlan(p, tr));
  return tr;
}

function renderPlans(body) {
  $("#results").hidden = false;
  $("#details").hidden = true;
  const withRun = body.plans.some((p) => p.estimate.days_to_train != null);
  $("#plans thead tr").replaceChildren(...columns(withRun).map((c) => el("th", {}, c)));
  const tbody = $("#plans tbody");
  tbody.replaceChildren();
  body.plans.forEach((p) => {
    const row = planRow(p, p.equivalent ? `${p.rank} ≈` : String(p.rank), withRun, p.equivalent ? "equivalent" : "", String(p.rank));
    if (p.equivalent) row.title = `within ${fmt(100 * body.equivalent_within, 0)}% of the fastest plan: as good under the model's uncertainty`;
    tbody.appendChild(row);
  });
  // Two baselines: the rule of thumb on today's runtime, and as the paper ran it in 2021.
  const baselines = [[body.modern_baseline, "baseline today", "baseline-modern", "on today's runtime"],
    [body.baseline, "baseline 2021", "baseline", "as the paper ran it in 2021"]];
  const s = body.search;
  let summary = `${fmt(s.candidates, 0)} layouts searched, ${fmt(s.feasible, 0)} fit, ${fmt(s.elapsed_ms, 0)} ms.`;
  for (const [base, label, rank, how] of baselines) {
    if (!base) continue;
    if (base.plan) tbody.appendChild(planRow(base.plan, label, withRun, "baseline", rank));
    if (base.speedup_of_best) summary += ` The best plan is ${fmt(base.speedup_of_best, 2)}x faster than the rule of thumb ${how} (${base.rule}).`;
    else if (!base.plan) summary += ` The rule of thumb ${how} finds nothing that fits.`;
  }
  if (!s.complete) summary += " The search budget ran out: these are the best found so far.";
  if (body.plans.some((p) => p.equivalent)) {
    summary += ` ≈ marks plans within ${fmt(100 * body.equivalent_within, 0)}% of the fastest (the model's uncertainty), simplest first.`;
  }
  summary += ` Fits leave ${fmt(100 * body.memory_headroom, 0)}% of GPU memory free (memory headroom).`;
  summary += body.accuracy
    ? ` Checked against published runs: ${body.accuracy.text}.`
    : " The model was checked against no published run of this GPU kind and workload.";
  $("#idle").hidden = !body.idle_reason;
  $("#idle").textContent = body.idle_reason ? `${fmt(body.idle_gpus, 0)} GPUs left idle: ${body.idle_reason}.` : "";
  $("#summary").textContent = summary;
  $("#plans-wrap").hidden = tbody.children.length === 0;
  $("#results-title").textContent = body.plans.length ? "Ranked plans" : "No plan fits";
  renderDiagnosis(body.diagnosis, body.plans.length === 0);
  if (body.plans.length) selectPlan(body.plans[0], tbody.firstElementChild);
}

// Memory needed against the capacity, as a bar with the numbers written on it.
function gauge(needGib, capacityGib, label) {
  const top = Math.max(needGib, capacityGib);
  const over = needGib > capacityGib;
  const bar = el("div", { class: "gauge" },
    el("div", { class: "gauge-fill" + (over ? " over" : ""), style: `width:${(100 * needGib) / top}%` }),
    el("div", { class: "gauge-capacity", style: `left:${(100 * capacityGib) / top}%` }));
  const text = el("p", { class: "gauge-text" },
    `${label} ${needGib.toFixed(1)} GiB / ${fmt(capacityGib, 0)} GiB capacity (${fmt((100 * needGib) / capacityGib, 0)}%)`);
  return el("div", {}, bar, text);
}

function renderDiagnosis(d, nothingFits) {
  $("#nothing-fits").hidden = !(d || nothingFits);
  if (!d && !nothingFits) return;
  if (!d) { $("#diagnosis").textContent = "No plan was returned."; return; }
  $("#diagnosis").textContent = d.message;
  const least = $("#least-memory");
  if (d.least_memory_layout) {
    least.replaceChildren(
      el("p", {}, "Least-memory layout: ", el("code", { class: "layout" }, layoutText(d.least_memory_layout))),
      gauge(d.least_memory_gib, d.capacity_gib, "needs"));
  } else {
    least.replaceChildren(el("p", {}, `No layout was priced; capacity ${fmt(d.capacity_gib, 0)} GiB per GPU.`));
  }
  const relax = $("#relax");
  const why = {
    num_gpus: () => `: use ${fmt(d.more_gpus, 0)} GPUs (a layout fits there)`,
    memory_headroom: () => ": lower the memory headroom (the least-memory layout fits the whole GPU memory)",
    max_step_time_s: () => ": raise the step-time bound",
  };
  const legal = (k) => (d.legal_values && d.legal_values[k] && d.legal_values[k].length
    ? `; legal ${k}: ${d.legal_values[k].join(", ")}` : "");
  if (d.relax.length) {
    relax.replaceChildren(...d.relax.map((k) => el("li", {}, el("code", {}, k),
      why[k] ? why[k]() : `: drop this constraint (a layout fits without it)${legal(k)}`)));
  } else {
    relax.replaceChildren(el("li", { class: "none" },
      "nothing to relax: no constraint stands in the way; use more GPUs or GPUs with more memory"));
  }
}

async function selectPlan(p, row) {
  const seq = requestSeq;
  for (const tr of document.querySelectorAll("#plans tbody tr")) tr.classList.toggle("selected", tr === row);
  $("#details").hidden = false;
  $("#details-title").textContent = `Plan ${row.dataset.rank}: ${layoutText(p.layout)}`;
  renderFacts(p);
  renderMemory(p.estimate.memory);
  renderBreakdown(p.estimate);
  renderLaunch(p.launch);
  const e = p.estimate, x = p.layout;
  const query = new URLSearchParams({ pp: x.pp, vp: x.vp, num_microbatches: x.num_microbatches,
    forward_s: Math.max(e.microbatch_forward_s, 1e-9), backward_s: Math.max(e.microbatch_backward_s, 1e-9) });
  const r = await fetch("/v1/timeline.svg?" + query);
  const svg = r.ok ? await r.text() : "<p>no schedule to draw</p>";
  if (seq === requestSeq) $("#timeline").innerHTML = svg;
}

function renderFacts(p) {
  const e = p.estimate;
  const facts = [`${fmt(p.num_gpus, 0)} GPUs`, `step ${fmt(e.step_time_s, 3)} s`, `${fmt(e.tokens_per_s, 0)} tokens/s`,
    `MFU ${fmt(100 * e.mfu, 1)}%`];
  if (e.days_to_train != null) facts.push(`${e.days_to_train.toFixed(1)} days to train`);
  if (e.gpu_hours != null) facts.push(`${human(e.gpu_hours)} GPU-hours`);
  $("#plan-facts").textContent = facts.join(" · ");
}

function svgEl(tag, attrs, text) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}

function renderMemory(mem) {
  const width = 460, left = 10, barH = 30, top = 24, height = 64;
  const total = Math.max(mem.capacity_gib, mem.peak_gib) * 1.05;
  const scale = (width - 2 * left) / total;
  const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, class: "memory-bar", role: "img",
    "aria-label": `peak ${fmt(mem.peak_gib, 1)} GiB of ${fmt(mem.capacity_gib, 0)} GiB` });
  let x = left;
  MEMORY_KEYS.forEach((k, i) => {
    const w = mem.breakdown_gib[k] * scale;
    const rect = svgEl("rect", { x, y: top, width: Math.max(w, 0), height: barH, fill: MEMORY_COLORS[i], class: "segment", "data-kind": k });
    rect.appendChild(svgEl("title", {}, `${k}: ${fmt(mem.breakdown_gib[k], 1)} GiB`));
    svg.appendChild(rect);
    if (w > 34) {
      svg.appendChild(svgEl("text", { x: x + w / 2, y: top + barH / 2 + 4, "font-size": 11, "text-anchor": "middle",
        fill: "white", class: "segment-label" }, fmt(mem.breakdown_gib[k], 1)));
    }
    x += w;
  });
  const cx = left + mem.capacity_gib * scale;
  svg.appendChild(svgEl("line", { x1: cx, x2: cx, y1: top - 8, y2: top + barH + 8, stroke: "#b00020", "stroke-width": 2, class: "capacity-line" }));
  svg.appendChild(svgEl("text", { x: Math.min(cx - 4, width - 4), y: 13, "font-size": 12, "text-anchor": "end", class: "capacity-label" },
    `capacity ${fmt(mem.capacity_gib, 0)} GiB`));
  const over = mem.peak_gib > mem.capacity_gib;
  const totalLine = el("p", { class: "memory-total" + (over ? " over" : "") },
    el("b", {}, `peak ${mem.peak_gib.toFixed(1)} GiB`), ` / ${fmt(mem.capacity_gib, 0)} GiB capacity `,
    `(${fmt((100 * mem.peak_gib) / mem.capacity_gib, 0)}%, ${fmt(mem.capacity_gib - mem.peak_gib, 1)} GiB free;`
    + ` plans may fill ${fmt(mem.usable_gib, 1)} GiB, the rest is headroom)`);
  const table = el("table", { class: "memory-table" });
  MEMORY_KEYS.forEach((k, i) => {
    const v = mem.breakdown_gib[k];
    table.append(el("tr", { "data-kind": k },
      el("td", {}, el("span", { class: "swatch", style: `background:${MEMORY_COLORS[i]}` }), k.replace("_", " ")),
      el("td", { class: "num" }, `${fmt(v, 1)} GiB`),
      el("td", { class: "num" }, `${fmt(mem.peak_gib ? (100 * v) / mem.peak_gib : 0, 0)}%`)));
  });
  $("#memory").replaceChildren(totalLine, svg, table);
}

function renderBreakdown(e) {
  const table = document.createElement("table");
  const max = Math.max(...TIME_KEYS.map((k) => e.time_breakdown_s[k]));
  for (const k of TIME_KEYS) {
    const v = e.time_breakdown_s[k];
    const bar = el("span", { class: "bar", style: `width:${max ? (100 * v) / max : 0}%` });
    table.append(el("tr", {}, el("td", {}, k.replace("_", " ")), el("td", { class: "num" }, `${fmt(v, 3)} s`),
      el("td", { class: "bar-cell" }, bar)));
  }
  table.append(el("tr", {}, el("td", {}, el("b", {}, "step")), el("td", { class: "num" }, el("b", {}, `${fmt(e.step_time_s, 3)} s`)),
    el("td", {}, `bubble ${fmt(100 * e.bubble_fraction, 1)}%`)));
  $("#breakdown").replaceChildren(table);
}

function launchBlock(title, text, notes = []) {
  const button = el("button", { type: "button" }, "copy");
  const pre = el("pre", {}, text);
  button.addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(text); button.textContent = "copied"; }
    catch { button.textContent = "select and copy"; }
  });
  const list = notes.length ? [el("ul", { class: "launch-notes" }, ...notes.map((n) => el("li", {}, n)))] : [];
  return el("div", { class: "launch-block" }, el("h4", {}, title, button), ...list, pre);
}

// TorchTitan's CONFIG.toml, which its command reads for shapes it does not ship and splits its CLI cannot spell.
function tomlValue(v) {
  if (Array.isArray(v)) return `[${v.map(tomlValue).join(", ")}]`;
  return typeof v === "string" ? JSON.stringify(v) : String(v);
}

function toml(config) {
  return Object.entries(config)
    .map(([section, body]) => [`[${section}]`, ...Object.entries(body).map(([k, v]) => `${k} = ${tomlValue(v)}`)].join("\n"))
    .join("\n\n") + "\n";
}

function renderLaunch(launch) {
  const titan = launch.torchtitan;
  const blocks = [
    launchBlock(`Megatron-LM (${launch.megatron.framework_version})`, launch.megatron.command, launch.megatron.notes),
    launchBlock("Slurm sbatch", launch.megatron.script || ""),
    launchBlock(`TorchTitan (${titan.framework_version})`, titan.command, titan.notes),
    ...(titan.command.includes("CONFIG.toml") ? [launchBlock("TorchTitan CONFIG.toml", toml(titan.config))] : []),
    launchBlock(`NeMo (${launch.nemo.framework_version})`, launch.nemo.command, launch.nemo.notes),
  ];
  $("#launch").replaceChildren(...blocks);
}

// --- Site calibration: GET /v1/hardware-profiles/{id}/calibration and the profile's observations ---

let calibSeq = 0; // answers for a profile no longer selected are dropped

function pct(x) { return `${x >= 0 ? "+" : ""}${fmt(100 * x, 1)}%`; }

async function showCalibration(profileId) {
  const seq = ++calibSeq;
  $("#calib-status").textContent = "loading…";
  const id = encodeURIComponent(profileId);
  const [calib, observations] = await Promise.all([
    fetch(`/v1/hardware-profiles/${id}/calibration`).then((r) => (r.ok ? r.json() : null)),
    getJson(`/v1/observations?profile=${id}&limit=200`),
  ]);
  if (seq !== calibSeq) return;
  $("#calib-status").textContent = "";
  renderCalibration(profileId, calib, observations);
}

function renderCalibration(profileId, calib, observations) {
  const summary = $("#calib-summary");
  if (calib) {
    const r = calib.report;
    summary.textContent = `${calib.profile_id} version ${calib.version}, fitted on ${r.rows.length} observations`
      + ` by ${calib.owner} (${calib.created_at.slice(0, 10)}): mean |error| before ${fmt(100 * r.before.mean_abs, 1)}%,`
      + ` after ${fmt(100 * r.after.mean_abs, 1)}%, leave-one-out ${fmt(100 * r.loo.mean_abs, 1)}%`
      + (r.unidentified.length ? `; kept at the base's value: ${r.unidentified.join(", ")}` : "")
      + (calib.skipped.length ? `; ${calib.skipped.length} observation(s) skipped` : "") + ".";
    renderConstants(r.constants);
    renderRows(r.rows);
  } else {
    summary.textContent = `${profileId}: no stored calibration (built-in constants).`
      + ` ${observations.total} observation(s) name this profile.`;
    $("#calib-constants").replaceChildren();
    $("#calib-rows").replaceChildren();
  }
  const points = calib
    ? calib.report.rows.flatMap((row) => [
        { id: row.id, measured: row.measured_step_s, predicted: row.predicted_before_s, kind: "before" },
        { id: row.id, measured: row.measured_step_s, predicted: row.predicted_after_s, kind: "after" }])
    : observations.items.map((o) => (
        { id: o.id, measured: o.measured.step_time_s, predicted: o.predicted.step_time_s, kind: "arrival" }));
  renderScatter(points);
}

function renderConstants(constants) {
  const table = el("table", { class: "calib-constants" },
    el("tr", {}, ...["constant", "before", "after", "range", "fitted", "why"].map((h) => el("th", {}, h))));
  for (const c of constants) {
    const after = `${sig3(c.after)}${c.at_bound ? ` (at ${c.at_bound} bound)` : ""}`;
    table.append(el("tr", { "data-constant": c.name }, el("td", {}, `${c.name} (${c.unit})`),
      el("td", { class: "num" }, sig3(c.before)), el("td", { class: "num" }, after),
      el("td", { class: "num" }, `${sig3(c.lower)}–${sig3(c.upper)}`), el("td", {}, c.fitted ? "yes" : "no"),
      el("td", {}, c.reason)));
  }
  $("#calib-constants").replaceChildren(table);
}

function renderRows(rows) {
  const table = el("table", { class: "calib-rows" },
    el("tr", {}, ...["run", "layout", "measured s", "before s", "after s", "leave-one-out s", "before", "after", "leave-one-out"]
      .map((h) => el("th", {}, h))));
  for (const r of rows) {
    table.append(el("tr", {}, el("td", {}, r.id.slice(0, 12)), el("td", {}, el("code", { class: "layout" }, r.layout)),
      ...[r.measured_step_s, r.predicted_before_s, r.predicted_after_s, r.predicted_loo_s].map((v) => el("td", { class: "num" }, sig3(v))),
      ...[r.error_before, r.error_after, r.error_loo].map((v) => el("td", { class: "num" }, pct(v)))));
  }
  $("#calib-rows").replaceChildren(table);
}

const SCATTER_COLORS = { before: "#bab0ac", after: "#4e79a7", arrival: "#f28e2b" };
const SCATTER_LABELS = { before: "built-in constants", after: "calibrated", arrival: "predicted on arrival" };

// Measured (x) against predicted (y) step time on log axes, with the line y = x: a point above it is predicted slow.
function renderScatter(points) {
  const size = 320, pad = 44;
  if (!points.length) { $("#calib-scatter").replaceChildren(el("p", {}, "No observations to plot.")); return; }
  const values = points.flatMap((p) => [p.measured, p.predicted]);
  const lo = Math.log10(Math.min(...values)) - 0.05, hi = Math.log10(Math.max(...values)) + 0.05;
  const at = (v) => pad + ((Math.log10(v) - lo) / (hi - lo)) * (size - 2 * pad);
  const svg = svgEl("svg", { viewBox: `0 0 ${size} ${size}`, class: "calib-scatter", role: "img",
    "aria-label": `${points.length} points: predicted against measured step time` });
  svg.appendChild(svgEl("rect", { x: pad, y: pad, width: size - 2 * pad, height: size - 2 * pad, fill: "white", stroke: "#d0d4da" }));
  svg.appendChild(svgEl("line", { x1: pad, y1: size - pad, x2: size - pad, y2: pad, stroke: "#5b5b5b", "stroke-dasharray": "4 3", class: "identity" }));
  for (const p of points) {
    const dot = svgEl("circle", { cx: at(p.measured), cy: size - at(p.predicted), r: 4, fill: SCATTER_COLORS[p.kind],
      class: `point ${p.kind}`, "fill-opacity": 0.85 });
    dot.appendChild(svgEl("title", {}, `${p.id.slice(0, 12)}: measured ${sig3(p.measured)} s, ${SCATTER_LABELS[p.kind]} ${sig3(p.predicted)} s`));
    svg.appendChild(dot);
  }
  svg.appendChild(svgEl("text", { x: size / 2, y: size - 10, "font-size": 12, "text-anchor": "middle" }, "measured step (s, log)"));
  svg.appendChild(svgEl("text", { x: 12, y: size / 2, "font-size": 12, "text-anchor": "middle",
    transform: `rotate(-90 12 ${size / 2})` }, "predicted step (s, log)"));
  const kinds = [...new Set(points.map((p) => p.kind))];
  kinds.forEach((k, i) => {
    svg.appendChild(svgEl("circle", { cx: pad + 8, cy: 16 + 14 * i, r: 4, fill: SCATTER_COLORS[k] }));
    svg.appendChild(svgEl("text", { x: pad + 16, y: 20 + 14 * i, "font-size": 11 }, SCATTER_LABELS[k]));
  });
  $("#calib-scatter").replaceChildren(svg);
}

document.addEventListener("DOMContentLoaded", () => { init().catch((err) => showError("form", String(err))); });
