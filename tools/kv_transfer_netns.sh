#!/usr/bin/env bash
# Issue 28's away-from-the-prefix benchmark across two network namespaces joined by a veth pair
# (as root): the router and worker A in kvbA (10.28.0.1), worker B in kvbB (10.28.0.2), each
# worker serving its blocks on port 7000 at its veth address; tools/kv_transfer_bench.py runs in
# kvbA against them. docs/BENCHMARKS.md §25 lists the runs.
#   tools/kv_transfer_netns.sh MODEL true|false "BENCH_FLAGS" [build/bin]
set -euo pipefail
model=$1
transfer=$2
bench_flags=$3
bin=$(realpath "${4:-build/bin}")
here=$(dirname "$(realpath "$0")")
a=kvbA b=kvbB
cleanup() {
  for p in $(jobs -p); do kill "$p" 2> /dev/null || true; done
  wait 2> /dev/null || true
  ip netns del $a 2> /dev/null || true
  ip netns del $b 2> /dev/null || true
}
trap cleanup EXIT
ip netns add $a
ip netns add $b
ip link add veth-a netns $a type veth peer name veth-b netns $b
ip -n $a addr add 10.28.0.1/24 dev veth-a
ip -n $b addr add 10.28.0.2/24 dev veth-b
ip -n $a link set veth-a up
ip -n $b link set veth-b up
ip -n $a link set lo up
ip -n $b link set lo up
log=/tmp/kv_transfer_netns
common=(--model="$model" --threads=1 --kv-cache-mb=512 --worker-token=kvbench --kv-transfer-port=7000)
ip netns exec $a "$bin/pagoda-router" --model="$model" --host=0.0.0.0 --port=50051 \
  --worker-port=50052 --http-port=8000 --metrics-port=9090 --served-model-name=m \
  --worker-token=kvbench --placement=round_robin --kv-transfer="$transfer" 2> $log.router.log &
ip netns exec $a "$bin/pagoda-worker" --router=10.28.0.1:50052 "${common[@]}" \
  --advertise-address=10.28.0.1:7000 2> $log.a.log &
workers() {  # until the router has $1 workers
  for _ in $(seq 600); do
    n=$(ip netns exec $a curl -s 127.0.0.1:9090/metrics | awk '$1 ~ /^pagoda_num_workers({|$)/ {n += $2} END {print n}') || true
    [ "${n:-0}" = "$1" ] && return
    sleep 0.5
  done
  exit 1
}
workers 1  # worker A joins first: round_robin's first pick
ip netns exec $b "$bin/pagoda-worker" --router=10.28.0.1:50052 "${common[@]}" \
  --advertise-address=10.28.0.2:7000 2> $log.b.log &
workers 2
# shellcheck disable=SC2086 # a word list on purpose
ip netns exec $a "$here/kv_transfer_bench.py" away --model="$model" --attach=8000,9090 \
  --kv-transfer="$transfer" $bench_flags
