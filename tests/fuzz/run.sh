#!/usr/bin/env bash
# Builds the libFuzzer targets (the fuzz preset: clang-14, ASan, UBSan) and runs each for a
# while, starting from its seed corpus in tests/fuzz/corpus/<target>/ (which also holds every
# input that once crashed it, named regression-*). Fails on the first crash, leak, sanitizer
# report or broken property; the input that did it is left in build/fuzz/artifacts/.
#
#   tests/fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]     (default: 20 s, every target)
#
# Inputs found on the way go to a scratch corpus under build/fuzz/, not into the repo: add the
# ones worth keeping by hand (libFuzzer's -merge=1 keeps the smallest set with the same coverage).
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${1:-20}
shift || true
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(size validate mountinfo config_file secrets_file roset_api_json tgt_show)
fi

cmake --preset fuzz >/dev/null
cmake --build --preset fuzz -j "$(nproc)"

bin=build/fuzz/tests/fuzz
artifacts=build/fuzz/artifacts
mkdir -p "${artifacts}"
for target in "${targets[@]}"; do
  seeds=tests/fuzz/corpus/${target}
  scratch=build/fuzz/corpus/${target}
  mkdir -p "${scratch}"
  printf '==> fuzz_%s for %s s\n' "${target}" "${seconds}"
  # The seeds are read, never written: new inputs land in the scratch corpus (the first dir).
  if ! "${bin}/fuzz_${target}" -max_total_time="${seconds}" -rss_limit_mb=2048 -timeout=10 \
      -print_final_stats=1 -artifact_prefix="${artifacts}/${target}-" \
      "${scratch}" "${seeds}" >"${artifacts}/${target}.log" 2>&1; then
    tail -n 40 "${artifacts}/${target}.log"
    printf 'fuzz_%s failed: the input is in %s/%s-*\n' "${target}" "${artifacts}" "${target}"
    exit 1
  fi
  grep -E '^stat::(number_of_executed_units|new_units_added):' "${artifacts}/${target}.log" |
    tr '\n' ' '
  printf '\n'
done
