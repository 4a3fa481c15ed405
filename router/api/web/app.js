// Pagoda's page: a chat playground on /v1/chat/completions and a cluster view of /metrics.
// Plain JS, no build step; served from the binary with a CSP that allows this origin only.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY_STORAGE = "pagoda-api-key";

// ---- The API key: typed once per tab, sent as a bearer header on every API call. ----

function authHeaders(extra = {}) {
  const key = sessionStorage.getItem(KEY_STORAGE) || "";
  return key ? { ...extra, Authorization: `Bearer ${key}` } : extra;
}

async function api(path, body) {
  const init = body === undefined
    ? { headers: authHeaders() }
    : { method: "POST", headers: authHeaders({ "Content-Type": "application/json" }),
        body: JSON.stringify(body) };
  const res = await fetch(path, init);
  if (!res.ok) throw await apiError(res);
  return res.json();
}

async function apiError(res) {
  let message = `HTTP ${res.status}`;
  try {
    const j = await res.json();
    if (j.error && j.error.message) message = j.error.message;
  } catch (_) { /* not JSON */ }
  if (res.status === 401) {
    $("api-key").classList.add("wanted");
    message += " (fill in the API key above)";
  }
  return new Error(message);
}

// ---- Chat ----

const chat = {
  messages: [],      // the conversation: {role, content, tool_calls?}
  controller: null,  // the call in flight's AbortController
};

function el(tag, className, text) {
  const e = document.createElement(tag);
  if (className) e.className = className;
  if (text !== undefined) e.textContent = text;
  return e;
}

function addBubble(role, text) {
  const bubble = el("div", `msg ${role}`);
  bubble.append(el("span", "role", role), el("div", "text", text));
  $("messages").append(bubble);
  bubble.scrollIntoView({ block: "end" });
  return bubble.querySelector(".text");
}

function numberOrUndefined(id, integer) {
  const v = $(id).value.trim();
  if (v === "") return undefined;
  const n = integer ? parseInt(v, 10) : parseFloat(v);
  return Number.isFinite(n) ? n : undefined;
}

function jsonField(id, name) {
  const v = $(id).value.trim();
  if (v === "") return undefined;
  try {
    return JSON.parse(v);
  } catch (e) {
    throw new Error(`${name} is not JSON: ${e.message}`);
  }
}

function requestMessages() {
  const system = $("system").value.trim();
  const out = system ? [{ role: "system", content: system }] : [];
  return out.concat(chat.messages);
}

function buildRequest() {
  const body = {
    model: $("model").value || undefined,
    messages: requestMessages(),
    temperature: numberOrUndefined("temperature", false),
    top_p: numberOrUndefined("top-p", false),
    max_tokens: numberOrUndefined("max-tokens", true),
    seed: numberOrUndefined("seed", true),
    stream: $("stream").checked,
  };
  if (body.stream) body.stream_options = { include_usage: true };
  const format = jsonField("response-format", "response_format");
  if (format !== undefined) body.response_format = format;
  const tools = jsonField("tools", "tools");
  if (tools !== undefined) body.tools = tools;
  return body;
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
}

function showUsage(usage, finish) {
  if (!usage) return;
  $("usage").textContent =
    `prompt ${usage.prompt_tokens} tokens, completion ${usage.completion_tokens}, ` +
    `total ${usage.total_tokens}` + (finish ? ` · finish_reason ${finish}` : "");
}

// The prompt as the chat template renders it: /tokenize (with messages) and /detokenize.
async function showRenderedPrompt(body) {
  try {
    const req = { model: body.model, messages: body.messages };
    if (body.tools) req.tools = body.tools;
    const tokens = await api("/tokenize", req);
    $("prompt-count").textContent = `(${tokens.count} tokens of ${tokens.max_model_len})`;
    const text = await api("/detokenize", { model: body.model, tokens: tokens.tokens });
    $("rendered-text").textContent = text.prompt;
  } catch (e) {
    $("rendered-text").textContent = `(cannot render: ${e.message})`;
  }
}

