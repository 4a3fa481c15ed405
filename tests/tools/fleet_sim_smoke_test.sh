#!/usr/bin/env bash
# fleet_sim's smoke test: the real router, 2 simulated workers and 4 streams for a couple of
# seconds over gRPC and over HTTP; tokens and requests must flow with no failure, and every
# report line must be `name number` with the figures the docs quote present.
# Usage: fleet_sim_smoke_test.sh BIN_DIR SHARED_DIR
set -euo pipefail
bin=$1
shared=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for api in grpc http; do
  if ! "$bin/fleet_sim" --model="$shared/models/stories260K-hf" --router-bin="$bin/pagoda-router" \
      --router-log="$tmp/router-$api.log" --workers=2 --streams=4 --api=$api --speed=10 \
      --max-tokens=16 --warmup-s=1 --duration-s=2 > "$tmp/$api.txt"; then
    echo "fleet_sim --api=$api failed"; tail -20 "$tmp/router-$api.log"; exit 1
  fi
  cat "$tmp/$api.txt"
  awk -v api=$api '
    NF != 2 { print "not a report line: " $0; bad = 1; next }
    $1 == "api" { next }
    $2 !~ /^-?[0-9.e+-]+$/ { print "not a number: " $0; bad = 1; next }
    { v[$1] = $2 }
    END {
      n = split("tokens_per_s router_cpu_s_per_1k added_step_ms_p50 added_step_ms_p99 " \
                "token_ms_p50 token_ms_p99 rss_per_stream_kb lock_wait_us_per_report", need, " ")
      for (i = 1; i <= n; ++i) if (!(need[i] in v)) { print api ": no " need[i]; bad = 1 }
      if (v["tokens"] + 0 <= 0) { print api ": no tokens flowed"; bad = 1 }
      if (v["requests"] + 0 <= 0) { print api ": no request finished"; bad = 1 }
      if (v["failures"] + 0 != 0) { print api ": " v["failures"] " failures"; bad = 1 }
      if (v["added_step_samples"] + 0 <= 0) { print api ": no step measured"; bad = 1 }
      exit bad
    }' "$tmp/$api.txt"
done
echo "fleet_sim smoke test passed"
