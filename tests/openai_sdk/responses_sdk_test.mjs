// /v1/responses driven by the official OpenAI Node SDK (client.responses.create), against a
// real router and worker (router_fixture.mjs): text in and out, instructions, the streamed
// events in OpenAI's order, text.format constraints, tool turns in the input, and the fields a
// stateless server refuses by name.
//   node --test responses_sdk_test.mjs   with PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import OpenAI from "openai";
import { model, startRouter } from "./router_fixture.mjs";

let router, client;
before(async () => {
  router = await startRouter();
  client = router.client;
});
after(() => router?.stop());

const ask = (input, extra = {}) => ({ model, input, ...extra });

test("not streamed: a response object with one assistant message and usage", async () => {
  const r = await client.responses.create(ask("Tell me a story.", {
    instructions: "You tell stories.", max_output_tokens: 12, metadata: { run: "sdk" }, seed: 5,
  }));
  assert.match(r.id, /^resp_/);
  assert.equal(r.object, "response");
  assert.ok(["completed", "incomplete"].includes(r.status));
  assert.equal(r.model, model);
  assert.equal(r.instructions, "You tell stories.");
  assert.deepEqual(r.metadata, { run: "sdk" });
  assert.equal(r.store, false);
  assert.equal(r.output.length, 1);
  const [message] = r.output;
  assert.equal(message.type, "message");
  assert.equal(message.role, "assistant");
  assert.match(message.id, /^msg_/);
  assert.equal(message.content[0].type, "output_text");
  // output_text is the SDK's: the message's text parts joined.
  assert.equal(r.output_text, message.content[0].text);
  assert.ok(r.output_text.length > 0);
  assert.ok(r.usage.input_tokens > 5);
  assert.ok(r.usage.output_tokens >= 1 && r.usage.output_tokens <= 12);
  assert.equal(r.usage.total_tokens, r.usage.input_tokens + r.usage.output_tokens);
});

test("max_output_tokens reached: status incomplete, reason max_output_tokens", async () => {
  const r = await client.responses.create(ask("Hi", { max_output_tokens: 5, temperature: 0 }));
  assert.equal(r.status, "incomplete");
  assert.deepEqual(r.incomplete_details, { reason: "max_output_tokens" });
  assert.equal(r.output[0].status, "incomplete");
  assert.equal(r.usage.output_tokens, 5);
});

test("streamed: OpenAI's events in order, deltas adding up to the unstreamed text", async () => {
  const request = ask([{ role: "user", content: [{ type: "input_text", text: "Once upon" }] }],
    { max_output_tokens: 16, temperature: 0 });
  const whole = await client.responses.create(request);
  const stream = await client.responses.create({ ...request, stream: true });
  const types = [];
  let text = "", last;
  for await (const event of stream) {
    assert.equal(event.sequence_number, types.length);
    types.push(event.type);
    if (event.type === "response.output_text.delta") text += event.delta;
    last = event;
  }
  const deltas = types.filter((t) => t === "response.output_text.delta").length;
  assert.ok(deltas >= 1);
  const end = whole.status === "completed" ? "response.completed" : "response.incomplete";
  assert.deepEqual(types, [
    "response.created", "response.in_progress", "response.output_item.added",
    "response.content_part.added", ...Array(deltas).fill("response.output_text.delta"),
    "response.output_text.done", "response.content_part.done", "response.output_item.done", end,
  ]);
  assert.equal(text, whole.output_text);
  assert.equal(last.response.output[0].content[0].text, text);
  assert.equal(last.response.usage.output_tokens, whole.usage.output_tokens);
});

// The text of a response from the SDK's stream helper, which leaves output_text out.
const textOf = (response) => response.output[0].content[0].text;

test("the SDK's stream helper ends with the final response", async () => {
  const request = ask("A cat", { max_output_tokens: 40, temperature: 0 });
  const stream = client.responses.stream(request);
  let deltas = "";
  stream.on("response.output_text.delta", (e) => (deltas += e.delta));
  const final = await stream.finalResponse();
  assert.match(final.id, /^resp_/);
  assert.equal(textOf(final), deltas);
  assert.equal(deltas, (await client.responses.create(request)).output_text);
});

test("text.format json_schema: the output parses and follows the schema", async () => {
  const schema = {
    type: "object",
    properties: { name: { type: "string", maxLength: 8 }, age: { type: "integer" } },
    required: ["name", "age"], additionalProperties: false,
  };
  for (const [stream, extra] of [[false, { temperature: 0 }], [true, { temperature: 0 }],
    [false, { temperature: 1, seed: 11 }], [true, { temperature: 1, seed: 11 }]]) {
    const request = ask("Who is Lily?", {
      max_output_tokens: 200, ...extra,
      text: { format: { type: "json_schema", name: "person", schema, strict: true } },
    });
    let text;
    if (stream) {
      const final = await client.responses.stream(request).finalResponse();
      assert.equal(final.status, "completed");
      text = textOf(final);
    } else {
      const r = await client.responses.create(request);
      assert.equal(r.status, "completed");
      assert.equal(r.text.format.type, "json_schema");
      text = r.output_text;
    }
    const person = JSON.parse(text);
    assert.deepEqual(Object.keys(person).sort(), ["age", "name"]);
    assert.equal(typeof person.name, "string");
    assert.ok(Number.isInteger(person.age));
  }
});

