#!/usr/bin/env bash
# Builds deploy/docker/Dockerfile with Buildah and runs it as a deployment would: a router and
# two workers, each its own container, read-only, as the image's non-root user, serving
# stories260K from ../shared mounted read-only. From the host it checks grpc.health.v1
# (router liveness and readiness, each worker's), streams a request, reads /metrics, then
# `podman stop`s every container and expects exit code 0 from each.
#
# No registry is reached: the base is a debootstrapped minbase bookworm root
# (tools/debian_root.sh, cached), imported and tagged as both debian:bookworm and
# debian:bookworm-slim. Images and containers live in a temporary store (vfs), removed at the end.
#   KEEP_STORE=DIR  use (and keep) this store instead, e.g. to look at the image afterwards
#   BUILD_TIMEOUT   give up on the build after this long (default 45m)
#   PREBUILT=DIR    the binaries from DIR (default build/bin, when it holds all three, as in CI
#                   after tools/test.sh): the Dockerfile's runtime stage exactly as written, its
#                   build stage replaced by those binaries. The build stage runs tools/setup.sh
#                   and the Release build that tools/fresh_machine_test.sh runs on a bare root;
#                   building them a third time would add ~8 minutes and test nothing new.
#                   PREBUILT=none builds the whole Dockerfile.
# Needs root, buildah, podman, runc and python3-grpcio (.ci/run installs them); without them it
# prints SKIPPED with the reason and exits 77, which .ci/run reports as skipped, not passed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
models=$(cd "${PAGODA_SHARED:-../shared}/models/stories260K" 2>/dev/null && pwd) ||
  { echo "image_test: ../shared/models/stories260K is missing" >&2; exit 1; }
if [ "$(id -u)" -ne 0 ]; then
  echo "image_test: SKIPPED (needs root: buildah and podman run here with the vfs driver as root)"
  exit 0
fi
for tool in debootstrap buildah podman runc; do
  command -v "$tool" >/dev/null ||
    { echo "image_test: SKIPPED ($tool is not installed; .ci/run installs it)"; exit 77; }
done
/usr/bin/python3 -c 'import grpc' 2>/dev/null ||
  { echo "image_test: SKIPPED (python3-grpcio is not installed; .ci/run installs it)"; exit 77; }
start=$SECONDS
tarball=$(tools/debian_root.sh)

