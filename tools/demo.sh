#!/usr/bin/env bash
# The one-command local deployment: builds what is missing or out of date (an incremental,
# quiet build; a no-op when nothing changed), starts pagoda-router with two local workers
# serving stories260K from ../shared/models, waits until it is ready, streams one request
# through it with `pagoda generate`, and stops it (KEEP=1 leaves it running on port 50051, with
# the OpenAI-compatible HTTP API on 8000; HTTP_PORT=P moves it).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${PAGODA_SHARED:-../shared}/models/stories260K
prompt=${1:-Once upon a time}
mkdir -p build
build_log=build/demo-build.log
: > "$build_log"
source tools/ccache_env.sh
if [ ! -f build/CMakeCache.txt ]; then
  echo "building Pagoda (first time: a few minutes; log: $build_log)"
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${pagoda_ccache_args[@]}" >> "$build_log" 2>&1 ||
    { tail -20 "$build_log"; exit 1; }
fi
cmake --build build -j "$(nproc)" --target pagoda-router pagoda-worker pagoda >> "$build_log" 2>&1 ||
  { tail -20 "$build_log"; echo "build failed; log: $build_log"; exit 1; }
port=${PORT:-50051}
log=$(mktemp -t pagoda-router.XXXXXX.log)
http_port=${HTTP_PORT:-8000}
build/bin/pagoda-router --port="$port" --worker-port=$((port + 1)) --http-port="$http_port" \
  --model="$models/stories260K.bin" --tokenizer="$models/tok512.bin" --spawn-workers=2 \
  2> "$log" &
router=$!
[ "${KEEP:-0}" = 1 ] || trap 'kill $router' EXIT
ready=0
for _ in $(seq 100); do
  if build/bin/pagoda generate --server=127.0.0.1:"$port" --prompt=x --max-tokens=1 --timeout=1 \
    > /dev/null 2>&1; then
    ready=1
    break
  fi
  kill -0 $router 2> /dev/null || break  # the router exited: its log says why
  sleep 0.1
done
if [ $ready != 1 ]; then
  tail -20 "$log"
  echo "the router did not become ready; log: $log"
  exit 1
fi
echo "router ready on 127.0.0.1:$port (gRPC) and :$http_port (OpenAI HTTP API, /v1) with 2 workers" \
  "(log: $log)"
build/bin/pagoda generate --server=127.0.0.1:"$port" --prompt="$prompt" --temperature=0
