#!/usr/bin/env bash
# The Debian package as apt would see it: cpack on the built Release tree, then dpkg-deb says
# what it holds. It must hold the three binaries (stripped, still running), a man page for each
# that man renders without a warning, the systemd units and their /etc/default conffiles, and
# maintainer scripts; its Depends must be the container image's runtime packages (which
# DeployTest.ImageRuntimePackagesMatchTheBinaries checks against ldd) plus adduser. The units
# pass `systemd-analyze verify` where systemd is installed (skipped, and said, where not).
#   debian_package_test.sh BUILD_DIR SOURCE_DIR VERSION
set -euo pipefail
build=$1
source=$2
version=$3
for tool in cpack dpkg-deb dpkg-shlibdeps file readelf; do
  command -v "$tool" > /dev/null || { echo "SKIPPED: $tool is not installed"; exit 77; }
done
work=$build/deb-test
rm -rf "$work"
mkdir -p "$work"
fail() {
  echo "FAILED: $*" >&2
  exit 1
}

cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work" > "$work/cpack.log" 2>&1 ||
  { cat "$work/cpack.log" >&2; fail "cpack -G DEB"; }
deb=$work/pagoda_${version}_amd64.deb
[ -f "$deb" ] || fail "no $(basename "$deb") in $work: $(ls "$work")"

field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = pagoda ] || fail "Package: $(field Package)"
[ "$(field Version)" = "$version" ] || fail "Version: $(field Version)"
[ "$(field Architecture)" = amd64 ] || fail "Architecture: $(field Architecture)"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
[ -n "$(field Description)" ] || fail "no Description"

# Every file the package installs, and no other.
expected="./etc/default/pagoda-router
./etc/default/pagoda-worker
./lib/systemd/system/pagoda-router.service
./lib/systemd/system/pagoda-worker.service
./usr/bin/pagoda
./usr/bin/pagoda-router
./usr/bin/pagoda-worker
./usr/share/man/man1/pagoda-router.1.gz
./usr/share/man/man1/pagoda-worker.1.gz
./usr/share/man/man1/pagoda.1.gz"
files=$(dpkg-deb -c "$deb" | awk '$1 !~ /^d/ { print $6 }' | sort)
if [ "$files" != "$expected" ]; then
  diff <(echo "$expected") <(echo "$files") >&2 || true
  fail "the package's files (< expected, > found)"
fi
dpkg-deb -c "$deb" | awk '$1 !~ /^d/ && $6 ~ /^.\/usr\/bin\// && $1 != "-rwxr-xr-x" { bad = 1 } END { exit bad }' ||
  fail "a binary is not mode 755: $(dpkg-deb -c "$deb" | grep usr/bin/)"