// Tool calls arrive in pieces (index, then name and argument fragments).
function mergeToolCalls(into, deltas) {
  for (const d of deltas || []) {
    const i = d.index ?? into.length;
    into[i] = into[i] || { id: d.id, type: "function", function: { name: "", arguments: "" } };
    if (d.id) into[i].id = d.id;
    if (d.function && d.function.name) into[i].function.name += d.function.name;
    if (d.function && d.function.arguments) into[i].function.arguments += d.function.arguments;
  }
}

function renderToolCalls(calls) {
  return calls.map((c) => `→ ${c.function.name}(${c.function.arguments})`).join("\n");
}

// Reads server-sent events from a fetch body: calls onData with each `data:` payload.
async function readEvents(body, onData) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.search(/\r?\n\r?\n/)) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, "");
      const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart()).join("\n");
      if (data && onData(data) === false) return;
    }
  }
}

async function send(event) {
  event.preventDefault();
  const text = $("prompt").value.trim();
  if (!text || chat.controller) return;
  let body;
  try {
    chat.messages.push({ role: "user", content: text });
    body = buildRequest();
  } catch (e) {
    chat.messages.pop();
    $("status").textContent = e.message;
    return;
  }
  $("prompt").value = "";
  const asked = addBubble("user", text).parentElement;
  const out = addBubble("assistant", "");
  out.parentElement.classList.add("streaming");
  const reply = { role: "assistant", content: "" };
  const toolCalls = [];
  let finish = null;
  chat.controller = new AbortController();
  setBusy(true);
  $("status").textContent = "waiting for the first token…";
  $("usage").textContent = "";
  showRenderedPrompt(body);
  const started = performance.now();
  try {
    const res = await fetch("/v1/chat/completions", {
      method: "POST",
      headers: authHeaders({ "Content-Type": "application/json" }),
      body: JSON.stringify(body),
      signal: chat.controller.signal,
    });
    if (!res.ok) throw await apiError(res);
    if (body.stream) {
      let events = 0;
      await readEvents(res.body, (data) => {
        if (data === "[DONE]") return false;
        out.parentElement.dataset.events = String(++events);
        const chunk = JSON.parse(data);
        if (chunk.error) throw new Error(chunk.error.message || "stream failed");
        for (const c of chunk.choices || []) {
          const delta = c.delta || {};
          if (delta.content) reply.content += delta.content;
          mergeToolCalls(toolCalls, delta.tool_calls);
          if (c.finish_reason) finish = c.finish_reason;
        }
        if (chunk.usage) showUsage(chunk.usage, finish);
        out.textContent = reply.content + (toolCalls.length ? "\n" + renderToolCalls(toolCalls) : "");
        $("status").textContent = `streaming… ${((performance.now() - started) / 1000).toFixed(1)} s`;
        return true;
      });
    } else {
      const j = await res.json();
      const c = j.choices[0];
      reply.content = c.message.content || "";
      mergeToolCalls(toolCalls, (c.message.tool_calls || []).map((t, i) => ({ index: i, ...t })));
      finish = c.finish_reason;
      out.textContent = reply.content + (toolCalls.length ? "\n" + renderToolCalls(toolCalls) : "");
      showUsage(j.usage, finish);
    }
    $("status").textContent = `done in ${((performance.now() - started) / 1000).toFixed(1)} s`;
  } catch (e) {
    $("status").textContent = e.name === "AbortError" ? "stopped" : `error: ${e.message}`;
    if (e.name !== "AbortError") out.parentElement.classList.add("failed");
  } finally {
    if (toolCalls.length) reply.tool_calls = toolCalls;
    if (reply.content || toolCalls.length) {
      chat.messages.push(reply);
    } else {
      // No answer: the question leaves the conversation, so the next call has no two user
      // turns in a row.
      chat.messages.pop();
      asked.classList.add("dropped");
      out.textContent = $("status").textContent === "stopped" ? "(stopped)" : "(no answer)";
    }
    out.parentElement.classList.remove("streaming");
    chat.controller = null;
    setBusy(false);
  }
}

