#!/usr/bin/env bash
# README's first command on a bare Debian 12: debootstraps (once, cached: tools/debian_root.sh) a
# minbase bookworm root, copies in a clean clone of this commit and ../shared beside it, and
# inside a chroot (with /proc, /sys, /dev and the host's resolv.conf) runs exactly
#     tools/setup.sh && tools/demo.sh "Once upon a time"
# It passes when that exits 0 and a story comes back. This catches a package missing from
# setup.sh, which a developer machine with years of installs hides. Then the Debian package
# (docs/install.md): `cmake --build build --target deb` in that root, and in a SECOND bare root
#     apt-get install -y ./pagoda_*.deb
# (the runtime libraries only), /usr/bin/pagoda-router --spawn-workers=1 from it serving
# stories260K as the package's user, ready by its /health, a story streamed with the package's
# `pagoda generate`, and a SIGTERM it leaves with exit 0 (FRESH_PACKAGE=0 skips this part).
#   PAGODA_CI_CACHE   where the root tarball and downloaded .debs are kept (/var/cache/pagoda-ci)
#   FRESH_TIMEOUT     give up after this long (default 45m; 26 min were seen on a loaded machine)
# Only committed files are tested (a clone of HEAD). Needs root and debootstrap; without them
# it prints SKIPPED with the reason and exits 77, which .ci/run reports as skipped, not passed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
shared=$(cd "${PAGODA_SHARED:-../shared}" 2>/dev/null && pwd -P) ||
  { echo "fresh_machine_test: ../shared is missing" >&2; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
  echo "fresh_machine_test: SKIPPED (needs root for debootstrap and chroot)"; exit 77
fi
if ! command -v debootstrap >/dev/null; then
  echo "fresh_machine_test: SKIPPED (debootstrap is not installed; .ci/run installs it)"; exit 77
fi
start=$SECONDS
cache=${PAGODA_CI_CACHE:-/var/cache/pagoda-ci}
tarball=$(tools/debian_root.sh)

work=$(mktemp -d /var/tmp/pagoda-fresh.XXXXXX)
root=$work/root
pkg_root=$work/pkg-root  # the second bare root, where the package is installed
mounts=()
cleanup() {
  # Anything still running in a root (a router left by a failure) goes first, then the mounts.
  local pid r
  for pid in $(ls /proc | grep -E '^[0-9]+$'); do
    r=$(readlink "/proc/$pid/root" 2>/dev/null) || continue
    [ "$r" = "$root" ] || [ "$r" = "$pkg_root" ] && kill -9 "$pid" 2>/dev/null || true
  done
  local i
  for ((i = ${#mounts[@]} - 1; i >= 0; i--)); do
    umount -R "${mounts[i]}" 2>/dev/null || umount -lR "${mounts[i]}" || true
  done
  if findmnt -rn -o TARGET | grep -q "^$work"; then
    echo "fresh_machine_test: mounts left under $work, not removing it" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT
mkdir -p "$root"
tar -C "$root" -xf "$tarball"

# The project as a fresh clone would have it: committed files only, ../shared beside it.
git clone -q --no-checkout "$repo" "$root/src/pagoda"
git -C "$root/src/pagoda" checkout -q --detach "$(git rev-parse HEAD)"
mkdir "$root/src/shared"
cp -a "$shared/." "$root/src/shared/"

bind() {  # bind SRC DEST: a mount the trap removes (recursive, and not propagated back).
  mount --rbind "$1" "$2"
  mount --make-rslave "$2"
  mounts+=("$2")
}
# machine ROOT: /proc, /sys, /dev and the host's name servers, as a booted machine has them;
# downloaded .debs are kept between runs (the same files apt would fetch again).
machine() {
  mount -t proc proc "$1/proc"; mounts+=("$1/proc")
  mount -t sysfs sysfs "$1/sys"; mounts+=("$1/sys")
  bind /dev "$1/dev"
  cp /etc/resolv.conf "$1/etc/resolv.conf"
  bind "$cache/apt-archives" "$1/var/cache/apt/archives"
}
mkdir -p "$cache/apt-archives/partial"
machine "$root"
# The host's compile cache (tools/ccache_env.sh; in CI, the first stage's Release objects):
# once setup.sh has installed ccache in the root, demo.sh's build takes its objects from there
# instead of compiling them a second time. FRESH_CCACHE=0 builds cold.
ccache_env=()
if [ "${FRESH_CCACHE:-1}" != 0 ] && command -v ccache > /dev/null; then
  ccache_dir=$(ccache -k cache_dir)
  mkdir -p "$ccache_dir" "$root/var/cache/ccache"
  bind "$ccache_dir" "$root/var/cache/ccache"
  ccache_env=(CCACHE_DIR=/var/cache/ccache)
fi

# demo.sh serves on 50051/50052; another router there would answer its readiness check.
if ss -Htln | awk '{print $4}' | grep -Eq ':5005[12]$'; then
  echo "fresh_machine_test: port 50051 or 50052 is in use; the demo gets PORT=46051" >&2
  export PORT=46051
fi
if ss -Htln | awk '{print $4}' | grep -Eq ':8000$'; then
  echo "fresh_machine_test: port 8000 is in use; the demo gets HTTP_PORT=46053" >&2
  export HTTP_PORT=46053
fi

# in_root ROOT COMMAND...: as root's login on that machine would run it.
in_root() {
  local r=$1
  shift
  chroot "$r" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"
}

# The package made from the first root's Release build, installed with apt in a second bare
# root, serving stories260K from /usr/bin as user pagoda; fails (exit 1) with the logs.
package_test() {
  local t0=$SECONDS log=$work/package.log
  echo "fresh_machine_test: the Debian package: cmake --build build --target deb"
  if ! in_root "$root" "${ccache_env[@]}" /bin/bash -c \
    'cd /src/pagoda && cmake --build build --target deb' > "$log" 2>&1; then
    tail -30 "$log" >&2
    echo "fresh_machine_test: FAILED: the package did not build" >&2
    return 1
  fi
  local debs=("$root"/src/pagoda/build/pagoda_*_amd64.deb)
  [ -f "${debs[0]}" ] || { echo "fresh_machine_test: FAILED: no pagoda_*_amd64.deb" >&2; return 1; }
  local t_built=$SECONDS
  mkdir -p "$pkg_root"
  tar -C "$pkg_root" -xf "$tarball"
  machine "$pkg_root"
  cp "${debs[0]}" "$pkg_root/root/"
  mkdir -p "$pkg_root/srv/models"
  cp "$shared/models/stories260K/stories260K.bin" "$shared/models/stories260K/tok512.bin" \
    "$pkg_root/srv/models/"
  echo "fresh_machine_test: in a second bare Debian 12 root: apt-get install -y ./$(basename "${debs[0]}")"
  if ! in_root "$pkg_root" /bin/bash -c 'cd /root && apt-get update -q &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q ./pagoda_*_amd64.deb' > "$log" 2>&1; then
    tail -30 "$log" >&2
    echo "fresh_machine_test: FAILED: apt-get install of the package" >&2
    return 1
  fi
  grep -E 'newly installed' "$log" || true
  local t_installed=$SECONDS
  # Ports of their own: the demo's router may still be letting go of its.
  local port=50151 http_port=8100
  if ss -Htln | awk '{print $4}' | grep -Eq ":(5015[12]|8100)$"; then
    echo "fresh_machine_test: port 50151, 50152 or 8100 is in use; the package's router gets 46151-46153" >&2
    port=46151 http_port=46153
  fi
  # As the unit's user, pagoda; chroot and env exec, so $! is the router itself.
  chroot --userspec=pagoda:pagoda "$pkg_root" /usr/bin/env -i LANG=C.UTF-8 \
    /usr/bin/pagoda-router --port="$port" --worker-port=$((port + 1)) --http-port="$http_port" \
    --model=/srv/models/stories260K.bin --tokenizer=/srv/models/tok512.bin --spawn-workers=1 \
    2> "$work/package-router.log" &
  local router=$! ready=0 reply
  # Ready when its /health answers 200 (bash's /dev/tcp: the bare root has no curl).
  for _ in $(seq 600); do
    reply=$({ exec 3<> "/dev/tcp/127.0.0.1/$http_port" &&
      printf 'GET /health HTTP/1.0\r\n\r\n' >&3 && IFS= read -r -t 5 line <&3 &&
      echo "$line"; } 2> /dev/null) || true
    [[ "$reply" == "HTTP/1.1 200"* ]] && { ready=1; break; }
    kill -0 "$router" 2> /dev/null || break
    sleep 0.1
  done
  if [ $ready != 1 ]; then
    tail -20 "$work/package-router.log" >&2
    echo "fresh_machine_test: FAILED: the package's router did not become ready" >&2
    return 1
  fi
  local t_ready=$SECONDS story
  story=$(in_root "$pkg_root" /usr/bin/pagoda generate --server=127.0.0.1:"$port" \
    --prompt="Once upon a time" --temperature=0 2>&1) || true
  # Stopped as systemd stops the unit: SIGTERM, and SIGKILL after its TimeoutStopSec=45.
  kill -TERM "$router"
  (sleep 45 && kill -KILL "$router" 2> /dev/null) &
  local watchdog=$! status=0
  wait "$router" || status=$?
  kill "$watchdog" 2> /dev/null || true
  if [ "$(wc -w <<< "$story")" -lt 10 ] || [ $status != 0 ]; then
    echo "$story" >&2
    tail -20 "$work/package-router.log" >&2
    echo "fresh_machine_test: FAILED: the package's router (SIGTERM: exit $status)" >&2
    return 1
  fi
  echo "$story"
  echo "fresh_machine_test: the package: built in $((t_built - t0))s, installed in" \
    "$((t_installed - t_built))s, ready in $((t_ready - t_installed))s; $((SECONDS - t0))s in all"
}

echo "fresh_machine_test: in a bare Debian 12 root: tools/setup.sh && tools/demo.sh \"Once upon a time\""
out=$work/demo.out
# Each output line gets the second it was printed, to tell setup.sh's time from demo.sh's.
stamp() {
  local line now
  while IFS= read -r line || [ -n "$line" ]; do
    printf -v now '%(%s)T' -1
    printf '%s %s\n' "$now" "$line"
  done
}
printf -v t0 '%(%s)T' -1
{
  status=0
  timeout "${FRESH_TIMEOUT:-45m}" chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 \
    PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin ${PORT:+PORT=$PORT} \
    ${HTTP_PORT:+HTTP_PORT=$HTTP_PORT} \
    "${ccache_env[@]}" \
    /bin/bash -c 'cd /src/pagoda && tools/setup.sh && tools/demo.sh "Once upon a time"' \
    2>&1 || status=$?
  echo "fresh_machine_test: exit $status"
} | stamp > "$out"
printf -v t1 '%(%s)T' -1
status=$(tail -1 "$out" | awk '{print $NF}')
story=$(sed -n '/^[0-9]* router ready/,$p' "$out" | sed '1d;$d' | cut -d' ' -f2-)
if [ "$status" != 0 ] || [ "$(wc -w <<< "$story")" -lt 10 ]; then
  tail -40 "$out" | cut -d' ' -f2- >&2
  [ -f "$root/tmp/pagoda-router.log" ] && { echo "--- router log" >&2; tail -20 "$root/tmp/pagoda-router.log" >&2; }
  echo "fresh_machine_test: FAILED (exit $status after $((SECONDS - start))s)" >&2
  exit 1
fi
grep -E '^[0-9]+ setup: installing' "$out" | cut -d' ' -f2- | cut -c1-200 || true
echo "$story"
# setup.sh ends with its last line before demo.sh's "router ready" (demo's build is silent).
t_ready=$(grep -m1 -E '^[0-9]+ router ready' "$out" | cut -d' ' -f1)
t_setup=$(sed -n '/^[0-9]* router ready/q;p' "$out" | tail -1 | cut -d' ' -f1)
echo "fresh_machine_test: setup.sh $((t_setup - t0))s, demo.sh's build and start" \
  "$((t_ready - t_setup))s, the request $((t1 - t_ready))s"
[ "${FRESH_PACKAGE:-1}" = 0 ] || package_test
echo "fresh_machine_test: passed in $((SECONDS - start))s"