test("text.format json_object: the output is a JSON object", async () => {
  // This model writes long keys, so the object may be cut at max_output_tokens.
  const r = await client.responses.create(ask("Some JSON", {
    max_output_tokens: 200, temperature: 1, seed: 2, text: { format: { type: "json_object" } },
  }));
  assert.ok(r.output_text.startsWith("{"), r.output_text);
  if (r.status === "completed") {
    const value = JSON.parse(r.output_text);
    assert.ok(typeof value === "object" && !Array.isArray(value) && value !== null);
  }
  assert.deepEqual(r.text.format, { type: "json_object" });
});

test("tool turns and a developer message in the input render through the template", async () => {
  const r = await client.responses.create(ask([
    { role: "developer", content: "Answer briefly." },
    { role: "user", content: "What is 6 times 7?" },
    { type: "function_call", call_id: "call_1", name: "multiply", arguments: "{\"a\":6,\"b\":7}" },
    { type: "function_call_output", call_id: "call_1", output: "42" },
    { role: "assistant", content: [{ type: "output_text", text: "It is 42." }] },
    { role: "user", content: "Thanks" },
  ], { max_output_tokens: 4 }));
  assert.equal(r.output[0].type, "message");
  assert.ok(r.usage.input_tokens > 30);
});

test("what needs server-side state, and what is not served, is refused by name", async () => {
  const refused = async (extra, param, code = "unsupported_parameter") => {
    for (const stream of [false, true]) {
      await assert.rejects(client.responses.create(ask("x", { ...extra, stream })),
        (e) => e instanceof OpenAI.BadRequestError && e.param === param && e.code === code &&
          e.message.includes(param), JSON.stringify(extra));
    }
  };
  await refused({ store: true }, "store");
  await refused({ previous_response_id: "resp_123" }, "previous_response_id");
  await refused({ conversation: "conv_123" }, "conversation");
  await refused({ background: true }, "background");
  await refused({ tools: [{ type: "web_search" }] }, "tools");
  await refused({ tools: [{ type: "function", name: "f", parameters: {}, color: "red" }] },
    "tools");
  await refused({ tools: [{ type: "file_search", vector_store_ids: ["vs_1"] }] }, "tools");
  await refused({ include: ["reasoning.encrypted_content"] }, "include");
  await refused({ truncation: "auto" }, "truncation");
  await refused({ reasoning: { effort: "low" } }, "reasoning");
  await refused({ text: { verbosity: "high" } }, "text.verbosity");
  await refused({ no_such_field: 1 }, "no_such_field");
  await refused({ temperature: "hot" }, "temperature", "invalid_type");
  await refused({ max_output_tokens: 100000 }, "max_output_tokens", "context_length_exceeded");
  await refused({ text: { format: { type: "json_schema", name: "x", schema: { type: "nope" } } } },
    "text.format", "invalid_value");
  await assert.rejects(client.responses.create({ model, max_output_tokens: 4 }),
    (e) => e.status === 400 && e.param === "input" && e.code === "missing_required_parameter");
  await assert.rejects(client.responses.create(ask([{ role: "user", content: [
    { type: "input_image", image_url: "https://example.com/a.png" }] }])),
  (e) => e.status === 400 && e.param === "input" && e.message.includes("input_image"));
  await assert.rejects(client.responses.create({ model: "gpt-4.1", input: "x" }),
    (e) => e instanceof OpenAI.NotFoundError && e.code === "model_not_found");
  // store: false and the defaults of the other settings are accepted.
  const r = await client.responses.create(ask("x", {
    store: false, background: false, truncation: "disabled", include: [], max_output_tokens: 2,
    service_tier: "auto", user: "u1", parallel_tool_calls: true, tool_choice: "auto",
  }));
  assert.equal(r.object, "response");
  assert.equal(r.user, "u1");
});

// A template that writes calls as Hermes does (<tool_call>{...}</tool_call>), so the router
// parses them; stories260K's byte-fallback vocabulary lets the grammar of a required call force
// any text.
const TOOLS_TEMPLATE = `{%- if tools %}tools:{% for t in tools %} {{ t.function.name }}{% endfor %}
{% endif %}
{%- for m in messages %}
{%- if m.role == 'assistant' and m.tool_calls %}assistant:{% for c in m.tool_calls %} <tool_call>{{ c.function | tojson }}</tool_call>{% endfor %}
{% elif m.role == 'tool' %}tool {{ m.tool_call_id }}: {{ m.content }}
{% else %}{{ m.role }}: {{ m.content }}
{% endif %}
{%- endfor %}
{%- if add_generation_prompt %}assistant:{% endif %}`;

