// Pagoda's OpenAI-compatible API driven by the official OpenAI Node SDK (pinned in
// package-lock.json), against a real pagoda-router with one local worker serving
// stories260K-hf with a chat template taken from the golden set (Phi-3.5's).
//
//   node --test openai_sdk_test.mjs   with PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const bin = process.env.PAGODA_BIN_DIR;
const shared = process.env.PAGODA_SHARED_DIR;
const work = fs.mkdtempSync(path.join(process.env.PAGODA_WORK_DIR ?? "/tmp", "openai-sdk-"));
const apiKey = "sdk-test-key";
let router, baseURL, client;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A copy of stories260K-hf whose tokenizer_config.json carries a real chat template.
function makeChatModel() {
  const model = path.join(work, "chat-model");
  fs.cpSync(path.join(shared, "models/stories260K-hf"), model, { recursive: true });
  const golden = JSON.parse(fs.readFileSync(path.join(shared, "golden/chat_templates.json")));
  const configPath = path.join(model, "tokenizer_config.json");
  fs.chmodSync(model, 0o755);
  const config = JSON.parse(fs.readFileSync(configPath));
  config.chat_template = golden.templates["microsoft-Phi-3.5-mini-instruct"];
  fs.rmSync(configPath);
  fs.writeFileSync(configPath, JSON.stringify(config));
  return model;
}

async function metric(series) {
  const text = await (await fetch(`${baseURL.replace("/v1", "")}/metrics`)).text();
  const line = text.split("\n").find((l) => !l.startsWith("#") && l.includes(series));
  return line === undefined ? NaN : Number(line.split(" ").pop());
}

async function until(check, what) {
  for (let i = 0; i < 200; ++i) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  assert.fail(`timed out waiting for ${what}`);
}

before(async () => {
  const [port, workerPort, httpPort] = [await freePort(), await freePort(), await freePort()];
  const log = fs.openSync(path.join(work, "router.log"), "w");
  router = spawn(path.join(bin, "pagoda-router"), [
    `--port=${port}`, `--worker-port=${workerPort}`, `--http-port=${httpPort}`,
    "--host=127.0.0.1", `--model=${makeChatModel()}`, "--max-model-len=257",
    "--spawn-workers=1", "--worker-kv-cache-mb=8", `--api-key=${apiKey}`,
    "--allowed-origins=https://app.example",
  ], { stdio: ["ignore", log, log] });
  baseURL = `http://127.0.0.1:${httpPort}/v1`;
  // Ready when /health says a worker is ready.
  await until(async () => {
    try {
      return (await fetch(`http://127.0.0.1:${httpPort}/health`)).status === 200;
    } catch {
      return false;
    }
  }, `the router's /health (log: ${work}/router.log)`);
  client = new OpenAI({ apiKey, baseURL, maxRetries: 0 });
});

after(() => {
  router?.kill("SIGKILL");
});

const chat = (content, extra = {}) => ({
  model: "chat-model",
  messages: [{ role: "user", content }],
  ...extra,
});

test("lists the served model", async () => {
  const models = await client.models.list();
  assert.deepEqual(models.data.map((m) => m.id), ["chat-model"]);
  assert.equal(models.data[0].max_model_len, 257);
  assert.equal(models.data[0].meta.n_vocab, 512);  // stories260K's vocabulary
});

test("chat, not streamed: the assistant's message, usage and a fingerprint", async () => {
  const r = await client.chat.completions.create(chat("Tell me a story.", { max_tokens: 12 }));
  assert.equal(r.object, "chat.completion");
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, "assistant");
  assert.ok(r.choices[0].message.content.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, "number");
  assert.match(r.system_fingerprint, /^fp_/);
});

test("chat, streamed: deltas add up to the same text as not streamed", async () => {
  const ask = chat("Once upon a time", { max_tokens: 20, temperature: 0 });
  const whole = await client.chat.completions.create(ask);
  const stream = await client.chat.completions.create({
    ...ask, stream: true, stream_options: { include_usage: true },
  });
  let text = "", role, finish, usage;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      role ??= c.delta.role;
      text += c.delta.content ?? "";
      finish ??= c.finish_reason ?? undefined;
    }
  }
  assert.equal(role, "assistant");
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  assert.equal(usage.completion_tokens, whole.usage.completion_tokens);
});

