#!/usr/bin/env bash
# ThreadSanitizer over router_test's tests with in-process fake workers: the Cluster, worker
# loops, engines, request table and transfers, whose threads meet at the Cluster's locks. The
# tests that start processes or gRPC servers are left out (Debian's gRPC is not built with TSan,
# so TSan cannot see its synchronisation). Abseil's mutexes are made visible to TSan by
# tools/tsan/absl_mutex_tsan.cc (CMake's PAGODA_TSAN).
#   tools/tsan_check.sh [BUILD_DIR]     default build-tsan; FILTER=... picks other tests
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-tsan}
source tools/ccache_env.sh
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPAGODA_TSAN=ON -DPAGODA_WERROR=ON \
  -DPAGODA_BENCHMARKS=OFF -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  "${pagoda_ccache_args[@]}" > /dev/null
cmake --build "$dir" -j "$(nproc)" --target router_test
filter=${FILTER:--RouterServer*:H2Proxy*:LocalWorkers*:LoadReport*}
# halt_on_error: the first race fails the run, with both stacks.
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" OMP_NUM_THREADS=1 \
  "$dir/bin/router_test" --gtest_filter="$filter" --gtest_brief=1
echo "tsan_check: router_test ($filter) passed under ThreadSanitizer"
