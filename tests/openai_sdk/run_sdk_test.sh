#!/usr/bin/env bash
# ctest's entry to the OpenAI SDK test: installs the SDK exactly as package-lock.json pins it
# (npm ci, once per lockfile, in CACHE_DIR) and runs TEST (openai_sdk_test.mjs unless given)
# with node's runner.
#   run_sdk_test.sh BIN_DIR SHARED_DIR CACHE_DIR [TEST]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 shared=${PAGODA_SHARED:-$2} cache=$3 test=${4:-openai_sdk_test.mjs}
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  echo "error: node and npm are needed (tools/setup.sh installs nodejs and npm)" >&2
  exit 1
fi
source "$here/../js/npm_ci_cached.sh"
npm_ci_cached "$here" "$cache" openai-sdk
dir=$npm_dir
# Under node_modules' directory, so `import "openai"` resolves to the pinned copy; one
# directory per run, so runs side by side do not rewrite each other's files.
run=$(mktemp -d "$dir/run.XXXXXX")
# The routers' model copies and logs: removed after a pass, kept (and named) after a failure.
work=$(mktemp -d "${TMPDIR:-/tmp}/openai-sdk-run.XXXXXX")
trap 'status=$?; rm -rf "$run"
      if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "logs kept in $work" >&2; fi' EXIT
cp "$here/$test" "$here/router_fixture.mjs" "$here/../js/pagoda_router.mjs" "$run/"
PAGODA_BIN_DIR=$bin PAGODA_SHARED_DIR=$shared PAGODA_WORK_DIR=$work \
  node --test --test-reporter=spec "$run/$test"