mkdir "$work/control"
dpkg-deb -e "$deb" "$work/control"
[ "$(cat "$work/control/conffiles")" = "/etc/default/pagoda-router
/etc/default/pagoda-worker" ] || fail "conffiles: $(cat "$work/control/conffiles")"
for script in postinst prerm postrm; do
  [ -x "$work/control/$script" ] || fail "no executable $script"
  sh -n "$work/control/$script" || fail "$script does not parse"
done
grep -q 'adduser --system' "$work/control/postinst" || fail "postinst makes no system user"
if grep -qE 'systemctl( --system)? (enable|start)' "$work/control/postinst"; then
  fail "postinst enables or starts a unit (the model must be set first)"
fi

x=$work/root
dpkg-deb -x "$deb" "$x"
for b in pagoda-router pagoda-worker pagoda; do
  out=$("$x/usr/bin/$b" --version) || fail "$b --version exits $?"
  [[ "$out" == "$b $version"* ]] || fail "$b --version says: $out"
  file -b "$x/usr/bin/$b" | grep -q 'not stripped' && fail "$b is not stripped"
done

# Depends (names only: versions and alternatives aside) must be adduser and the packages of the
# libraries the binaries name (NEEDED; not the libraries those load in turn, as Debian does it),
# each one of the container image's runtime packages (checked against ldd by
# DeployTest.ImageRuntimePackagesMatchTheBinaries).
depends=$(field Depends | tr ',' '\n' | sed -E 's/\(.*\)//; s/\|.*//; s/ //g' | grep . | sort -u)
# The NEEDED libraries' files as ldd finds them, then their packages from one dpkg -S (merged
# /usr: dpkg knows each file by one of its names).
libs=$(
  for b in pagoda-router pagoda-worker pagoda; do
    paths=$(ldd "$x/usr/bin/$b" | awk '/=> \// { print $1, $3 }')
    readelf -d "$x/usr/bin/$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | while read -r soname; do
      lib=$(awk -v s="$soname" '$1 == s { print $2 }' <<< "$paths")
      echo "${lib:-?$b: ldd does not find $soname}"
    done
  done | sort -u
)
grep '^?' <<< "$libs" && fail "a library the binaries need is missing here"
declare -A names
for lib in $libs; do
  real=$(readlink -f "$lib")
  for name in "$lib" "$real" "${real#/usr}"; do names[$name]=$lib; done
done
declare -A owner
while IFS= read -r line; do  # "libfoo1:amd64: /usr/lib/x86_64-linux-gnu/libfoo.so.1"
  file=${line##*: }
  [ -n "${names[$file]:-}" ] && owner[${names[$file]}]=${line%%:*}
done < <(dpkg -S "${!names[@]}" 2> /dev/null)
needed=$(for lib in $libs; do echo "${owner[$lib]:-?unowned:$lib}"; done | sort -u)
wanted=$( (echo "$needed"; echo adduser) | sort -u)
if [ "$depends" != "$wanted" ]; then
  diff <(echo "$wanted") <(echo "$depends") >&2 || true
  fail "Depends is not adduser + the NEEDED libraries' packages (< those, > Depends)"
fi
image=$(sed -n '/# runtime-packages-begin/,/# runtime-packages-end/p' \
  "$source/deploy/docker/Dockerfile" | grep -oE '^\s+[a-z0-9][a-z0-9.+-]+\s*\\$' |
  tr -d ' \\' | sort -u)
outside=$(comm -23 <(echo "$needed") <(echo "$image"))
[ -z "$outside" ] || fail "Depends names packages the image does not install: $outside"

# Each page renders without a groff warning and lists a flag of its own program.
declare -A flag=([pagoda-router]=--spawn-workers [pagoda-worker]=--drain-timeout-s
  [pagoda]=--server)
if command -v man > /dev/null; then
  for b in pagoda-router pagoda-worker pagoda; do
    page=$x/usr/share/man/man1/$b.1.gz
    text=$(MANWIDTH=100 man --warnings -E UTF-8 -P cat -l "$page" 2> "$work/man.err") ||
      fail "man -l $page"
    [ ! -s "$work/man.err" ] || { cat "$work/man.err" >&2; fail "man warns on $b.1"; }
    for want in NAME SYNOPSIS OPTIONS "SEE ALSO" "${flag[$b]}"; do
      grep -qF -- "$want" <<< "$text" || fail "$b.1 has no $want"
    done
  done
else
  echo "man is not installed: the pages are not rendered"
fi

if command -v systemd-analyze > /dev/null && [ -f /lib/systemd/system/sysinit.target ]; then
  # Against the package's tree (the units name /usr/bin/pagoda-*) with this machine's units
  # beside them (they need sysinit.target and the rest). An unknown key is only a warning.
  v=$work/verify-root
  cp -al "$x" "$v"
  cp -an /lib/systemd/system/. "$v/lib/systemd/system/"
  for unit in pagoda-router.service pagoda-worker.service; do
    systemd-analyze verify --man=no --root="$v" "$v/lib/systemd/system/$unit" > "$work/verify.log" 2>&1 ||
      { cat "$work/verify.log" >&2; fail "systemd-analyze verify $unit"; }
    if grep -v -e '^$' "$work/verify.log" | grep -q .; then
      cat "$work/verify.log" >&2
      fail "systemd-analyze verify warns on $unit"
    fi
  done
else
  echo "systemd is not installed: the units are not verified"
fi
echo "ok: $(basename "$deb"), $(stat -c %s "$deb") bytes; Depends: $(field Depends)"
