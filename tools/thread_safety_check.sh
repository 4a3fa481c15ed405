#!/usr/bin/env bash
# Compiles router/, common/, lib/ and worker/ (its ISA kernels aside) with Clang's thread-safety
# analysis (-Wthread-safety), which GCC does not have: every ABSL_GUARDED_BY /
# ABSL_EXCLUSIVE_LOCKS_REQUIRED is checked. Syntax only, no objects, and only the files whose
# translation unit can see an annotation (tools/thread_safety_files.py: the file or a project
# header it includes names a lock or a lock requirement); the others cannot fail the analysis.
# Needs a configured and built tree for the generated headers:
#   tools/thread_safety_check.sh BUILD_DIR
set -euo pipefail
build=$(realpath "${1:?usage: tools/thread_safety_check.sh BUILD_DIR}")
cd "$(dirname "$0")/.."
src=$PWD
mapfile -t sources < <(git ls-files 'router/*.cc' 'common/*.cc' 'lib/*.cc' 'worker/*.cc' \
                         ':!worker/kernels/*' 2>/dev/null ||
                       find router common lib worker -name '*.cc' -not -path 'worker/kernels/*')
mapfile -t files < <(python3 tools/thread_safety_files.py "${sources[@]}")
[ "${#files[@]}" -gt 0 ] || { echo "thread_safety_check: FAILED (no file sees a lock?)" >&2; exit 1; }
flags=(-std=c++20 -fsyntax-only -march=x86-64-v3 -Wthread-safety -Werror=thread-safety
       -Wno-unknown-warning-option -I"$src" -I"$build/proto_gen" -I"$build/generated")
read -r -a pkg_flags <<< "$(pkg-config --cflags cpp-httplib libpcre2-8 libxxhash)"
export CLANG_FLAGS="${flags[*]} ${pkg_flags[*]}"
# xargs runs every file and exits non-zero when any failed.
if ! printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -I{} sh -c 'clang++ $CLANG_FLAGS "$1" || { echo "thread-safety: $1 failed" >&2; exit 1; }' _ {}; then
  echo "thread_safety_check: FAILED (the files above)" >&2
  exit 1
fi
echo "thread_safety_check: the ${#files[@]} of ${#sources[@]} files of router/, common/, lib/ and" \
  "worker/ that see a lock pass clang -Wthread-safety"
