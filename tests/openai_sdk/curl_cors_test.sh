#!/usr/bin/env bash
# A browser's view of CORS, played with curl against real routers (llama2.c stories260K): with
# --allowed-origins, a preflight (OPTIONS + Origin + Access-Control-Request-Method) is a 200
# that needs no API key and allows what was asked; answers, errors and streams carry
# Access-Control-Allow-Origin for an allowed Origin only; --allow-credentials echoes the origin
# even for "*". Without the flag no Access-Control-* header is sent and OPTIONS is not served.
#   curl_cors_test.sh BIN_DIR SHARED_DIR
set -euo pipefail
bin=$1 shared=${PAGODA_SHARED:-$2}
work=$(mktemp -d)
routers=()
trap 'for r in "${routers[@]}"; do kill "$r" 2>/dev/null; wait "$r" 2>/dev/null; done; rm -rf "$work"' EXIT
free_port() { node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# start_router NAME FLAGS...: a router with one worker and API key "k"; its HTTP port in $hport.
start_router() {
  local name=$1; shift
  local port wport
  port=$(free_port) wport=$(free_port) hport=$(free_port)
  "$bin/pagoda-router" --port="$port" --worker-port="$wport" --http-port="$hport" \
    --host=127.0.0.1 --model="$shared/models/stories260K/stories260K.bin" \
    --tokenizer="$shared/models/stories260K/tok512.bin" --spawn-workers=1 \
    --worker-kv-cache-mb=8 --max-model-len=257 --api-key=k "$@" 2> "$work/$name.log" &
  routers+=($!)
  for _ in $(seq 200); do
    curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hport/health" | grep -q 200 && return
    kill -0 "${routers[-1]}" 2> /dev/null || { cat "$work/$name.log" >&2; exit 1; }
    sleep 0.05
  done
  fail "router $name never became ready"
}
# head_of OUT: the status line and headers of a `curl -si` answer, lower-cased, CRs dropped.
head_of() { tr -d '\r' < "$1" | sed '/^$/q' | tr 'A-Z' 'a-z'; }
expect() { grep -qx "$2" <(head_of "$1") || { head_of "$1" >&2; fail "$3: no \"$2\""; }; }
expect_none() { ! grep -q "$2" <(head_of "$1") || { head_of "$1" >&2; fail "$3"; }; }
app=https://app.example

start_router on --allowed-origins="$app,http://localhost:3000"
url=http://127.0.0.1:$hport
curl -si -X OPTIONS "$url/v1/chat/completions" -H "Origin: $app" \
  -H 'Access-Control-Request-Method: POST' \
  -H 'Access-Control-Request-Headers: authorization, content-type' > "$work/preflight"
expect "$work/preflight" 'http/1.1 200 ok' "preflight without a key (200, as vLLM and llama-server)"
expect "$work/preflight" "access-control-allow-origin: $app" "preflight origin"
expect "$work/preflight" 'access-control-allow-methods: post' "preflight methods"
expect "$work/preflight" 'access-control-allow-headers: authorization, content-type' "headers"
expect "$work/preflight" 'vary: origin' "preflight vary"
expect_none "$work/preflight" 'access-control-allow-credentials' "credentials not asked for"
curl -si -X OPTIONS "$url/v1/completions" -H 'Origin: https://evil.example' \
  -H 'Access-Control-Request-Method: POST' > "$work/evil"
expect_none "$work/evil" 'access-control-allow' "a foreign origin is allowed nothing"
curl -si "$url/v1/completions" -H "Origin: $app" -H 'Authorization: Bearer k' \
  -H 'Content-Type: application/json' -d '{"prompt":"Once","max_tokens":3}' > "$work/post"
expect "$work/post" 'http/1.1 200 ok' "allowed POST"
expect "$work/post" "access-control-allow-origin: $app" "allowed POST origin"
curl -si "$url/v1/completions" -H "Origin: $app" -d '{"prompt":"x"}' > "$work/nokey"
expect "$work/nokey" 'http/1.1 401 unauthorized' "a POST still needs the key"
expect "$work/nokey" "access-control-allow-origin: $app" "the browser may read the 401"
curl -siN "$url/v1/completions" -H 'Origin: http://localhost:3000' -H 'Authorization: Bearer k' \
  -d '{"prompt":"Once","max_tokens":2,"stream":true}' > "$work/stream"
expect "$work/stream" 'access-control-allow-origin: http://localhost:3000' "a stream's origin"
grep -q 'data: \[DONE\]' "$work/stream" || fail "the stream did not end"
curl -si "$url/v1/models" -H 'Origin: https://evil.example' -H 'Authorization: Bearer k' \
  > "$work/evil_get"
expect "$work/evil_get" 'http/1.1 200 ok' "a foreign origin's GET is served"
expect_none "$work/evil_get" 'access-control-allow-origin' "but its browser may not read it"

start_router star --allowed-origins='*'
curl -si "http://127.0.0.1:$hport/v1/models" -H "Origin: $app" -H 'Authorization: Bearer k' \
  > "$work/star"
expect "$work/star" 'access-control-allow-origin: \*' "any origin"

start_router creds --allowed-origins='*' --allow-credentials --allowed-headers=authorization
curl -si -X OPTIONS "http://127.0.0.1:$hport/v1/models" -H "Origin: $app" \
  -H 'Access-Control-Request-Method: GET' -H 'Access-Control-Request-Headers: x-other' \
  > "$work/creds"
expect "$work/creds" "access-control-allow-origin: $app" "credentials echo the origin"
expect "$work/creds" 'access-control-allow-credentials: true' "credentials allowed"
expect "$work/creds" 'access-control-allow-headers: authorization' "the configured headers"

start_router off
curl -si -X OPTIONS "http://127.0.0.1:$hport/v1/completions" -H "Origin: $app" \
  -H 'Access-Control-Request-Method: POST' > "$work/off_preflight"
expect "$work/off_preflight" 'http/1.1 401 unauthorized' "OPTIONS as before: the key first"
expect_none "$work/off_preflight" 'access-control' "CORS off"
curl -si "http://127.0.0.1:$hport/v1/models" -H "Origin: $app" -H 'Authorization: Bearer k' \
  > "$work/off_get"
expect "$work/off_get" 'http/1.1 200 ok' "CORS off, GET"
expect_none "$work/off_get" 'access-control' "CORS off: no header"
if "$bin/pagoda-router" --model=x --allowed-origins='not an origin' 2> "$work/bad.log"; then
  fail "a bad --allowed-origins was accepted"
fi
grep -q 'allowed-origins' "$work/bad.log" || { cat "$work/bad.log" >&2; fail "bad flag unnamed"; }
echo "CORS: preflights, answers, streams, credentials and off all as a browser needs"