const weather = {
  type: "function", name: "get_weather", description: "The weather in a city",
  parameters: {
    type: "object",
    properties: { city: { type: "string", maxLength: 12 }, days: { type: "integer", minimum: 1,
      maximum: 7 } },
    required: ["city", "days"],
  },
};
const clock = { type: "function", name: "get_time", parameters: { type: "object", properties: {} } };

describe("function tools", () => {
  let tools;
  before(async () => {
    const dir = fs.mkdtempSync(path.join(process.env.PAGODA_WORK_DIR ?? "/tmp", "responses-"));
    fs.writeFileSync(path.join(dir, "tools.jinja"), TOOLS_TEMPLATE);
    tools = await startRouter([`--chat-template=${path.join(dir, "tools.jinja")}`]);
  });
  after(() => tools?.stop());

  const call = (extra) => ({
    model, input: "What is the weather in Paris?", tools: [weather, clock],
    max_output_tokens: 200, ...extra,
  });
  const checkWeather = (item) => {
    assert.equal(item.type, "function_call");
    assert.match(item.id, /^fc_/);
    assert.match(item.call_id, /^call_/);
    assert.equal(item.name, "get_weather");
    const args = JSON.parse(item.arguments);
    assert.equal(typeof args.city, "string");
    assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, item.arguments);
  };

  test("a required call comes back as function_call items, streamed and not", async () => {
    for (const extra of [{ temperature: 0 }, { temperature: 1, seed: 3 }]) {
      const request = call({ tool_choice: { type: "function", name: "get_weather" }, ...extra });
      const whole = await tools.client.responses.create(request);
      assert.equal(whole.status, "completed");
      assert.ok(whole.output.length >= 1);
      for (const item of whole.output) checkWeather(item);
      assert.equal(whole.output_text, "");

      const stream = await tools.client.responses.create({ ...request, stream: true });
      const types = [], args = {}, done = {};
      let last;
      for await (const e of stream) {
        types.push(e.type);
        if (e.type === "response.function_call_arguments.delta") {
          args[e.item_id] = (args[e.item_id] ?? "") + e.delta;
        }
        if (e.type === "response.function_call_arguments.done") done[e.item_id] = e.arguments;
        last = e;
      }
      assert.equal(types[2], "response.output_item.added");
      assert.equal(types.at(-1), "response.completed");
      assert.ok(!types.includes("response.output_text.delta"));
      assert.deepEqual(args, done);
      const streamed = last.response.output;
      assert.deepEqual(streamed.map((i) => [i.name, i.arguments]),
        whole.output.map((i) => [i.name, i.arguments]));
      for (const item of streamed) {
        checkWeather(item);
        assert.equal(done[item.id], item.arguments);
      }
    }
  });

  test("tool_choice required, one call at most without parallel calls", async () => {
    const r = await tools.client.responses.create(call({
      tool_choice: "required", parallel_tool_calls: false, temperature: 1, seed: 8,
    }));
    assert.equal(r.output.length, 1);
    assert.equal(r.output[0].type, "function_call");
    assert.ok(["get_weather", "get_time"].includes(r.output[0].name));
    assert.equal(typeof JSON.parse(r.output[0].arguments), "object");
  });

  test("the call's result goes back in the next turn's input", async () => {
    const first = await tools.client.responses.create(call({
      tool_choice: { type: "function", name: "get_weather" }, temperature: 0,
    }));
    const [fc] = first.output;
    const next = await tools.client.responses.create({
      model, tools: [weather], max_output_tokens: 8, temperature: 0,
      input: [
        { role: "user", content: "What is the weather in Paris?" },
        fc,
        { type: "function_call_output", call_id: fc.call_id, output: "Sunny, 21 C" },
      ],
    });
    assert.equal(next.object, "response");
    assert.ok(next.usage.input_tokens > first.usage.input_tokens, "the call and result are in");
  });

  test("tools and tool_choice are checked by name", async () => {
    const bad = (extra, param) => assert.rejects(tools.client.responses.create(call(extra)),
      (e) => e instanceof OpenAI.BadRequestError && e.param === param, JSON.stringify(extra));
    await bad({ tool_choice: { type: "function", name: "nowhere" } }, "tool_choice");
    await bad({ tools: [{ type: "function", name: "bad name!", parameters: {} }] }, "tools");
    await bad({ tools: [weather, { type: "code_interpreter", container: "c" }] }, "tools");
  });
});
