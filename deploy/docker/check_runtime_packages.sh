#!/usr/bin/env bash
# Checks the runtime stage of the Dockerfile names exactly the Debian packages whose shared
# libraries the binaries load (ldd -> dpkg -S), the C library included (already in the base
# image; naming it costs nothing). Catches a new dependency before an image fails to start.
#   deploy/docker/check_runtime_packages.sh Dockerfile BINARY...
set -euo pipefail
dockerfile=$1
shift
listed=$(sed -n '/# runtime-packages-begin/,/# runtime-packages-end/p' "$dockerfile" |
  grep -oE '^\s+[a-z0-9][a-z0-9.+-]+\s*\\$' | tr -d ' \\' | sort -u)
needed=$(
  for binary in "$@"; do
    ldd "$binary" | awk '/=> \// { print $3 }'
  done | sort -u | while read -r lib; do
    # dpkg knows a file by one of its names (merged /usr: /lib is /usr/lib).
    real=$(readlink -f "$lib")
    owner=""
    for name in "$lib" "$real" "${real#/usr}"; do
      owner=$(dpkg -S "$name" 2>/dev/null | head -1 | cut -d: -f1) && break || owner=""
    done
    if [ -z "$owner" ]; then
      echo "check: $lib belongs to no Debian package" >&2
      echo "?unowned:$lib"
      continue
    fi
    echo "$owner"
  done | sort -u
)
status=0
missing=$(comm -13 <(echo "$listed") <(echo "$needed"))
extra=$(comm -23 <(echo "$listed") <(echo "$needed"))
if [ -n "$missing" ]; then
  echo "the runtime stage lacks: $(echo $missing)" >&2
  status=1
fi
if [ -n "$extra" ]; then
  echo "the runtime stage installs what nothing loads: $(echo $extra)" >&2
  status=1
fi
[ $status -eq 0 ] && echo "ok: $(echo "$listed" | wc -l) runtime packages, as loaded by $# binaries"
exit $status