function stop() {
  if (chat.controller) chat.controller.abort();
}

function clearChat() {
  stop();
  chat.messages = [];
  $("messages").textContent = "";
  $("usage").textContent = "";
  $("status").textContent = "";
  $("rendered-text").textContent = "";
  $("prompt-count").textContent = "";
}

const EXAMPLE_SCHEMA = {
  type: "json_schema",
  json_schema: {
    name: "character",
    schema: {
      type: "object",
      properties: { name: { type: "string" }, age: { type: "integer" } },
      required: ["name", "age"],
    },
  },
};

const EXAMPLE_TOOLS = [{
  type: "function",
  function: {
    name: "get_weather",
    description: "The weather in a city",
    parameters: {
      type: "object",
      properties: { city: { type: "string" } },
      required: ["city"],
    },
  },
}];

async function loadModels() {
  try {
    const list = await api("/v1/models");
    const select = $("model");
    select.textContent = "";
    for (const m of list.data) {
      const option = el("option", "", m.id);
      option.value = m.id;
      select.append(option);
    }
    cluster.model = list.data.length ? list.data[0].id : "";
  } catch (e) {
    $("status").textContent = `models: ${e.message}`;
  }
}

// ---- Cluster: /metrics (Prometheus text) every 2 s. ----

const cluster = { model: "", timer: null };

// {name: [{labels: {..}, value}]} of a Prometheus text exposition.
function parseMetrics(text) {
  const out = {};
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] || "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]] = l[2];
    (out[m[1]] = out[m[1]] || []).push({ labels, value: parseFloat(m[3]) });
  }
  return out;
}

function sum(metrics, name) {
  return (metrics[name] || []).reduce((s, x) => s + x.value, 0);
}

// A family's series by worker. Each model served has its own workers, numbered from 0: the key
// is the model's name, a tab, and the worker's id.
function byWorker(metrics, name) {
  const out = new Map();
  for (const x of metrics[name] || []) {
    if (x.labels.worker !== undefined) out.set(`${x.labels.model_name || ""}\t${x.labels.worker}`, x.value);
  }
  return out;
}

function formatCount(n) {
  if (!Number.isFinite(n)) return "–";
  if (n >= 1e9) return `${(n / 1e9).toFixed(1)} G`;
  if (n >= 1e6) return `${(n / 1e6).toFixed(1)} M`;
  if (n >= 1e4) return `${(n / 1e3).toFixed(1)} k`;
  return String(Math.round(n));
}

function percent(part, whole) {
  return whole > 0 ? `${(100 * part / whole).toFixed(0)}%` : "–";
}

