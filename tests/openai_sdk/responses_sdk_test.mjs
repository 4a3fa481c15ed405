// /v1/responses driven by the official OpenAI Node SDK (client.responses.create), against a
// real router and worker (router_fixture.mjs): text in and out, instructions, the streamed
// events in OpenAI's order, text.format constraints, tool turns in the input, and the fields a
// stateless server refuses by name.
//   node --test responses_sdk_test.mjs   with PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR
import { after, before, test } from "node:test";
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
    instructions: "You tell stories.", max_output_tokens: 12, metadata: { run: "sdk" },
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
