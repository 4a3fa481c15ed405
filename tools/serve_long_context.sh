#!/usr/bin/env bash
# The served long-context comparison (issue 42): llama-server and pagoda-router (one spawned
# worker) serve the same GGUF, both running at once on their own ports, and the same client,
# `pagoda bench --backend=openai`, drives them one after the other for each row (random
# prompts of LENGTHS tokens, STREAMS requests at once, OUTPUT tokens each, EOS ignored, greedy,
# speculation off on Pagoda's side). One run; prints each bench's JSON line, then the table:
# time to first token, time per output token, median inter-token latency, and each ratio
# (llama-server's time / Pagoda's: above 1, Pagoda is faster).
#
#   tools/serve_long_context.sh [--help]
#
# Environment (defaults):
#   PAGODA_BIN  build/bin                 pagoda, pagoda-router, pagoda-worker, pagoda-make-model
#   LLAMA       /tmp/llama.cpp            built by ../shared/peers/build_llamacpp.sh
#   MODEL       (made)                    a GGUF; unset: WORK/1B-Q4_K_M.gguf, made once from
#                                         pagoda-make-model --shape=1B (random weights), llama.cpp's
#                                         llama2.c converter and llama-quantize Q4_K_M
#   WORK        /tmp/pagoda-long-context  where the made model and the servers' logs go
#   LENGTHS     "4096 16384"              prompt tokens of each row
#   STREAMS     "1 4"                     requests at once (and in all) of each row
#   OUTPUT      64                        output tokens of each request
#   THREADS     2                         each server's compute threads
#   SERVERS     "llama-server pagoda"     which of the two to start and drive
#   LLAMA_KV    f16                       llama-server's -ctk/-ctv (its default; also q8_0, f32)
#   PAGODA_KV   auto                      Pagoda's --worker-kv-cache-dtype (auto is f32; also
#                                         bf16, f16, int8)
# The model's context_length is set to the longest prompt + OUTPUT + 64
# (tools/gguf_set_context_length.py), and both servers hold the largest STREAMS of those:
# llama-server as that many slots, Pagoda's pool sized by auto, capped at that many contexts.
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${PAGODA_BIN:-$here/build/bin}" && pwd)
llama=${LLAMA:-/tmp/llama.cpp}/build/bin
work=${WORK:-/tmp/pagoda-long-context}
lengths=${LENGTHS:-4096 16384}
streams=${STREAMS:-1 4}
output=${OUTPUT:-64}
threads=${THREADS:-2}
llama_kv=${LLAMA_KV:-f16}
pagoda_kv=${PAGODA_KV:-auto}
servers=${SERVERS:-llama-server pagoda}
shared=${PAGODA_SHARED:-$here/../shared}
for b in pagoda pagoda-router pagoda-worker; do
  [ -x "$bin/$b" ] || { echo "error: no $bin/$b (build it, or set PAGODA_BIN)" >&2; exit 2; }
done
[ -x "$llama/llama-server" ] || {
  echo "error: no $llama/llama-server: build llama.cpp with $shared/peers/build_llamacpp.sh" >&2
  exit 2
}
mkdir -p "$work"

max_len=0
for l in $lengths; do [ "$l" -gt "$max_len" ] && max_len=$l; done
max_streams=0
for s in $streams; do [ "$s" -gt "$max_streams" ] && max_streams=$s; done
context=$((max_len + output + 64))

model=${MODEL:-}
if [ -z "$model" ]; then
  model=$work/1B-Q4_K_M.gguf
  if [ ! -f "$model" ]; then
    echo "making $model (random 1.1B-shaped weights; minutes)" >&2
    [ -f "$work/1B.bin" ] || "$bin/pagoda-make-model" --shape=1B --out="$work/1B.bin"
    [ -f "$work/1B-f32.gguf" ] || "$llama/llama-convert-llama2c-to-ggml" \
      --copy-vocab-from-model "$shared/models/llama2-tokenizer/tokenizer.bin" \
      --llama2c-model "$work/1B.bin" --llama2c-output-model "$work/1B-f32.gguf" > "$work/convert.log" 2>&1
    "$llama/llama-quantize" "$work/1B-f32.gguf" "$model" Q4_K_M > "$work/quantize.log" 2>&1
    rm -f "$work/1B-f32.gguf" "$work/1B.bin"
  fi
