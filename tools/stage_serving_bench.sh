#!/usr/bin/env bash
# Pipeline stages served (issue 40's benchmarks): the same model and the same cores, as one whole
# worker with THREADS threads and as a group of stages (SPLIT) sharing those threads, each behind
# its own pagoda-router on loopback, the same client (`pagoda bench --backend=openai`) for both:
# output tokens per second at STREAMS streams, and one stream's time per output token (the hops'
# cost). Each configuration runs REPEATS times, interleaved (whole, stages, whole, stages, ...),
# each time with fresh processes. Prints each bench's JSON line, each worker's resident memory
# after its benches, then a table of medians and the stages' share of the whole worker's, and
# each stage's mean compute, wait (the bubble) and send a step from the router's metrics.
# SERVERS may add llama.cpp's RPC backend on the same file and the same split (rpc): one
# rpc-server per stage with the stages' threads, and one llama-server (1 thread of its own for
# the host's part: embeddings, sampling) that offloads every layer to them, SPLIT's layers on
# each (-ts; the output layer on the last); its rows join the table with the stages' share of
# them. NETNS=1 (as root) puts each worker, stage or rpc-server in its own network namespace,
# 10.40.0.2, .3, ... on a bridge in the router's (and llama-server's, and the client's)
# namespace, 10.40.0.1: the stages' activations and the router's steps cross veth pairs, not
# loopback. The namespaces are removed on exit.
#
#   tools/stage_serving_bench.sh [--help]
#
# Environment (defaults):
#   PAGODA_BIN  build/bin                         pagoda, pagoda-router, pagoda-worker
#   MODEL       /tmp/pagoda-long-context/1B-Q4_K_M.gguf   (tools/serve_long_context.sh makes it)
#   WORK        /tmp/pagoda-stage-bench           the servers' logs and the results
#   SPLIT       0:11,11:22                        the stages' --layers, in order
#   THREADS     2                                 threads in all: the whole worker's, or split
#                                                 evenly between the stages (or rpc-servers)
#   STREAMS     32                                requests at once (and twice that in all)
#   INPUT       128                               prompt tokens of each request
#   OUTPUT      64                                output tokens of each request
#   REPEATS     2                                 runs of each configuration
#   SERVERS     "whole stages"                    the configurations, in each repeat's order:
#                                                 whole, stages, rpc (llama.cpp's RPC backend)
#   LLAMA_RPC   /tmp/llama.cpp-rpc                a llama.cpp built with -DGGML_RPC=ON (rpc):
#                                                 build/bin/ggml-rpc-server and llama-server
#   NETNS       0                                 1: a network namespace per worker (root)
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
servers=${SERVERS:-whole stages}
llama=${LLAMA_RPC:-/tmp/llama.cpp-rpc}/build/bin
netns=${NETNS:-0}
for c in $servers; do
  case $c in
    whole | stages | rpc) ;;
    *) echo "error: SERVERS: unknown configuration $c (whole, stages, rpc)" >&2; exit 2 ;;
  esac
done
has() { [[ " $servers " == *" $1 "* ]]; }
for b in pagoda pagoda-router pagoda-worker; do
  [ -x "$bin/$b" ] || { echo "error: no $bin/$b (build it, or set PAGODA_BIN)" >&2; exit 2; }
done
if has rpc; then
  for b in ggml-rpc-server llama-server; do
    [ -x "$llama/$b" ] || { echo "error: no $llama/$b (a llama.cpp built with -DGGML_RPC=ON; set LLAMA_RPC)" >&2; exit 2; }
  done
