#!/usr/bin/env bash
# The cost of the router/worker split: the same load through `pagoda run` (in-process) and
# through pagoda-router + 1 pagoda-worker on loopback. Load: PROMPTS prompts at once, each
# generating exactly TOKENS tokens (greedy, --ignore-eos), on a random-weight model of SHAPE
# with the 32000-token Llama 2 tokenizer.
#   tools/split_bench.sh [build/bin] ; env: SHAPE=stories110M PROMPTS=32 TOKENS=128 THREADS=2
set -euo pipefail
bin=${1:-build/bin}
shape=${SHAPE:-stories110M}
prompts=${PROMPTS:-32}
tokens=${TOKENS:-128}
threads=${THREADS:-2}
shared=${PAGODA_SHARED:-$(dirname "$0")/../../shared}
tok=$shared/models/llama2-tokenizer/tokenizer.bin
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
model=$work/$shape.bin
"$bin/pagoda-make-model" --shape="$shape" --out="$model"
for i in $(seq "$prompts"); do echo "Prompt number $i: once upon a time there was a"; done > "$work/prompts.txt"
now() { date +%s.%N; }

run_args=(--model="$model" --tokenizer="$tok" --temperature=0 --ignore-eos --threads="$threads")
t0=$(now); "$bin/pagoda" run "${run_args[@]}" --prompt=x --max-tokens=1 > /dev/null; t1=$(now)
"$bin/pagoda" run "${run_args[@]}" --prompts-file="$work/prompts.txt" --max-tokens="$tokens" --json > "$work/run.json"; t2=$(now)
load=$(echo "$t1 - $t0" | bc -l)
inproc=$(echo "$prompts * $tokens / ($t2 - $t1 - $load)" | bc -l)

port=$((20000 + RANDOM % 20000)); wport=$((port + 1))
PAGODA_WORKER_TOKEN=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')  # router and worker
export PAGODA_WORKER_TOKEN
"$bin/pagoda-router" --port=$port --worker-port=$wport --http-port=0 --host=127.0.0.1 --model="$model" \
  --tokenizer="$tok" 2> "$work/router.log" &
"$bin/pagoda-worker" --router=127.0.0.1:$wport --model="$model" --threads="$threads" \
  --kv-cache-mb=1024 2> "$work/worker.log" &
until "$bin/pagoda" generate --server=127.0.0.1:$port --prompt=x --max-tokens=1 --timeout=2 \
  > /dev/null 2>&1; do sleep 0.2; done
t3=$(now)
"$bin/pagoda" generate --server=127.0.0.1:$port --prompts-file="$work/prompts.txt" \
  --temperature=0 --ignore-eos --max-tokens="$tokens" --json > "$work/router.json"
t4=$(now)
routed=$(echo "$prompts * $tokens / ($t4 - $t3)" | bc -l)
sleep 6  # one more periodic stats line
printf 'in-process (pagoda run):   %8.1f tok/s  (model load %.2f s excluded)\n' "$inproc" "$load"
printf 'router + 1 worker (gRPC):  %8.1f tok/s\n' "$routed"
printf 'ratio:                     %8.3f\n' "$(echo "$routed / $inproc" | bc -l)"
cmp -s <(grep -o '"output_ids":[^]]*' "$work/run.json") <(grep -o '"output_ids":[^]]*' "$work/router.json") \
  && echo "outputs: identical" || echo "outputs: DIFFER"
grep -h "steps .* step" "$work/router.log" | tail -2 | sed 's/^[^]]*] /router: /'
