#!/usr/bin/env bash
# `curl -N` on a streamed chat from a real router (llama2.c stories260K, a chat template given
# with --chat-template): every event is "data: JSON" and a blank line, chunks are
# chat.completion.chunk objects of one id, and "data: [DONE]" comes last.
#   curl_sse_test.sh BIN_DIR SHARED_DIR
set -euo pipefail
bin=$1 shared=${PAGODA_SHARED:-$2}
work=$(mktemp -d)
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
port=$(free_port) wport=$(free_port) hport=$(free_port)
printf '%s' "{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %}" > "$work/template.jinja"
"$bin/pagoda-router" --port="$port" --worker-port="$wport" --http-port="$hport" --host=127.0.0.1 \
  --model="$shared/models/stories260K/stories260K.bin" \
  --tokenizer="$shared/models/stories260K/tok512.bin" --chat-template="$work/template.jinja" \
  --spawn-workers=1 --worker-kv-cache-mb=8 --max-model-len=257 2> "$work/router.log" &
router=$!
trap 'kill $router 2>/dev/null; wait $router 2>/dev/null; rm -rf "$work"' EXIT
for _ in $(seq 200); do
  curl -sf "http://127.0.0.1:$hport/health" > /dev/null && break
  kill -0 $router 2> /dev/null || { cat "$work/router.log" >&2; exit 1; }
  sleep 0.05
done
curl -sfN "http://127.0.0.1:$hport/v1/chat/completions" -H 'Content-Type: application/json' \
  -d '{"messages":[{"role":"user","content":"Once upon a time"}],"max_tokens":16,"stream":true}' \
  > "$work/stream.txt"
# The checks, in node (already needed by the SDK test) for its JSON parser.
node - "$work/stream.txt" << 'JS'
const text = require("fs").readFileSync(process.argv[2], "utf8");
const fail = (why) => { console.error(`malformed SSE: ${why}\n${text}`); process.exit(1); };
if (!text.endsWith("\n\n")) fail("the stream does not end with a blank line");
const events = text.slice(0, -2).split("\n\n");
if (events.at(-1) !== "data: [DONE]") fail("[DONE] is not the last event");
const ids = new Set();
let content = "", finish = null;
for (const e of events.slice(0, -1)) {
  if (!e.startsWith("data: ") || e.includes("\n")) fail(`not one data line: ${e}`);
  const chunk = JSON.parse(e.slice(6));
  if (chunk.object !== "chat.completion.chunk") fail(`object ${chunk.object}`);
  ids.add(chunk.id);
  for (const c of chunk.choices) {
    content += c.delta.content ?? "";
    finish = c.finish_reason ?? finish;
  }
}
if (ids.size !== 1) fail("chunks of more than one id");
if (events.length < 4 || content.length === 0) fail("no content streamed");
if (finish !== "length" && finish !== "stop") fail(`finish_reason ${finish}`);
console.log(`${events.length} events, ${content.length} characters, finish_reason ${finish}`);
JS
