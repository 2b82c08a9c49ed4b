#!/usr/bin/env bash
# Runs every test suite and prints pass/fail counts for each runner:
#   1. tests_cpp under ctest (the engine as the extension is built: Release)
#   2. tests_cpp again under AddressSanitizer + UndefinedBehaviorSanitizer, built
#      with clang and its -Wthread-safety analysis as errors (the engine, the
#      cluster core and the tests: one build for both checks)
#   3. tests_cpp again under ThreadSanitizer (all but the single-threaded simulator)
#   4. the libFuzzer targets tests_cpp/fuzz/*_fuzz.cc (frame decoder and every
#      message parser), each for FUZZ_SECONDS (default 20) under ASan+UBSan
#   5. pytest tests_py (adapters, errors, wheel, pynenc's conformance suites (a
#      representative slice; PYNENC_CPP_CONFORMANCE=full for all), cluster, actors)
#   6. pynenc's conformance suites again with every shortcut off
#      (PYNENC_CPP_SHORTCUTS=off; a short slice: docs/shortcuts.md)
# Exits non-zero if any suite fails.
set -uo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh || { echo "setup failed"; exit 1; }
setup_secs=$SECONDS

JOBS=${JOBS:-2}
declare -a NAMES PASSED FAILED SECS
overall=0
mark=$SECONDS

record() {  # name passed failed (and the seconds since the last record)
  NAMES+=("$1"); PASSED+=("$2"); FAILED+=("$3"); SECS+=($((SECONDS - mark)))
  mark=$SECONDS
  [ "$3" -eq 0 ] || overall=1
}

run_ctest() {  # name build-dir cmake-args...
  local name=$1 dir=$2; shift 2
  echo "==> $name"
  if ! { cmake -S . -B "$dir" -G Ninja -DPYNENC_CPP_BUILD_TESTS=ON "$@" >"$dir.configure.log" 2>&1 ||
         { cat "$dir.configure.log"; false; }; } ||
     ! cmake --build "$dir" -j"$JOBS" 2>&1 | tee "$dir.build.log"; then  # pipefail
    echo "$name: build failed"
    record "$name" 0 1
    return
  fi
  local log="$dir.ctest.log"
  ctest --test-dir "$dir" --output-on-failure -j"$JOBS" --timeout 300 ${CTEST_EXCLUDE:+-E "$CTEST_EXCLUDE"} 2>&1 | tee "$log"
  local line total failed
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" | tail -1)
  if [ -z "$line" ]; then
    record "$name" 0 1
    return
  fi
  failed=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\1/' <<<"$line")
  total=$(sed -E 's/.* ([0-9]+) tests failed out of ([0-9]+).*/\2/' <<<"$line")
  record "$name" $((total - failed)) "$failed"
}

