#!/usr/bin/env bash
# Builds Pagoda and runs its whole test suite with ctest.
#   tools/test.sh              Release build in build/
#   SANITIZE=1 tools/test.sh   -fsanitize=address,undefined build in build-asan/
# Both trees build with -Werror and compile each test executable's sources in batches
# (PAGODA_UNITY_TESTS: router_test's objects took 108 CPU-s against 246 apart); the Release
# tree also runs the style checks (clang-format, Clang's thread-safety analysis of router/ and
# common/) as tests.
# Tests read the real models from ../shared (or $PAGODA_SHARED).
set -euo pipefail
cd "$(dirname "$0")/.."
PAGODA_SETUP_STYLE=1 tools/setup.sh
source tools/ccache_env.sh
if [ "${SANITIZE:-0}" = 1 ]; then
  dir=${BUILD_DIR:-build-asan}
  # -O1 and line tables only (-g1): enough for the sanitizers' stack traces; -O2 took ~1.45x
  # the compile time (25.3 against 17.6 s for responses_output.cc, 31.3 against 19.3 s for
  # cluster_test.cc) for tests that are not compute-bound. No benchmarks: no test runs them, and
  # the Release tree compiles them.
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAGODA_SANITIZE=ON -DPAGODA_WERROR=ON \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" -DPAGODA_BENCHMARKS=OFF \
    -DPAGODA_UNITY_TESTS=ON "${pagoda_ccache_args[@]}"
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
else
  dir=${BUILD_DIR:-build}
  cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPAGODA_WERROR=ON \
    -DPAGODA_UNITY_TESTS=ON "${pagoda_ccache_args[@]}"
fi
cmake --build "$dir" -j "$(nproc)"
# Tests use both cores themselves (OpenMP); two at a time keeps the machine busy, not thrashing.
OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} ctest --test-dir "$dir" --output-on-failure -j "$(nproc)"