test("completions, streamed and not, with n = 2", async () => {
  const r = await client.completions.create({
    model: "chat-model", prompt: "Once upon a time", max_tokens: 8, n: 2, seed: 5,
  });
  assert.equal(r.object, "text_completion");
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1]);
  assert.equal(r.usage.completion_tokens, 16);
  const stream = await client.completions.create({
    model: "chat-model", prompt: "Once upon a time", max_tokens: 8, n: 2, seed: 5, stream: true,
  });
  const texts = ["", ""];
  for await (const chunk of stream) for (const c of chunk.choices) texts[c.index] += c.text;
  assert.deepEqual(texts, r.choices.map((c) => c.text), "the same seed, the same samples");
});

test("max_tokens and stop", async () => {
  const ask = { model: "chat-model", prompt: "Once upon a time", temperature: 0 };
  const long = await client.completions.create({ ...ask, max_tokens: 30 });
  assert.equal(long.usage.completion_tokens, 30);
  assert.equal(long.choices[0].finish_reason, "length");
  const words = long.choices[0].text.trim().split(" ");
  const stop = ` ${words[3]}`;
  const cut = await client.completions.create({ ...ask, max_tokens: 30, stop: [stop] });
  assert.equal(cut.choices[0].finish_reason, "stop");
  assert.equal(cut.choices[0].text, long.choices[0].text.slice(0, long.choices[0].text.indexOf(stop)));
});

test("logprobs on both endpoints", async () => {
  const c = await client.completions.create({
    model: "chat-model", prompt: "Once upon a time", max_tokens: 6, logprobs: 2, temperature: 0,
  });
  const lp = c.choices[0].logprobs;
  assert.equal(lp.tokens.length, 6);
  assert.equal(lp.token_logprobs.length, 6);
  assert.equal(lp.tokens.join(""), c.choices[0].text);
  for (const top of lp.top_logprobs) assert.ok(Object.keys(top).length <= 2);
  for (const x of lp.token_logprobs) assert.ok(x <= 0);
  const r = await client.chat.completions.create(
    chat("Hi", { max_tokens: 5, logprobs: true, top_logprobs: 3 }));
  assert.equal(r.choices[0].logprobs.content.length, r.usage.completion_tokens);
  for (const t of r.choices[0].logprobs.content) {
    assert.equal(t.top_logprobs.length, 3);
    assert.deepEqual(t.bytes, [...Buffer.from(t.token)]);
  }
});

// lm-evaluation-harness's log-likelihood request: the prompt echoed with its log
// probabilities (the first null), max_tokens 0 (or 1, the extra token then last).
test("echo with logprobs: the prompt's log probabilities, streamed and not", async () => {
  const ask = { model: "chat-model", prompt: "Once upon a time there was", echo: true,
    logprobs: 1, temperature: 0 };
  const zero = await client.completions.create({ ...ask, max_tokens: 0 });
  const lp = zero.choices[0].logprobs;
  assert.equal(zero.choices[0].text, ask.prompt);
  assert.equal(zero.usage.completion_tokens, 0);
  assert.equal(lp.tokens.length, zero.usage.prompt_tokens);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (const x of lp.token_logprobs.slice(1)) assert.ok(x <= 0);
  for (const top of lp.top_logprobs.slice(1)) assert.equal(Object.keys(top).length, 1);
  // The greedy token at each position is its top alternative's.
  const one = await client.completions.create({ ...ask, max_tokens: 1 });
  const lp1 = one.choices[0].logprobs;
  assert.equal(lp1.tokens.length, lp.tokens.length + 1);
  assert.deepEqual(lp1.token_logprobs.slice(0, -1), lp.token_logprobs);
  assert.deepEqual(lp1.tokens.slice(0, -1), lp.tokens);
  assert.equal(one.choices[0].text, ask.prompt + lp1.tokens.at(-1));
  const stream = await client.completions.create({ ...ask, max_tokens: 1, stream: true });
  let streamed = [], text = "";
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.text;
      if (c.logprobs) streamed = streamed.concat(c.logprobs.token_logprobs);
    }
  }
  assert.equal(text, one.choices[0].text);
  assert.deepEqual(streamed, lp1.token_logprobs);
  // vLLM's prompt_logprobs: the prompt token's entry, with its rank, and the alternatives.
  const v = await client.completions.create({ ...ask, echo: false, logprobs: undefined,
    prompt_logprobs: 2, max_tokens: 1 });
  const plp = v.choices[0].prompt_logprobs;
  assert.equal(plp.length, zero.usage.prompt_tokens);
  assert.equal(plp[0], null);
  for (let i = 1; i < plp.length; ++i) {
    const entries = Object.values(plp[i]);
    assert.ok(entries.length >= 2 && entries.length <= 3);
    // Keys are token ids (JavaScript orders them by number): one is the prompt's token.
    assert.ok(entries.some((e) => Math.abs(e.logprob - lp.token_logprobs[i]) < 1e-6));
    for (const e of entries) assert.ok(e.rank >= 1 && typeof e.decoded_token === "string");
  }
  await assert.rejects(client.completions.create({ model: "chat-model", prompt: "x",
    max_tokens: 0 }), (e) => e.status === 400 && e.param === "max_tokens");
});

