// Issue 39's "done when": the official OpenAI Node SDK lists and calls two models and two LoRA
// adapters behind one router (router_fixture.mjs's chat model, and llama.cpp's GGUF conversion
// of the same weights as `gguf`), each adapter a random rank-8 one written by write_test_lora,
// loaded by the spawned workers (--lora-modules), and a third loaded and unloaded at run time
// through vLLM's /v1/load_lora_adapter.
//   node --test lora_sdk_test.mjs   with PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { apiKey, model, startRouter } from "./router_fixture.mjs";

const shared = process.env.PAGODA_SHARED_DIR;
const gguf = path.join(shared, "models/stories260K-gguf/stories260K.gguf");
const loras = fs.mkdtempSync(path.join(process.env.PAGODA_WORK_DIR ?? "/tmp", "loras-"));
function writeLora(name, seed) {
  const dir = path.join(loras, name);
  execFileSync(path.join(process.env.PAGODA_BIN_DIR, "write_test_lora"),
               [path.join(shared, "models/stories260K-hf"), dir, String(seed)]);
  return dir;
}

let router, client;
before(async () => {
  router = await startRouter([
    `--model=gguf=${gguf}`, "--max-model-len=0", `--lora-modules=${model}:sql=${writeLora("sql", 1)}`,
    `--lora-modules=gguf:tale=${writeLora("tale", 2)}`, "--allow-runtime-lora-updating",
    `--lora-dir=${loras}`,
  ]);
  client = router.client;
  // /health is ready once any model's worker is: wait until each model answers (this
  // test flaked when the second model's worker was up first).
  for (const m of [model, "gguf"]) {
    for (let i = 0; ; ++i) {
      const r = await client.completions.create({ model: m, prompt: "Once", max_tokens: 1 })
          .catch((e) => e);
      if (!(r instanceof Error)) break;
      if (i === 400) throw r;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  }
});
after(() => router?.stop());

const complete = (m, extra = {}) => client.completions.create({
  model: m, prompt: "Once upon a time", max_tokens: 12, temperature: 0, ...extra,
});

test("models.list names both models and both adapters, each adapter with its parent", async () => {
  const listed = [];
  for await (const m of client.models.list()) listed.push(m);
  const parents = Object.fromEntries(listed.map((m) => [m.id, m.parent]));
  assert.deepEqual(parents, { [model]: null, sql: model, gguf: null, tale: "gguf" });
  assert.ok(listed.every((m) => m.object === "model" && m.max_model_len > 0));
});

test("each model and adapter answers under its own name, an adapter with its own tokens",
     async () => {
  const answers = {};
  for (const m of [model, "sql", "gguf", "tale"]) {
    const r = await complete(m);
    assert.equal(r.model, m);
    assert.equal(r.choices[0].text.length > 0, true);
    answers[m] = r.choices[0].text;
  }
  assert.notEqual(answers.sql, answers[model]);
  assert.notEqual(answers.tale, answers.gguf);
  assert.equal((await complete("sql")).choices[0].text, answers.sql, "greedy: the same again");
  const chat = await client.chat.completions.create({
    model: "sql", messages: [{ role: "user", content: "Tell me a story." }], max_tokens: 8,
  });
  assert.equal(chat.model, "sql");
  assert.equal(chat.choices[0].message.role, "assistant");
  const stream = await client.chat.completions.create({
    model: "sql", messages: [{ role: "user", content: "Hi" }], max_tokens: 8, stream: true,
  });
  let chunks = 0;
  for await (const chunk of stream) {
    assert.equal(chunk.model, "sql");
    ++chunks;
  }
  assert.ok(chunks > 1);
});

test("an unknown model or adapter is a 404 model_not_found", async () => {
  await assert.rejects(complete("nope"), (e) => e.status === 404 && e.code === "model_not_found");
});

test("an adapter loaded at run time serves until it is unloaded, behind the API key",
     async () => {
  const root = router.baseURL.replace(/\/v1$/, "");
  const post = (route, body, key = apiKey) => fetch(`${root}/v1/${route}`, {
    method: "POST", headers: { "Content-Type": "application/json", Authorization: `Bearer ${key}` },
    body: JSON.stringify(body),
  });
  const body = { lora_name: `${model}:fresh`, lora_path: writeLora("fresh", 3) };
  assert.equal((await post("load_lora_adapter", body, "wrong-key")).status, 401);
  const loaded = await post("load_lora_adapter", body);
  assert.equal(loaded.status, 200, await loaded.text());
  assert.equal((await complete("fresh")).model, "fresh");
  const unloaded = await post("unload_lora_adapter", { lora_name: "fresh" });
  assert.equal(unloaded.status, 200, await unloaded.text());
  await assert.rejects(complete("fresh"), (e) => e.status === 404);
});
