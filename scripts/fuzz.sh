#!/usr/bin/env bash
# Builds and runs every libFuzzer target tests_cpp/fuzz/*_fuzz.cc for a bounded
# time. Not part of the CMake (gcc) build: each target is compiled directly with
# clang++ (-fsanitize=fuzzer,address,undefined) into build/fuzz/<target>.
#
# A target declares what it needs in its first lines:
#   // fuzz-sources: cpp/src/cluster/transport/frame.cc [more .cc, repo-relative]   (line 1, required)
#   // fuzz-libs: -lcrypto                                                           (optional, lines 1-5)
# Seeds: tests_cpp/fuzz/corpus/<target>/ (tiny committed files, read only). New
# inputs go to build/fuzz/corpus/<target>/, crashes to build/fuzz/<target>-crash-*.
#
# Environment: FUZZ_SECONDS (default 20) per target; FUZZ_CXX (default clang++);
# FUZZ_TARGETS (space-separated names, default all); FUZZ_JOBS (targets at once, default 2).
# Needs (Debian 12): clang and libclang-rt-14-dev (the fuzzer/sanitizer runtimes;
# only a Recommends of clang), libssl-dev for targets that link -lcrypto.
# Prints "<target>: N runs, 0 crashes" per target; exits non-zero if any target
# fails to build or finds a crash.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CXX="${FUZZ_CXX:-clang++}"
SECS="${FUZZ_SECONDS:-20}"
OUT="$ROOT/build/fuzz"

if ! command -v "$CXX" >/dev/null 2>&1; then
  echo "fuzz.sh: $CXX not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 2
fi
mkdir -p "$OUT"

# One target: built, then fuzzed for SECS; prints its line and returns non-zero if
# it failed to build or crashed.
fuzz_one() {
  local src=$1 name first libs work log rc runs
  name="$(basename "$src" .cc)"
  first="$(head -n 1 "$src")"
  if [[ "$first" != "// fuzz-sources:"* ]]; then
    echo "$name: first line must be '// fuzz-sources: <files>'" >&2
    return 1
  fi
  local sources=()
  for s in ${first#// fuzz-sources:}; do sources+=("$ROOT/$s"); done
  libs="$(head -n 5 "$src" | sed -n 's|^// fuzz-libs:||p')"

  # shellcheck disable=SC2086
  if ! "$CXX" -std=c++20 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
      -I"$ROOT/cpp/include" -I"$ROOT/cpp/src" -I"$ROOT/tests_cpp/cluster" "$src" "${sources[@]}" $libs -o "$OUT/$name" \
      2>"$OUT/$name.build.log"; then
    echo "$name: build failed (see $OUT/$name.build.log)"
    tail -n 20 "$OUT/$name.build.log" >&2
    return 1
  fi

  work="$OUT/corpus/$name"
  mkdir -p "$work"
  local seeds=()
  [[ -d "$ROOT/tests_cpp/fuzz/corpus/$name" ]] && seeds+=("$ROOT/tests_cpp/fuzz/corpus/$name")
  log="$OUT/$name.log"
  "$OUT/$name" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
      -artifact_prefix="$OUT/$name-" "$work" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  runs="$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)"
  if [[ $rc -eq 0 ]]; then
    echo "$name: ${runs:-0} runs, 0 crashes"
  else
    echo "$name: ${runs:-?} runs, crashed (exit $rc; log $log; input $(ls "$OUT/$name"-* 2>/dev/null | grep -v -e '\.log$' | head -n 1))"
    grep -m 5 -E 'ERROR|SUMMARY|runtime error' "$log" >&2
    return 1
  fi
}

# Targets run FUZZ_JOBS at a time (default 2, one per core here): each is one
# process on one core, built and fuzzed for the same SECS as when run alone.
JOBS="${FUZZ_JOBS:-2}"
status=0
running=0
shopt -s nullglob
for src in "$ROOT"/tests_cpp/fuzz/*_fuzz.cc; do
  name="$(basename "$src" .cc)"
  if [[ -n "${FUZZ_TARGETS:-}" && " $FUZZ_TARGETS " != *" $name "* ]]; then continue; fi
  if ((running >= JOBS)); then
    wait -n || status=1
    running=$((running - 1))
  fi
  fuzz_one "$src" &
  running=$((running + 1))
done
while ((running > 0)); do
  wait -n || status=1
  running=$((running - 1))
done
exit $status
