// Tool calls and reasoning through the official OpenAI Node SDK, against a real pagoda-router
// with one local worker serving stories260K-hf with a small chat template that writes calls as
// Hermes does (<tool_call>{...}</tool_call>) and may <think>: the router detects both formats
// from it. stories260K's vocabulary has byte-fallback tokens, so grammars can force any text.
//
//   node --test openai_tools_test.mjs   with PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";

const bin = process.env.PAGODA_BIN_DIR;
const shared = process.env.PAGODA_SHARED_DIR;
const work = fs.mkdtempSync(path.join(process.env.PAGODA_WORK_DIR ?? "/tmp", "openai-tools-"));
let router, client;

// Short enough for stories260K's context; renders tools, assistant tool calls and results.
const TEMPLATE = `{#- Calls are written <tool_call>{...}</tool_call>; a reply may <think> first. -#}
{%- if tools %}tools:{% for t in tools %} {{ t.function.name }}{% endfor %}
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' and m.tool_calls %}assistant:{% for c in m.tool_calls %} <tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}
{% elif m.role == 'tool' %}tool {{ m.tool_call_id }}: {{ m.content }}
{% else %}{{ m.role }}: {{ m.content }}
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}assistant:{% endif %}`;

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

before(async () => {
  const [port, workerPort, httpPort] = [await freePort(), await freePort(), await freePort()];
  const template = path.join(work, "tools.jinja");
  fs.writeFileSync(template, TEMPLATE);
  const log = fs.openSync(path.join(work, "router.log"), "w");
  router = spawn(path.join(bin, "pagoda-router"), [
    `--port=${port}`, `--worker-port=${workerPort}`, `--http-port=${httpPort}`,
    "--host=127.0.0.1", `--model=${path.join(shared, "models/stories260K-hf")}`,
    "--max-model-len=257", "--spawn-workers=1", "--worker-kv-cache-mb=8",
    `--chat-template=${template}`, "--served-model-name=m",
  ], { stdio: ["ignore", log, log] });
  for (let i = 0; ; ++i) {
    try {
      if ((await fetch(`http://127.0.0.1:${httpPort}/health`)).status === 200) break;
    } catch {}
    if (i === 400) assert.fail(`the router never got ready (log: ${work}/router.log)`);
    await new Promise((r) => setTimeout(r, 25));
  }
  client = new OpenAI({ apiKey: "none", baseURL: `http://127.0.0.1:${httpPort}/v1`, maxRetries: 0 });
});

after(() => {
  router?.kill("SIGKILL");
});

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "The weather in a city",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", maxLength: 12 },
          days: { type: "integer", minimum: 1, maximum: 7 },
        },
        required: ["city", "days"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "get_time",
      parameters: {
        type: "object",
        properties: { zone: { enum: ["UTC", "CET", "PST"] } },
        required: ["zone"],
      },
    },
  },
];

// Whether `args` (JSON text) satisfies the named tool's schema above.
function checkArguments(name, text) {
  const args = JSON.parse(text);
  assert.equal(typeof args, "object");
  if (name === "get_weather") {
    assert.deepEqual(Object.keys(args).sort(), ["city", "days"]);
    assert.equal(typeof args.city, "string");
    assert.ok([...args.city].length <= 12, args.city);
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, text);
  } else {
    assert.equal(name, "get_time");
    assert.deepEqual(Object.keys(args), ["zone"]);
    assert.ok(["UTC", "CET", "PST"].includes(args.zone), text);
  }
}

const ask = (extra = {}) => ({
  model: "m",
  messages: [{ role: "user", content: "What is the weather in Oslo?" }],
  tools: TOOLS,
  max_tokens: 200,
  ...extra,
});

