#!/usr/bin/env bash
# Clang's checks, which GCC lacks, over router/, common/, lib/ and worker/ (its ISA kernels
# aside): clang-tidy with the repository's .clang-tidy (use after move, dangling views, needless
# copies, ...; every finding an error), and with Clang's thread-safety analysis
# (-Wthread-safety: every ABSL_GUARDED_BY / ABSL_EXCLUSIVE_LOCKS_REQUIRED is checked) reported
# through it as an error too. No objects are written. By default only the files whose
# translation unit can see a lock annotation (tools/thread_safety_files.py: the file or a
# project header it includes names a lock or a lock requirement): those are where the analysis
# can fail and where a moved-from or dangling value costs most; --all checks every file (about
# three times as long). Needs a configured and built tree for the generated headers:
#   tools/thread_safety_check.sh BUILD_DIR [--all]
set -euo pipefail
build=$(realpath "${1:?usage: tools/thread_safety_check.sh BUILD_DIR [--all]}")
cd "$(dirname "$0")/.."
src=$PWD
mapfile -t sources < <(git ls-files 'router/*.cc' 'common/*.cc' 'lib/*.cc' 'worker/*.cc' \
                         ':!worker/kernels/*' 2>/dev/null ||
                       find router common lib worker -name '*.cc' -not -path 'worker/kernels/*')
if [ "${2:-}" = --all ]; then
  files=("${sources[@]}")
else
  mapfile -t files < <(python3 tools/thread_safety_files.py "${sources[@]}")
fi
[ "${#files[@]}" -gt 0 ] || { echo "thread_safety_check: FAILED (no file sees a lock?)" >&2; exit 1; }
flags=(-std=c++20 -march=x86-64-v3 -Wthread-safety -Werror=thread-safety
       -Wno-unknown-warning-option -I"$src" -I"$build/proto_gen" -I"$build/generated")
read -r -a pkg_flags <<< "$(pkg-config --cflags cpp-httplib libpcre2-8 libxxhash)"
export CLANG_FLAGS="${flags[*]} ${pkg_flags[*]}"
# xargs runs every file and exits non-zero when any failed; a failing file shows its findings.
if ! printf '%s\n' "${files[@]}" |
  xargs -P "$(nproc)" -I{} sh -c 'out=$(clang-tidy --quiet "$1" -- $CLANG_FLAGS 2>&1) && exit 0
    printf "%s\n" "$out" | grep -v -E "^[0-9]+ (warning|error)s? generated|^Suppressed [0-9]+" >&2
    echo "clang-tidy: $1 failed" >&2; exit 1' _ {}; then
  echo "thread_safety_check: FAILED (the files above)" >&2
  exit 1
fi
echo "thread_safety_check: the ${#files[@]} of ${#sources[@]} files of router/, common/, lib/ and" \
  "worker/ checked pass clang-tidy (.clang-tidy) and clang -Wthread-safety"
