// A real pagoda-router with one local worker serving stories260K-hf with a golden chat template
// (../js/pagoda_router.mjs), behind an API key, for tests that drive it through the official
// SDK.
//   const { client, baseURL, stop } = await startRouter(["--extra-flag"]);
// Reads PAGODA_BIN_DIR, PAGODA_SHARED_DIR, PAGODA_WORK_DIR.
import OpenAI from "openai";
import { model, startPagodaRouter } from "./pagoda_router.mjs";

export { model };
export const apiKey = "sdk-test-key";

export async function startRouter(flags = []) {
  const { root, stop } = await startPagodaRouter([`--api-key=${apiKey}`, ...flags], "openai-sdk-");
  const baseURL = `${root}/v1`;
  return { baseURL, client: new OpenAI({ apiKey, baseURL, maxRetries: 0 }), stop };
}