test("embeddings: floats or base64, a batch equals each alone, dimensions refused", async () => {
  const inputs = ["Once upon a time", "The cat sat", [1, 5, 6, 7]];
  const batch = await client.embeddings.create({ model: "chat-model", input: inputs });
  assert.equal(batch.object, "list");
  assert.deepEqual(batch.data.map((d) => d.index), [0, 1, 2]);
  assert.ok(batch.usage.prompt_tokens > 8);
  assert.equal(batch.usage.total_tokens, batch.usage.prompt_tokens);
  for (let i = 0; i < inputs.length; ++i) {
    // The SDK asks for base64 unless told; here floats.
    const alone = await client.embeddings.create({
      model: "chat-model", input: inputs[i], encoding_format: "float" });
    const [a, b] = [alone.data[0].embedding, batch.data[i].embedding];
    assert.equal(a.length, 64);  // stories260K's dim
    assert.equal(b.length, a.length);
    for (let d = 0; d < a.length; ++d) assert.ok(Math.abs(a[d] - b[d]) < 1e-5, `${i}: ${d}`);
    assert.ok(Math.abs(a.reduce((s, x) => s + x * x, 0) - 1) < 1e-4, "L2-normalized");
  }
  assert.notDeepEqual(batch.data[0].embedding, batch.data[1].embedding);
  await assert.rejects(client.embeddings.create({ model: "chat-model", input: "x", dimensions: 8 }),
    (e) => e.status === 400 && e.param === "dimensions");
  await assert.rejects(client.embeddings.create({ model: "chat-model", input: [] }),
    (e) => e.status === 400 && e.param === "input");
  await assert.rejects(client.embeddings.create({ model: "gpt-4o", input: "x" }),
    (e) => e.status === 404 && e.code === "model_not_found");
});

test("a seed replays; no seed draws a new one each call", async () => {
  const ask = chat("Tell me a story.", { max_tokens: 24, temperature: 1 });
  const [a, b, c] = await Promise.all([1, 2, 3].map(() => client.chat.completions.create(ask)));
  const texts = new Set([a, b, c].map((r) => r.choices[0].message.content));
  assert.ok(texts.size > 1, "three unseeded calls gave the same text");
  const replay = await client.chat.completions.create({ ...ask, seed: a.seed });
  assert.equal(replay.choices[0].message.content, a.choices[0].message.content);
});

// stories260K's EOS ids are 1 and 2: +100 ends a sequence at once unless min_tokens holds
// them back. min_tokens is vLLM's field: the SDK sends what it is given.
test("logit_bias and min_tokens, streamed and not, on both endpoints", async () => {
  const bias = { logit_bias: { 1: 100, 2: 100, 13: -100 }, temperature: 1, seed: 3 };
  const eager = await client.completions.create({
    model: "chat-model", prompt: "Once upon a time", max_tokens: 30, ...bias,
  });
  assert.equal(eager.choices[0].finish_reason, "stop");
  assert.ok(eager.usage.completion_tokens < 3, `${eager.usage.completion_tokens} tokens`);
  const ask = { model: "chat-model", prompt: "Once upon a time", max_tokens: 30, min_tokens: 12,
    ...bias };
  const held = await client.completions.create(ask);
  assert.equal(held.choices[0].finish_reason, "stop");
  assert.ok(held.usage.completion_tokens >= 12, `${held.usage.completion_tokens} tokens`);
  let text = "";
  for await (const chunk of await client.completions.create({ ...ask, stream: true })) {
    for (const c of chunk.choices) text += c.text;
  }
  assert.equal(text, held.choices[0].text);
  const chatAsk = chat("Tell me a story.", { max_tokens: 30, min_tokens: 10, ...bias });
  const whole = await client.chat.completions.create(chatAsk);
  assert.equal(whole.choices[0].finish_reason, "stop");
  assert.ok(whole.usage.completion_tokens >= 10);
  let streamed = "";
  for await (const chunk of await client.chat.completions.create({ ...chatAsk, stream: true })) {
    for (const c of chunk.choices) streamed += c.delta.content ?? "";
  }
  assert.equal(streamed, whole.choices[0].message.content);
});

