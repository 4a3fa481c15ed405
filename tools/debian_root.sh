#!/usr/bin/env bash
# Prints the path of a tarball holding a bare Debian 12 root (`debootstrap --variant=minbase
# bookworm`), made once and cached outside the repository; tools/fresh_machine_test.sh unpacks
# it as its fresh machine and tools/image_test.sh imports it as the image's base.
#   PAGODA_CI_CACHE   cache directory (default /var/cache/pagoda-ci)
#   DEBIAN_MIRROR     default http://deb.debian.org/debian
# The root gets the sources of a standard Debian 12 install (bookworm, bookworm-updates,
# bookworm-security), as Docker Hub's debian:bookworm has; a tarball older than 7 days is
# made again, so what it holds stays close to the archive. Needs root and debootstrap.
set -euo pipefail
cache=${PAGODA_CI_CACHE:-/var/cache/pagoda-ci}
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
tarball=$cache/bookworm-minbase.tar
mkdir -p "$cache"
if [ -s "$tarball" ] && [ -z "$(find "$tarball" -mtime +7)" ]; then
  echo "$tarball"
  exit 0
fi
root=$(mktemp -d "$cache/debootstrap.XXXXXX")
trap 'rm -rf "$root"' EXIT
echo "debian_root: debootstrap --variant=minbase bookworm (cached in $tarball)" >&2
debootstrap --variant=minbase bookworm "$root" "$mirror" > "$root.log" 2>&1 ||
  { tail -20 "$root.log" >&2; exit 1; }
rm -f "$root.log" "$root/etc/apt/sources.list"
cat > "$root/etc/apt/sources.list.d/debian.sources" <<EOF
Types: deb
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: ${mirror%/debian}/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
# No apt lists and no downloaded packages in the image: as on a new machine, apt-get update first.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb
chmod 0755 "$root"  # mktemp made it 0700; as the image's / it would lock out non-root users
tar -C "$root" -cf "$tarball.tmp" .
mv "$tarball.tmp" "$tarball"
echo "$tarball"
