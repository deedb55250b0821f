// The foveate inspector: a client of the /v1 routes (upload, select, overlay, mosaic, crops, prompt).
// Plain JavaScript, no build step, nothing from another origin.
"use strict";

const $ = (id) => document.getElementById(id);
const num = new Intl.NumberFormat("en");
// pages: a document's page count (null for a picture); page: the page shown (1-based); picked: chosen by hand
const state = { id: null, width: 0, height: 0, seq: 0, request: null, urls: [], pages: null, page: 1, picked: false };

// -- talking to the API ----------------------------------------------------------------------------------------

function headers(extra) {
  const key = $("key").value.trim();
  return key ? { ...extra, Authorization: "Bearer " + key } : { ...extra };
}

// The API's one-line error: the JSON body's `detail` (a validation error's first message where it is a list).
async function failure(r) {
  let detail = `${r.status} ${r.statusText}`;
  try {
    const body = await r.json();
    if (typeof body.detail === "string") detail = body.detail;
    else if (Array.isArray(body.detail) && body.detail.length) detail = body.detail[0].msg || detail;
  } catch (_) { /* not JSON: keep the status line */ }
  return new Error(detail);
}

async function call(method, path, body, kind) {
  const json = body !== undefined && !(body instanceof Blob); // a Blob (the upload) goes as it is
  const init = { method, headers: headers(json ? { "Content-Type": "application/json" } : {}) };
  if (body !== undefined) init.body = json ? JSON.stringify(body) : body;
  const r = await fetch(path, init);
  if (!r.ok) throw await failure(r);
  return kind === "blob" ? r.blob() : r.json();
}

// -- the query -------------------------------------------------------------------------------------------------

function parseList(text, n, what) {
  return text.split(/[;\s]+/).filter(Boolean).map((item) => {
    const neg = n === 2 && item.startsWith("-");
    const vals = (neg ? item.slice(1) : item).split(",").map(Number);
    if (vals.length !== n || vals.some((v) => !Number.isFinite(v))) {
      throw new Error(`${what} must be ${n} numbers separated by commas, got '${item}'`);
    }
    return { vals, label: neg ? 0 : 1 };
  });
}

function query() {
  const points = parseList($("points").value, 2, "a point");
  return {
    text: $("question").value.trim() || null,
    points: points.map((p) => p.vals),
    point_labels: points.map((p) => p.label),
    boxes: parseList($("boxes").value, 4, "a box").map((b) => b.vals),
    budget: Number($("budget").value),
  };
}

function params(q, model) {
  const u = new URLSearchParams({ budget: String(q.budget) });
  if (state.pages) u.append("page", String(state.page)); // a document: the routes render one page (1-based)
  if (q.text) u.append("text", q.text);
  q.points.forEach((p, i) => u.append(q.point_labels[i] ? "point" : "neg_point", p.join(",")));
  q.boxes.forEach((b) => u.append("box", b.join(",")));
  if (model) u.append("model", model);
  return u.toString();
}

// -- upload and ask ---------------------------------------------------------------------------------------------

function showError(err) {
  $("error").textContent = err ? String(err.message || err) : "";
  $("error").hidden = !err;
}

function busy(text) {
  $("status").textContent = text;
  $("progress").hidden = !text.startsWith("Encoding");
}

async function upload(file) {
  if (!file) return;
  showError(null);
  state.id = null;
  $("picture").textContent = "";
  busy(`Encoding ${file.name}…`);
  try {
    const tex = await call("POST", "/v1/textures", file);
    const pages = tex.kind === "document" ? tex.pages : null;
    Object.assign(state, { id: tex.id, width: tex.width, height: tex.height, pages, page: 1, picked: false });
    $("marks").setAttribute("viewBox", `0 0 ${tex.width} ${tex.height}`);
    $("page").replaceChildren(...Array.from({ length: pages || 0 }, (_, i) =>
      el("option", { value: String(i + 1), textContent: `Page ${i + 1} of ${pages}` })));
    $("page-pick").hidden = !pages;
    busy("");
    $("picture").textContent = `${file.name}: ` + (pages ? `a document of ${pages} pages` : `${tex.width}×${tex.height} px`) +
      ", " + (tex.created ? `encoded in ${num.format(Math.round(tex.encode_ms))} ms` : "already stored (not encoded again)");
    await ask();
  } catch (err) {
    busy("");
    showError(err);
  }
}

