"use strict";
// The planner page: a form over POST /v1/plan, a ranked table, and details of the selected plan.
// No framework and no network beyond this service.

const $ = (sel) => document.querySelector(sel);
const MEMORY_KEYS = ["parameters", "gradients", "optimizer_states", "activations", "other"];
const MEMORY_COLORS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#bab0ac"];
const TIME_KEYS = ["compute", "recompute", "bubble", "tp_comm", "pp_comm", "dp_comm", "cp_comm", "ep_comm", "optimizer"];
// Where an error's `loc` should be shown: its last named part -> the field's element id.
const FIELD_FOR = {
  preset: "model-preset", hf_config: "hf-config", model: "model-preset", profile: "profile", overrides: "profile",
  num_gpus: "num_gpus", cluster: "num_gpus", global_batch_size: "global_batch_size", precision: "precision",
  tp: "pin-tp", pp: "pin-pp", recompute: "recompute",
  num_layers: "shape", hidden_size: "shape", num_attention_heads: "shape", num_query_groups: "shape",
  ffn_hidden_size: "shape", vocab_size: "shape", seq_length: "shape",
};
let lastResponse = null;

async function getJson(url) {
  const r = await fetch(url);
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return r.json();
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
    radio.addEventListener("change", () => {
      for (const div of document.querySelectorAll(".model-kind")) div.hidden = div.dataset.kind !== radio.value;
    });
  }
  $("#plan-form").addEventListener("submit", (e) => { e.preventDefault(); submitPlan(); });
}

function numberOrNull(id) {
  const v = $("#" + id).value.trim();
  return v === "" ? null : Number(v);
}

function modelInput() {
  const kind = document.querySelector('input[name="model-kind"]:checked').value;
  if (kind === "preset") return { preset: $("#model-preset").value };
  if (kind === "hf") {
    try { return { hf_config: JSON.parse($("#hf-config").value || "{}") }; }
    catch (err) { throw { field: "hf-config", message: "not valid JSON: " + err.message }; }
  }
  const shape = {};
  for (const id of ["num_layers", "hidden_size", "num_attention_heads", "num_query_groups", "ffn_hidden_size",
                    "vocab_size", "seq_length"]) shape[id] = numberOrNull(id);
  shape.gated_mlp = $("#gated_mlp").checked;
  return shape;
}

function planRequest() {
  const constraints = {};
  const tp = numberOrNull("pin-tp"), pp = numberOrNull("pin-pp");
  if (tp !== null) constraints.tp = tp;
  if (pp !== null) constraints.pp = pp;
  const recompute = [...document.querySelectorAll('input[name="recompute"]:checked')].map((x) => x.value);
  if (recompute.length < 3) constraints.recompute = recompute;
  return {
    model: modelInput(),
    cluster: { profile: $("#profile").value, num_gpus: numberOrNull("num_gpus") },
    training: { global_batch_size: numberOrNull("global_batch_size"), precision: $("#precision").value },
    constraints: Object.keys(constraints).length ? constraints : null,
    top_k: 10,
  };
}

function clearErrors() {
  for (const el of document.querySelectorAll(".field-error")) el.textContent = "";
  for (const el of document.querySelectorAll(".invalid")) el.classList.remove("invalid");
}

function showError(field, message) {
  const slot = document.querySelector(`.field-error[data-for="${field}"]`) || document.querySelector('.field-error[data-for="form"]');
  slot.textContent = message;
  const input = document.getElementById(field);
  if (input) input.classList.add("invalid");
}

function showProblem(problem) {
  const errors = problem.errors && problem.errors.length ? problem.errors : [{ loc: [], msg: problem.detail }];
  for (const e of errors) {
    const named = [...e.loc].reverse().find((p) => typeof p === "string" && FIELD_FOR[p]);
    showError(named ? FIELD_FOR[named] : "form", `${e.loc.filter((p) => p !== "body").join(".")}: ${e.msg}`);
  }
}

