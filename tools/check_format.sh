#!/usr/bin/env bash
# Fails when a C++ source is not as clang-format (Google style, .clang-format) would write it.
#   tools/check_format.sh            every tracked .cc and .h
#   tools/check_format.sh FILE...    just those
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 0 ]; then
  mapfile -t files < <(git ls-files '*.cc' '*.h' 2>/dev/null ||
                       find cli common lib proto router tests tools worker -name '*.cc' -o -name '*.h')
else
  files=("$@")
fi
clang-format --dry-run -Werror "${files[@]}"
echo "check_format: ${#files[@]} files as clang-format writes them"