test("errors carry OpenAI's string codes, streamed or not", async () => {
  const bad = (param, code) => (e) =>
    e instanceof OpenAI.BadRequestError && e.param === param && e.code === code &&
    e.type === "invalid_request_error";
  for (const stream of [false, true]) {
    await assert.rejects(client.completions.create({
      model: "chat-model", prompt: "x", logit_bias: { 5: 1000 }, stream,
    }), bad("logit_bias", "invalid_value"));
    await assert.rejects(client.chat.completions.create(
      chat("x", { logit_bias: { 9999: 1 }, stream })), bad("logit_bias", "invalid_value"));
    await assert.rejects(client.completions.create({
      model: "chat-model", prompt: "x", max_tokens: 4, min_tokens: 5, stream,
    }), bad("min_tokens", "invalid_value"));
    await assert.rejects(client.completions.create({
      model: "chat-model", prompt: "x", max_tokens: 1000, stream,
    }), bad("max_tokens", "context_length_exceeded"));
    await assert.rejects(client.chat.completions.create(
      chat("x", { temperature: "hot", stream })), bad("temperature", "invalid_type"));
    await assert.rejects(client.completions.create({ model: "chat-model", stream }),
      bad("prompt", "missing_required_parameter"));
  }
  await assert.rejects(client.completions.create({
    model: "chat-model", prompt: "x".repeat(257 * 64 + 1) }),
  bad("prompt", "context_length_exceeded"));
});