mkdir -p build
# The plain run tests the engine exactly as the extension ships it: in the build
# directory scikit-build-core made for `pip install -e .` (pyproject.toml's
# build-dir = "build/{wheel_tag}"; Release, the portable static links) with the tests
# switched on, so the engine and cluster libraries setup.sh compiled are not compiled
# again (the stage took 524 s with its own -O2 build, 190 s this way). The test code
# itself is -O0 in every build (tests_cpp/CMakeLists.txt).
ext_build=build/$(.venv/bin/python -c 'import platform, sys
v = "%d%d" % sys.version_info[:2]
print(f"cp{v}-cp{v}-linux_{platform.machine()}")')
if [ -f "$ext_build/CMakeCache.txt" ]; then
  run_ctest "ctest" "$ext_build"
else  # an extension built some other way: a build of its own, as a developer's would be
  echo "(no extension build directory at $ext_build: the plain ctest run builds its own)"
  run_ctest "ctest" build/tests -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
fi
# The sanitizer builds (Debug, -O0) keep line tables only (-g1): a report's stack still
# names file and line, and the compile is shorter than with full debug info.
# The ASan build is clang's, with Clang's thread-safety analysis over the classes
# annotated with core/thread_annotations.h as errors: a violation fails this build
# (reported as "thread-safety" below), and no separate compile-only pass is needed
# (it took 116 s; clang also compiles this -O0 build faster than gcc).
CXX=clang++ CC=clang ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
  UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_ctest "ctest-asan-ubsan" build/asan -DCMAKE_BUILD_TYPE=Debug -DPYNENC_CPP_SANITIZE_ADDRESS=ON \
  -DPYNENC_CPP_THREAD_SAFETY_ANALYSIS=ON "-DCMAKE_CXX_FLAGS_DEBUG=-g1" "-DCMAKE_C_FLAGS_DEBUG=-g1"
if [ -f build/asan/tests_cpp/engine_tests ] && [ -f build/asan/tests_cpp/cluster/cluster_tests ]; then
  record "thread-safety" 1 0
else
  grep -E "error: .*\[-Werror,-Wthread-safety" build/asan.build.log 2>/dev/null | head -n 40
  record "thread-safety" 0 1
fi
# The deterministic simulator (Sim*) runs every node on one thread: ThreadSanitizer has
# nothing to find there, and it is the slowest part of a TSan run. Everything with
# threads (brokers, stores, runner, transport, real-socket cluster nodes) runs.
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 CTEST_EXCLUDE='^Sim' \
  run_ctest "ctest-tsan" build/tsan -DCMAKE_BUILD_TYPE=Debug -DPYNENC_CPP_SANITIZE_THREAD=ON \
  "-DCMAKE_CXX_FLAGS_DEBUG=-g1" "-DCMAKE_C_FLAGS_DEBUG=-g1"

echo "==> fuzz"
fuzz_log=build/fuzz.log
bash scripts/fuzz.sh 2>&1 | tee "$fuzz_log"
fuzz_rc=${PIPESTATUS[0]}
fp=$(grep -cE ": [0-9]+ runs, 0 crashes$" "$fuzz_log")
ff=$(grep -cE ": .*(crashed|build failed|first line must)" "$fuzz_log")
if [ "$fuzz_rc" -ne 0 ] && [ "$ff" -eq 0 ]; then ff=1; fi
record "fuzz" "$fp" "$ff"

echo "==> pytest"
# pynenc's conformance matrix: CI runs a representative slice of every suite
# (docs/conformance.md); `make conformance` (or PYNENC_CPP_CONFORMANCE=full) runs it all.
export PYNENC_CPP_CONFORMANCE=${PYNENC_CPP_CONFORMANCE:-slice}
record_pytest() {  # name log rc: the counts of pytest's last summary line in log
  local summary p f n
  summary=$(grep -E "[0-9]+ (passed|failed|errors?|skipped).* in [0-9.]+s" "$2" | tail -1)
  p=$(grep -oE "[0-9]+ passed" <<<"$summary" | grep -oE "[0-9]+" || echo 0)
  f=0
  for n in $(grep -oE "[0-9]+ (failed|error|errors)" <<<"$summary" | grep -oE "[0-9]+"); do f=$((f + n)); done
  if [ "$3" -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi  # collection error, no tests run, ...
  record "$1" "${p:-0}" "$f"
}
# Two pytest workers (pytest-xdist): most tests wait on runner processes, servers and
# sockets, so a second worker finds a core free; with two the slice took 799-854 s
# (144% CPU) where one took 1,679 s on the last CI machine. Every test starts its own servers on
# free ports in its own temp dir, so the workers share nothing. PYTEST_WORKERS=0 runs
# them in this process, one after another.
PYTEST_WORKERS=${PYTEST_WORKERS:-2}
log=build/pytest.log
.venv/bin/python -m pytest -p no:cacheprovider -q -rs -n "$PYTEST_WORKERS" ${PYTEST_ARGS:-} 2>&1 | tee "$log"
record_pytest "pytest" "$log" "${PIPESTATUS[0]}"

echo "==> pytest, shortcuts off"
# The conformance slice again with every shortcut off (docs/shortcuts.md): pynenc's own
# code where pynenc-cpp has a shortcut, as after a pynenc release that changed one. One
# backend per mode (SQLite native, Redis mixed), every suite, and of the runner
# combinations only CppRunner's (the runner that takes the run and result-wait
# shortcuts) with the Json serializer: ~50 s. `make conformance` runs the whole matrix
# with the shortcuts off too.
log=build/pytest-shortcuts-off.log
PYNENC_CPP_SHORTCUTS=off PYNENC_CPP_CONFORMANCE=slice PYNENC_CPP_BACKENDS=sqlite,redis \
  .venv/bin/python -m pytest -p no:cacheprovider -q -rs -n "$PYTEST_WORKERS" tests_py/conformance \
  -k "not combinations or (not Thread and not Process and not Pickle)" 2>&1 | tee "$log"
record_pytest "pytest-no-shortcut" "$log" "${PIPESTATUS[0]}"

echo
echo "==> summary"
tp=0; tf=0
for i in "${!NAMES[@]}"; do
  printf '  %-18s %5d passed, %d failed  (%d s)\n' "${NAMES[$i]}" "${PASSED[$i]}" "${FAILED[$i]}" "${SECS[$i]}"
  tp=$((tp + PASSED[i])); tf=$((tf + FAILED[i]))
done
echo "total: $tp passed, $tf failed; setup $setup_secs s, all $SECONDS s"
exit $overall