async function ask() {
  if (!state.id) return showError(new Error("choose a picture first"));
  let q;
  try { q = query(); } catch (err) { return showError(err); }
  const seq = ++state.seq;
  const tid = "/v1/textures/" + state.id;
  const model = $("model").value.trim() || null;
  const t0 = performance.now();
  busy("Asking…");
  $("results").setAttribute("aria-busy", "true");
  try {
    // a document: one budget across its pages (points and boxes are in the shown page's pixels: that page only)
    const body = state.pages && (q.points.length || q.boxes.length) ? { ...q, page: state.page } : q;
    let sel = null, prompt = null;
    if (state.pages) { // the document's selection first: it says which page to show
      [sel, prompt] = await Promise.all([
        call("POST", tid + "/select", { ...body, explain: true }),
        q.text ? call("POST", tid + "/prompt", { ...body, model }) : Promise.resolve(null),
      ]);
      if (seq !== state.seq) return;
      showPage(sel);
    }
    const [s1, overlay, mosaic, crops, p1] = await Promise.all([
      sel || call("POST", tid + "/select", { ...q, explain: true }),
      call("GET", `${tid}/overlay.png?${params(q)}`, undefined, "blob"),
      call("GET", `${tid}/mosaic.png?${params(q)}`, undefined, "blob"),
      call("GET", `${tid}/crops?${params(q, model)}`),
      state.pages ? prompt : q.text ? call("POST", tid + "/prompt", { ...q, model }) : Promise.resolve(null),
    ]);
    [sel, prompt] = [s1, p1];
    if (seq !== state.seq) return; // a newer question answered first
    showError(null);
    show(q, sel, overlay, mosaic, crops, prompt);
    busy(`Answered in ${num.format(Math.round(performance.now() - t0))} ms (select ${sel.timings_ms.total.toFixed(1)} ms)`);
  } catch (err) {
    if (seq === state.seq) showError(err);
  } finally {
    if (seq === state.seq) $("results").removeAttribute("aria-busy");
  }
}

// -- showing the answer -----------------------------------------------------------------------------------------

// A document's selection: show the page chosen by hand, else the page with the most tokens.
function showPage(sel) {
  if (!state.picked && sel.page_selections.length) {
    const best = sel.page_selections.reduce((a, b) => (b.num_tokens > a.num_tokens ? b : a));
    state.page = best.page + 1;
  }
  const size = sel.pages[state.page - 1];
  Object.assign(state, { width: size.width, height: size.height });
  $("marks").setAttribute("viewBox", `0 0 ${size.width} ${size.height}`);
  $("page").value = String(state.page);
  const touched = sel.page_selections.map((p) => `${p.page + 1} (${num.format(p.num_tokens)})`);
  $("page-note").textContent = `tokens on page ${touched.join(", page ") || "none"}`;
}

function objectUrl(blob) {
  const url = URL.createObjectURL(blob);
  state.urls.push(url);
  return url;
}

function el(tag, { dataset, ...props }, ...children) {
  const node = Object.assign(document.createElement(tag), props);
  Object.assign(node.dataset, dataset || {});
  node.append(...children);
  return node;
}

function show(q, sel, overlay, mosaic, crops, prompt) {
  state.urls.splice(0).forEach((u) => URL.revokeObjectURL(u));
  $("overlay").src = objectUrl(overlay);
  $("mosaic").src = objectUrl(mosaic);
  const ledger = prompt ? prompt.ledger : crops;
  const doc = Boolean(state.pages && prompt); // the document's ledger: every page it touches
  const lines = doc ? ledger.pictures.filter((p) => p.page === state.page - 1) : ledger.pictures;
  $("pictures").replaceChildren(...crops.pictures.map((p, i) => el("div", {},
    el("img", { src: p.image, alt: `Picture ${i + 1}: ${p.kind}, ${p.sent[0]}×${p.sent[1]} px` }),
    el("p", { textContent: `${p.kind}: ${p.sent[0]}×${p.sent[1]} px sent, ${num.format(p.tokens)} tokens` +
      (lines[i] && lines[i].line ? ` · “${lines[i].line}”` : "") }))));
  const rows = [
    ["model", "Model", ledger.model],
    ["rule", "Token rule", ledger.rule],
    ["plan_tokens", "Tokens of the plan", num.format(ledger.plan_tokens)],
    ...(doc ? [["document_tokens", "Tokens of every page as a picture", num.format(ledger.document_tokens)]] : [
      ["image_tokens", "Tokens of the whole picture", num.format(ledger.image_tokens)],
      ["uniform_tokens", "Tokens of the uniform resize", num.format(ledger.uniform_tokens)]]),
    ["saving", "Saving", (ledger.saving * 100).toFixed(1) + " %"],
    ["pictures", "Pictures", String(ledger.pictures.length)],
    ["selected", "Selected tokens", `${num.format(sel.num_tokens)} of ${num.format(sel.budget)}`],
  ];
  $("ledger").tBodies[0].replaceChildren(...rows.map(([field, name, value]) =>
    el("tr", {}, el("th", { scope: "row", textContent: name }), el("td", { textContent: value, dataset: { field } }))));
  const evidence = (sel.evidence || []).slice(0, 8);
  $("evidence").replaceChildren(...(evidence.length ? evidence.map((e) => el("li", {
    textContent: (e.page !== undefined ? `Page ${e.page + 1}: ` : "") + `${e.text}` + (e.probability !== undefined ? ` · p = ${e.probability.toFixed(2)}` :
      e.value !== undefined ? ` · match ${e.value.toFixed(2)}` : "") + ` (${e.relation})`,
  })) : [el("li", { textContent: q.text ? "no text lines matched" : "no question: saliency only" })]));
  state.request = prompt ? prompt.request : null;
  $("download").disabled = !state.request;
  drawMarks(q);
  $("results").hidden = false;
}

