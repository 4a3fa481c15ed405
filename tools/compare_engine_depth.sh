#!/usr/bin/env bash
# The engine at the lengths people run, Pagoda's engine_benchmark and llama.cpp's
# llama-batched-bench on one GGUF file, side by side, THREADS threads (issue 42, item 1):
#   short: prefill of 512 tokens; decode of 1 and of 32 sequences at depth 32;
#   deep:  prefill of DEPTH tokens; decode of 1 and of 8 sequences at depth DEPTH.
# Each repeat runs Pagoda's short rows, llama.cpp's, then Pagoda's deep rows, llama.cpp's
# (A B A B), because these VMs' read bandwidth wanders from minute to minute.
#   tools/compare_engine_depth.sh MODEL.gguf
#   BIN=build/bin LLAMA=/tmp/llama.cpp THREADS=2 REPEATS=1 ROWS="short deep" SIDES="pagoda llama"
#   DEPTH=8192       4096, 8192 or 16384 (engine_benchmark's BM_DecodeAt rows)
#   KVS="bf16 int8"  Pagoda's K/V types for the deep decode rows (its prefill uses the first)
#   KV_GIB=9         Pagoda's pool: 8 sequences of DEPTH+1 tokens must fit it
#   LLAMA_KV="-ctk f16 -ctv f16"  llama.cpp's K/V types (its default; "-ctk q8_0 -ctv q8_0")
# llama.cpp's deep rows share one prompt between the 8 sequences (-pps), so each of its two
# deep runs prefills DEPTH tokens once; Pagoda's decode rows start on blocks no step wrote
# (engine_benchmark's BM_DecodeAt), so only its prefill row computes a prompt.
# Outputs: $WORK/{pagoda,llama}-{short,deep}-RUN.txt, and the lines that carry the figures.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
model=${1:?usage: compare_engine_depth.sh MODEL.gguf}
bin=${BIN:-$here/../build/bin}
L=${LLAMA:-/tmp/llama.cpp}/build/bin
t=${THREADS:-2}
depth=${DEPTH:-8192}
kvs=${KVS:-bf16 int8}
work=${WORK:-/tmp/pagoda-engine-depth}
[ -x "$bin/engine_benchmark" ] || { echo "no $bin/engine_benchmark (a Release build)" >&2; exit 2; }
[ -x "$L/llama-batched-bench" ] || { echo "build llama.cpp first (../shared/peers)" >&2; exit 2; }
mkdir -p "$work"

pagoda() {  # ROWS-NAME RUN KV FILTER
  [[ " ${SIDES:-pagoda llama} " == *" pagoda "* ]] || return 0
  local out="$work/pagoda-$1-$2-$3.txt"
  echo "== pagoda $1 (K/V $3), run $2"
  OMP_NUM_THREADS=$t PAGODA_BENCH_MODEL="$model" PAGODA_BENCH_KV="$3" \
    PAGODA_BENCH_KV_GIB=${KV_GIB:-9} "$bin/engine_benchmark" --benchmark_filter="$4" >"$out" 2>&1
  grep -E '^BM_' "$out" || { tail -5 "$out"; return 1; }
}

llama() {  # ROWS-NAME RUN ARGS...
  [[ " ${SIDES:-pagoda llama} " == *" llama "* ]] || return 0
  local name=$1 run=$2 out="$work/llama-$1-$2.txt"
  shift 2
  echo "== llama.cpp $name ${LLAMA_KV:-}, run $run"
  echo "columns: PP TG B N_KV T_PP S_PP(t/s) T_TG S_TG(t/s) T S(t/s)"
  # shellcheck disable=SC2086  # LLAMA_KV is a list of flags
  "$L/llama-batched-bench" -m "$model" -t "$t" -tb "$t" ${LLAMA_KV:-} "$@" >"$out" 2>&1
  grep -E '^\|\s+[0-9]' "$out" || { tail -5 "$out"; return 1; }
}

first_kv=${kvs%% *}
for run in $(seq 1 "${REPEATS:-1}"); do
  for rows in ${ROWS:-short deep}; do
    if [ "$rows" = short ]; then
      pagoda short "$run" "$first_kv" 'BM_Prefill/512/|BM_Decode/(1|32)/'
      llama short "$run" -c 4096 -npp 512 -ntg 1 -npl 1
      llama short "$run" -c 4096 -npp 32 -ntg 64 -npl 1,32
    else
      for kv in $kvs; do
        filter="BM_DecodeAt/(1|8)/$depth/"
        [ "$kv" = "$first_kv" ] && filter="BM_PrefillDeep/$depth/|$filter"
        pagoda deep "$run" "$kv" "$filter"
      done
      # One K/V buffer for all sequences (-kvu): split 8 ways, no sequence's share holds the prompt.
      llama deep "$run" -c $((depth + 8 * 16 + 256)) -kvu -npp "$depth" -ntg 16 -npl 1,8 -pps
    fi
  done
done
