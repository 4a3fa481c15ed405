#!/usr/bin/env bash
# The served LoRA comparison (issue 39): STREAMS requests at once spread over 0 (the base
# model), 1, 4 and 16 rank-RANK adapters, on pagoda-router (one spawned worker, the adapters
# named at start with --lora-modules and --max-loras=16) and on llama-server (the same adapter
# files with --lora ... --lora-init-without-apply, each request naming its adapter in
# llama-server's "lora" field), the same client (`pagoda bench --backend=openai`) for both. The
# adapters are random GGUF LoRAs of the model's shape (build/bin/write_test_lora), which both
# servers read. Each server first serves a short warm-up bench (not counted); then the rows run
# REPEATS times, interleaved: each row's two benches back to back, the server that goes first
# alternating from one repeat to the next. Every request bans the Llama 2 vocabulary's 256
# byte tokens (ids 3-258, "logit_bias" -100) on both servers, so the random weights' text is
# valid UTF-8: llama-server ends a stream whose text is not with an error event ("does not
# match the expected Content-only format"). Prints each bench's JSON line, then for each row
# the median output tokens per second of its repeats, its share of the same server's
# base-model row, and Pagoda over llama-server (the median of the repeats' ratios).
#
#   tools/lora_serving_bench.sh [--help]
#
# Environment (defaults):
#   PAGODA_BIN  build/bin                         pagoda, pagoda-router, pagoda-worker,
#                                                 write_test_lora
#   LLAMA       /tmp/llama.cpp                    built by ../shared/peers/build_llamacpp.sh
#   MODEL       /tmp/pagoda-long-context/1B-Q4_K_M.gguf   (tools/serve_long_context.sh makes it)
#   WORK        /tmp/pagoda-lora-bench            adapters and the servers' logs
#   ADAPTERS    "0 1 4 16"                        adapters the requests spread over, per row
#   RANK        16
#   STREAMS     32                                requests at once (and twice that in all)
#   INPUT       128                               prompt tokens of each request
#   OUTPUT      64                                output tokens of each request
#   THREADS     2                                 each server's compute threads
#   REPEATS     2                                 runs of every row
#   SERVERS     "llama-server pagoda"             which servers run (e.g. SERVERS=pagoda:
#                                                 Pagoda's rows against its own base only)
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${PAGODA_BIN:-$here/build/bin}" && pwd)
llama=${LLAMA:-/tmp/llama.cpp}/build/bin
model=${MODEL:-/tmp/pagoda-long-context/1B-Q4_K_M.gguf}
work=${WORK:-/tmp/pagoda-lora-bench}
rows=${ADAPTERS:-0 1 4 16}
rank=${RANK:-16}
streams=${STREAMS:-32}
input=${INPUT:-128}
output=${OUTPUT:-64}
threads=${THREADS:-2}
repeats=${REPEATS:-2}
servers=${SERVERS:-llama-server pagoda}
has() { [[ " $servers " == *" $1 "* ]]; }
has pagoda || has llama-server || { echo "error: SERVERS names neither pagoda nor llama-server" >&2; exit 2; }
for b in pagoda pagoda-router pagoda-worker write_test_lora; do
  [ -x "$bin/$b" ] || { echo "error: no $bin/$b (build it, or set PAGODA_BIN)" >&2; exit 2; }
done
! has llama-server || [ -x "$llama/llama-server" ] ||
  { echo "error: no $llama/llama-server" >&2; exit 2; }
[ -f "$model" ] || { echo "error: no $model (tools/serve_long_context.sh makes one)" >&2; exit 2; }
mkdir -p "$work"
context=$((input + output + 64))
python3 "$here/tools/gguf_set_context_length.py" "$model" "$context"

most=0
for a in $rows; do [ "$a" -gt "$most" ] && most=$a; done
pagoda_loras=() llama_loras=()
for i in $(seq 0 $((most - 1))); do
  f=$work/a$i-r$rank.gguf
  [ -f "$f" ] || "$bin/write_test_lora" "$model" "$f" $((100 + i)) "$rank" gguf
  pagoda_loras+=("--lora-modules=a$i=$f")
  llama_loras+=(--lora "$f")
done

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
llama_port=$(port) pagoda_http=$(port) pagoda_grpc=$(port) pagoda_workers=$(port)
pagoda_metrics=$(port)
llama_pid= pagoda_pid=
if has llama-server; then
  "$llama/llama-server" -m "$model" -t "$threads" -tb "$threads" -c $((context * streams)) \
    -np "$streams" "${llama_loras[@]}" --lora-init-without-apply --host 127.0.0.1 \
    --port "$llama_port" > "$work/llama-server.log" 2>&1 &
  llama_pid=$!
