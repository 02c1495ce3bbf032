#!/usr/bin/env bash
# Formats every C/C++ source of the repository with the root .clang-format;
# --check reports unformatted files and fails instead of rewriting them.
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=(-i)
[ "${1:-}" = "--check" ] && mode=(--dry-run --Werror)
git ls-files -z --cached --others --exclude-standard -- '*.c' '*.h' '*.cc' '*.cpp' '*.hpp' |
  xargs -0 -r clang-format "${mode[@]}"
