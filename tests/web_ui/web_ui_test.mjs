// The page at `/` in a real browser (issue 41): Debian's headless Chromium, driven by
// puppeteer-core, opens the page of a real pagoda-router serving stories260K through one
// spawned worker, sends a chat, sees the streamed answer, the token counts and the rendered
// prompt, stops a call, then sees the cluster view's worker; screenshots go to
// PAGODA_SCREENSHOT_DIR. Also: the page is behind the API key (401 asking for Basic, 200 with
// the key as Basic's password) and --no-web-ui turns it off (404).
// Reads PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR, PAGODA_CHROMIUM,
// PAGODA_SCREENSHOT_DIR.
import assert from "node:assert/strict";
import path from "node:path";
import { after, before, test } from "node:test";
import puppeteer from "puppeteer-core";
import { model, startPagodaRouter } from "./pagoda_router.mjs";

const apiKey = "web-ui-test-key";
const shots = process.env.PAGODA_SCREENSHOT_DIR;

// A router with one local worker, ready (its /health says 200); `root` is its HTTP address.
const startRouter = (flags) => startPagodaRouter(flags, "web-ui-");

const basic = (user, password) =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`;

let router;
let browser;
before(async () => {
  router = await startRouter([`--api-key=${apiKey}`]);
  browser = await puppeteer.launch({
    executablePath: process.env.PAGODA_CHROMIUM,
    headless: true,
    // Root in a container has no user namespace for Chromium's sandbox.
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
  });
});
after(async () => {
  await browser?.close();
  router?.stop();
});

test("with an API key the page asks for it as HTTP Basic and takes it as the password", async () => {
  const without = await fetch(`${router.root}/`);
  assert.equal(without.status, 401);
  assert.match(without.headers.get("www-authenticate") ?? "", /^Basic realm="pagoda"/);
  const wrong = await fetch(`${router.root}/`, { headers: { Authorization: basic("me", "nope") } });
  assert.equal(wrong.status, 401);
  const page = await fetch(`${router.root}/`, { headers: { Authorization: basic("me", apiKey) } });
  assert.equal(page.status, 200);
  assert.match(page.headers.get("content-type"), /^text\/html/);
  assert.match(page.headers.get("content-security-policy"), /default-src 'none'/);
  assert.match(await page.text(), /<title>Pagoda<\/title>/);
  const bearer = await fetch(`${router.root}/ui/app.js`, {
    headers: { Authorization: `Bearer ${apiKey}` },
  });
  assert.equal(bearer.status, 200);
  assert.match(bearer.headers.get("content-type"), /^text\/javascript/);
  // The API itself takes the bearer header only: a browser would send remembered Basic
  // credentials along with another site's forged request.
  const api = await fetch(`${router.root}/v1/models`, { headers: { Authorization: basic("me", apiKey) } });
  assert.equal(api.status, 401);
});

test("the page streams a chat and shows its tokens, its prompt and the cluster's worker", async () => {
  const page = await browser.newPage();
  try {
    await chatAndCluster(page);
  } catch (e) {
    // What the page showed when it failed.
    await page.screenshot({ path: path.join(shots, "failure.png"), fullPage: true });
    throw e;
  } finally {
    await page.close();
  }
});

async function chatAndCluster(page) {
  await page.setViewport({ width: 1280, height: 860 });
  const problems = [];
  page.on("pageerror", (e) => problems.push(`page error: ${e.message}`));
  page.on("console", (m) => {
    if (m.type() === "error") problems.push(`console: ${m.text()}`);
  });
  // The browser answers the page's 401 with these, as a user would in its prompt.
  await page.authenticate({ username: "pagoda", password: apiKey });
  const response = await page.goto(`${router.root}/`, { waitUntil: "load" });
  assert.equal(response.status(), 200);

  // The key for the API calls, typed once (sessionStorage), as the page asks.
  await page.type("#api-key", apiKey);
  await page.keyboard.press("Tab");
  await page.waitForFunction(
    (m) => [...document.querySelectorAll("#model option")].some((o) => o.value === m), {}, model);
  // Until then the browser met 401s by design: its first request (before it sent the Basic
  // credentials) and the page's first /v1/models (before the key was typed).
  problems.length = 0;

  await page.$eval("#max-tokens", (e) => { e.value = "40"; });
  await page.$eval("#seed", (e) => { e.value = "7"; });
  await page.type("#system", "You tell short stories.");
  await page.type("#prompt", "Tell me about a cat.");
  // The answer comes as server-sent events, each rendered as it is parsed.
  const streamed = page.waitForResponse((r) => r.url().endsWith("/v1/chat/completions"));
  await page.click("#send");
  assert.match((await streamed).headers()["content-type"], /^text\/event-stream/);
  await page.waitForFunction(
    () => document.querySelector(".msg.assistant .text")?.textContent.length > 0);
  // Polled until the page says the call ended.
  await page.waitForFunction(() => /^(done in|error)/.test(document.getElementById("status").textContent));
  const status = await page.$eval("#status", (e) => e.textContent);
  assert.match(status, /^done in/);
  const answer = await page.$eval(".msg.assistant .text", (e) => e.textContent);
  assert.ok(answer.trim().length > 0, "the answer is empty");
  const events = await page.$eval(".msg.assistant", (e) => Number(e.dataset.events));
  assert.ok(events >= 3, `${events} events: not the role, text and usage chunks`);
  // Token counts from the stream's usage chunk, the prompt from /tokenize and /detokenize.
  await page.waitForFunction(() => document.getElementById("usage").textContent.length > 0);
  assert.match(await page.$eval("#usage", (e) => e.textContent),
               /prompt \d+ tokens, completion \d+, total \d+/);
  await page.waitForFunction(() => document.getElementById("rendered-text").textContent.length > 0);
  await page.click("#rendered summary");
  const rendered = await page.$eval("#rendered-text", (e) => e.textContent);
  assert.match(rendered, /<\|user\|>/);
  assert.match(rendered, /Tell me about a cat\./);
  assert.match(await page.$eval("#prompt-count", (e) => e.textContent), /\(\d+ tokens of 257\)/);
  await page.screenshot({ path: path.join(shots, "chat.png"), fullPage: true });

  // The JSON-schema example fills response_format; the answer is then constrained to JSON.
  await page.click("#clear");
  await page.click("#example-schema");
  const format = JSON.parse(await page.$eval("#response-format", (e) => e.value));
  assert.equal(format.type, "json_schema");
  await page.click("#send");
  await page.waitForFunction(() => /^(done in|error)/.test(document.getElementById("status").textContent));
  assert.match(await page.$eval("#status", (e) => e.textContent), /^done in/);
  assert.match(await page.$eval(".msg.assistant .text", (e) => e.textContent), /^\s*\{/);
  // Stop aborts the call: both clicks in one task, so no answer can come before the abort.
  await page.evaluate(() => {
    document.getElementById("prompt").value = "Go on.";
    document.getElementById("send").click();
    document.getElementById("stop").click();
  });
  await page.waitForFunction(() => document.getElementById("status").textContent === "stopped" &&
                                   !document.getElementById("send").disabled);
  assert.equal(await page.$$eval(".msg.assistant .text", (all) => all.at(-1).textContent),
               "(stopped)");
  // The tool example fills `tools` with a function the template is told about.
  await page.click("#example-tools");
  assert.equal(JSON.parse(await page.$eval("#tools", (e) => e.value))[0].function.name,
               "get_weather");
  await page.screenshot({ path: path.join(shots, "schema.png"), fullPage: true });

  await page.click("#tab-cluster");
  await page.waitForFunction((m) => {
    const row = document.querySelector("#workers tbody tr.worker");
    return row && row.cells[1].textContent === m && /\d+ \/ \d+/.test(row.cells[4].textContent);
  }, {}, model);
  const summary = await page.$eval("#cluster-summary", (e) => e.textContent);
  assert.match(summary, /1Workers/);
  await page.screenshot({ path: path.join(shots, "cluster.png"), fullPage: true });
  assert.deepEqual(problems, []);
}

test("--no-web-ui turns the page off", async () => {
  const off = await startRouter(["--no-web-ui"]);
  try {
    assert.equal((await fetch(`${off.root}/`)).status, 404);
    assert.equal((await fetch(`${off.root}/ui/app.js`)).status, 404);
    assert.equal((await fetch(`${off.root}/v1/models`)).status, 200);
  } finally {
    off.stop();
  }
});