function renderCluster(m) {
  const figures = [
    ["Workers", sum(m, "pagoda_num_workers")],
    ["Running", sum(m, "pagoda_num_requests_running")],
    ["Waiting", sum(m, "pagoda_num_requests_waiting")],
    ["Paused", sum(m, "pagoda_num_requests_paused")],
    ["Prompt tokens", sum(m, "pagoda_prompt_tokens_total")],
    ["Generated tokens", sum(m, "pagoda_generation_tokens_total")],
    ["Prefix hits", percent(sum(m, "pagoda_prefix_cache_hits_total"),
                            sum(m, "pagoda_prefix_cache_queries_total"))],
    ["Preemptions", sum(m, "pagoda_num_preemptions_total")],
    ["KV transfers (blocks)", sum(m, "pagoda_kv_transfer_blocks_total")],
    ["KV transferred", `${formatCount(sum(m, "pagoda_kv_transfer_bytes_total"))}B`],
    ["Transfer failures", sum(m, "pagoda_kv_transfer_failures_total")],
  ];
  const summary = $("cluster-summary");
  summary.textContent = "";
  for (const [name, value] of figures) {
    const box = el("div", "figure");
    box.append(el("span", "value", typeof value === "number" ? formatCount(value) : value),
               el("span", "name", name));
    summary.append(box);
  }
  const running = byWorker(m, "pagoda_worker_num_requests_running");
  const waiting = byWorker(m, "pagoda_worker_num_requests_waiting");
  const used = byWorker(m, "pagoda_worker_kv_blocks_used");
  const total = byWorker(m, "pagoda_worker_kv_blocks");
  const usage = byWorker(m, "pagoda_kv_cache_usage");
  const hits = byWorker(m, "pagoda_worker_prefix_cache_hits_total");
  const queries = byWorker(m, "pagoda_worker_prefix_cache_queries_total");
  const pulled = byWorker(m, "pagoda_worker_kv_transfer_blocks_in_total");
  const steps = byWorker(m, "pagoda_worker_step_seconds_count");
  const ids = [...new Set([...usage.keys(), ...running.keys()])].sort((a, b) => {
    const [modelA, idA] = a.split("\t"), [modelB, idB] = b.split("\t");
    return modelA === modelB ? idA - idB : modelA.localeCompare(modelB);
  });
  const body = $("workers").tBodies[0];
  body.textContent = "";
  for (const id of ids) {
    const row = el("tr", "worker");
    const bar = el("div", "bar");
    const fill = el("div", "fill");
    fill.style.width = `${Math.min(100, 100 * (usage.get(id) || 0))}%`;
    bar.append(fill);
    const kvUse = el("td");
    kvUse.append(bar, el("span", "", percent(used.get(id) || 0, total.get(id) || 0)));
    const [model, worker] = id.split("\t");
    row.append(el("td", "", worker), el("td", "", model || cluster.model),
               el("td", "", formatCount(running.get(id))), el("td", "", formatCount(waiting.get(id))),
               el("td", "", `${formatCount(used.get(id))} / ${formatCount(total.get(id))}`), kvUse,
               el("td", "", `${formatCount(hits.get(id))} / ${formatCount(queries.get(id))} tokens`),
               el("td", "", `${formatCount(pulled.get(id))} blocks`),
               el("td", "", formatCount(steps.get(id))));
    body.append(row);
  }
  if (!ids.length) {
    const row = el("tr");
    const cell = el("td", "empty", "no worker connected");
    cell.colSpan = 9;
    row.append(cell);
    body.append(row);
  }
}

async function refreshCluster() {
  try {
    const res = await fetch("/metrics", { headers: authHeaders() });
    if (!res.ok) throw await apiError(res);
    renderCluster(parseMetrics(await res.text()));
    $("cluster-status").textContent = `updated ${new Date().toLocaleTimeString()} (every 2 s)`;
  } catch (e) {
    $("cluster-status").textContent = `metrics: ${e.message}`;
  }
}

// ---- Wiring ----

function showTab(name) {
  for (const t of ["chat", "cluster"]) {
    $(`tab-${t}`).classList.toggle("active", t === name);
    $(`${t}-view`).hidden = t !== name;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const key = $("api-key");
  key.value = sessionStorage.getItem(KEY_STORAGE) || "";
  key.addEventListener("change", () => {
    sessionStorage.setItem(KEY_STORAGE, key.value);
    key.classList.remove("wanted");
    loadModels();
  });
  $("tab-chat").addEventListener("click", () => showTab("chat"));
  $("tab-cluster").addEventListener("click", () => showTab("cluster"));
  $("composer").addEventListener("submit", send);
  $("prompt").addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) $("composer").requestSubmit();
  });
  $("stop").addEventListener("click", stop);
  $("clear").addEventListener("click", clearChat);
  $("example-schema").addEventListener("click", () => {
    $("response-format").value = JSON.stringify(EXAMPLE_SCHEMA, null, 2);
    $("prompt").value = "Describe a character as JSON.";
  });
  $("example-tools").addEventListener("click", () => {
    $("tools").value = JSON.stringify(EXAMPLE_TOOLS, null, 2);
    $("prompt").value = "What is the weather in Paris?";
  });
  loadModels();
  refreshCluster();
  cluster.timer = setInterval(refreshCluster, 2000);
});
