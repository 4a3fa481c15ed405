#!/usr/bin/env bash
# One serving benchmark: starts pagoda-router with its own local workers (--spawn-workers in
# ROUTER_FLAGS), waits until they are all connected, runs `pagoda bench` against it with the
# router's /metrics sampled, prints the bench result (--json in BENCH_FLAGS for one object),
# and stops the router. docs/BENCHMARKS.md lists the runs made with it.
#   tools/bench_serving.sh "ROUTER_FLAGS" "BENCH_FLAGS" [build/bin]
set -euo pipefail
router_flags=$1
bench_flags=$2
bin=${3:-build/bin}
port=$((20000 + RANDOM % 20000)); wport=$((port + 1)); mport=$((port + 2)); hport=$((port + 3))
# HTTP_PORT in BENCH_FLAGS is the router's OpenAI port (for --backend=openai --base-url=...).
bench_flags=${bench_flags//HTTP_PORT/$hport}
workers=$(grep -oE -- '--spawn-workers=[0-9]+' <<< "$router_flags" | cut -d= -f2)
log=$(mktemp)
# shellcheck disable=SC2086 # the flags are word lists on purpose
"$bin/pagoda-router" --port=$port --worker-port=$wport --metrics-port=$mport --http-port=$hport \
  --host=127.0.0.1 \
  $router_flags 2> "$log" &
router=$!
trap 'kill $router 2>/dev/null; wait $router 2>/dev/null; rm -f "$log"' EXIT
scrape() {
  exec 3<> /dev/tcp/127.0.0.1/$mport && printf 'GET /metrics HTTP/1.0\r\n\r\n' >&3 && cat <&3
}
for _ in $(seq 600); do
  n=$(scrape 2> /dev/null | awk '$1 ~ /^pagoda_num_workers({|$)/ { print $2 }') || true
  [ "${n:-0}" = "${workers:-1}" ] && break
  kill -0 $router 2> /dev/null || { cat "$log" >&2; exit 1; }
  sleep 0.2
done
# shellcheck disable=SC2086
"$bin/pagoda" bench --server=127.0.0.1:$port --metrics=127.0.0.1:$mport $bench_flags