function drawMarks(q) {
  const ns = "http://www.w3.org/2000/svg";
  const r = Math.max(state.width, state.height) / 90;
  const shapes = q.points.map(([x, y], i) => {
    const c = document.createElementNS(ns, "circle");
    Object.entries({ cx: x, cy: y, r, class: q.point_labels[i] ? "pos" : "neg" }).forEach(([k, v]) => c.setAttribute(k, v));
    return c;
  });
  q.boxes.forEach(([x0, y0, x1, y1]) => {
    const b = document.createElementNS(ns, "rect");
    Object.entries({ x: x0, y: y0, width: x1 - x0, height: y1 - y0, class: "box" }).forEach(([k, v]) => b.setAttribute(k, v));
    shapes.push(b);
  });
  $("marks").replaceChildren(...shapes);
}

// -- drawing prompts on the overlay -----------------------------------------------------------------------------

function imagePoint(ev) {
  const rect = $("overlay").getBoundingClientRect();
  return [Math.round(((ev.clientX - rect.left) / rect.width) * state.width),
          Math.round(((ev.clientY - rect.top) / rect.height) * state.height)];
}

function append(input, text) {
  input.value = (input.value.trim() + " " + text).trim();
}

function setUpDrawing() {
  let start = null;
  const stage = $("overlay").parentElement;
  stage.addEventListener("pointerdown", (ev) => { if (state.id) { start = imagePoint(ev); ev.preventDefault(); } });
  stage.addEventListener("pointerup", (ev) => {
    if (!start) return;
    const end = imagePoint(ev);
    const far = Math.abs(end[0] - start[0]) + Math.abs(end[1] - start[1]) > Math.max(state.width, state.height) / 100;
    if (far) {
      const box = [Math.min(start[0], end[0]), Math.min(start[1], end[1]), Math.max(start[0], end[0]), Math.max(start[1], end[1])];
      append($("boxes"), box.join(","));
    } else {
      const positive = document.querySelector("input[name=click]:checked").value === "1";
      append($("points"), (positive ? "" : "-") + start.join(","));
    }
    start = null;
    ask();
  });
}

// -- wiring -----------------------------------------------------------------------------------------------------

async function loadModels() {
  try {
    const rows = await call("GET", "/v1/vlm-models");
    const names = [...new Set(rows.map((r) => r.name).filter(Boolean))];
    $("models").replaceChildren(...names.map((n) => el("option", { value: n })));
    if (!$("model").value && names.length) $("model").value = names[0];
    showError(null);
  } catch (err) {
    showError(err);
  }
}

function download() {
  if (!state.request) return;
  const url = URL.createObjectURL(new Blob([JSON.stringify(state.request)], { type: "application/json" }));
  const a = el("a", { href: url, download: "request.json" });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function init() {
  $("key").value = sessionStorage.getItem("foveate-key") || "";
  $("key").addEventListener("change", () => { sessionStorage.setItem("foveate-key", $("key").value.trim()); loadModels(); });
  $("file").addEventListener("change", () => upload($("file").files[0]));
  const drop = $("drop");
  drop.addEventListener("dragover", (ev) => { ev.preventDefault(); drop.classList.add("over"); });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (ev) => {
    ev.preventDefault();
    drop.classList.remove("over");
    upload(ev.dataTransfer.files[0]);
  });
  $("ask").addEventListener("submit", (ev) => { ev.preventDefault(); ask(); });
  $("budget").addEventListener("input", () => { $("budget-out").textContent = $("budget").value; });
  for (const id of ["budget", "model", "points", "boxes"]) $(id).addEventListener("change", () => state.id && ask());
  $("page").addEventListener("change", () => {
    Object.assign(state, { page: Number($("page").value), picked: true });
    $("points").value = ""; // points and boxes are in one page's pixels
    $("boxes").value = "";
    ask();
  });
  $("clear").addEventListener("click", () => { $("points").value = ""; $("boxes").value = ""; if (state.id) ask(); });
  $("download").addEventListener("click", download);
  setUpDrawing();
  loadModels();
}

init();
