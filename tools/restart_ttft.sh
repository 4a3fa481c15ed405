#!/usr/bin/env bash
# Time to first token of one long prompt three ways (issue 38): computed, from the prefix cache,
# and from the cache after the router restarts (the worker's Hello hands it its blocks back).
# A real router and worker; the router is killed (SIGKILL) and started again on its ports while
# the worker keeps running and reconnects. Each answer is one token, so its time is the TTFT.
#   tools/restart_ttft.sh MODEL [TOKENIZER] [WORDS]
# e.g. pagoda-make-model --shape=1B --format=hf --dtype=bf16 --out=/tmp/models/1b-bf16, then
#   tools/restart_ttft.sh /tmp/models/1b-bf16 ../shared/models/llama2-tokenizer/tokenizer.json 2000
set -euo pipefail
cd "$(dirname "$0")/.."
model=${1:?usage: tools/restart_ttft.sh MODEL [TOKENIZER] [WORDS]}
tokenizer=${2:-}
words=${3:-2000}
bin=${BIN:-build/bin}
http=$((20000 + RANDOM % 10000)); grpc=$((http + 1)); wport=$((http + 2))
work=$(mktemp -d)
router_pid=
cleanup() {
  [ -n "$router_pid" ] && kill -9 "$router_pid" 2>/dev/null
  [ -n "${worker_pid:-}" ] && kill -9 "$worker_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
start_router() {
  "$bin/pagoda-router" --model="$model" ${tokenizer:+--tokenizer="$tokenizer"} --host=127.0.0.1 \
    --port="$grpc" --http-port="$http" --worker-port="$wport" --insecure-worker-port \
    --speculative=off >> "$work/router.log" 2>&1 &
  router_pid=$!
}
workers() {  # connected workers, from the router's /health/ready or metrics
  curl -s "http://127.0.0.1:$http/metrics" | awk '/^pagoda_num_workers/ {print $2; exit}'
}
wait_workers() {
  for _ in $(seq 1 1200); do
    [ "$(workers 2>/dev/null)" = "1" ] && return 0
    sleep 0.25
  done
  echo "restart_ttft: no worker joined; see $work/router.log" >&2
  exit 1
}
prompt=$(python3 -c "import random; r=random.Random(7); print(' '.join(r.choice(['the','a','cat','sat','on','mat','and','then','it','ran','far','away']) for _ in range($words)))")
ask() {  # one request; prints "seconds cached_tokens prompt_tokens"
  local out
  out=$(curl -s -w '\n%{time_total}' "http://127.0.0.1:$http/v1/completions" \
    -H 'content-type: application/json' \
    -d "$(python3 -c 'import json,sys; print(json.dumps({"model": sys.argv[2], "prompt": sys.argv[1], "max_tokens": 1, "temperature": 0}))' "$prompt" "$name")")
  python3 -c '
import json, sys
body, t = sys.argv[1].rsplit("\n", 1)
u = json.loads(body)["usage"]
print(t, (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0), u["prompt_tokens"])' "$out"
}
start_router
"$bin/pagoda-worker" --router="127.0.0.1:$wport" --model="$model" > "$work/worker.log" 2>&1 &
worker_pid=$!
wait_workers
name=$(curl -s "http://127.0.0.1:$http/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
echo "what seconds cached_tokens prompt_tokens"
echo "computed $(ask)"
echo "cached $(ask)"
kill -9 "$router_pid"; wait "$router_pid" 2>/dev/null || true
start_router
wait_workers
echo "after_router_restart $(ask)"