fi
if has pagoda; then
  "$bin/pagoda-router" --model="$model" --host=127.0.0.1 --port="$pagoda_grpc" \
    --worker-port="$pagoda_workers" --http-port="$pagoda_http" --metrics-port="$pagoda_metrics" \
    --spawn-workers=1 --worker-threads="$threads" --max-model-len="$context" \
    --max-num-seqs="$streams" --speculative=off --step-timeout-s=600 "${pagoda_loras[@]}" \
    --max-loras=$((most > 0 ? most : 1)) --max-cpu-loras=$((most > 0 ? most : 1)) \
    > "$work/pagoda.log" 2>&1 &
  pagoda_pid=$!
fi
trap 'kill $llama_pid $pagoda_pid 2> /dev/null; wait $llama_pid $pagoda_pid 2> /dev/null' EXIT
ready() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2> /dev/null
}
for _ in $(seq 900); do
  { ! has llama-server || ready "http://127.0.0.1:$llama_port/health"; } &&
    { ! has pagoda || ready "http://127.0.0.1:$pagoda_metrics/health"; } && break
  [ -z "$llama_pid" ] || kill -0 "$llama_pid" 2> /dev/null || { tail "$work/llama-server.log" >&2; exit 1; }
  [ -z "$pagoda_pid" ] || kill -0 "$pagoda_pid" 2> /dev/null || { tail "$work/pagoda.log" >&2; exit 1; }
  sleep 1
done

results=$work/results.jsonl
: > "$results"
no_bytes=$(python3 -c 'import json; print(json.dumps({"logit_bias": {str(i): -100 for i in range(3, 259)}}))')
bench() {  # SERVER ADAPTERS REPEAT BENCH_FLAGS...
  local server=$1 adapters=$2 repeat=$3
  shift 3
  { "$bin/pagoda" bench --backend=openai --dataset=random --input-len="$input" \
    --output-len="$output" --max-concurrency="$streams" --temperature=0 --ignore-eos \
    --extra-request-body="$no_bytes" --json "$@" || true; } |
    python3 -c 'import json, sys; j = json.loads(sys.stdin.read()); j.update(server=sys.argv[1], adapters=int(sys.argv[2]), repeat=int(sys.argv[3])); print(json.dumps(j))' \
      "$server" "$adapters" "$repeat" | tee -a "$results"
}
row() {  # SERVER ADAPTERS REPEAT [BENCH_FLAGS...]
  local server=$1 a=$2 repeat=$3
  shift 3
  if [ "$server" = llama-server ]; then
    bench llama-server "$a" "$repeat" --base-url="http://127.0.0.1:$llama_port" --lora-ids="$a" "$@"
  elif [ "$a" -eq 0 ]; then
    bench pagoda 0 "$repeat" --base-url="http://127.0.0.1:$pagoda_http" "$@"
  else
    bench pagoda "$a" "$repeat" --base-url="http://127.0.0.1:$pagoda_http" \
      --model-name="$(seq -s, -f "a%g" 0 $((a - 1)))" "$@"
  fi
}
echo "== warm-up (not counted)" >&2
! has llama-server || row llama-server "$most" -1 --num-prompts=4 --output-len=8 --seed=7 > /dev/null
! has pagoda || row pagoda "$most" -1 --num-prompts=4 --output-len=8 --seed=7 > /dev/null
: > "$results"
for repeat in $(seq "$repeats"); do
  order="llama-server pagoda"
  [ $((repeat % 2)) -eq 0 ] && order="pagoda llama-server"
  for a in $rows; do
    echo "== repeat $repeat: $streams streams over $a adapters ($order)" >&2
    # Prompts drawn afresh for each row and repeat, the same for both servers: no bench finds
    # another's prompts in a server's prefix cache (llama-server keeps each slot's last one).
    for server in $order; do
      has "$server" || continue
      row "$server" "$a" "$repeat" --num-prompts=$((2 * streams)) --seed=$((1000 * repeat + a))
    done
  done
done

python3 - "$results" << 'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
key = "output_throughput"
def runs(server, a):
    return sorted((r for r in rows if r["server"] == server and r["adapters"] == a),
                  key=lambda r: r["repeat"])
def median(server, a):
    v = [r[key] for r in runs(server, a)]
    return statistics.median(v) if v else None
print("\n| adapters | llama-server tok/s | (of its base) | Pagoda tok/s | (of its base) | Pagoda / llama-server (each repeat) | failed |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for a in sorted({r["adapters"] for r in rows}):
    l, p = median("llama-server", a), median("pagoda", a)
    lb, pb = median("llama-server", 0), median("pagoda", 0)
    tok = lambda x: "—" if x is None else f"{x:.1f}"
    share = lambda x, b: f"{x / b:.2f}" if x is not None and b else "—"
    ratios = [pr[key] / lr[key] for lr, pr in zip(runs("llama-server", a), runs("pagoda", a)) if lr[key]]
    ratio = (f"{statistics.median(ratios):.2f}× ({', '.join(f'{x:.2f}' for x in ratios)})"
             if ratios else "—")
    failed = sum(r["failed"] for r in runs("llama-server", a) + runs("pagoda", a))
    print(f"| {a} | {tok(l)} | {share(l, lb)} | {tok(p)} | {share(p, pb)} | {ratio} | {failed} |")
PY
