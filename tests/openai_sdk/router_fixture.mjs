// A real pagoda-router with one local worker serving stories260K-hf, with a chat template
// taken from the golden set (Phi-3.5's), for tests that drive it through the official SDK.
//   const { client, baseURL, stop } = await startRouter(["--extra-flag"]);
// Reads PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";
import OpenAI from "openai";

export const apiKey = "sdk-test-key";
export const model = "chat-model";

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// A copy of stories260K-hf whose tokenizer_config.json carries a real chat template.
function makeChatModel(shared, work) {
  const dir = path.join(work, model);
  fs.cpSync(path.join(shared, "models/stories260K-hf"), dir, { recursive: true });
  const golden = JSON.parse(fs.readFileSync(path.join(shared, "golden/chat_templates.json")));
  const configPath = path.join(dir, "tokenizer_config.json");
  fs.chmodSync(dir, 0o755);
  const config = JSON.parse(fs.readFileSync(configPath));
  config.chat_template = golden.templates["microsoft-Phi-3.5-mini-instruct"];
  fs.rmSync(configPath);
  fs.writeFileSync(configPath, JSON.stringify(config));
  return dir;
}

export async function startRouter(flags = []) {
  const bin = process.env.PAGODA_BIN_DIR;
  const shared = process.env.PAGODA_SHARED_DIR;
  const work = fs.mkdtempSync(path.join(process.env.PAGODA_WORK_DIR ?? "/tmp", "openai-sdk-"));
  const [port, workerPort, httpPort] = [await freePort(), await freePort(), await freePort()];
  const log = fs.openSync(path.join(work, "router.log"), "w");
  const router = spawn(path.join(bin, "pagoda-router"), [
    `--port=${port}`, `--worker-port=${workerPort}`, `--http-port=${httpPort}`,
    "--host=127.0.0.1", `--model=${makeChatModel(shared, work)}`, "--max-model-len=257",
    "--spawn-workers=1", "--worker-kv-cache-mb=8", `--api-key=${apiKey}`, ...flags,
  ], { stdio: ["ignore", log, log] });
  const root = `http://127.0.0.1:${httpPort}`;
  // Ready when /health says a worker is ready.
  for (let i = 0; ; ++i) {
    try {
      if ((await fetch(`${root}/health`)).status === 200) break;
    } catch {}
    if (i === 400) throw new Error(`the router never became ready (log: ${work}/router.log)`);
    await new Promise((r) => setTimeout(r, 25));
  }
  const baseURL = `${root}/v1`;
  return {
    baseURL,
    client: new OpenAI({ apiKey, baseURL, maxRetries: 0 }),
    stop: () => router.kill("SIGKILL"),
  };
}