fi
[ "$netns" = 0 ] || [ "$(id -u)" = 0 ] || { echo "error: NETNS=1 needs root" >&2; exit 2; }
[ -f "$model" ] || { echo "error: no $model (tools/serve_long_context.sh makes one)" >&2; exit 2; }
IFS=, read -r -a ranges <<< "$split"
stage_threads=$((threads / ${#ranges[@]}))
[ "$stage_threads" -ge 1 ] || { echo "error: $threads threads cannot split over ${#ranges[@]} stages" >&2; exit 2; }
# llama-server's -ts: layer l goes to the first device whose share of the layers and the output
# layer so far (cumulative, of n_layers + 1) exceeds l / (n_layers + 1); each boundary half a
# layer short of the stage's end gives every device exactly its range, the output on the last.
tensor_split=$(awk -v s="$split" 'BEGIN {
  n = split(s, r, ","); split(r[n], last, ":"); prev = 0
  for (i = 1; i <= n; i++) {
    split(r[i], ab, ":"); end = i < n ? ab[2] - 0.5 : last[2] + 1
    out = out (i > 1 ? "," : "") (end - prev); prev = end
  }
  print out }')
mkdir -p "$work"
context=$((input + output + 64))
python3 "$here/tools/gguf_set_context_length.py" "$model" "$context"
export PAGODA_WORKER_TOKEN=stage-bench-not-a-secret

# NETNS=1: the router's namespace holds the bridge (10.40.0.1); worker namespace i holds
# 10.40.0.(i+2) on a veth whose other end is a port of the bridge. rns/wns: `ip netns exec NS`
# before a command that runs there (empty without NETNS).
ns_names=() rns=() router_host=127.0.0.1 router_bind=127.0.0.1
wns() { [ "$netns" = 0 ] || echo "ip netns exec ${ns_names[$1 + 1]}"; }
worker_host() { if [ "$netns" = 0 ]; then echo 127.0.0.1; else echo "10.40.0.$(($1 + 2))"; fi; }
if [ "$netns" != 0 ]; then
  ns_names=("psb$$-r")
  for i in "${!ranges[@]}"; do ns_names+=("psb$$-$i"); done
  rns=(ip netns exec "${ns_names[0]}") router_host=10.40.0.1 router_bind=0.0.0.0
fi
netns_down() {
  local ns
  for ns in "${ns_names[@]}"; do ip netns del "$ns" 2> /dev/null || true; done
}
netns_up() {
  local i ns=${ns_names[0]}
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  ip -n "$ns" link add br0 type bridge
  ip -n "$ns" addr add 10.40.0.1/24 dev br0
  ip -n "$ns" link set br0 up
  for i in "${!ranges[@]}"; do
    ip netns add "${ns_names[$i + 1]}"
    ip link add "veth$i" netns "$ns" type veth peer name eth0 netns "${ns_names[$i + 1]}"
    ip -n "$ns" link set "veth$i" master br0 up
    ip -n "${ns_names[$i + 1]}" addr add "10.40.0.$((i + 2))/24" dev eth0
    ip -n "${ns_names[$i + 1]}" link set eth0 up
    ip -n "${ns_names[$i + 1]}" link set lo up
  done
}

# port [ip netns exec NS]: a free port (in NS)
port() { "$@" python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
ready() {
  "${rns[@]}" python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' "$1" 2> /dev/null
}
listening() {  # HOST PORT accepts a connection (from the router's namespace)
  "${rns[@]}" python3 -c 'import socket, sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2).close()' "$1" "$2" 2> /dev/null
}
pids=()
stop() {
  [ ${#pids[@]} -eq 0 ] || { kill "${pids[@]}" 2> /dev/null; wait "${pids[@]}" 2> /dev/null || true; }
  pids=()
}
trap 'stop; netns_down' EXIT
trap 'exit 130' INT TERM
[ "$netns" = 0 ] || netns_up
results=$work/results.jsonl
: > "$results"

# run CONFIG REPEAT: a router and CONFIG's workers (whole: one; stages: one per range), or
# (rpc) one rpc-server per range and a llama-server over them, then the benches; each line of
# results gets the configuration, the repeat and the workers' (rpc-servers') RSS.
run() {
  local config=$1 repeat=$2 http grpc workers metrics health worker_pids=() i host_pid='' pre=() p
  http=$(port "${rns[@]}") grpc=$(port "${rns[@]}") workers=$(port "${rns[@]}") metrics=$(port "${rns[@]}")
  if [ "$config" = rpc ]; then
    local endpoints=() host
    for i in "${!ranges[@]}"; do
      read -r -a pre <<< "$(wns "$i")"
      host=$(worker_host "$i") p=$(port "${pre[@]}")
      "${pre[@]}" "$llama/ggml-rpc-server" -H "$host" -p "$p" -t "$stage_threads" \
        > "$work/rpc-server-$repeat-$i.log" 2>&1 &
      pids+=($!) worker_pids+=($!) endpoints+=("$host:$p")
    done
    for i in "${!endpoints[@]}"; do
      for _ in $(seq 600); do
        listening "${endpoints[$i]%:*}" "${endpoints[$i]##*:}" && break
        kill -0 "${worker_pids[$i]}" 2> /dev/null || { echo "error: an rpc-server ended; see $work" >&2; exit 1; }
        sleep 1
      done
    done
    "${rns[@]}" "$llama/llama-server" -m "$model" --rpc "$(IFS=,; echo "${endpoints[*]}")" \
      -ngl 99 -ts "$tensor_split" --fit off -np "$streams" -c $((context * streams)) \
      --cont-batching -t 1 -tb 1 --host 127.0.0.1 --port "$http" \
      > "$work/llama-server-$repeat.log" 2>&1 &
    pids+=($!) host_pid=$!
    health=http://127.0.0.1:$http/health
  else
    "${rns[@]}" "$bin/pagoda-router" --model="$model" --host="$router_bind" --port="$grpc" \
      --worker-port="$workers" --http-port="$http" --metrics-port="$metrics" \
      --max-model-len="$context" --max-num-seqs="$streams" --speculative=off \
      > "$work/router-$config-$repeat.log" 2>&1 &
    pids+=($!)
    health=http://127.0.0.1:$metrics/health
  fi
  if [ "$config" = whole ]; then
    read -r -a pre <<< "$(wns 0)"
    "${pre[@]}" "$bin/pagoda-worker" --router="$router_host:$workers" --model="$model" --threads="$threads" \
      --kv-cache-mb=1024 > "$work/worker-$config-$repeat.log" 2>&1 &
    pids+=($!) worker_pids+=($!)
  elif [ "$config" = stages ]; then
    for i in "${!ranges[@]}"; do
      local transfer=(--kv-transfer-port=-1)
      read -r -a pre <<< "$(wns "$i")"
      if [ "$netns" != 0 ]; then
        p=$(port "${pre[@]}")
        transfer=(--kv-transfer-port="$p" --advertise-address="$(worker_host "$i"):$p")
      fi
      "${pre[@]}" "$bin/pagoda-worker" --router="$router_host:$workers" --model="$model" \
        --threads="$stage_threads" --layers="${ranges[$i]}" "${transfer[@]}" --kv-cache-mb=1024 \
        > "$work/worker-$config-$repeat-$i.log" 2>&1 &
      pids+=($!) worker_pids+=($!)
    done
  fi
  for _ in $(seq 600); do
    ready "$health" && break
    for p in "${pids[@]}"; do
      kill -0 "$p" 2> /dev/null || { echo "error: a process of $config ended; see $work" >&2; exit 1; }
    done
    sleep 1
  done
  local common=(--backend=openai --base-url="http://127.0.0.1:$http" --dataset=random
                --input-len="$input" --temperature=0 --ignore-eos --json)
  "${rns[@]}" "$bin/pagoda" bench "${common[@]}" --output-len=8 --num-prompts=4 --max-concurrency=4 \
    --seed=7 > /dev/null  # warm-up
  local streamed one rss host_rss=''
  streamed=$("${rns[@]}" "$bin/pagoda" bench "${common[@]}" --output-len="$output" \
    --num-prompts=$((2 * streams)) --max-concurrency="$streams" --seed=$((1000 + repeat)))
  one=$("${rns[@]}" "$bin/pagoda" bench "${common[@]}" --output-len="$output" --num-prompts=3 \
    --max-concurrency=1 --seed=$((2000 + repeat)))
  rss=$(for p in "${worker_pids[@]}"; do awk '/VmRSS/ {printf "%d ", $2 / 1024}' "/proc/$p/status"; done)
  [ -z "$host_pid" ] || host_rss=$(awk '/VmRSS/ {printf "%d", $2 / 1024}' "/proc/$host_pid/status")
  # The stages' own account of both benches (the router's per-stage series): mean compute,
  # wait (the bubble) and send a step, and bytes sent, per stage.
  local stages_json='[]'
  [ "$config" = rpc ] || stages_json=$("${rns[@]}" python3 - "http://127.0.0.1:$metrics/metrics" << 'PY'
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
    python3 -c 'import json, sys; j = json.loads(sys.argv[1]); j.update(config=sys.argv[2], repeat=int(sys.argv[3]), worker_rss_mib=[int(x) for x in sys.argv[4].split()], stages=json.loads(sys.argv[5])); sys.argv[6] and j.update(host_rss_mib=int(sys.argv[6])); print(json.dumps(j))' \
      "$line" "$config" "$repeat" "$rss" "$stages_json" "$host_rss" | tee -a "$results"
  done
  stop
}

describe() {
  case $1 in
    whole) echo "whole worker ($threads threads)" ;;
    stages) echo "${#ranges[@]} stages ($split, $stage_threads each)" ;;
    rpc) echo "llama.cpp rpc (${#ranges[@]} rpc-servers, -ts $tensor_split, $stage_threads each)" ;;
  esac
}
for repeat in $(seq "$repeats"); do
  what='' sep=''
  for c in $servers; do what+="$sep$(describe "$c")" sep=', then '; done
  echo "== repeat $repeat: $what${rns[*]:+ (each worker in its own network namespace)}" >&2
  for c in $servers; do run "$c" "$repeat"; done
done

python3 - "$results" "$streams" "$servers" << 'PY'
import json, statistics, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
streams = int(sys.argv[2])
order = [c for c in sys.argv[3].split() if any(r["config"] == c for r in rows)]
label = {"whole": "whole worker", "stages": "stages", "rpc": "llama.cpp rpc"}
ratios = [(a, b) for a, b in (("stages", "whole"), ("stages", "rpc")) if a in order and b in order]
def med(config, concurrency, key):
    v = [r[key] for r in rows if r["config"] == config and r["max_concurrency"] == concurrency]
    return statistics.median(v) if v else None
def line(what, cells):
    print("|" + "".join(f" {c} |" if c else " |" for c in [what] + cells))
print()
line("", [label[c] for c in order] + [f"{a} / {b}" for a, b in ratios])
line("---", ["---:"] * (len(order) + len(ratios)))
m = {c: med(c, streams, "output_throughput") for c in order}
line(f"{streams} streams: output tok/s",
     [f"{m[c]:.1f}" for c in order] + [f"{m[a] / m[b]:.2f}×" for a, b in ratios])
m = {c: med(c, 1, "median_tpot_ms") for c in order}
line("1 stream: time per output token", [f"{m[c]:.1f} ms" for c in order] +
     [f"{m[a] / m[b]:.2f}× ({m[a] - m[b]:+.1f} ms)" for a, b in ratios])
rss = {c: [r["worker_rss_mib"] for r in rows if r["config"] == c] for c in order}
line("workers' resident memory (MiB, last run)", [f"{rss[c][-1]}" for c in order] + [""] * len(ratios))
if "rpc" in order:
    host = [r.get("host_rss_mib") for r in rows if r["config"] == "rpc"][-1]
    print(f"\nllama.cpp rpc: the workers are its rpc-servers; llama-server itself held {host} MiB")
last = [r for r in rows if r["config"] == "stages"]
last = last[-1].get("stages") or [] if last else []
if last:
    print("\nPer stage, both benches of the last run (the router's pagoda_stage_* series), a step:")
    for s in last:
        f = lambda x: "—" if x is None else f"{x:.1f} ms"
        print(f"- stage {s['stage']}: compute {f(s['compute_ms'])}, wait {f(s['wait_ms'])}, "
              f"send {f(s['send_ms'])}; {s['sent_mb']:.1f} MB sent")
failed = sum(r["failed"] for r in rows)
print(f"\n{failed} requests failed")
PY