// A stream's deltas put back together as the SDK's users do.
async function collect(stream) {
  const calls = [];
  let content = "", reasoning = "", finish, role;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      role ??= c.delta.role;
      content += c.delta.content ?? "";
      reasoning += c.delta.reasoning_content ?? "";
      for (const t of c.delta.tool_calls ?? []) {
        if (calls[t.index] === undefined) {
          assert.equal(t.index, calls.length, "calls come in order");
          assert.match(t.id, /^call_[A-Za-z0-9]{24}$/);
          assert.equal(t.type, "function");
          assert.ok(t.function.name, "the name comes first");
          calls[t.index] = { id: t.id, name: t.function.name, arguments: "" };
        } else {
          assert.equal(t.id, undefined, "the id comes once");
        }
        calls[t.index].arguments += t.function.arguments ?? "";
      }
      finish ??= c.finish_reason ?? undefined;
    }
  }
  return { role, content, reasoning, calls, finish };
}

test("tool_choice required: calls that follow the schemas, streamed and not", async () => {
  for (const temperature of [0, 1]) {
    for (const seed of [1, 2, 3]) {
      const r = await client.chat.completions.create(
        ask({ tool_choice: "required", temperature, seed }));
      const m = r.choices[0].message;
      assert.equal(r.choices[0].finish_reason, "tool_calls");
      assert.equal(m.content, null);
      assert.ok(m.tool_calls.length >= 1);
      for (const c of m.tool_calls) {
        assert.match(c.id, /^call_[A-Za-z0-9]{24}$/);
        assert.equal(c.type, "function");
        checkArguments(c.function.name, c.function.arguments);
      }
      const s = await collect(await client.chat.completions.create(
        ask({ tool_choice: "required", temperature, seed, stream: true })));
      assert.equal(s.finish, "tool_calls");
      assert.equal(s.content, "");
      assert.deepEqual(s.calls.map((c) => [c.name, c.arguments]),
                       m.tool_calls.map((c) => [c.function.name, c.function.arguments]),
                       "the same seed, the same calls");
    }
  }
});

test("a named function is the one called", async () => {
  const choice = { type: "function", function: { name: "get_time" } };
  const r = await client.chat.completions.create(ask({ tool_choice: choice, seed: 4 }));
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  for (const c of r.choices[0].message.tool_calls) {
    assert.equal(c.function.name, "get_time");
    checkArguments(c.function.name, c.function.arguments);
  }
  const s = await collect(await client.chat.completions.create(
    ask({ tool_choice: choice, seed: 4, stream: true })));
  assert.ok(s.calls.length >= 1);
  for (const c of s.calls) checkArguments(c.name, c.arguments);
  assert.equal(s.finish, "tool_calls");
});

test("parallel_tool_calls false: one call", async () => {
  for (const seed of [1, 2, 3, 4, 5]) {
    const r = await client.chat.completions.create(
      ask({ tool_choice: "required", parallel_tool_calls: false, seed, temperature: 1 }));
    assert.equal(r.choices[0].message.tool_calls.length, 1);
  }
  // auto keeps the first of the model's calls.
  const two = '<tool_call>{"name": "get_time", "arguments": {"zone": "UTC"}}</tool_call>';
  const r = await client.chat.completions.create(
    ask({ parallel_tool_calls: false, grammar: `root ::= ${JSON.stringify(two + two)}` }));
  assert.equal(r.choices[0].message.tool_calls.length, 1);
});

test("tool_choice auto parses the model's own calls and keeps the text around them", async () => {
  const text = 'Let me look. <tool_call>{"name": "get_weather", "arguments": ' +
               '{"city": "Oslo", "days": 2}}</tool_call>';
  const extra = { grammar: `root ::= ${JSON.stringify(text)}` };
  const r = await client.chat.completions.create(ask(extra));
  const m = r.choices[0].message;
  assert.equal(m.content, "Let me look. ");
  assert.equal(m.tool_calls.length, 1);
  assert.equal(m.tool_calls[0].function.name, "get_weather");
  assert.deepEqual(JSON.parse(m.tool_calls[0].function.arguments), { city: "Oslo", days: 2 });
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  const s = await collect(await client.chat.completions.create(ask({ ...extra, stream: true })));
  assert.equal(s.content, m.content);
  assert.deepEqual(s.calls.map((c) => c.arguments), [m.tool_calls[0].function.arguments]);
  assert.equal(s.finish, "tool_calls");
  // tool_choice none: the same text is content.
  const none = await client.chat.completions.create(ask({ ...extra, tool_choice: "none" }));
  assert.equal(none.choices[0].message.content, text);
  assert.equal(none.choices[0].message.tool_calls, undefined);
  assert.equal(none.choices[0].finish_reason, "stop");
});

