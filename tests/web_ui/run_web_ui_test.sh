#!/usr/bin/env bash
# ctest's entry to the page's browser test: installs puppeteer-core exactly as package-lock.json
# pins it (npm ci, once per lockfile, in CACHE_DIR; it downloads no browser) and runs
# web_ui_test.mjs with node's runner against Debian's chromium.
#   run_web_ui_test.sh BIN_DIR SHARED_DIR CACHE_DIR SCREENSHOT_DIR
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=$1 shared=${PAGODA_SHARED:-$2} cache=$3 shots=$4
for tool in node npm; do
  if ! command -v "$tool" > /dev/null; then
    echo "error: $tool is needed (tools/setup.sh installs nodejs and npm)" >&2
    exit 1
  fi
done
browser=${PAGODA_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$browser" ]; then
  echo "error: $browser is missing (PAGODA_SETUP_STYLE=1 tools/setup.sh, as tools/test.sh runs it, installs Debian's chromium)" >&2
  exit 1
fi
source "$here/../js/npm_ci_cached.sh"
npm_ci_cached "$here" "$cache" web-ui
dir=$npm_dir
# Under node_modules' directory, so `import "puppeteer-core"` resolves to the pinned copy.
run=$(mktemp -d "$dir/run.XXXXXX")
# The routers' logs and model copies: removed after a pass, kept (and named) after a failure.
# The screenshots stay in SCREENSHOT_DIR either way (CI keeps them as artifacts).
work=$(mktemp -d "${TMPDIR:-/tmp}/web-ui-run.XXXXXX")
trap 'status=$?; rm -rf "$run"
      if [ "$status" -eq 0 ]; then rm -rf "$work"; else echo "logs kept in $work" >&2; fi' EXIT
rm -rf "$shots" && mkdir -p "$shots"
cp "$here/web_ui_test.mjs" "$here/../js/pagoda_router.mjs" "$run/"
PAGODA_BIN_DIR=$bin PAGODA_SHARED_DIR=$shared PAGODA_WORK_DIR=$work PAGODA_CHROMIUM=$browser \
  PAGODA_SCREENSHOT_DIR=$shots node --test --test-reporter=spec "$run/web_ui_test.mjs"
echo "screenshots in $shots"
