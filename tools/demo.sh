#!/usr/bin/env bash
# The one-command local deployment: builds Pagoda, starts pagoda-router with two local workers
# serving stories260K from ../shared/models, waits until it is ready, streams one request
# through it with `pagoda generate`, and stops it (KEEP=1 leaves it running on port 50051).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${PAGODA_SHARED:-../shared}/models/stories260K
prompt=${1:-Once upon a time}
if [ ! -x build/bin/pagoda-router ] || [ "${REBUILD:-1}" = 1 ]; then
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release > /dev/null
  cmake --build build -j "$(nproc)" > /dev/null
fi
port=${PORT:-50051}
build/bin/pagoda-router --port="$port" --worker-port=$((port + 1)) \
  --model="$models/stories260K.bin" --tokenizer="$models/tok512.bin" --spawn-workers=2 \
  2> /tmp/pagoda-router.log &
router=$!
[ "${KEEP:-0}" = 1 ] || trap 'kill $router' EXIT
for _ in $(seq 100); do
  build/bin/pagoda generate --server=127.0.0.1:"$port" --prompt=x --max-tokens=1 --timeout=1 \
    > /dev/null 2>&1 && break
  sleep 0.1
done
echo "router ready on 127.0.0.1:$port with 2 workers (log: /tmp/pagoda-router.log)"
build/bin/pagoda generate --server=127.0.0.1:"$port" --prompt="$prompt" --temperature=0
