// A real pagoda-router with one local worker serving a copy of stories260K-hf whose
// tokenizer_config.json carries a chat template from the golden set (Phi-3.5's), for the
// Node tests (the OpenAI SDK's, the web page's). No package of its own: node's built-ins only.
//   const { root, work, stop } = await startPagodaRouter(["--api-key=K"], "openai-sdk-");
// Reads PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR.
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import path from "node:path";

export const model = "chat-model";

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

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

// Starts the router with `flags` in a fresh directory named with `prefix` under
// PAGODA_WORK_DIR and returns once its /health says a worker is ready; `root` is its HTTP
// address, `work` the directory (its log is router.log there).
export async function startPagodaRouter(flags, prefix) {
  const work = fs.mkdtempSync(path.join(process.env.PAGODA_WORK_DIR ?? "/tmp", prefix));
  const [port, workerPort, httpPort] = [await freePort(), await freePort(), await freePort()];
  const log = fs.openSync(path.join(work, "router.log"), "w");
  const router = spawn(path.join(process.env.PAGODA_BIN_DIR, "pagoda-router"), [
    `--port=${port}`, `--worker-port=${workerPort}`, `--http-port=${httpPort}`,
    "--host=127.0.0.1", `--model=${makeChatModel(process.env.PAGODA_SHARED_DIR, work)}`,
    "--max-model-len=257", "--spawn-workers=1", "--worker-kv-cache-mb=8", ...flags,
  ], { stdio: ["ignore", log, log] });
  const root = `http://127.0.0.1:${httpPort}`;
  for (let i = 0; ; ++i) {
    try {
      if ((await fetch(`${root}/health`)).status === 200) break;
    } catch {}
    if (i === 400) throw new Error(`the router never became ready (log: ${work}/router.log)`);
    await new Promise((r) => setTimeout(r, 25));
  }
  return { root, work, stop: () => router.kill("SIGKILL") };
}
