#!/usr/bin/env bash
# The AVX-512 kernel library must define nothing the rest of the program could link to except
# its own pagoda::avx512:: functions: an inline function or template instantiated there (a weak
# symbol) could be the copy the linker keeps for everyone, and would then run AVX-512
# instructions on an AVX2-only CPU. Local symbols (t, d, b, r) are private to their object.
#   kernel_symbols_test.sh LIBRARY.a NAMESPACE
set -euo pipefail
lib=$1 ns=$2
bad=$(nm -C --defined-only "$lib" | awk 'NF >= 3 && $2 !~ /^[tdbrn]$/' | grep -v " ${ns}::" || true)
if [ -n "$bad" ]; then
  echo "symbols outside ${ns}:: in $lib:"
  echo "$bad"
  exit 1
fi
echo "ok: every exported symbol of $(basename "$lib") is in ${ns}::"
