#!/usr/bin/env bash
# Time to first token of one long prompt three ways (issue 38): computed, from the prefix cache,
# and from the cache after a restart. Each answer is one token, so its time is the TTFT.
#   --restart=router (default): the router is killed (SIGKILL) and started again on its ports
#     while the worker keeps running and reconnects (its Hello hands the router its blocks back).
#   --restart=worker: the worker runs with --kv-cache-dir; it is stopped (SIGTERM: it drains and
#     writes its blocks) and a new one started on the same directory (it loads them before its
#     Hello). The new worker's time to join (weights, then the directory) is printed apart.
#   tools/restart_ttft.sh [--restart=router|worker] MODEL [TOKENIZER] [WORDS]
# e.g. pagoda-make-model --shape=1B --format=hf --dtype=bf16 --out=/tmp/models/1b-bf16, then
#   tools/restart_ttft.sh /tmp/models/1b-bf16 ../shared/models/llama2-tokenizer/tokenizer.json 2000
set -euo pipefail
cd "$(dirname "$0")/.."
restart=router
case "${1:-}" in
  --restart=router|--restart=worker) restart=${1#--restart=}; shift ;;
  --restart=*) echo "restart_ttft: --restart is router or worker" >&2; exit 2 ;;
esac
model=${1:?usage: tools/restart_ttft.sh [--restart=router|worker] MODEL [TOKENIZER] [WORDS]}
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
# A prompt step of 2,048 tokens of the 1B shape takes more than the default 30 s on a busy VM.
start_router() {
  "$bin/pagoda-router" --model="$model" ${tokenizer:+--tokenizer="$tokenizer"} --host=127.0.0.1 \
    --port="$grpc" --http-port="$http" --worker-port="$wport" --insecure-worker-port \
    --speculative=off --step-timeout-s=1200 >> "$work/router.log" 2>&1 &
  router_pid=$!
}
workers() {  # connected workers, from the router's /health/ready or metrics
  curl -s "http://127.0.0.1:$http/metrics" | awk '/^pagoda_num_workers/ {print $2; exit}'
}
wait_workers() {  # until the router counts ${1:-1} workers
  for _ in $(seq 1 1200); do
    [ "$(workers 2>/dev/null)" = "${1:-1}" ] && return 0
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
kv_dir=()
[ "$restart" = worker ] && kv_dir=(--kv-cache-dir="$work/kv")
start_worker() {
  "$bin/pagoda-worker" --router="127.0.0.1:$wport" --model="$model" "${kv_dir[@]}" \
    >> "$work/worker.log" 2>&1 &
  worker_pid=$!
}
start_router
start_worker
wait_workers
name=$(curl -s "http://127.0.0.1:$http/v1/models" | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')
echo "what seconds cached_tokens prompt_tokens"
echo "computed $(ask)"
echo "cached $(ask)"
if [ "$restart" = worker ]; then
  kill -TERM "$worker_pid"; wait "$worker_pid" 2>/dev/null || true
  wait_workers 0
  start=$(date +%s.%N)
  start_worker
  wait_workers
  echo "# new worker joined in $(python3 -c "print(round($(date +%s.%N) - $start, 1))") s" \
    "(weights and --kv-cache-dir); $(du -sh "$work/kv" | cut -f1) in the directory"
  grep -h -- "--kv-cache-dir" "$work/worker.log" | sed 's/^/# /'
  echo "after_worker_restart $(ask)"
else
  kill -9 "$router_pid"; wait "$router_pid" 2>/dev/null || true
  start_router
  wait_workers
  echo "after_router_restart $(ask)"
fi