async function submitPlan() {
  clearErrors();
  let request;
  try { request = planRequest(); } catch (err) { showError(err.field, err.message); return; }
  $("#status").textContent = "planning...";
  const response = await fetch("/v1/plan", {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request),
  });
  const body = await response.json();
  $("#status").textContent = "";
  if (!response.ok) { showProblem(body); return; }
  lastResponse = body;
  renderPlans(body);
}

function layoutText(x) {
  let s = `tp${x.tp} pp${x.pp} dp${x.dp}`;
  if (x.cp > 1) s += ` cp${x.cp}`;
  if (x.ep > 1) s += ` ep${x.ep}`;
  if (x.vp > 1) s += ` vp${x.vp}`;
  s += ` b${x.micro_batch_size} ${x.recompute}${x.sequence_parallel ? " sp" : ""} zero${x.zero_stage}`;
  return s;
}

function fmt(n, digits = 2) { return Number(n).toLocaleString(undefined, { maximumFractionDigits: digits }); }

function planRow(p, label, cls) {
  const e = p.estimate, mem = e.memory;
  const tr = document.createElement("tr");
  if (cls) tr.className = cls;
  tr.dataset.rank = label;
  const cells = [label, p.num_gpus, layoutText(p.layout), `${fmt(e.step_time_s, 3)} s`, fmt(e.tokens_per_s, 0),
    `${fmt(100 * e.mfu, 1)}%`, `${fmt(mem.peak_gib, 1)} / ${fmt(mem.capacity_gib, 0)} GiB`];
  for (const c of cells) { const td = document.createElement("td"); td.textContent = c; tr.appendChild(td); }
  tr.addEventListener("click", () => selectPlan(p, tr));
  return tr;
}

function renderPlans(body) {
  $("#results").hidden = false;
  $("#details").hidden = true;
  const tbody = $("#plans tbody");
  tbody.replaceChildren();
  body.plans.forEach((p) => tbody.appendChild(planRow(p, String(p.rank))));
  const base = body.baseline;
  if (base.plan) tbody.appendChild(planRow(base.plan, "baseline", "baseline"));
  const s = body.search;
  let summary = `${fmt(s.candidates, 0)} layouts searched, ${fmt(s.feasible, 0)} fit, ${fmt(s.elapsed_ms, 0)} ms.`;
  if (base.speedup_of_best) summary += ` The best plan is ${fmt(base.speedup_of_best, 2)}x faster than the rule of thumb (${base.rule}).`;
  else if (!base.plan) summary += " The rule of thumb finds nothing that fits.";
  if (!s.complete) summary += " The search budget ran out: these are the best found so far.";
  $("#summary").textContent = summary;
  $("#diagnosis").textContent = body.diagnosis ? body.diagnosis.message : "";
  if (body.plans.length) selectPlan(body.plans[0], tbody.firstElementChild);
}

async function selectPlan(p, row) {
  for (const tr of document.querySelectorAll("#plans tbody tr")) tr.classList.toggle("selected", tr === row);
  $("#details").hidden = false;
  $("#details-title").textContent = `Plan ${row.dataset.rank}: ${layoutText(p.layout)}`;
  renderMemory(p.estimate.memory);
  renderBreakdown(p.estimate);
  renderLaunch(p.launch);
  const e = p.estimate, x = p.layout;
  const query = new URLSearchParams({ pp: x.pp, vp: x.vp, num_microbatches: x.num_microbatches,
    forward_s: Math.max(e.microbatch_forward_s, 1e-9), backward_s: Math.max(e.microbatch_backward_s, 1e-9) });
  const r = await fetch("/v1/timeline.svg?" + query);
  $("#timeline").innerHTML = r.ok ? await r.text() : "<p>no schedule to draw</p>";
}

function svgEl(tag, attrs, text) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, v);
  if (text !== undefined) el.textContent = text;
  return el;
}

