#!/usr/bin/env bash
# Pipeline stages served (issue 40's benchmarks): the same model and the same cores, as one whole
# worker with THREADS threads and as a group of stages (SPLIT) sharing those threads, each behind
# its own pagoda-router on loopback, the same client (`pagoda bench --backend=openai`) for both:
# output tokens per second at STREAMS streams, and one stream's time per output token (the hops'
# cost). Each configuration runs REPEATS times, interleaved (whole, stages, whole, stages, ...),
# each time with fresh processes. Prints each bench's JSON line, each worker's resident memory
# after its benches, then a table of medians and the stages' share of the whole worker's, and
# each stage's mean compute, wait (the bubble) and send a step from the router's metrics.
#
#   tools/stage_serving_bench.sh [--help]
#
# Environment (defaults):
#   PAGODA_BIN  build/bin                         pagoda, pagoda-router, pagoda-worker
#   MODEL       /tmp/pagoda-long-context/1B-Q4_K_M.gguf   (tools/serve_long_context.sh makes it)
#   WORK        /tmp/pagoda-stage-bench           the servers' logs and the results
#   SPLIT       0:11,11:22                        the stages' --layers, in order
#   THREADS     2                                 threads in all: the whole worker's, or split
#                                                 evenly between the stages
#   STREAMS     32                                requests at once (and twice that in all)
#   INPUT       128                               prompt tokens of each request
#   OUTPUT      64                                output tokens of each request
#   REPEATS     2                                 runs of each configuration
set -euo pipefail
if [ "${1:-}" = "--help" ] || [ "${1:-}" = "-h" ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit 0
fi
here=$(cd "$(dirname "$0")/.." && pwd)
bin=$(cd "${PAGODA_BIN:-$here/build/bin}" && pwd)
model=${MODEL:-/tmp/pagoda-long-context/1B-Q4_K_M.gguf}
work=${WORK:-/tmp/pagoda-stage-bench}
split=${SPLIT:-0:11,11:22}
threads=${THREADS:-2}
streams=${STREAMS:-32}
input=${INPUT:-128}
output=${OUTPUT:-64}
repeats=${REPEATS:-2}
for b in pagoda pagoda-router pagoda-worker; do
  [ -x "$bin/$b" ] || { echo "error: no $bin/$b (build it, or set PAGODA_BIN)" >&2; exit 2; }
done
[ -f "$model" ] || { echo "error: no $model (tools/serve_long_context.sh makes one)" >&2; exit 2; }
IFS=, read -r -a ranges <<< "$split"
stage_threads=$((threads / ${#ranges[@]}))
[ "$stage_threads" -ge 1 ] || { echo "error: $threads threads cannot split over ${#ranges[@]} stages" >&2; exit 2; }
mkdir -p "$work"
context=$((input + output + 64))
python3 "$here/tools/gguf_set_context_length.py" "$model" "$context"
export PAGODA_WORKER_TOKEN=stage-bench-not-a-secret

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ready() {
  python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2> /dev/null
}
pids=()
stop() {
  [ ${#pids[@]} -eq 0 ] || { kill "${pids[@]}" 2> /dev/null; wait "${pids[@]}" 2> /dev/null; }
  pids=()
}
trap stop EXIT
results=$work/results.jsonl
: > "$results"

# run CONFIG REPEAT: a router and CONFIG's workers (whole: one; stages: one per range), then the
# benches; each line of results gets the configuration, the repeat and the workers' RSS.
run() {
  local config=$1 repeat=$2 http grpc workers metrics worker_pids=() i
  http=$(port) grpc=$(port) workers=$(port) metrics=$(port)
  "$bin/pagoda-router" --model="$model" --host=127.0.0.1 --port="$grpc" \
    --worker-port="$workers" --http-port="$http" --metrics-port="$metrics" \
    --max-model-len="$context" --max-num-seqs="$streams" --speculative=off \
    > "$work/router-$config-$repeat.log" 2>&1 &
  pids+=($!)
  if [ "$config" = whole ]; then
    "$bin/pagoda-worker" --router="127.0.0.1:$workers" --model="$model" --threads="$threads" \
      --kv-cache-mb=1024 > "$work/worker-$config-$repeat.log" 2>&1 &
    pids+=($!) worker_pids+=($!)
  else
    for i in "${!ranges[@]}"; do
      "$bin/pagoda-worker" --router="127.0.0.1:$workers" --model="$model" \
        --threads="$stage_threads" --layers="${ranges[$i]}" --kv-transfer-port=-1 --kv-cache-mb=1024 \
        > "$work/worker-$config-$repeat-$i.log" 2>&1 &
      pids+=($!) worker_pids+=($!)
    done
  fi
  for _ in $(seq 600); do
    ready "http://127.0.0.1:$metrics/health" && break
    for p in "${pids[@]}"; do
      kill -0 "$p" 2> /dev/null || { echo "error: a process of $config ended; see $work" >&2; exit 1; }
    done
    sleep 1
  done
  local common=(--backend=openai --base-url="http://127.0.0.1:$http" --dataset=random
                --input-len="$input" --temperature=0 --ignore-eos --json)
  "$bin/pagoda" bench "${common[@]}" --output-len=8 --num-prompts=4 --max-concurrency=4 \
    --seed=7 > /dev/null  # warm-up
  local streamed one rss
  streamed=$("$bin/pagoda" bench "${common[@]}" --output-len="$output" \
    --num-prompts=$((2 * streams)) --max-concurrency="$streams" --seed=$((1000 + repeat)))
  one=$("$bin/pagoda" bench "${common[@]}" --output-len="$output" --num-prompts=3 \
    --max-concurrency=1 --seed=$((2000 + repeat)))
  rss=$(for p in "${worker_pids[@]}"; do awk '/VmRSS/ {printf "%d ", $2 / 1024}' "/proc/$p/status"; done)
  # The stages' own account of both benches (the router's per-stage series): mean compute,
  # wait (the bubble) and send a step, and bytes sent, per stage.
  local stages_json
  stages_json=$(python3 - "http://127.0.0.1:$metrics/metrics" << 'PY'
import json, re, sys, urllib.request
text = urllib.request.urlopen(sys.argv[1], timeout=5).read().decode()
v = {}
for m in re.finditer(r'^pagoda_stage_(\w+?)(_sum|_count|_total)\{[^}]*stage="(\d+)"[^}]*\} (\S+)$', text, re.M):
    v[(int(m.group(3)), m.group(1) + m.group(2))] = float(m.group(4))
out = []
for s in sorted({k[0] for k in v}):
    mean = lambda n: v.get((s, n + "_sum"), 0) / v[(s, n + "_count")] if v.get((s, n + "_count")) else None
    out.append({"stage": s, "compute_ms": mean("compute_seconds") and 1e3 * mean("compute_seconds"),
                "wait_ms": mean("wait_seconds") and 1e3 * mean("wait_seconds"),
                "send_ms": mean("send_seconds") and 1e3 * mean("send_seconds"),
                "sent_mb": v.get((s, "sent_bytes_total"), 0) / 1e6})
print(json.dumps(out))
PY
)
  for line in "$streamed" "$one"; do
    python3 -c 'import json, sys; j = json.loads(sys.argv[1]); j.update(config=sys.argv[2], repeat=int(sys.argv[3]), worker_rss_mib=[int(x) for x in sys.argv[4].split()], stages=json.loads(sys.argv[5])); print(json.dumps(j))' \
      "$line" "$config" "$repeat" "$rss" "$stages_json" | tee -a "$results"
  done
  stop
}

for repeat in $(seq "$repeats"); do
  echo "== repeat $repeat: whole worker ($threads threads), then ${#ranges[@]} stages ($split, $stage_threads each)" >&2
  run whole "$repeat"
  run stages "$repeat"
done

python3 - "$results" "$streams" << 'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
streams = int(sys.argv[2])
def med(config, concurrency, key):
    v = [r[key] for r in rows if r["config"] == config and r["max_concurrency"] == concurrency]
    return statistics.median(v) if v else None
print(f"\n| | whole worker | stages | stages / whole |")
print("| --- | ---: | ---: | ---: |")
w, s = med("whole", streams, "output_throughput"), med("stages", streams, "output_throughput")
print(f"| {streams} streams: output tok/s | {w:.1f} | {s:.1f} | {s / w:.2f}× |")
w, s = med("whole", 1, "median_tpot_ms"), med("stages", 1, "median_tpot_ms")
print(f"| 1 stream: time per output token | {w:.1f} ms | {s:.1f} ms | {s / w:.2f}× (+{s - w:.1f} ms) |")
rss = {c: [r["worker_rss_mib"] for r in rows if r["config"] == c] for c in ("whole", "stages")}
print(f"| workers' resident memory (MiB, last run) | {rss['whole'][-1]} | {rss['stages'][-1]} | |")
last = [r for r in rows if r["config"] == "stages"][-1].get("stages") or []
if last:
    print("\nPer stage, both benches of the last run (the router's pagoda_stage_* series), a step:")
    for s in last:
        f = lambda x: "—" if x is None else f"{x:.1f} ms"
        print(f"- stage {s['stage']}: compute {f(s['compute_ms'])}, wait {f(s['wait_ms'])}, "
              f"send {f(s['send_ms'])}; {s['sent_mb']:.1f} MB sent")
failed = sum(r["failed"] for r in rows)
print(f"\n{failed} requests failed")
PY