test("the next turn: an assistant's tool calls and the tool's result reach the template",
  async () => {
    const r = await client.chat.completions.create({
      model: "m",
      tools: TOOLS,
      max_tokens: 4,
      messages: [
        { role: "user", content: "Weather in Oslo?" },
        {
          role: "assistant", content: null,
          tool_calls: [{
            id: "call_1", type: "function",
            function: { name: "get_weather", arguments: '{"city": "Oslo", "days": 1}' },
          }],
        },
        { role: "tool", tool_call_id: "call_1", content: "sunny" },
      ],
    });
    // The template dumped the arguments as an object, not as a string of JSON.
    assert.ok(r.usage.prompt_tokens > 20);
    await assert.rejects(client.chat.completions.create({
      model: "m", max_tokens: 4,
      messages: [{
        role: "assistant",
        tool_calls: [{ id: "c", type: "function", function: { name: "f", arguments: "{oops" } }],
      }],
    }), (e) => e instanceof OpenAI.BadRequestError && e.param === "messages");
  });

test("reasoning_content: the <think> block apart from the answer, streamed and not", async () => {
  const extra = { grammar: 'root ::= "<think>Oslo is cold.</think>\\n\\nIt is cold."' };
  const r = await client.chat.completions.create(ask({ ...extra, tools: undefined }));
  assert.equal(r.choices[0].message.reasoning_content, "Oslo is cold.");
  assert.equal(r.choices[0].message.content, "It is cold.");
  const s = await collect(await client.chat.completions.create(
    ask({ ...extra, tools: undefined, stream: true })));
  assert.equal(s.reasoning, "Oslo is cold.");
  assert.equal(s.content, "It is cold.");
  assert.equal(s.finish, "stop");
});

test("bad tool requests and unknown fields are 400s naming the field", async () => {
  const bad = (param) => (e) => e instanceof OpenAI.BadRequestError && e.param === param;
  await assert.rejects(client.chat.completions.create(
    ask({ tool_choice: { type: "function", function: { name: "rm_rf" } } })), bad("tool_choice"));
  await assert.rejects(client.chat.completions.create(
    ask({ tool_choice: "sometimes" })), bad("tool_choice"));
  await assert.rejects(client.chat.completions.create(
    ask({ tools: undefined, tool_choice: "required" })), bad("tool_choice"));
  await assert.rejects(client.chat.completions.create(
    ask({ tools: [{ type: "function", function: { name: "bad name!" } }] })), bad("tools"));
  await assert.rejects(client.chat.completions.create(
    ask({ tools: [{ type: "retrieval" }] })), bad("tools"));
  await assert.rejects(client.chat.completions.create(ask({ parallel_tool_calls: "yes" })),
    bad("parallel_tool_calls"));
  for (const field of ["frobnicate", "store", "audio", "service_tier", "functions"]) {
    await assert.rejects(client.chat.completions.create(ask({ [field]: 1 })),
      (e) => bad(field)(e) && e.code === "unsupported_parameter", field);
  }
  await assert.rejects(client.completions.create({ model: "m", prompt: "a", best_of: 2 }),
    bad("best_of"));
  await assert.rejects(client.completions.create({ model: "m", prompt: "a", tools: TOOLS }),
    bad("tools"));
  await assert.rejects(client.chat.completions.create(
    ask({ stream: true, stream_options: { include_usage: true, continuous_usage_stats: true } })),
    bad("stream_options"));
});