test("errors: 400 naming the field, 401, 404", async () => {
  await assert.rejects(client.chat.completions.create(chat("x", { temperature: -1 })),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "temperature");
  await assert.rejects(client.completions.create({ model: "chat-model", prompt: "x", n: 1000 }),
    (e) => e instanceof OpenAI.BadRequestError && e.param === "n");
  const stranger = new OpenAI({ apiKey: "wrong", baseURL, maxRetries: 0 });
  await assert.rejects(stranger.chat.completions.create(chat("x")),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401 &&
      e.code === "invalid_api_key");
  await assert.rejects(client.chat.completions.create({ ...chat("x"), model: "gpt-4o" }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === "model_not_found");
});

// Structured output: a small person schema (nested object, bounded array, enum, bounded
// integer, no extra keys), checked by hand on what comes back.
const personSchema = {
  type: "object",
  properties: {
    name: { type: "string", maxLength: 10 },
    age: { type: "integer", minimum: 0, maximum: 99 },
    mood: { enum: ["happy", "sad"] },
    friends: { type: "array", items: { type: "string", maxLength: 6 }, maxItems: 2 },
    pet: { type: "object", properties: { legs: { type: "integer", minimum: 0, maximum: 8 } },
           required: ["legs"], additionalProperties: false },
  },
  required: ["name", "age", "mood", "friends", "pet"],
  additionalProperties: false,
};

function assertPerson(text) {
  const p = JSON.parse(text);
  assert.deepEqual(Object.keys(p), ["name", "age", "mood", "friends", "pet"], text);
  assert.ok(typeof p.name === "string" && p.name.length <= 10, text);
  assert.ok(Number.isInteger(p.age) && p.age >= 0 && p.age <= 99, text);
  assert.ok(["happy", "sad"].includes(p.mood), text);
  assert.ok(Array.isArray(p.friends) && p.friends.length <= 2, text);
  assert.ok(Number.isInteger(p.pet.legs) && p.pet.legs >= 0 && p.pet.legs <= 8, text);
}

test("response_format json_schema, streamed and not, greedy and sampled", async () => {
  const response_format = {
    type: "json_schema", json_schema: { name: "person", strict: true, schema: personSchema },
  };
  for (const extra of [{ temperature: 0 }, { temperature: 1, seed: 11 }]) {
    const ask = chat("Tell me about a friend.", { max_tokens: 200, response_format, ...extra });
    const whole = await client.chat.completions.create(ask);
    assert.equal(whole.choices[0].finish_reason, "stop");
    assertPerson(whole.choices[0].message.content);
    const stream = await client.chat.completions.create({ ...ask, stream: true });
    let text = "", finish;
    for await (const chunk of stream) {
      for (const c of chunk.choices) {
        text += c.delta.content ?? "";
        finish ??= c.finish_reason ?? undefined;
      }
    }
    assert.equal(text, whole.choices[0].message.content);
    assert.equal(finish, "stop");
  }
  // json_object on completions (as vLLM takes it): this model writes long keys, so it may be
  // cut at max_tokens; and a document surely cut there.
  const object = await client.completions.create({
    model: "chat-model", prompt: "Once upon a time", max_tokens: 200, temperature: 1, seed: 2,
    response_format: { type: "json_object" },
  });
  const { text, finish_reason } = object.choices[0];
  assert.ok(text.startsWith("{"), text);
  if (finish_reason === "stop") assert.equal(typeof JSON.parse(text), "object");
  const cut = await client.chat.completions.create(
    chat("x", { max_tokens: 3, temperature: 0, response_format }));
  assert.equal(cut.choices[0].finish_reason, "length");
  assert.ok(cut.choices[0].message.content.startsWith("{"));
});

test("guided_choice and guided_regex (vLLM's names) constrain the text", async () => {
  const choice = await client.completions.create({
    model: "chat-model", prompt: "The answer is", max_tokens: 20, temperature: 1, seed: 3,
    guided_choice: ["yes", "no", "once upon a time"],
  });
  assert.ok(["yes", "no", "once upon a time"].includes(choice.choices[0].text));
  const regex = await client.chat.completions.create(
    chat("x", { max_tokens: 30, guided_regex: "[0-9]{3}-[a-z]{2,4}" }));
  assert.match(regex.choices[0].message.content, /^[0-9]{3}-[a-z]{2,4}$/);
});

test("a bad constraint is a 400 naming its field", async () => {
  const bad = (param) => (e) => e instanceof OpenAI.BadRequestError && e.param === param;
  for (const stream of [false, true]) {
    await assert.rejects(client.chat.completions.create(
      chat("x", { response_format: { type: "sound" }, stream })), bad("response_format"));
    await assert.rejects(client.chat.completions.create(chat("x", {
      response_format: { type: "json_schema", json_schema: { name: "x", schema: {
        type: "object", patternProperties: { "^a": {} } } } }, stream,
    })), (e) => bad("response_format")(e) && /patternProperties/.test(e.message));
    await assert.rejects(client.completions.create({
      model: "chat-model", prompt: "x", grammar: "root ::= undefined-rule", stream,
    }), bad("grammar"));
    await assert.rejects(client.completions.create({
      model: "chat-model", prompt: "x", guided_regex: "(?=a)", stream,
    }), bad("guided_regex"));
    await assert.rejects(client.completions.create({
      model: "chat-model", prompt: "x", guided_json: {}, guided_choice: ["a"], stream,
    }), (e) => bad("guided_json")(e) && /guided_choice/.test(e.message));
  }
});

// What a browser page on https://app.example reads: the SDK as it runs there (Origin sent),
// its answers allowed to that origin, streamed or not; a preflight needs no key.
test("CORS: an allowed origin reads answers and streams; a preflight needs no key", async () => {
  const origin = "https://app.example";
  const page = new OpenAI({ apiKey, baseURL, maxRetries: 0, defaultHeaders: { Origin: origin } });
  const { response } = await page.completions.create({
    model: "chat-model", prompt: "Once", max_tokens: 3,
  }).withResponse();
  assert.equal(response.headers.get("access-control-allow-origin"), origin);
  const { response: streamed } = await page.chat.completions.create(
    chat("Hi", { max_tokens: 3, stream: true })).withResponse();
  assert.equal(streamed.headers.get("access-control-allow-origin"), origin);
  const preflight = await fetch(`${baseURL}/chat/completions`, {
    method: "OPTIONS",
    headers: { Origin: origin, "Access-Control-Request-Method": "POST",
      "Access-Control-Request-Headers": "authorization,content-type" },
  });
  assert.equal(preflight.status, 200);
  assert.equal(preflight.headers.get("access-control-allow-origin"), origin);
  assert.match(preflight.headers.get("access-control-allow-headers"), /authorization/);
  const { response: foreign } = await new OpenAI({
    apiKey, baseURL, maxRetries: 0, defaultHeaders: { Origin: "https://elsewhere.example" },
  }).models.list().withResponse();
  assert.equal(foreign.headers.get("access-control-allow-origin"), null);
});

test("aborting a stream mid-way frees its blocks", async () => {
  const aborted = await metric('finished_reason="abort"');
  const stream = await client.completions.create({
    model: "chat-model", prompt: "Once", max_tokens: 240, ignore_eos: true, stream: true,
  });
  let chunks = 0;
  for await (const _ of stream) {
    if (++chunks === 3) {
      stream.controller.abort();
      break;
    }
  }
  await until(async () => (await metric('finished_reason="abort"')) === aborted + 1,
    "the router to count the abort");
  await until(async () => (await metric("pagoda_kv_cache_usage")) === 0, "KV usage 0");
});