work=$(mktemp -d /var/tmp/pagoda-image.XXXXXX)
store=${KEEP_STORE:-$work/store}
mkdir -p "$store"
opts=(--root "$store/root" --runroot "$store/run" --storage-driver vfs)
pod() { podman "${opts[@]}" --cgroup-manager=cgroupfs --events-backend=file "$@"; }
names=()
cleanup() {
  local name
  for name in "${names[@]}"; do pod rm -f -t 0 "$name" > /dev/null 2>&1 || true; done
  if [ -z "${KEEP_STORE:-}" ]; then
    buildah "${opts[@]}" rm --all > /dev/null 2>&1 || true
  fi
  umount -R "$store/run" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

echo "image_test: the debootstrap root as debian:bookworm, and slimmed as debian:bookworm-slim"
# With the configuration Docker Hub's debian images carry (a PATH, bash as the command).
pod import -q --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' "$tarball" docker.io/library/debian:bookworm > /dev/null
# -slim: the same root without documentation, man pages and translations, and with the dpkg
# configuration that keeps later installs without them, as Docker Hub's is made (debuerreotype).
slim=$work/slim
mkdir "$slim"
tar -C "$slim" -xf "$tarball"
cat > "$slim/etc/dpkg/dpkg.cfg.d/docker" <<'END'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/lintian/overrides/*
path-exclude /usr/share/locale/*
path-exclude /usr/share/man/*
END
find "$slim/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$slim/usr/share/doc" -mindepth 1 -depth -type d -empty -delete
rm -rf "$slim"/usr/share/{groff,info,linda,lintian/overrides,locale,man}/*
tar -C "$slim" -c . | pod import -q --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  --change 'CMD ["bash"]' - docker.io/library/debian:bookworm-slim > /dev/null
rm -rf "$slim"

prebuilt=${PREBUILT:-build/bin}
dockerfile=deploy/docker/Dockerfile
context=$repo
if [ "$prebuilt" != none ] && [ -x "$prebuilt/pagoda-router" ] && [ -x "$prebuilt/pagoda-worker" ] &&
   [ -x "$prebuilt/pagoda" ]; then
  # A context of the three binaries where the build stage left them (/src/build/bin), and the
  # Dockerfile from its runtime stage on.
  context=$work/context
  mkdir -p "$context/src/build/bin"
  cp "$prebuilt/pagoda-router" "$prebuilt/pagoda-worker" "$prebuilt/pagoda" "$context/src/build/bin/"
  { echo "FROM scratch AS build"; echo "COPY src /src"
    sed -n '/^FROM debian:bookworm-slim AS runtime/,$p' deploy/docker/Dockerfile; } > "$context/Dockerfile"
  grep -q '^FROM debian:bookworm-slim AS runtime' "$context/Dockerfile" ||
    { echo "image_test: FAILED (no runtime stage in deploy/docker/Dockerfile)" >&2; exit 1; }
  dockerfile=$context/Dockerfile
  echo "image_test: the runtime stage of deploy/docker/Dockerfile over the binaries of $prebuilt"
fi
echo "image_test: buildah bud -f $dockerfile (log: build.log on failure)"
build_start=$SECONDS
timeout "${BUILD_TIMEOUT:-45m}" buildah "${opts[@]}" bud --isolation=chroot --network=host \
  --pull=never --layers=false -f "$dockerfile" -t localhost/pagoda:test "$context" > "$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log" >&2; echo "image_test: FAILED (build)" >&2; exit 1; }
build_s=$((SECONDS - build_start))
size=$(pod image inspect --format '{{.Size}}' localhost/pagoda:test)
user=$(pod image inspect --format '{{.Config.User}}' localhost/pagoda:test)
echo "image_test: built in ${build_s}s; image $((size / 1000000)) MB, user $user"
[ "$user" = 10001:10001 ] || { echo "image_test: FAILED (image user $user)" >&2; exit 1; }

# Five free loopback ports: public, worker link, metrics, and the two workers' health ports.
port=""
for base in 47051 47151 47251 47351 47451; do
  used=$(ss -Htln | awk '{print $4}' | grep -cE ":($base|$((base + 1))|$((base + 2))|$((base + 3))|$((base + 4)))\$" || true)
  [ "$used" = 0 ] && { port=$base; break; }
done
[ -n "$port" ] || { echo "image_test: FAILED (no free ports)" >&2; exit 1; }
token=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')

# What the Kubernetes manifests ask of the pods: a read-only root (and no writable /tmp
# either), the image's own user, no capabilities, no new privileges. The ulimits are explicit
# and modest: runc here may not raise them to the host's own hard limits (EPERM).
ulimits=(--ulimit nofile=16384:16384 --ulimit nproc=8192:8192)
run() {  # run NAME ENTRYPOINT ARGS...
  local name=$1 entrypoint=$2
  shift 2
  names+=("$name")
  pod run -d --name "$name" --runtime=runc --network=host --read-only --read-only-tmpfs=false \
    --cap-drop=all --security-opt=no-new-privileges "${ulimits[@]}" \
    -v "$models:/models:ro" -e PAGODA_WORKER_TOKEN="$token" -e OMP_NUM_THREADS=1 \
    --entrypoint "$entrypoint" localhost/pagoda:test "$@" > /dev/null || fail "starting $name"
}
fail() {
  local name
  echo "image_test: FAILED ($1)" >&2
  for name in "${names[@]}"; do
    echo "--- $name" >&2
    pod logs --tail 15 "$name" >&2 || true
  done
  exit 1
}
run pagoda-router /usr/local/bin/pagoda-router --port=$port --worker-port=$((port + 1)) \
  --metrics-port=$((port + 2)) --http-port=$((port + 10)) --model=/models/stories260K.bin \
  --tokenizer=/models/tok512.bin
for i in 0 1; do
  run pagoda-worker-$i /usr/local/bin/pagoda-worker --router=127.0.0.1:$((port + 1)) \
    --model=/models/stories260K.bin --threads=1 --kv-cache-mb=64 \
    --health-port=$((port + 3 + i)) --name=worker-$i
done
health=(/usr/bin/python3 tools/grpc_health.py)
"${health[@]}" 127.0.0.1:$port liveness --wait=60 || fail "router liveness"
"${health[@]}" 127.0.0.1:$((port + 3)) "" --wait=60 || fail "worker-0 readiness"
"${health[@]}" 127.0.0.1:$((port + 4)) "" --wait=60 || fail "worker-1 readiness"
"${health[@]}" 127.0.0.1:$((port + 3)) liveness || fail "worker-0 liveness"
"${health[@]}" 127.0.0.1:$((port + 4)) liveness || fail "worker-1 liveness"
"${health[@]}" 127.0.0.1:$port "" --wait=60 || fail "router readiness"
ids=$(pod top pagoda-router huser hgroup | tail -n +2 | sort -u | tr -s ' ')
[ "$ids" = "10001 10001" ] || fail "the router runs as '$ids', not 10001 10001"

# The request: the image's own client, in a throwaway container on the host's network.
story=$(pod run --rm --runtime=runc --network=host --read-only "${ulimits[@]}" \
  --entrypoint /usr/local/bin/pagoda localhost/pagoda:test generate \
  --server=127.0.0.1:$port --prompt="Once upon a time" --temperature=0 --max-tokens=64) ||
  fail "generate"
echo "$story"
[ "$(wc -w <<< "$story")" -ge 10 ] || fail "a story of fewer than 10 words"
metrics=$(/usr/bin/python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=5).read().decode())' \
  "http://127.0.0.1:$((port + 2))/metrics") || fail "metrics"
grep -E '^pagoda_num_workers(\{[^}]*\})? 2$' <<< "$metrics" > /dev/null ||
  fail "metrics: pagoda_num_workers is not 2"
grep -E '^pagoda_num_requests_waiting' <<< "$metrics" > /dev/null ||
  fail "metrics: no pagoda_num_requests_waiting"

# SIGTERM: workers drain and exit 0, then the router exits 0.
for name in pagoda-worker-0 pagoda-worker-1 pagoda-router; do
  pod stop -t 40 "$name" > /dev/null
  code=$(pod inspect --format '{{.State.ExitCode}}' "$name")
  [ "$code" = 0 ] || fail "$name exited $code after podman stop"
done
echo "image_test: passed in $((SECONDS - start))s (build ${build_s}s, image $((size / 1000000)) MB)"
