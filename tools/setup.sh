#!/usr/bin/env bash
# Installs what Pagoda needs to build and test on Debian 12 (bookworm). Safe to re-run.
#   PAGODA_SETUP_ONLY_BUILD=1  only what the build needs (the container image's build stage)
#   PAGODA_SETUP_STYLE=1       also clang, clang-format, python3 and chromium, for the style and
#                              browser tests (tools/test.sh)
set -euo pipefail
# Every package is named: --no-install-recommends installs nothing by luck.
# nlohmann-json, cpp-httplib and PCRE2 are the packaged JSON, HTTP and regex libraries.
# oneDNN (libdnnl-dev, the worker's bf16 matmuls) is built with an OpenCL GPU runtime: its CMake
# config finds OpenCL, so ocl-icd-opencl-dev comes too (only the CPU engine is used). ccache:
# rebuilds (and CI's fresh-machine stage after its first) reuse compiled objects.
packages=(
  build-essential cmake ninja-build pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libabsl-dev libgoogle-glog-dev libgrpc-dev libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libcpp-httplib-dev libpcre2-dev libxxhash-dev
  libdnnl-dev ocl-icd-opencl-dev
)
if [ "${PAGODA_SETUP_ONLY_BUILD:-0}" != 1 ]; then
  # Tests: network namespaces (multi-host test), openssl (TLS test certificates), curl and
  # Node.js with npm (the HTTP API's client tests, the Kubernetes schema validator), and
  # kubectl for `kubectl kustomize`, haproxy (the deploy manifests' proxy in front of the
  # public gRPC port, measured by hostile_grpc_test), and lld (links the trees' ~50
  # executables in a fraction of GNU ld's time); a tool already installed some other way
  # will do.
  # file: cpack -G DEB runs it to find the binaries whose libraries dpkg-shlibdeps names
  # (docs/install.md; dpkg-shlibdeps itself comes with build-essential).
  packages+=(iproute2 openssl haproxy lld file)
  command -v curl >/dev/null || packages+=(curl)
  command -v node >/dev/null || packages+=(nodejs)
  command -v npm >/dev/null || packages+=(npm)
  command -v kubectl >/dev/null || packages+=(kubernetes-client)
fi
if [ "${PAGODA_SETUP_STYLE:-0}" = 1 ]; then
  # Debian's chromium: headless, for the web page's browser test (~122 MB to download with its
  # libraries), so only here: README's first command on a bare machine does not need it.
  packages+=(clang clang-format clang-tidy chromium)
  command -v python3 >/dev/null || packages+=(python3)  # class_files_check, thread_safety_files
fi
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y --no-install-recommends "${missing[@]}"
fi