fi
python3 "$here/tools/gguf_set_context_length.py" "$model" "$context"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
llama_port=$(port)
pagoda_http=$(port)
pagoda_grpc=$(port)
pagoda_workers=$(port)
pagoda_metrics=$(port)

llama_pid='' pagoda_pid=''
if [[ " $servers " == *" llama-server "* ]]; then
"$llama/llama-server" -m "$model" -t "$threads" -tb "$threads" -c $((context * max_streams)) \
  -np "$max_streams" -ctk "$llama_kv" -ctv "$llama_kv" --host 127.0.0.1 --port "$llama_port" \
  > "$work/llama-server.log" 2>&1 &
llama_pid=$!
fi
if [[ " $servers " == *" pagoda "* ]]; then
# A 512-token chunk deep in a long prompt can take over the default 30 s step timeout on a
# loaded machine: the router would call the worker dead.
"$bin/pagoda-router" --model="$model" --host=127.0.0.1 --port="$pagoda_grpc" \
  --worker-port="$pagoda_workers" --http-port="$pagoda_http" --metrics-port="$pagoda_metrics" \
  --spawn-workers=1 --worker-threads="$threads" --worker-kv-cache-dtype="$pagoda_kv" \
  --max-model-len="$context" --max-num-seqs="$max_streams" \
  --speculative=off --step-timeout-s=3600 > "$work/pagoda.log" 2>&1 &
pagoda_pid=$!
fi
# shellcheck disable=SC2086 # either may be empty
trap 'kill $llama_pid $pagoda_pid 2> /dev/null; wait $llama_pid $pagoda_pid 2> /dev/null' EXIT

ready() {  # /health answers 200
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2> /dev/null
}
for _ in $(seq 1800); do
  { [ -z "$llama_pid" ] || ready "http://127.0.0.1:$llama_port/health"; } &&
    { [ -z "$pagoda_pid" ] || ready "http://127.0.0.1:$pagoda_metrics/health"; } && break
  [ -z "$llama_pid" ] || kill -0 "$llama_pid" 2> /dev/null || { tail "$work/llama-server.log" >&2; exit 1; }
  [ -z "$pagoda_pid" ] || kill -0 "$pagoda_pid" 2> /dev/null || { tail "$work/pagoda.log" >&2; exit 1; }
  sleep 1
done
grep -h "KV pool" "$work/pagoda.log" | tail -1 >&2 || true

results=$work/results.jsonl
: > "$results"
bench() {  # SERVER PORT LENGTH STREAMS; a failed request is in the JSON, not the end of the run
  [[ " $servers " == *" $1 "* ]] || return 0
  { "$bin/pagoda" bench --backend=openai --base-url="http://127.0.0.1:$2" --dataset=random \
    --input-len="$3" --output-len="$output" --num-prompts="$4" --max-concurrency="$4" \
    --temperature=0 --ignore-eos --json || true; } |
    python3 -c 'import json, sys; j = json.loads(sys.stdin.read()); j.update(server=sys.argv[1], length=int(sys.argv[2]), streams=int(sys.argv[3])); print(json.dumps(j))' \
      "$1" "$3" "$4" | tee -a "$results"
}
for l in $lengths; do
  for s in $streams; do
    echo "== $l-token prompts, $s at once" >&2
    bench llama-server "$llama_port" "$l" "$s"
    bench pagoda "$pagoda_http" "$l" "$s"
  done
done

python3 - "$results" << 'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
by = {(r["server"], r["length"], r["streams"]): r for r in rows}
print("\n| | llama-server | Pagoda | ratio |\n| --- | ---: | ---: | ---: |")
def fmt(ms):
    return f"{ms / 1000:.1f} s" if ms >= 10000 else f"{ms:.1f} ms"
for length, streams in sorted({(l, s) for (_, l, s) in by}):
    a, b = by.get(("llama-server", length, streams)), by.get(("pagoda", length, streams))
    if not a or not b:
        continue
    what = f"{length // 1024}k, {streams} stream{'s' if streams > 1 else ''}"
    for key, label in (("median_ttft_ms", "time to first token (median)"),
                       ("median_tpot_ms", "time per output token (median)"),
                       ("median_itl_ms", "inter-token latency (median)")):
        x, y = a[key], b[key]
        ratio = f"{x / y:.2f}×" if y else "—"
        print(f"| {what}: {label} | {fmt(x)} | {fmt(y)} | {ratio} |")
    failed = a["failed"] + b["failed"]
    if failed:
        print(f"| {what}: failed requests | {a['failed']} | {b['failed']} | |")
EOF
