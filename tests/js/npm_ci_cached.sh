# Sourced by the Node tests' ctest entries (tests/openai_sdk, tests/web_ui).
#   npm_ci_cached HERE CACHE NAME
# installs HERE's package.json exactly as its package-lock.json pins it (npm ci; puppeteer
# downloads no browser), once per lockfile, in CACHE/NAME-<the lockfile's hash>, and sets
# npm_dir to that directory. One install at a time: the tests may start together.
npm_ci_cached() {
  local here=$1 cache=$2 name=$3
  npm_dir="$cache/$name-$(sha256sum "$here/package-lock.json" | cut -c1-16)"
  mkdir -p "$cache"
  exec 9> "$cache/.install-lock"
  flock 9
  if [ ! -d "$npm_dir/node_modules" ]; then
    rm -rf "$npm_dir.partial" && mkdir -p "$npm_dir.partial"
    cp "$here/package.json" "$here/package-lock.json" "$npm_dir.partial/"
    (cd "$npm_dir.partial" &&
      PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
    rm -rf "$npm_dir" && mv "$npm_dir.partial" "$npm_dir"
  fi
  flock -u 9
}