function renderMemory(mem) {
  const width = 460, left = 10, barH = 30, top = 24;
  const total = Math.max(mem.capacity_gib, mem.peak_gib) * 1.05;
  const scale = (width - 2 * left) / total;
  const svg = svgEl("svg", { width, height: 120, viewBox: `0 0 ${width} 120`, class: "memory-bar" });
  let x = left;
  MEMORY_KEYS.forEach((k, i) => {
    const w = mem.breakdown_gib[k] * scale;
    const rect = svgEl("rect", { x, y: top, width: Math.max(w, 0), height: barH, fill: MEMORY_COLORS[i], class: "segment", "data-kind": k });
    rect.appendChild(svgEl("title", {}, `${k}: ${fmt(mem.breakdown_gib[k], 1)} GiB`));
    svg.appendChild(rect);
    x += w;
  });
  const cx = left + mem.capacity_gib * scale;
  svg.appendChild(svgEl("line", { x1: cx, x2: cx, y1: top - 8, y2: top + barH + 8, stroke: "#b00020", "stroke-width": 2, class: "capacity-line" }));
  svg.appendChild(svgEl("text", { x: Math.min(cx + 4, width - 120), y: 14, "font-size": 12, class: "capacity-label" },
    `capacity ${fmt(mem.capacity_gib, 0)} GiB`));
  svg.appendChild(svgEl("text", { x: left, y: top + barH + 22, "font-size": 12 }, `peak ${fmt(mem.peak_gib, 1)} GiB`));
  let lx = left;
  MEMORY_KEYS.forEach((k, i) => {
    const label = k.replace("_", " ");
    svg.appendChild(svgEl("rect", { x: lx, y: 92, width: 10, height: 10, fill: MEMORY_COLORS[i] }));
    svg.appendChild(svgEl("text", { x: lx + 13, y: 101, "font-size": 11 }, label));
    lx += 24 + 6.2 * label.length;
  });
  $("#memory").replaceChildren(svg);
}

function renderBreakdown(e) {
  const table = document.createElement("table");
  const max = Math.max(...TIME_KEYS.map((k) => e.time_breakdown_s[k]));
  for (const k of TIME_KEYS) {
    const v = e.time_breakdown_s[k];
    const tr = document.createElement("tr");
    tr.innerHTML = `<td>${k.replace("_", " ")}</td><td>${fmt(v, 3)} s</td><td><span class="bar" style="width:${max ? (200 * v) / max : 0}px"></span></td>`;
    table.appendChild(tr);
  }
  const total = document.createElement("tr");
  total.innerHTML = `<td><b>step</b></td><td><b>${fmt(e.step_time_s, 3)} s</b></td><td>bubble ${fmt(100 * e.bubble_fraction, 1)}%</td>`;
  table.appendChild(total);
  $("#breakdown").replaceChildren(table);
}

function launchBlock(title, text) {
  const div = document.createElement("div");
  div.className = "launch-block";
  const h = document.createElement("h4");
  h.textContent = title;
  const button = document.createElement("button");
  button.type = "button";
  button.textContent = "copy";
  const pre = document.createElement("pre");
  pre.textContent = text;
  button.addEventListener("click", async () => {
    try { await navigator.clipboard.writeText(text); button.textContent = "copied"; }
    catch { button.textContent = "select and copy"; }
  });
  h.appendChild(button);
  div.append(h, pre);
  return div;
}

function renderLaunch(launch) {
  const blocks = [
    launchBlock(`Megatron-LM (${launch.megatron.framework_version})`, launch.megatron.command),
    launchBlock("Slurm sbatch", launch.megatron.script || ""),
    launchBlock(`TorchTitan (${launch.torchtitan.framework_version})`, launch.torchtitan.command),
    launchBlock(`NeMo (${launch.nemo.framework_version})`, launch.nemo.command),
  ];
  $("#launch").replaceChildren(...blocks);
}

document.addEventListener("DOMContentLoaded", () => { init().catch((err) => showError("form", String(err))); });
